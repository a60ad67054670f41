"""An engine's start, one take and close with its worker as a process and as a thread of this process.

    .venv/bin/python bench/worker_host.py [--rounds 3]

The test model (`studio serve --model test`'s files, cropped to 64 frames, 4 steps): what a studio or
engine test pays per engine. The in-process host (`WorkerSpec(in_process=True)`, the tests' default) speaks
the same wire; its first start pays this process's torch and transformers imports, later ones do not.
Prints the median of --rounds after that first start, and the first start itself, for each host.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from engine.config import EngineConfig, WorkerSpec  # noqa: E402
from engine.engine import Engine  # noqa: E402
from engine.request import SongRequest  # noqa: E402
from studio.testmodel import ensure_test_models  # noqa: E402


def one_round(models, in_process: bool) -> tuple[float, float, float]:
    tmp = Path(tempfile.mkdtemp(prefix="worker-host-"))
    t0 = time.perf_counter()
    engine = Engine(EngineConfig(tmp, models, workers=[WorkerSpec(threads=1, in_process=in_process)],
                                 crop_frames=64, lock_dir=str(tmp / "locks")))
    t1 = time.perf_counter()
    engine.submit(SongRequest(lyrics="", style="pop", steps=4, seed=1)).result(120)
    t2 = time.perf_counter()
    engine.close()
    return t1 - t0, t2 - t1, time.perf_counter() - t2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    models = ensure_test_models()
    print(f"{'host':<8} {'first start':>12} {'start':>8} {'take':>8} {'close':>8}   (median of {args.rounds} after the first)")
    rows = {}
    for in_process in (False, True):
        first = one_round(models, in_process)
        runs = [one_round(models, in_process) for _ in range(args.rounds)]
        med = [statistics.median(r[i] for r in runs) for i in range(3)]
        rows[in_process] = med
        name = "thread" if in_process else "process"
        print(f"{name:<8} {first[0]:>11.2f}s {med[0]:>7.2f}s {med[1]:>7.2f}s {med[2]:>7.2f}s")
    print(f"start: process / thread = {rows[False][0] / rows[True][0]:.1f}x")


if __name__ == "__main__":
    main()
