"""One song on one GPU, upstream's way and ours side by side, in one run.

For a 95 s song (base DiT, 2048 frames) and a 285 s song (full DiT, 6144 frames):
  upstream  DiffRhythm's inference as it runs: `model.half()` (fp16 everywhere), two DiT forwards per step
            (conditional, then unconditional with the drop flags), an all-zero float attention mask on
            every attention call (which keeps SDPA off its fastest kernels), fp32 VAE with chunked decode
            (128-frame windows, 32 overlap);
  ours      the worker's path: one batched guided forward per step on prepared inputs
            (`sampling.sample`), weights in each precision (float32 exact, bfloat16 / float16 "mixed"),
            the step compiled (`--compile`), the VAE in float16 on a GPU when the DiT is half, windows of
            `--window` frames.
Per row: DiT and VAE seconds (device-synchronised), real-time factor, peak device memory, and the PCC of
the final latent and waveform against our float32 row. The last lines give ours / upstream.

Weights: `--preset release` writes release-size random weights in the release formats (bench/release_size.py,
~4.5 GB on disk under --dir, once) or uses the real files when `--models-dir` holds them; `--preset tiny`
takes the reference set's tiny checkpoints (a dry run that works on the CPU: `--device cpu --steps 4`).
Random weights make noise, not music: the timings and memory are what the real files cost.

    python bench/gpu_song.py --device cuda:0 --preset release --dir /tmp/release-models
    python bench/gpu_song.py --device cpu --preset tiny --steps 4 --songs 95      # the script itself, on a CPU
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from device_worker import sampling  # noqa: E402
from device_worker.backends.torch_backend import vae_dtype  # noqa: E402
from device_worker.compiled import CompiledDiT  # noqa: E402
from device_worker.models import load_dit, load_vae  # noqa: E402
from device_worker.shapes import BASE_FRAMES, FULL_FRAMES, HOP, SAMPLE_RATE  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def model_files(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """(base DiT, full DiT, VAE) paths."""
    if args.preset == "tiny":
        ref = ROOT.parent / "shared" / "reference" / "diffrhythm"
        return ref / "dit-tiny-base", ref / "dit-tiny-full", ref / "vae-tiny" / "vae_model.pt"
    if args.models_dir:
        d = Path(args.models_dir) / "ASLP-lab"
        return d / "DiffRhythm-1_2", d / "DiffRhythm-1_2-full", d / "DiffRhythm-vae" / "vae_model.pt"
    sys.path.insert(0, str(ROOT / "bench"))
    from release_size import write_dit, write_vae

    d = Path(args.dir) / "ASLP-lab"
    base, full, vae = d / "DiffRhythm-1_2", d / "DiffRhythm-1_2-full", d / "DiffRhythm-vae" / "vae_model.pt"
    for folder in (base, full):
        folder.mkdir(parents=True, exist_ok=True)
    write_dit(torch, base / "cfm_model.pt", "diffrhythm-1.2-base")
    write_dit(torch, full / "cfm_model.pt", "diffrhythm-1.2-full")
    write_vae(torch, vae)
    return base, full, vae


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(torch.device(device))


@contextlib.contextmanager
def zero_float_mask():
    """Upstream passes an all-zero float mask to every attention call: same result, slower kernels."""
    plain = F.scaled_dot_product_attention

    def masked(q, k, v, *args, **kwargs):
        if kwargs.get("attn_mask") is None and not kwargs.get("is_causal"):
            kwargs["attn_mask"] = torch.zeros(q.shape[0], 1, q.shape[-2], k.shape[-2], dtype=q.dtype, device=q.device)
        return plain(q, k, v, *args, **kwargs)

    F.scaled_dot_product_attention = masked
    try:
        yield
    finally:
        F.scaled_dot_product_attention = plain


def upstream_sample(dit, song: dict) -> torch.Tensor:
    """Upstream's CFM.sample loop: the same noise and time grid, two full forwards per step."""
    state = sampling.start_song(dit, **{**song, "cfg_strength": 0.0})  # noise and the t grid only
    x, ts, cfg = state.x, state.t, song["cfg_strength"]
    dev = x.device
    text, style, neg = song["text"].to(dev), song["style"].to(dev), song["negative_style"].to(dev)
    cond = torch.zeros_like(x)
    for k in range(len(ts) - 1):
        t = ts[k]
        pred = dit.forward(x, cond, text, t, style_prompt=style)
        null = dit.forward(x, cond, text, t, drop_audio_cond=True, drop_text=True, style_prompt=neg)
        x = x + (ts[k + 1] - t) * (pred + (pred - null) * cfg).to(x.dtype)
    return x


def run_row(name: str, dit_path: Path, vae_path: Path, song: dict, args: argparse.Namespace, *, dtype: str,
            upstream: bool = False, compile_: bool = False, window: int = 128) -> dict:
    dev = args.device
    if dev.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(torch.device(dev))
    dit = load_dit(dit_path, device=dev, dtype=DTYPES[dtype], precision="upstream" if upstream else "mixed")
    vae = load_vae(vae_path, device=dev, dtype=torch.float32 if upstream else vae_dtype(dev, dtype))
    backbone = CompiledDiT(dit) if compile_ else dit
    compile_s = backbone.warm(song["duration"]) if compile_ else 0.0
    with torch.inference_mode():
        sync(dev)
        t0 = time.perf_counter()
        if upstream:
            with zero_float_mask():
                latent = upstream_sample(dit, song)
        else:
            latent = sampling.sample(backbone, **song)
        sync(dev)
        t1 = time.perf_counter()
        audio = torch.cat(list(vae.decode_windows(latent.transpose(1, 2).float(), window, 32)), dim=2)
        sync(dev)
        t2 = time.perf_counter()
    peak = torch.cuda.max_memory_allocated(torch.device(dev)) / 2**20 if dev.startswith("cuda") else float("nan")
    row = {"name": name, "dit_s": t1 - t0, "vae_s": t2 - t1, "total_s": t2 - t0, "peak_mb": peak,
           "compile_s": compile_s, "latent": latent.float().cpu(), "audio": audio.float().cpu()}
    del dit, vae, backbone, latent, audio
    gc.collect()
    return row


def pcc(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.corrcoef(torch.stack((a.double().flatten(), b.double().flatten())))[0, 1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--preset", choices=("release", "tiny"), default="release")
    ap.add_argument("--dir", default="/tmp/release-models", help="where release-size random weights are written")
    ap.add_argument("--models-dir", default=None, help="real model files laid out <dir>/<org>/<repo>/<file>")
    ap.add_argument("--songs", default="95,285", help="song lengths: 95 (base) and/or 285 (full)")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--precisions", default="float32,bfloat16,float16")
    ap.add_argument("--compile", choices=("on", "off"), default=None, help="default: on for CUDA")
    ap.add_argument("--window", type=int, default=None, help="our VAE window (default: 512 on CUDA, else 128)")
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    compile_ = (args.compile or ("on" if cuda else "off")) == "on"
    window = args.window or (512 if cuda else 128)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # fp32 rows stay exact
    base, full, vae = model_files(args)
    print(f"device={args.device} ({torch.cuda.get_device_name(0) if cuda else 'CPU'}) preset={args.preset} "
          f"steps={args.steps} compile={compile_} window={window} torch={torch.__version__}")
    for seconds in (int(s) for s in args.songs.split(",")):
        frames, dit_path = (BASE_FRAMES, base) if seconds <= 95 else (FULL_FRAMES, full)
        g = torch.Generator().manual_seed(seconds)
        song = dict(text=torch.randint(1, 300, (1, frames), generator=g), style=torch.randn(1, 512, generator=g),
                    negative_style=torch.randn(1, 512, generator=g), duration=frames, steps=args.steps,
                    cfg_strength=4.0, seed=7)
        audio_s = frames * HOP / SAMPLE_RATE
        rows = [run_row("ours float32", dit_path, vae, song, args, dtype="float32", window=window)]
        for p in args.precisions.split(","):
            if p != "float32":
                rows.append(run_row(f"ours {p}", dit_path, vae, song, args, dtype=p, compile_=compile_, window=window))
        rows.append(run_row("upstream fp16", dit_path, vae, song, args, dtype="float16", upstream=True))
        ref = rows[0]
        print(f"\n{seconds} s song ({frames} frames, {audio_s:.1f} s of audio)")
        print(f"{'path':16} {'DiT s':>8} {'VAE s':>8} {'total s':>8} {'RTF':>7} {'peak MB':>9} {'compile s':>9} "
              f"{'PCC latent':>10} {'PCC audio':>10}")
        for r in rows:
            print(f"{r['name']:16} {r['dit_s']:8.2f} {r['vae_s']:8.2f} {r['total_s']:8.2f} "
                  f"{audio_s / r['total_s']:7.1f} {r['peak_mb']:9.0f} {r['compile_s']:9.1f} "
                  f"{pcc(r['latent'], ref['latent']):10.5f} {pcc(r['audio'], ref['audio']):10.5f}")
        up = rows[-1]
        for r in rows[:-1]:
            print(f"speed-up {r['name']} / upstream: {up['total_s'] / r['total_s']:.2f}x "
                  f"(DiT {up['dit_s'] / r['dit_s']:.2f}x, VAE {up['vae_s'] / r['vae_s']:.2f}x)")


if __name__ == "__main__":
    main()
