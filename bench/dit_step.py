"""Time one guided DiT step four ways: separate vs batched guidance, per-call vs per-song (prepared) work.

    .venv/bin/python bench/dit_step.py [--repeats 3] [--threads 1] [--frames 512] [--device cpu] [--dtype float32]

Configs: the tiny reference checkpoints' architecture and a
mid-size one, both with random weights. "separate" = two B=1 forwards (conditional, unconditional) as upstream runs them;
"batched" = one B=2 forward. "unprepared" recomputes lyric features, text-fusion terms and start/duration
embeddings every call (upstream); "prepared" computes them once per song (`DiT.prepare`). Times are the
median of --repeats runs after one warm-up run; peak RSS is the process maximum at the end.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from device_worker.model.dit import DiT, DiTConfig  # noqa: E402

CONFIGS = {  # name: (config, frames)
    "tiny (128x4)": (DiTConfig(dim=128, depth=4, ff_mult=2, conv_layers=2, max_frames=2048), 96),
    "mid (512x8)": (DiTConfig(dim=512, depth=8, ff_mult=4, conv_layers=2, max_frames=6144), 512),
}


def median_time(fn: Callable[[], object], repeats: int, sync: Callable[[], None]) -> float:
    fn()  # warm-up (allocator, kernel selection), not timed
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench(cfg: DiTConfig, n: int, repeats: int, device: str, dtype: torch.dtype) -> dict[str, float]:
    torch.manual_seed(0)
    dit = DiT(cfg)
    for p in dit.parameters():  # upstream zero-initialises some layers; random values exercise every path
        p.data.normal_(0, 0.02)
    dit = dit.to(device=device, dtype=dtype).eval()
    g = dict(device=device)
    x, cond = torch.randn(1, n, 64, **g), torch.zeros(1, n, 64, **g)
    text = torch.randint(0, cfg.text_num_embeds + 1, (1, n), **g)
    style, neg = torch.randn(1, 512, **g), torch.randn(1, 512, **g)
    start, dur, t = torch.zeros(1, **g), torch.full((1,), n / cfg.max_frames, **g), torch.tensor(0.3, **g)
    kw = dict(start_time=start, duration=dur)
    both = dict(cond=torch.cat((cond, cond)), text=torch.cat((text, torch.zeros_like(text))),
                style=torch.cat((style, neg)))
    cache_c = dit.prepare(cond, text, style, start, dur)
    cache_u = dit.prepare(cond, text, neg, start, dur, drop_audio_cond=True, drop_text=True)
    cache_2 = dit.prepare(both["cond"], both["text"], both["style"], start.repeat(2), dur.repeat(2))
    x2 = torch.cat((x, x))
    steps = {
        "separate, unprepared": lambda: (
            dit(x, cond, text, t, style_prompt=style, **kw),
            dit(x, cond, text, t, drop_audio_cond=True, drop_text=True, style_prompt=neg, **kw),
        ),
        "batched, unprepared": lambda: dit(x2, both["cond"], both["text"], t, style_prompt=both["style"],
                                           start_time=start.repeat(2), duration=dur.repeat(2)),
        "separate, prepared": lambda: (dit.forward_prepared(x, t, cache_c), dit.forward_prepared(x, t, cache_u)),
        "batched, prepared": lambda: dit.forward_prepared(x2, t, cache_2),
    }
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    with torch.inference_mode():
        return {name: median_time(fn, repeats, sync) for name, fn in steps.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    # 1 thread by default: on the shared 2-core CI machine two threads contend and run ~3x slower
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--frames", type=int, default=None, help="N for the mid-size config (default 512)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    print(f"torch {torch.__version__}, device {args.device}, {args.dtype}, {torch.get_num_threads()} threads, "
          f"median of {args.repeats} after 1 warm-up")
    header = f"{'config':<16} {'N':>5} {'2 fwd':>9} {'1 fwd B=2':>10} {'batch x':>8} " \
             f"{'2 fwd prep':>11} {'B=2 prep':>9} {'prep x (2 fwd)':>15} {'prep x (B=2)':>13} {'total x':>8}"
    print(header)
    print("-" * len(header))
    for name, (cfg, n) in CONFIGS.items():
        if args.frames and name.startswith("mid"):
            n = args.frames
        r = bench(cfg, n, args.repeats, args.device, dtype)
        a, b = r["separate, unprepared"], r["batched, unprepared"]
        c, d = r["separate, prepared"], r["batched, prepared"]
        print(f"{name:<16} {n:>5} {a * 1e3:>7.1f}ms {b * 1e3:>8.1f}ms {a / b:>7.2f}x "
              f"{c * 1e3:>9.1f}ms {d * 1e3:>7.1f}ms {a / c:>14.2f}x {b / d:>12.2f}x {a / d:>7.2f}x")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak_mb:.0f} MiB")


if __name__ == "__main__":
    main()
