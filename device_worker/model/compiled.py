"""The DiT's per-step forward compiled with `torch.compile`, one graph per song shape.

A song's shapes are few and fixed: the latent is the model's whole frame budget (2048 frames for the
95 s model, 6144 for the full one; `shapes.max_frames_for`), and a guided step is a batch of 2. So the
step is compiled with static shapes (`dynamic=False`): the graph fuses RMSNorm, RoPE, SwiGLU and the
residual adds without a dynamic-shape guard, and `warm` compiles it while the worker loads, before READY,
so a musician's first song pays no compile time (inductor keeps its artefacts on disk, so a later start
is quicker). `prepare` (once per song) stays eager.

`CompiledDiT` is a `sampling.Backbone`: the sampler drives it exactly as it drives the DiT.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from device_worker.config import COMPILE_CHOICES
from device_worker.model.config import COND_DIM
from device_worker.model.dit import DiT

logger = logging.getLogger(__name__)


def should_compile(choice: str, device: str) -> bool:
    """on: try it anywhere (a failure still leaves the eager step). auto: on a CUDA GPU with a working
    Triton, where fused kernels pay (bench/gpu_song.py on an H200: the DiT 1.45-1.7x eager); off on the CPU and Apple's
    MPS, where nothing has shown it pays for the minutes it costs at start."""
    if choice not in COMPILE_CHOICES:
        raise ValueError(f"compile must be one of {', '.join(COMPILE_CHOICES)}, got {choice!r}")
    return choice == "on" or (choice == "auto" and device.startswith("cuda") and has_triton())


def has_triton() -> bool:
    """Whether inductor can build GPU kernels here (no Triton on Windows and on many laptops)."""
    try:
        from torch.utils._triton import has_triton as torch_has_triton
    except ImportError:  # an older torch: ask for the package itself
        import importlib.util

        return importlib.util.find_spec("triton") is not None
    return bool(torch_has_triton())


def first_line(exc: BaseException) -> str:
    """`Name: first line of the message`, short enough for a log line and the page's status."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__


class CompiledDiT:
    """The same DiT with `forward_prepared` compiled (static shapes, one graph per batch x frames).

    A shape's first call compiles. If that fails (no C++ compiler or Triton, an inductor error), the step
    runs eager from then on, `failure` says why, and the song goes on: compiling can never stop a worker.
    Once a shape has run compiled, its errors are the model's and propagate."""

    def __init__(self, dit: DiT) -> None:
        self.dit = dit
        self.config = dit.config
        self._step = torch.compile(dit.forward_prepared, dynamic=False)
        self._shapes: set[tuple[int, ...]] = set()  # shapes that ran compiled
        self.failure: str | None = None  # why the step runs eager, once compiling failed

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
        if self.failure is not None:
            return self.dit.forward_prepared(x, time_, cache)
        if not isinstance(time_, torch.Tensor):  # a Python float would be baked into the graph
            time_ = torch.tensor(float(time_), dtype=self.state_dtype, device=x.device)
        shape = tuple(x.shape)
        if shape in self._shapes:
            return self._step(x, time_, cache)
        try:
            out = self._step(x, time_, cache)
        except Exception as exc:  # noqa: BLE001 - any compile failure: the eager step still works
            self.failure = first_line(exc)
            logger.warning("[compile] failed for shape %s; the step runs uncompiled from now on (%s)", shape,
                           self.failure)
            return self.dit.forward_prepared(x, time_, cache)
        self._shapes.add(shape)
        return out

    def warm(self, frames: int, batch: int = 2) -> float:
        """Compile the step for songs of `frames` frames in batches of `batch` (2: guided); seconds taken
        (a failure leaves `failure` set and the eager step in place)."""
        t0 = time.perf_counter()
        dev, m = self.device, self.config.mel_dim
        with torch.inference_mode():
            cache = self.prepare(torch.zeros(batch, frames, m, device=dev), torch.zeros(batch, frames, dtype=torch.long,
                                 device=dev), torch.zeros(batch, COND_DIM, device=dev))
            x = torch.zeros(batch, frames, m, device=dev, dtype=self.state_dtype)
            self.forward_prepared(x, 0.5, cache)
            self.release(cache)
        seconds = time.perf_counter() - t0
        logger.info("[compile] frames=%d batch=%d seconds=%.1f%s", frames, batch, seconds,
                    " (failed: the step runs uncompiled)" if self.failure else "")
        return seconds
