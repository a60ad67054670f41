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
import json
import os
import sys
import time
from pathlib import Path

import msgspec
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from device_worker.backends.torch_backend import vae_dtype  # noqa: E402
from device_worker.model import sampling  # noqa: E402
from device_worker.model.compiled import CompiledDiT  # noqa: E402
from device_worker.model.load import load_dit  # noqa: E402
from device_worker.model.vae import load_vae  # noqa: E402
from device_worker.protocol import SongParams  # noqa: E402
from device_worker.shapes import BASE_FRAMES, FULL_FRAMES, HOP, SAMPLE_RATE  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def model_files(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """(base DiT, full DiT, VAE) paths."""
    if args.preset == "tiny":
        ref = Path(os.environ.get("STUDIO_SHARED_DIR", ROOT.parent / "shared")) / "reference" / "diffrhythm"
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
    unguided = msgspec.structs.replace(song["params"], cfg=0.0)
    state = sampling.start_song(dit, **{**song, "params": unguided})  # noise and the t grid only
    x, ts, cfg = state.x, state.t, song["params"].cfg
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
    gc.collect()
    if dev.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(torch.device(dev))
    dit = load_dit(dit_path, device=dev, dtype=DTYPES[dtype], half_mode="upstream" if upstream else "mixed")
    vae = load_vae(vae_path, device=dev, dtype=torch.float32 if upstream else vae_dtype(dev, dtype))
    backbone = CompiledDiT(dit) if compile_ else dit
    compile_s = backbone.warm(song["duration"]) if compile_ else 0.0

    def dit_song(steps: int) -> torch.Tensor:
        if upstream:
            with zero_float_mask():
                return upstream_sample(dit, {**song, "params": msgspec.structs.replace(song["params"], steps=steps)})
        return sampling.sample(backbone, **{**song, "params": msgspec.structs.replace(song["params"], steps=steps)})

    def decode(latent: torch.Tensor) -> torch.Tensor:
        return torch.cat(list(vae.decode_windows(latent.transpose(1, 2).float(), window, 32)), dim=2)

    with torch.inference_mode():
        # Warm both halves as a worker is warm after its first song (cuBLAS/cuDNN kernel choice, the
        # allocator), so no row pays a start-up cost another row skipped: one Euler update, one window.
        decode(dit_song(2)[:, :window])
        sync(dev)
        t0 = time.perf_counter()
        latent = dit_song(song["params"].steps)
        sync(dev)
        t1 = time.perf_counter()
        audio = decode(latent)
        sync(dev)
        t2 = time.perf_counter()
    peak = torch.cuda.max_memory_allocated(torch.device(dev)) / 2**20 if dev.startswith("cuda") else float("nan")
    row = {"name": name, "dit_s": t1 - t0, "vae_s": t2 - t1, "total_s": t2 - t0, "peak_mb": peak,
           "compile_s": compile_s, "latent": latent.float().cpu(), "audio": audio.float().cpu()}
    return row  # the models go with this frame; the next row's empty_cache returns their memory


def pcc(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.corrcoef(torch.stack((a.double().flatten(), b.double().flatten())))[0, 1])


def worker_row(dit_path: Path, vae_path: Path, song: dict, args: argparse.Namespace, *, window: int,
               compile_: bool) -> dict:
    """The same song through the real worker process (`python -m device_worker`, zmq, typed messages, raw
    tensor frames): bfloat16, compiled as the worker compiles (at load, before READY) where the in-process
    rows are. Wall time from
    SUBMIT to DONE as the engine sees it, so the wire and the scheduler are inside it."""
    import numpy as np

    from engine.worker_client import Worker, collect

    w = Worker(dit=str(dit_path), vae=str(vae_path), device=args.device, precision="bfloat16",
               compile="on" if compile_ else "off", unit_timeout_s=None)
    try:
        t0 = time.perf_counter()
        w.start()
        ready = w.wait_ready(600)
        load_s = time.perf_counter() - t0
        text = song["text"][0].numpy().astype(np.int64)
        style, neg = song["style"][0].numpy(), song["negative_style"][0].numpy()
        opts = dict(song=song["params"], decode_window=window)
        collect(w.submit(text, style, neg, **opts), 900)  # warm: the first song's allocations and caches
        t0 = time.perf_counter()
        res = collect(w.submit(text, style, neg, **opts), 900)
        wall = time.perf_counter() - t0
    finally:
        w.close()
    units = sum(res.timings.get(k, 0.0) for k in ("prepare", "steps", "latent", "decode"))
    done = res.events[-1].body  # DONE: the song's timings and the device's peak while it ran
    return {"name": "worker bfloat16", "dit_s": res.timings.get("prepare", 0.0) + res.timings.get("steps", 0.0),
            "vae_s": res.timings.get("decode", 0.0), "total_s": wall,
            "peak_mb": float(done.memory.get("device_peak_mb", float("nan"))),
            "compile_s": ready.load_s, "worker_start_s": load_s, "outside_units_s": wall - units,
            "latent": torch.from_numpy(np.asarray(res.latent, np.float32))[None],
            "audio": torch.from_numpy(res.audio)[None]}


# What each row is: (label, run_row keywords). `worker` is the process path (worker_row).
ROWS = {
    "fp32": ("ours float32", dict(dtype="float32")),
    "bf16": ("ours bfloat16", dict(dtype="bfloat16", compile_=True)),
    "bf16-eager": ("ours bf16 eager", dict(dtype="bfloat16")),
    "fp16": ("ours float16", dict(dtype="float16", compile_=True)),
    "fp16-eager": ("ours fp16 eager", dict(dtype="float16")),
    "upstream": ("upstream fp16", dict(dtype="float16", upstream=True)),
    "worker": ("worker bfloat16", None),
}


def summary(row: dict, ref: dict | None, audio_s: float) -> dict:
    """A row's figures, without its tensors (what the table and the JSON show)."""
    out = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k not in ("latent", "audio")}
    out["rtf"] = round(audio_s / row["total_s"], 2)
    if ref is not None:
        n = min(ref["audio"].shape[-1], row["audio"].shape[-1])
        out["pcc_latent"] = round(pcc(row["latent"].reshape(ref["latent"].shape), ref["latent"]), 6)
        out["pcc_audio"] = round(pcc(row["audio"][..., :n], ref["audio"][..., :n]), 6)
    return out


def write_json(path: str | None, report: dict) -> None:
    """After every row, so a run cut short by its time limit still leaves every figure it measured."""
    if path:
        tmp = Path(path + ".part")
        tmp.write_text(json.dumps(report, indent=1))
        tmp.replace(path)


def print_table(seconds: int, frames: int, audio_s: float, rows: list[dict]) -> None:
    print(f"\n{seconds} s song ({frames} frames, {audio_s:.1f} s of audio)")
    print(f"{'path':16} {'DiT s':>8} {'VAE s':>8} {'total s':>8} {'RTF':>7} {'peak MB':>9} {'compile s':>9} "
          f"{'PCC latent':>10} {'PCC audio':>10}")
    for r in rows:
        print(f"{r['name']:16} {r['dit_s']:8.2f} {r['vae_s']:8.2f} {r['total_s']:8.2f} {r['rtf']:7.1f} "
              f"{r['peak_mb']:9.0f} {r['compile_s']:9.1f} {r.get('pcc_latent', 1.0):10.5f} "
              f"{r.get('pcc_audio', 1.0):10.5f}")
    up = next((r for r in rows if r["name"] == ROWS["upstream"][0]), None)
    for r in rows:
        if up is not None and r is not up:
            print(f"speed-up {r['name']} / upstream: {up['total_s'] / r['total_s']:.2f}x "
                  f"(DiT {up['dit_s'] / r['dit_s']:.2f}x, VAE {up['vae_s'] / max(r['vae_s'], 1e-9):.2f}x)")
    w = next((r for r in rows if r["name"] == ROWS["worker"][0]), None)
    same = next((r for r in rows if r["name"] == ROWS["bf16"][0]), None)
    if w is not None and same is not None:
        print(f"worker / in-process (bfloat16 compiled): {w['total_s'] / same['total_s']:.3f}x; "
              f"outside the worker's units: {w['outside_units_s'] * 1e3:.0f} ms "
              f"({100 * w['outside_units_s'] / w['total_s']:.2f}% of the song)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--preset", choices=("release", "tiny"), default="release")
    ap.add_argument("--dir", default="/tmp/release-models", help="where release-size random weights are written")
    ap.add_argument("--models-dir", default=None, help="real model files laid out <dir>/<org>/<repo>/<file>")
    ap.add_argument("--songs", default="95,285", help="song lengths: 95 (base) and/or 285 (full)")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--rows", default="fp32,upstream,bf16,bf16-eager,fp16",
                    help=f"which paths, in order ({', '.join(ROWS)}); fp32 first: the others' PCC is against it")
    ap.add_argument("--worker-songs", default="95", help="song lengths that also get the `worker` row ('' none)")
    ap.add_argument("--compile", choices=("on", "off"), default=None, help="default: on for CUDA")
    ap.add_argument("--window", type=int, default=None, help="our VAE window (default: 512 on CUDA, else 128)")
    ap.add_argument("--json", default=None, help="write every figure here as it is measured")
    ap.add_argument("--budget-s", type=float, default=None, help="start no row after this many seconds")
    args = ap.parse_args()
    t_start = time.perf_counter()
    cuda = args.device.startswith("cuda")
    compile_ = (args.compile or ("on" if cuda else "off")) == "on"
    window = args.window or (512 if cuda else 128)
    wanted = args.rows.split(",")
    unknown = [r for r in wanted if r not in ROWS]
    if unknown:
        ap.error(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # fp32 rows stay exact
    base, full, vae = model_files(args)
    device_name = torch.cuda.get_device_name(0) if cuda else "CPU"
    report = {"device": args.device, "device_name": device_name, "preset": args.preset, "steps": args.steps,
              "compile": compile_, "window": window, "torch": torch.__version__, "songs": {}, "skipped": []}
    print(f"device={args.device} ({device_name}) preset={args.preset} steps={args.steps} compile={compile_} "
          f"window={window} torch={torch.__version__}", flush=True)
    worker_songs = {int(s) for s in args.worker_songs.split(",") if s}
    for seconds in (int(s) for s in args.songs.split(",")):
        frames, dit_path = (BASE_FRAMES, base) if seconds <= 95 else (FULL_FRAMES, full)
        g = torch.Generator().manual_seed(seconds)
        song = dict(text=torch.randint(1, 300, (1, frames), generator=g), style=torch.randn(1, 512, generator=g),
                    negative_style=torch.randn(1, 512, generator=g), duration=frames,
                    params=SongParams(steps=args.steps, cfg=4.0, seed=7))
        audio_s = frames * HOP / SAMPLE_RATE
        done: list[dict] = []
        ref = None
        keys = wanted + (["worker"] if seconds in worker_songs and "worker" not in wanted else [])
        for key in keys:
            if args.budget_s is not None and time.perf_counter() - t_start > args.budget_s:
                report["skipped"].append(f"{seconds} s {key}: past the {args.budget_s:.0f} s budget")
                print(f"skipped {seconds} s {key}: past the budget", flush=True)
                continue
            label, kw = ROWS[key]
            try:
                if key == "worker":
                    row = worker_row(dit_path, vae, song, args, window=window, compile_=compile_)
                else:
                    kw = {**kw, "compile_": kw.get("compile_", False) and compile_}
                    row = run_row(label, dit_path, vae, song, args, window=window, **kw)
            except Exception as e:  # one failed path must not hide the others' figures
                report["skipped"].append(f"{seconds} s {key}: {type(e).__name__}: {e}")
                print(f"FAILED {seconds} s {key}: {type(e).__name__}: {e}", flush=True)
                continue
            ref = ref if ref is not None else (row if key == "fp32" else None)
            done.append(summary(row, ref if row is not ref else None, audio_s))
            print(f"  {seconds} s {label}: total {row['total_s']:.2f} s, peak {row['peak_mb']:.0f} MB", flush=True)
            report["songs"][str(seconds)] = {"frames": frames, "audio_s": audio_s, "rows": done}
            write_json(args.json, report)
        print_table(seconds, frames, audio_s, done)
    report["elapsed_s"] = round(time.perf_counter() - t_start, 1)
    write_json(args.json, report)


if __name__ == "__main__":
    main()
