"""The test model's DiT step with 32 heads (what a config without `n_head` gets) and with its 2, side by side.

    .venv/bin/python bench/testmodel_heads.py [--repeats 2] [--threads 1] [--dtype bfloat16]

One guided step as the worker runs it (batch 2: conditional and unconditional, per-song work prepared) on
`studio.testmodel.DIT` with random weights, at 2048 frames (a 95 s song) and 6144 (285 s). The test model
is dim 64: with 32 heads each is 2 wide, and attention's 32 score maps of N^2 dominate the step; with 2
heads of 32 the same weights shapes run ~5-10x faster. Median of --repeats after one warm-up.
"""

from __future__ import annotations

import argparse
import resource
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from bench.dit_step import median_time  # noqa: E402
from device_worker.model.dit import DiT  # noqa: E402
from device_worker.model.load import config_from_upstream  # noqa: E402
from studio.testmodel import DIT  # noqa: E402


def step_s(n_head: int, frames: int, repeats: int, dtype: torch.dtype) -> float:
    max_frames = 2048 if frames <= 2048 else 6144
    cfg = config_from_upstream({"model": {**DIT, "n_head": n_head}, "max_frames": max_frames}, None)
    torch.manual_seed(0)
    dit = DiT(cfg)
    for p in dit.parameters():
        p.data.normal_(0, 0.02)
    dit = dit.to(dtype=dtype).eval()
    x = torch.randn(2, frames, 64, dtype=dtype)
    cond = torch.zeros(2, frames, 64, dtype=dtype)
    text = torch.randint(0, cfg.text_num_embeds + 1, (2, frames))
    style = torch.randn(2, 512, dtype=dtype)
    start, dur = torch.zeros(2, dtype=dtype), torch.full((2,), frames / max_frames, dtype=dtype)
    with torch.inference_mode():
        cache = dit.prepare(cond, text, style, start, dur)
        t = torch.tensor(0.3, dtype=dtype)
        return median_time(lambda: dit.forward_prepared(x, t, cache), repeats, lambda: None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (the test workers run 1)")
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    print(f"torch {torch.__version__}, cpu, {args.dtype}, {torch.get_num_threads()} thread(s), "
          f"median of {args.repeats} after 1 warm-up; test model dim {DIT['dim']}, depth {DIT['depth']}")
    print(f"{'frames':>6} {'32 heads':>10} {'2 heads':>10} {'ratio':>7}")
    for frames in (2048, 6144):
        a, b = step_s(32, frames, args.repeats, dtype), step_s(DIT["n_head"], frames, args.repeats, dtype)
        print(f"{frames:>6} {a:>9.3f}s {b:>9.3f}s {a / b:>6.1f}x")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
