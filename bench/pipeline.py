"""Device busy fraction for a batch of songs: the three stages pipelined vs run one after another.

    .venv/bin/python bench/pipeline.py [--songs 8] [--steps 8] [--frames 320] [--formats wav,flac,mp3,ogg]

One engine, one worker (TEST MODE: the tiny reference model, songs cropped to --frames). "one after
another" admits one take at a time (max_ready=1): lyrics layout and style, then the device, then the
files, then the next song. "pipelined" uses the default max_ready (2 x workers + 2): the next songs are
prepared and the last ones written while the card works. Busy fraction = the worker's measured compute
(prepare + steps + decode of every take) / the batch's wall time.
"""

from __future__ import annotations

import argparse
import time

from engine_setup import make_config, style_file

from engine.engine import Engine
from engine.request import SongRequest, Style

LYRICS = "\n".join([*(f"[00:{2 + 3 * i:02d}.00]line number {i} of the song, with words to sing" for i in range(12)),
                    "[00:40.00]"])


def run_batch(engine: Engine, args: argparse.Namespace, style: str) -> tuple[float, float]:
    before = engine.pool.device_seconds
    t0 = time.perf_counter()
    jobs = [engine.submit(SongRequest(lyrics=LYRICS, style=Style(embedding=style), steps=args.steps, seed=i,
                                      formats=tuple(args.formats.split(","))))
            for i in range(args.songs)]
    for job in jobs:
        job.result(timeout=600)
    wall = time.perf_counter() - t0
    return wall, engine.pool.device_seconds - before


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--songs", type=int, default=8)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--frames", type=int, default=320)
    p.add_argument("--threads", type=int, default=1, help="torch threads in the worker")
    p.add_argument("--formats", default="wav,flac,mp3,ogg")
    args = p.parse_args()
    rows = []
    for name, max_ready in (("one after another", 1), ("pipelined", None)):
        cfg = make_config(args.frames, args.threads, policy="fifo", max_ready=max_ready, queue_limit=args.songs)
        with Engine(cfg) as engine:
            style = style_file(cfg.data_dir)
            engine.submit(SongRequest(style=Style(embedding=style), steps=2, seed=0)).result(120)  # warm-up
            wall, busy = run_batch(engine, args, style)
        rows.append((name, engine.pipeline.max_ready, wall, busy, busy / wall, args.songs / wall * 60))
    print(f"\n{args.songs} songs, {args.steps} steps, {args.frames} frames, formats {args.formats}, "
          f"worker threads {args.threads}")
    print("| mode | max_ready | wall s | device busy s | busy fraction | songs/min |\n|---|---:|---:|---:|---:|---:|")
    for name, mr, wall, busy, frac, rate in rows:
        print(f"| {name} | {mr} | {wall:.2f} | {busy:.2f} | {frac:.0%} | {rate:.1f} |")


if __name__ == "__main__":
    main()
