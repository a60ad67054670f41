"""`DRPrecision`: the precision recipe of the card path, as names (resolved to ttnn enums in tt_common).

Defaults are the public port's measured set (SunandBean/tt-diffrhythm `diffrhythm_dit.py::DRPrecision`,
its `device_check.py --closed-loop`, 96 s song, final latent vs a GPU): bf16 weights, HiFi4 with fp32
destination accumulation everywhere, fp32 residual stream / latent in / velocity out / per-call rows
-> final-latent PCC 0.9954; all-bf16 on the card 0.970; HiFi2 matmuls 0.9931 for only 14 % less time.
Guidance multiplies the branch difference by cfg = 4 and 31 steps add it up, which is why the rows that
are the same for every frame (style/time row, output scale/shift, norm weights) stay fp32.
HiFi2 and bfloat8_b weights are flags, off by default; their PCC on this code has not been measured
(no card here): measure with tests/tenstorrent/test_ttnn_hardware.py before turning them on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

FIDELITIES = ("LoFi", "HiFi2", "HiFi3", "HiFi4")
WEIGHT_DTYPES = ("bfloat16", "bfloat8_b")


@dataclass(frozen=True)
class DRPrecision:
    weight_dtype: str = "bfloat16"  # big matmul weights; "bfloat8_b" halves DRAM (1.18 GB) behind a flag
    mm_fidelity: str = "HiFi4"  # matmuls; HiFi2 only 14 % faster in the port (not FPU-bound at these shapes)
    sdpa_fidelity: str = "HiFi4"  # attention, fp32 accumulation
    norm_fidelity: str = "HiFi4"  # RMSNorm / LayerNorm / RoPE / convs, fp32 dest acc (the port's set)
    fp32_dest_acc: bool = True
    x_fp32: bool = True  # noisy latent uploaded fp32 (the input projection reads it)
    residual_fp32: bool = True  # residual stream fp32: each branch output is added into it
    out_fp32: bool = True  # velocity written fp32
    rows_fp32: bool = True  # per-call rows (input row, 1 + scale, shift) and norm weights fp32
    windowed_attention: bool = True  # padded keys excluded by cu_window_seqlens (port: 30 % faster at 6144
    # than an [S, S] additive mask); False builds the mask
    batch_branches: bool = True  # both guidance branches as one batch-2 call (one weight read per step)
    trace: bool = False  # capture one trace per bucket after an eager pass (flag; equality is a hw test)
    vae_fidelity: str = "HiFi4"  # port: HiFi2/LoFi no faster for the convs (not math-bound)
    vae_act_block_h: int = 64  # port's conv sweep: 64-row activation blocks on <= 256-channel layers
    vae_act_block_h_max_channels: int = 256

    def __post_init__(self) -> None:
        for name in ("mm_fidelity", "sdpa_fidelity", "norm_fidelity", "vae_fidelity"):
            if getattr(self, name) not in FIDELITIES:
                raise ValueError(f"{name}={getattr(self, name)!r}; choose one of {FIDELITIES}")
        if self.weight_dtype not in WEIGHT_DTYPES:
            raise ValueError(f"weight_dtype={self.weight_dtype!r}; choose one of {WEIGHT_DTYPES}")

    @classmethod
    def from_flags(cls, *, hifi2: bool = False, bfp8: bool = False, trace: bool = False,
                   batch_branches: bool = True) -> DRPrecision:
        p = cls(trace=trace, batch_branches=batch_branches)
        if hifi2:
            p = replace(p, mm_fidelity="HiFi2")
        if bfp8:
            p = replace(p, weight_dtype="bfloat8_b")
        return p

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> DRPrecision:
        """Deployment knobs: DRS_TTNN_HIFI2=1, DRS_TTNN_BFP8=1, DRS_TTNN_TRACE=1, DRS_TTNN_BATCH_BRANCHES=0."""
        e = os.environ if env is None else env
        on = lambda k, d="0": e.get(k, d).strip().lower() in ("1", "true", "yes", "on")  # noqa: E731
        return cls.from_flags(hifi2=on("DRS_TTNN_HIFI2"), bfp8=on("DRS_TTNN_BFP8"), trace=on("DRS_TTNN_TRACE"),
                              batch_branches=on("DRS_TTNN_BATCH_BRANCHES", "1"))

    def label(self) -> str:
        return (f"w={self.weight_dtype} mm={self.mm_fidelity} sdpa={self.sdpa_fidelity} "
                f"residual={'fp32' if self.residual_fp32 else 'bf16'} batch2={int(self.batch_branches)} "
                f"trace={int(self.trace)}")
