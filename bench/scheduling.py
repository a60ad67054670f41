"""One worker, a long song running, short songs arriving: what each scheduling policy does to them.

    .venv/bin/python bench/scheduling.py [--long-steps 60] [--short-steps 6] [--shorts 6] [--every 1.0]

TEST MODE (the tiny reference model, songs cropped to --frames). For each policy (fifo, fair, share) a
fresh worker runs: the long song is submitted, then one short song every --every seconds. Printed: the
short songs' completion time (submit -> done) mean and 95th percentile, and the long song's slowdown
(its completion time under load / alone, the faster of a run before and one after). All in one run,
side by side.
"""

from __future__ import annotations

import argparse
import statistics
import time

from engine_setup import make_config, style_file

from engine.engine import Engine
from engine.request import SongRequest, Style


def completion(job, t0: float) -> float:
    job.result(timeout=600)
    return job.final.at - t0


def run(policy: str, args: argparse.Namespace) -> tuple[float, list[float], float]:
    cfg = make_config(args.frames, args.threads, policy=policy, queue_limit=64, max_ready=args.shorts + 2)
    with Engine(cfg) as engine:
        style = Style(embedding=style_file(cfg.data_dir))
        engine.submit(SongRequest(style=style, steps=2, seed=0)).result(120)  # warm-up
        t0 = time.time()
        alone = completion(engine.submit(SongRequest(style=style, steps=args.long_steps, seed=1)), t0)
        t0 = time.time()
        long_job = engine.submit(SongRequest(style=style, steps=args.long_steps, seed=1))
        shorts = []
        for i in range(args.shorts):
            time.sleep(args.every)
            shorts.append((time.time(), engine.submit(SongRequest(style=style, steps=args.short_steps, seed=10 + i))))
        short_times = [completion(job, ts) for ts, job in shorts]
        loaded = completion(long_job, t0)
        t0 = time.time()  # alone again, after: the faster of the two (this box is shared) is the baseline
        alone = min(alone, completion(engine.submit(SongRequest(style=style, steps=args.long_steps, seed=1)), t0))
    return alone, short_times, loaded


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--long-steps", type=int, default=60)
    p.add_argument("--short-steps", type=int, default=6)
    p.add_argument("--shorts", type=int, default=6)
    p.add_argument("--every", type=float, default=1.0, help="seconds between short songs")
    p.add_argument("--frames", type=int, default=160)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    rows = [(policy, *run(policy, args)) for policy in ("fifo", "fair", "share")]
    print(f"\nlong song {args.long_steps} steps, {args.shorts} short songs of {args.short_steps} steps every "
          f"{args.every} s, {args.frames} frames, one worker ({args.threads} thread)")
    print("| policy | short mean s | short p95 s | long alone s | long under load s | long slowdown |")
    print("|---|---:|---:|---:|---:|---:|")
    for policy, alone, shorts, loaded in rows:
        print(f"| {policy} | {statistics.mean(shorts):.2f} | {p95(shorts):.2f} | {alone:.2f} | {loaded:.2f} | "
              f"{loaded / alone:.2f}x |")


if __name__ == "__main__":
    main()
