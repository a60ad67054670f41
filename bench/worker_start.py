"""What a device worker's start costs in CPU, to READY, beside what it cost while the model loaders
imported torch._dynamo (torch's Python reference ops, reached by random init on the meta device) and the
style tower imported transformers (XLM-R and its tokenizer).

    .venv/bin/python bench/worker_start.py [--rounds 3]

Both columns start the same worker on the test model (`studio serve --model test`'s files, style model
included, 1 thread) in one run; the second has those two imports done first, which is what the start paid
before `device_worker.model.checkpoints.empty_modules` and `device_worker.style.roberta`. CPU is the worker
process's own user + system time from /proc when it logs READY, so a loaded machine inflates wall time, not
this. The floor is `import torch` alone. The lyrics check's Whisper is plain torch too (what its first
check costs: bench/first_lyrics_check.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from studio.testmodel import ensure_test_models  # noqa: E402

OLD_IMPORTS = "import torch._dynamo, transformers, transformers.models.xlm_roberta.modeling_xlm_roberta; "


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(argv: list[str], prelude: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one worker process from its start to its READY line."""
    code = (f"{prelude}import runpy, sys; sys.argv = ['device_worker', *{argv!r}]; "
            "runpy.run_module('device_worker', run_name='__main__', alter_sys=True)")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:
            if "[worker] ready" in line:
                return cpu_s(proc.pid), time.perf_counter() - t0
        raise RuntimeError(f"the worker exited without READY (exit {proc.wait()})")
    finally:
        proc.terminate()
        proc.wait(30)


def floor() -> float:
    out = subprocess.run([sys.executable, "-c", "import time, torch; print(time.process_time())"],
                         capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    m = ensure_test_models()
    rows: dict[str, list[tuple[float, float]]] = {"now": [], "with the old imports": []}
    with tempfile.TemporaryDirectory(prefix="worker-start-") as tmp:
        for i in range(args.rounds):
            for name, prelude in (("now", ""), ("with the old imports", OLD_IMPORTS)):
                argv = ["--dit", m.base, "--vae", m.vae, "--style", m.style, "--threads", "1",
                        "--bind", f"ipc://{tmp}/w{i}.sock"]
                rows[name].append(start(argv, prelude))
    print(f"worker start to READY, test model with style, median of {args.rounds} (this machine, one run)")
    print(f"{'':>22}  {'CPU s':>6}  {'wall s':>6}")
    med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for k, v in rows.items()}
    for name, (c, w) in med.items():
        print(f"{name:>22}  {c:6.2f}  {w:6.2f}")
    print(f"{'import torch alone':>22}  {floor():6.2f}")
    print(f"ratio old / now: CPU {med['with the old imports'][0] / med['now'][0]:.2f}x, "
          f"wall {med['with the old imports'][1] / med['now'][1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
