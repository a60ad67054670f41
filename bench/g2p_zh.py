"""What Chinese lyrics cost the studio process: RSS of each piece loaded, first-line and ms-per-line times.

    .venv/bin/python bench/g2p_zh.py [--models-dir ../shared/reference/models-dir] [--repeats 20]

Loads, in this order and measuring the resident set size (RSS, /proc/self/statm) after each: jieba (its
dictionary builds on the first cut), upstream's lexicon, onnxruntime + the polyphone ONNX model. Then lays
out the 25 lines of `cases/g2p_zh.json` (or built-in lines without it) through `LyricTokenizer.encode` with its
line cache off: the first pass (cold: pypinyin is not loaded in upstream mode), then the median of --repeats
passes, reported per line; and the model's own run time per segment. Also prints how many lines give the
reference ids.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
SHARED = Path(os.environ.get("STUDIO_SHARED_DIR", ROOT.parent / "shared"))
LINES = ["我爱你中国", "我还没还你的钱", "为了你我愿意为你付出一切", "2024年我们一起去看海", "我爱你 baby"]


def rss_mb() -> float:
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:  # not Linux: the peak is what there is
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def step(label: str, fn, rows: list[str]):
    before, start = rss_mb(), time.perf_counter()
    out = fn()
    rows.append(f"  {label:<42} +{rss_mb() - before:6.1f} MB  {1e3 * (time.perf_counter() - start):7.0f} ms")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models-dir", default=str(SHARED / "reference" / "models-dir"))
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()

    base = rss_mb()
    rows: list[str] = []
    from engine.lyrics.g2p import LyricTokenizer
    from engine.lyrics.g2p.mandarin import _jieba
    from engine.lyrics.g2p.polyphone import load_polyphone_model
    from engine.lyrics.g2p.zh_data import load_lexicon

    tok = step("import engine.lyrics.g2p + find the files", lambda: LyricTokenizer(models_dir=args.models_dir), rows)
    files = tok.chinese_files
    if not files.lexicon or files.polyphone is None:
        sys.exit(f"Chinese g2p files not found under {args.models_dir} (searched {files.searched})")
    step("jieba (import + dictionary)", lambda: _jieba().lcut("我爱你中国"), rows)
    step("lexicon (chinese_lexicon.txt)", lambda: load_lexicon(files.paths["lexicon"]), rows)
    model = step("onnxruntime + polyphone model", lambda: load_polyphone_model(files.polyphone), rows)
    print(f"RSS at start {base:.1f} MB; loading (each piece once per process):")
    print("\n".join(rows))
    print(f"  {'total added':<42} +{rss_mb() - base:6.1f} MB  (RSS now {rss_mb():.1f} MB)")

    cases_path = SHARED / "reference" / "diffrhythm" / "cases" / "g2p_zh.json"
    cases = json.loads(cases_path.read_text(encoding="utf-8")) if cases_path.is_file() else \
        [{"text": t, "ids": None} for t in LINES]
    texts = [c["text"] for c in cases]

    def one_pass() -> float:
        tok._cache.clear()
        start = time.perf_counter()
        for t in texts:
            tok.encode(t)
        return time.perf_counter() - start

    first = one_pass()
    after_first = rss_mb()
    passes = [one_pass() for _ in range(args.repeats)]
    per_line = 1e3 * statistics.median(passes) / len(texts)
    segment = "为了你我愿意为你付出一切"
    model.readings(segment)
    start = time.perf_counter()
    for _ in range(args.repeats):
        model.readings(segment)
    model_ms = 1e3 * (time.perf_counter() - start) / args.repeats
    print(f"\n{len(texts)} lines ({sum(map(len, texts))} characters), mode {tok.mandarin.mode}:")
    print(f"  first pass   {1e3 * first / len(texts):6.1f} ms/line (RSS +{after_first - base:.1f} MB over the start)")
    print(f"  warm median  {per_line:6.1f} ms/line over {args.repeats} passes (line cache off)")
    print(f"  model alone  {model_ms:6.1f} ms per run on a {len(segment)}-character segment (one run per segment)")
    known = [c for c in cases if "ids" in c and ("phones" in c or "error" in c)]
    if known:
        ok = sum(1 for c in known if (tok.encode(c["text"]).tokens or None) == c["ids"])
        print(f"  reference    {ok}/{len(known)} lines give upstream's ids ({cases_path})")


if __name__ == "__main__":
    main()
