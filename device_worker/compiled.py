"""The DiT's per-step forward compiled with `torch.compile`, one graph per song shape.

A song's shapes are few and fixed: the latent is the model's whole frame budget (2048 frames for the
95 s model, 6144 for the full one; `shapes.max_frames_for`), and a guided step is a batch of 2. So the
step is compiled with static shapes (`dynamic=False`): the graph fuses RMSNorm, RoPE, SwiGLU and the
residual adds without a dynamic-shape guard, and `warm` compiles it while the worker loads, before READY,
so a musician's first song pays no compile time (inductor keeps its artefacts on disk, so a later start
is quicker). q/k/v and gate/up are fused into one matmul each first (`fuse_projections`). `prepare`
(once per song) stays eager.

`CompiledDiT` is a `sampling.Backbone`: the sampler drives it exactly as it drives the DiT.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from device_worker.config import COMPILE_CHOICES
from device_worker.dit import COND_DIM, DiT

logger = logging.getLogger(__name__)


def should_compile(choice: str, device: str) -> bool:
    """auto: on a CUDA GPU (where fused kernels pay), off on the CPU (30 s of compiling at start for a
    speed-up nobody measured there)."""
    if choice not in COMPILE_CHOICES:
        raise ValueError(f"compile must be one of {', '.join(COMPILE_CHOICES)}, got {choice!r}")
    return choice == "on" or (choice == "auto" and device.startswith("cuda"))


def fuse_projections(dit: DiT) -> DiT:
    """q/k/v and gate/up as one matmul each in every block (fewer, larger GEMMs; same weights, no more
    memory: the separate matrices are dropped). The model is then for inference only."""
    for block in dit.transformer_blocks:
        if not hasattr(block.self_attn, "qkv_proj"):
            block.self_attn.fuse()
        if not hasattr(block.mlp, "gate_up_proj"):
            block.mlp.fuse()
    return dit


class CompiledDiT:
    """The same DiT with `forward_prepared` compiled (static shapes, one graph per batch x frames)."""

    def __init__(self, dit: DiT, *, fuse: bool = True) -> None:
        self.dit = dit
        self.cfg = dit.cfg
        if fuse:
            fuse_projections(dit)
        self._step = torch.compile(dit.forward_prepared, dynamic=False)

    @property
    def device(self) -> torch.device:
        return self.dit.device

    @property
    def state_dtype(self) -> torch.dtype:
        return self.dit.state_dtype

    def prepare(self, *args: Any, **kwargs: Any) -> Any:
        return self.dit.prepare(*args, **kwargs)

    def release(self, cache: Any) -> None:
        self.dit.release(cache)

    def forward_prepared(self, x: torch.Tensor, time_: torch.Tensor | float, cache: Any) -> torch.Tensor:
        if not isinstance(time_, torch.Tensor):  # a Python float would be baked into the graph
            time_ = torch.tensor(float(time_), dtype=self.state_dtype, device=x.device)
        return self._step(x, time_, cache)

    def warm(self, frames: int, batch: int = 2) -> float:
        """Compile the step for songs of `frames` frames in batches of `batch` (2: guided); seconds taken."""
        t0 = time.perf_counter()
        dev, m = self.device, self.cfg.mel_dim
        with torch.inference_mode():
            cache = self.prepare(torch.zeros(batch, frames, m, device=dev), torch.zeros(batch, frames, dtype=torch.long,
                                 device=dev), torch.zeros(batch, COND_DIM, device=dev))
            x = torch.zeros(batch, frames, m, device=dev, dtype=self.state_dtype)
            self.forward_prepared(x, 0.5, cache)
            self.release(cache)
        seconds = time.perf_counter() - t0
        logger.info("[compile] frames=%d batch=%d seconds=%.1f", frames, batch, seconds)
        return seconds
