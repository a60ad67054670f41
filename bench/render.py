"""`studio render` throughput: one process with the worker kept warm between songs, vs one process per song.

    .venv/bin/python bench/render.py [--songs 6] [--steps 8] [--frames 256] [--device cpu] [--threads 1]

Both sides run the real command (`python -m studio.cli render`) on the test model (tiny random weights,
songs cropped to --frames) with the same songs and seeds. "warm worker": one jobs file of N lines, one
process, one worker started once. "one process each": N one-line jobs files, N processes, so every song
pays for starting the studio, the engine and its worker (torch import, weights loaded onto the device).

Songs per hour = N / the wall time of the whole batch as the user waits for it (process starts
included). Device busy fraction = the device's time on the songs (diffusion steps + decode windows, as
each take's record times them on the worker) / that wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def job(i: int, steps: int) -> dict:
    return {"id": f"song-{i:02d}", "style": ["warm jazz", "synthwave", "folk guitar"][i % 3], "duration": 95,
            "steps": steps, "seed": 100 + i}


def render(jobs: list[dict], out: Path, args: argparse.Namespace, env: dict[str, str]) -> None:
    path = out.with_suffix(".jsonl")
    path.write_text("\n".join(json.dumps(j) for j in jobs) + "\n")
    argv = [sys.executable, "-m", "studio.cli", "render", str(path), "-o", str(out), "--model", "test",
            "--test-crop-frames", str(args.frames), "--device", args.device, "--quiet", "--json",
            "--data-dir", str(out.parent / "data")]
    if args.threads:
        argv += ["--threads", str(args.threads)]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"studio render failed ({proc.returncode}): {proc.stderr[-2000:]}")


def device_seconds(outs: list[Path]) -> float:
    total = 0.0
    for out in outs:
        for rec_path in out.glob("*/render.json"):
            for take in json.loads(rec_path.read_text())["takes"]:
                total += take["timings"].get("diffusion", 0.0) + take["timings"].get("decode", 0.0)
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--songs", type=int, default=6)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--frames", type=int, default=256, help="test model: frames per song (2048 = 95 s)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads of a CPU worker")
    args = p.parse_args()
    jobs = [job(i, args.steps) for i in range(args.songs)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-render-") as tmp:
        env = {**os.environ, "DRS_LOCK_DIR": str(Path(tmp) / "locks"), "STUDIO_LOG_LEVEL": "ERROR"}
        render([job(99, 2)], Path(tmp) / "warmup", args, env)  # test model files, style cache, page cache
        t0 = time.perf_counter()
        render(jobs, Path(tmp) / "warm", args, env)
        wall = time.perf_counter() - t0
        rows.append(("warm worker (1 process)", wall, device_seconds([Path(tmp) / "warm"])))
        outs = [Path(tmp) / f"each-{i:02d}" for i in range(args.songs)]
        t0 = time.perf_counter()
        for j, out in zip(jobs, outs, strict=True):
            render([j], out, args, env)
        wall = time.perf_counter() - t0
        rows.append((f"one process each ({args.songs} processes)", wall, device_seconds(outs)))
    print(f"\n{args.songs} songs, test model, {args.frames} frames, {args.steps} steps, device {args.device}, "
          f"worker threads {args.threads}, cpus {os.cpu_count()}, load {os.getloadavg()[0]:.1f}")
    print("| mode | wall s | s/song | songs/hour | device busy s | busy fraction |\n|---|---:|---:|---:|---:|---:|")
    for name, wall, busy in rows:
        print(f"| {name} | {wall:.1f} | {wall / args.songs:.1f} | {args.songs / wall * 3600:.0f} | {busy:.2f} | "
              f"{busy / wall:.1%} |")
    print(f"warm worker: {rows[1][1] / rows[0][1]:.1f}x the songs per hour of one process each")


if __name__ == "__main__":
    main()
