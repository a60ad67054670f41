"""What one engine's output stage can keep up with: the time to write a 285 s song in each format, and
how many cards at a given seconds-per-song that feeds (the sizing in docs/scaleout.md).

    .venv/bin/python bench/output_stage.py [--seconds 285] [--repeat 3] [--card-s 2.0]

It runs the engine's own `engine.outputs.write_take` (int16 post-processing, the encoder child process,
tags, the record) on a 285 s stereo song of filtered noise, in a temp folder, `--repeat` times per
format, and prints the median. The wire side: the bytes a finished song costs as float32 [2, n].
Everything runs on this host's CPU; no model is involved.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from device_worker import shapes  # noqa: E402
from engine.outputs import TakeRecord, write_take  # noqa: E402


def song(seconds: float) -> np.ndarray:
    n = int(seconds * shapes.SAMPLE_RATE)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, n)).astype(np.float32)
    x = np.cumsum(x, axis=1) * 0.01  # brown-ish noise: closer to music for the encoders than white noise
    x -= x.mean(axis=1, keepdims=True)
    return (x / np.abs(x).max()).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=285.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--card-s", type=float, default=2.0, help="seconds a card takes for one song")
    args = ap.parse_args()

    audio = song(args.seconds)
    wire_mb = audio.nbytes / 2**20
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("wav", "flac", "mp3"):
            times = []
            for i in range(args.repeat):
                folder = Path(tmp) / f"{fmt}-{i}"
                folder.mkdir()
                info = TakeRecord(job_id="bench", take=i, seed=i, request={"title": "bench"})
                t0 = time.perf_counter()
                files = write_take(folder, audio, info, (fmt,))
                times.append(time.perf_counter() - t0)
                assert Path(files[fmt]).stat().st_size > 0
            rows[fmt] = statistics.median(times)

    print(f"song: {args.seconds:.0f} s stereo, {wire_mb:.1f} MiB as float32 on the wire")
    print(f"{'format':<8}{'write s':>10}{'songs/s/thread':>16}{'cards fed':>12}")
    for fmt, s in rows.items():
        # WAV is always written; other formats come on top of it.
        total = s if fmt == "wav" else s + rows["wav"]
        print(f"{fmt:<8}{s:>10.3f}{1 / total:>16.2f}{args.card_s / total:>12.1f}")
    print(f"(cards fed = cards at {args.card_s:g} s/song one output thread keeps up with; "
          f"10 GbE carries {1250 / wire_mb:.1f} songs/s = {1250 / wire_mb * args.card_s:.0f} such cards)")
    print(json.dumps({"seconds": args.seconds, "wire_mb": round(wire_mb, 1),
                      "write_s": {k: round(v, 3) for k, v in rows.items()}}))


if __name__ == "__main__":
    main()
