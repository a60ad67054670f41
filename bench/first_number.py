"""What the first number in a lyric costs a process: spelling it through `engine.lyrics.g2p.english` (inflect
imported with typeguard's decorator made a no-op) beside a plain `import inflect` (upstream's way, every call
type-checked), each in a fresh process, in one run. The studio pays this once, on the first digit in the
page's live lyric report; `studio lyrics check` pays it on every run with a number.

    .venv/bin/python bench/first_number.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LYRIC = "in 1999 I paid $3.50 for the 21st " * 50
WAYS = {
    "ours": "from engine.lyrics.g2p.english import normalise_numbers as spell",
    "plain inflect": "import inflect; from engine.lyrics.g2p import english; "
                     "english._inflect_engine = lambda e=inflect.engine(): e; spell = english.normalise_numbers",
}
RUN = """
import json, time
t0 = time.process_time()
{setup}
t1 = time.process_time()
spell({lyric!r})
t2 = time.process_time()
print(json.dumps({{"import": t1 - t0, "spell": t2 - t1}}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rows: dict[str, list[dict[str, float]]] = {w: [] for w in WAYS}
    for _ in range(args.rounds):
        for way, setup in WAYS.items():
            out = subprocess.run([sys.executable, "-c", RUN.format(setup=setup, lyric=LYRIC)], cwd=ROOT,
                                 capture_output=True, text=True, check=True)
            rows[way].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"the first numbers in a fresh process (CPU s, median of {args.rounds}, this machine, one run; "
          f"the lyric holds {4 * 50} numbers)")
    med = {w: {k: statistics.median(r[k] for r in v) for k in ("import", "spell")} for w, v in rows.items()}
    print("(setup: the imports; ours imports inflect inside its first spell, the plain way during setup)")
    print(f"{'':>14}  {'setup':>7}  {'spell':>7}  {'total':>7}")
    for way, m in med.items():
        print(f"{way:>14}  {m['import']:7.2f}  {m['spell']:7.2f}  {m['import'] + m['spell']:7.2f}")
    total = {w: m["import"] + m["spell"] for w, m in med.items()}
    print(f"ratio plain / ours: {total['plain inflect'] / total['ours']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
