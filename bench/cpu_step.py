"""One guided DiT step on the CPU at release width, float32 against half precision, side by side in one run.

The step: the DiT's per-step forward (`forward_prepared`) on a batch of 2 (both guidance branches), at the
release width (dim 2048, heads 32, ff 8192) with `--depth` of its 16 blocks and `--frames` latent frames,
random weights. Rows, timed in alternating rounds so a busy machine slows each alike:
  float32             the exact path (what `--precision float32` runs)
  bf16 3-D Linear     bfloat16 "mixed" as it ran before `dit.Linear` (torch's batched-GEMM path for 3-D inputs)
  bfloat16            bfloat16 "mixed" as the worker runs it now
  bf16 compiled       the same step through torch.compile (inductor's C++ kernels), with --compile
Then the final latent of each reference case (`../shared/reference/diffrhythm`, when present) sampled in
float32 and in what `--precision auto` picks on this CPU: their PCC. And what auto picks, and why.

    python bench/cpu_step.py [--depth 4] [--frames 2048] [--threads N] [--repeats 3] [--compile] [--native-only]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from device_worker.backends.torch_backend import cpu_has_native_bf16  # noqa: E402
from device_worker.config import resolve_precision  # noqa: E402
from device_worker.model import dit as dit_module  # noqa: E402
from device_worker.model import sampling  # noqa: E402
from device_worker.model.compiled import CompiledDiT  # noqa: E402
from device_worker.model.dit import DiT, DiTConfig  # noqa: E402
from device_worker.model.load import load_dit  # noqa: E402

REFERENCE = Path(os.environ.get("STUDIO_SHARED_DIR", ROOT.parent / "shared")) / "reference" / "diffrhythm"


def pcc(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.corrcoef(torch.stack((a.double().flatten(), b.double().flatten())))[0, 1])


@contextmanager
def batched_gemm_linears():
    """Every `dit.Linear` as plain nn.Linear (3-D inputs through batched GEMM): the path before the fix."""
    flat = dit_module.Linear.forward
    dit_module.Linear.forward = nn.Linear.forward
    try:
        yield
    finally:
        dit_module.Linear.forward = flat


def random_dit(depth: int, frames: int) -> DiT:
    with torch.device("meta"):
        model = DiT(DiTConfig(dim=2048, depth=depth, max_frames=max(frames, 2048)))
    model = model.to_empty(device="cpu")
    g = torch.Generator().manual_seed(0)
    for p in model.parameters():  # upstream zero-inits some layers; random values keep every path busy
        p.data.normal_(0, 0.02, generator=g)
    return model.eval().requires_grad_(False)


def half(model: DiT, dtype: torch.dtype) -> DiT:
    out = copy.deepcopy(model).to(dtype)
    out.upcast_residual = True  # load_dit(half_mode="mixed") for half weights
    return out


def step_rows(args: argparse.Namespace) -> list[dict]:
    n = args.frames
    fp32 = random_dit(args.depth, n)
    bf16 = half(fp32, torch.bfloat16)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, n, 64, generator=g)
    inputs = (torch.randn(2, n, 64, generator=g), torch.randint(1, 300, (2, n), generator=g),
              torch.randn(2, 512, generator=g))
    rows = {"float32": (fp32, None), "bf16 3-D Linear": (bf16, batched_gemm_linears), "bfloat16": (bf16, None)}
    compile_s = None
    if args.compile:
        compiled_model = half(fp32, torch.bfloat16)
        compiled = CompiledDiT(compiled_model)
        t0 = time.perf_counter()
        compiled.warm(n)
        compile_s = time.perf_counter() - t0
        rows["bf16 compiled"] = (compiled, None)
    caches = {name: model.prepare(*inputs) for name, (model, _) in rows.items()}
    times: dict[str, list[float]] = {name: [] for name in rows}
    outs: dict[str, torch.Tensor] = {}
    with torch.inference_mode():
        for r in range(args.repeats + 1):  # round 0 warms (allocator, oneDNN kernel selection)
            for name, (model, ctx) in rows.items():
                with ctx() if ctx else nullcontext():
                    t0 = time.perf_counter()
                    out = model.forward_prepared(x.to(model.state_dtype), 0.3, caches[name])
                    dt = time.perf_counter() - t0
                if r:
                    times[name].append(dt)
                outs[name] = out.float()
    result = []
    for name in rows:
        med = statistics.median(times[name])
        result.append({"row": name, "step_s": round(med, 3), "x_vs_float32": None, "pcc_vs_float32":
                       round(pcc(outs[name], outs["float32"]), 6)})
    base = result[0]["step_s"]
    for row in result:
        row["x_vs_float32"] = round(base / row["step_s"], 2)
    if compile_s is not None:
        result[-1]["compile_s"] = round(compile_s, 1)
    if getattr(rows.get("bf16 compiled", (None,))[0], "failure", None):
        result[-1]["compile_failure"] = rows["bf16 compiled"][0].failure
    return result


def reference_pcc(precision: str) -> list[dict]:
    """Final latents of the upstream reference cases: float32 against `precision` (mixed), PCC each."""
    if not REFERENCE.is_dir():
        return []
    from reference_cases import FP32_CASES, load_case, song_kwargs

    out = []
    for name in FP32_CASES:
        meta, t = load_case(REFERENCE, name)
        ckpt = REFERENCE / meta["checkpoint"]
        ref = sampling.sample(load_dit(ckpt), **song_kwargs(meta, t)).float()
        got = sampling.sample(load_dit(ckpt, dtype=getattr(torch, precision)), **song_kwargs(meta, t)).float()
        out.append({"case": name, "precision": precision, "pcc_final": round(pcc(got, ref), 6)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", type=int, default=4, help="blocks of the 16 (the time per block is what counts)")
    ap.add_argument("--frames", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compile", action="store_true", help="also time the compiled bfloat16 step")
    ap.add_argument("--json", default=None, help="write the figures here too")
    ap.add_argument("--native-only", action="store_true", help="skip the half rows on a CPU without native bf16")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    native = cpu_has_native_bf16()
    auto = resolve_precision("torch", "cpu", "auto", cpu_bf16=native)
    env = {"torch": torch.__version__, "threads": torch.get_num_threads(), "capability":
           torch.backends.cpu.get_cpu_capability(), "native_bf16": native, "auto_precision": auto,
           "depth": args.depth, "frames": args.frames}
    print(json.dumps(env), flush=True)
    if args.native_only and not native:
        print("no native bfloat16 on this CPU: the half rows are skipped (emulated, they run many times slower "
              "than float32; auto picks float32 here)")
        if args.json:
            Path(args.json).write_text(json.dumps({"env": env, "step": [], "reference": []}, indent=1))
        return
    rows = step_rows(args)
    print(f"{'row':18} {'step s':>8} {'x fp32':>7} {'PCC':>9}")
    for r in rows:
        print(f"{r['row']:18} {r['step_s']:8.3f} {r['x_vs_float32']:7.2f} {r['pcc_vs_float32']:9.6f}"
              + (f"   compile {r['compile_s']} s" if "compile_s" in r else "")
              + (f"   FAILED: {r['compile_failure']}" if "compile_failure" in r else ""), flush=True)
    refs = reference_pcc("bfloat16")
    for r in refs:
        print(f"reference {r['case']:28} {r['precision']} mixed vs float32: PCC {r['pcc_final']:.6f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"env": env, "step": rows, "reference": refs}, indent=1))


if __name__ == "__main__":
    main()
