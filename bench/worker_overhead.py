"""Wall time of a song through the device worker vs the same song in-process, side by side.

Builds a random DiT with `device_worker.model.dit` (release format: fp16 `model_state_dict` with the
`transformer.` prefix + upstream config.json) in a temp dir, sized so one guided step takes tens of
milliseconds on a CPU, and uses the tiny reference VAE. Then alternates: one song in-process
(`sampling.sample` + `decode_windows`), one song through `engine.worker_client.Worker` (submit -> events),
`--rounds` times, same torch thread count on both sides. Prints JSON lines: per-round times, the
median ratio worker / in-process (target <= 1.05), and the peak RSS of both processes. On a small or
busy machine the ratio moves by several per cent either way from run to run, so each round also gives
`worker_outside_units_ms`: the worker wall time minus the worker's own unit times (prepare, steps,
latent, decode), i.e. what the wire, the scheduling and the host's join of the windows add.

    .venv/bin/python bench/worker_overhead.py [--rounds 5] [--frames 192] [--dim 128] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VAE = ROOT.parent / "shared" / "reference" / "diffrhythm" / "vae-tiny" / "vae_model.pt"


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_random_dit(folder: Path, dim: int, depth: int, seed: int = 0) -> Path:
    """A random DiT saved like the release: cfm_model.pt (fp16, `transformer.` keys) + config.json."""
    import torch

    from device_worker.model.dit import DiT, DiTConfig

    model_cfg = dict(dim=dim, depth=depth, ff_mult=2, text_dim=512, conv_layers=1, mel_dim=64,
                     text_num_embeds=363)
    torch.manual_seed(seed)
    dit = DiT(DiTConfig(**model_cfg, max_frames=2048))
    with torch.no_grad():  # upstream zero-inits some layers; random everywhere keeps every path busy
        for p in dit.parameters():
            p.copy_(torch.randn_like(p) * 0.02)
    folder.mkdir(parents=True, exist_ok=True)
    state = {f"transformer.{k}": v.half() for k, v in dit.state_dict().items()}
    torch.save({"model_state_dict": state}, folder / "cfm_model.pt")
    (folder / "config.json").write_text(json.dumps({"model_type": "diffrhythm", "model": model_cfg,
                                                    "max_frames": 2048}))
    return folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--frames", type=int, default=192)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--vae", default=str(DEFAULT_VAE))
    ap.add_argument("--policy", default="fair")
    args = ap.parse_args()

    client_rss = _rss_mib()
    import torch

    from device_worker.model.load import load_dit
    from device_worker.model.sampling import sample
    from device_worker.model.vae import load_vae
    from engine.worker_client import Worker, collect

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="drs-bench-"))
    dit_dir = build_random_dit(tmp / "dit", args.dim, args.depth)
    n = args.frames
    rng = np.random.default_rng(0)
    text = np.zeros(n, np.int64)
    text[8 : n // 2] = rng.integers(3, 300, n // 2 - 8)
    style = rng.standard_normal(512).astype(np.float32)
    neg = rng.standard_normal(512).astype(np.float32)

    dit, vae = load_dit(dit_dir), load_vae(args.vae)
    tt, ts, tn = torch.from_numpy(text)[None], torch.from_numpy(style)[None], torch.from_numpy(neg)[None]

    def in_process() -> tuple[float, np.ndarray]:
        t0 = time.perf_counter()
        lat = sample(dit, text=tt, style=ts, negative_style=tn, duration=n, steps=args.steps, seed=1)
        audio = torch.cat(list(vae.decode_windows(lat.transpose(1, 2))), dim=2)[0].numpy()
        return time.perf_counter() - t0, audio

    # one guided step, measured in-process (what "tens of milliseconds" refers to)
    from device_worker.model.sampling import start_song, step_song

    st = start_song(dit, text=tt, style=ts, negative_style=tn, duration=n, steps=args.steps, seed=1)
    step_song(dit, st)
    t0 = time.perf_counter()
    for _ in range(5):
        step_song(dit, st)
    step_ms = (time.perf_counter() - t0) / 5 * 1e3

    w = Worker(dit=str(dit_dir), vae=args.vae, threads=args.threads, policy=args.policy,
               lock_dir=str(tmp / "lock"))
    try:
        w.start()
        ready = w.wait_ready(300)
        print(json.dumps({"event": "setup", "dim": args.dim, "depth": args.depth, "frames": n, "steps": args.steps,
                          "threads": args.threads, "guided_step_ms": round(step_ms, 1),
                          "worker_load_s": round(ready.load_s, 2)}), flush=True)
        collect(w.submit(text, style, neg, steps=args.steps, seed=1), 600)  # warm-up both sides
        in_process()
        rows = []
        for r in range(args.rounds):
            t_in, audio_in = in_process()
            t0 = time.perf_counter()
            res = collect(w.submit(text, style, neg, steps=args.steps, seed=1), 600)
            t_w = time.perf_counter() - t0
            same = bool(np.array_equal(res.audio, audio_in))
            # What the worker path adds besides the units themselves (wire, scheduling, the host's join of
            # the windows): robust against CPU noise that moves both wall times by more than the overhead.
            units = sum(res.timings.get(k, 0.0) for k in ("prepare", "steps", "latent", "decode"))
            rows.append((t_in, t_w, t_w - units))
            print(json.dumps({"event": "round", "round": r, "in_process_s": round(t_in, 3),
                              "worker_s": round(t_w, 3), "ratio": round(t_w / t_in, 3), "bit_identical": same,
                              "worker_steps_s": round(res.timings.get("steps", 0), 3),
                              "worker_decode_s": round(res.timings.get("decode", 0), 3),
                              "worker_outside_units_ms": round((t_w - units) * 1e3, 1)}), flush=True)
        stats = w.stats()
    finally:
        w.close()
        shutil.rmtree(tmp, ignore_errors=True)
    ratios = [tw / ti for ti, tw, _ in rows]
    print(json.dumps({
        "event": "summary", "median_in_process_s": round(statistics.median(r[0] for r in rows), 3),
        "median_worker_s": round(statistics.median(r[1] for r in rows), 3),
        "median_ratio": round(statistics.median(ratios), 3), "min_ratio": round(min(ratios), 3),
        "max_ratio": round(max(ratios), 3), "target": "<= 1.05",
        "median_outside_units_ms": round(statistics.median(r[2] for r in rows) * 1e3, 1),
        "median_outside_units_share": round(statistics.median(r[2] / r[1] for r in rows), 4),
        "host_peak_rss_mib": round(_rss_mib(), 1), "host_rss_before_torch_mib": round(client_rss, 1),
        "worker_peak_rss_mib": round(stats.peak_rss_bytes / 2**20, 1),
    }), flush=True)


if __name__ == "__main__":
    sys.exit(main())
