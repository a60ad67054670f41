"""Per-stage times of whole songs on a Tenstorrent p100a through the ttnn backend (needs a card).

    python bench/tt_song.py --dit models/DiffRhythm-1_2-full --vae models/vae_model.pt [--seconds 96 285]
        [--steps 32] [--window 128 --overlap 32] [--repeats 2]

Run in the worker's environment (Python 3.12 + ttnn). Stages: load (weights on the card, VAE windows
compiled), warm (first call of the song's bucket: compile or kernel-cache load; excluded from the song
times), prepare (per-song terms), dit (all guided steps; per-step median), latent, vae (all windows;
per-window median), total = prepare + dit + latent + vae. Times are the median over --repeats songs after
the warm one. Prints one JSON line per song length and a table; refuses (exit 2) without ttnn or a card.
Compare with the public port's 96 s song: DiT 7.7 s (62 calls x 121 ms at 2560 rows), VAE 2.0 s, 10.0 s
end to end (its own code, tt-metal v0.80.0-dev20260921; not measured here).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import numpy as np  # noqa: E402

from device_worker.backends.base import JobSpec  # noqa: E402
from device_worker.backends.ttnn.runtime import TtnnUnavailable  # noqa: E402
from device_worker.protocol import SongParams  # noqa: E402
from device_worker.shapes import end_frame_for  # noqa: E402


def one_song(be, spec: JobSpec) -> dict[str, float]:
    t = {}
    start = time.perf_counter()
    h = be.prepare(spec)
    t["prepare"] = time.perf_counter() - start
    steps = []
    while h.steps_done < h.steps_total:
        s0 = time.perf_counter()
        be.step([h])
        steps.append(time.perf_counter() - s0)
    t["dit"], t["step_median"] = sum(steps), statistics.median(steps)
    s0 = time.perf_counter()
    be.latent(h)
    t["latent"] = time.perf_counter() - s0
    windows = []
    while h.windows_done < h.windows_total:
        s0 = time.perf_counter()
        be.decode_window(h)
        windows.append(time.perf_counter() - s0)
    be.free(h)
    t["vae"], t["window_median"] = sum(windows), statistics.median(windows)
    t["total"] = t["prepare"] + t["dit"] + t["latent"] + t["vae"]
    return t


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dit", required=True)
    p.add_argument("--vae", required=True)
    p.add_argument("--device", default="0")
    p.add_argument("--seconds", type=int, nargs="+", default=[96, 285])
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--window", type=int, default=128)
    p.add_argument("--overlap", type=int, default=32)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    try:
        from device_worker.backends.ttnn.backend import TtnnBackend
    except TtnnUnavailable as exc:
        print(f"tt_song: refusing to run: {exc}", file=sys.stderr)
        return 2
    be = TtnnBackend(args.device, vae_windows=(args.window,))
    s0 = time.perf_counter()
    try:
        be.load(args.dit, args.vae, lambda stage, frac: None)
    except RuntimeError as exc:
        print(f"tt_song: refusing to run: no usable Tenstorrent card ({exc})", file=sys.stderr)
        return 2
    load_s = time.perf_counter() - s0
    rng = np.random.default_rng(0)
    rows = []
    try:
        for seconds in args.seconds:
            n = end_frame_for(seconds)
            spec = JobSpec(text=rng.integers(1, 364, n).astype(np.int64), style=rng.standard_normal(512).astype(np.float32) * 0.05,
                           negative_style=np.zeros(512, np.float32), song=SongParams(steps=args.steps, seed=1),
                           decode_window=args.window, decode_overlap=args.overlap)
            w0 = time.perf_counter()
            one_song(be, spec)  # compile / kernel-cache load of this bucket; not counted
            warm = time.perf_counter() - w0
            runs = [one_song(be, spec) for _ in range(args.repeats)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            row = {"seconds": seconds, "frames": n, "load_s": round(load_s, 2), "first_song_s": round(warm, 2),
                   **{k: round(v, 4) for k, v in med.items()}, "precision": be.prec.label()}
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        be.close()
    print(f"{'song':>6} {'frames':>6} {'prepare':>8} {'dit':>7} {'step':>7} {'latent':>7} {'vae':>7} {'window':>7} {'total':>7}")
    for r in rows:
        print(f"{r['seconds']:>5}s {r['frames']:>6} {r['prepare']:>8.3f} {r['dit']:>7.2f} {r['step_median']:>7.3f} "
              f"{r['latent']:>7.3f} {r['vae']:>7.2f} {r['window_median']:>7.3f} {r['total']:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
