"""`RemoteDiT`: the worker's DiT as a torch module on the host, for upstream-style calling code.

It is the sampler's `Backbone` (`device`, `state_dtype`, `cfg`, `prepare`, `forward_prepared`, `release`)
and has upstream's `DiT.forward` arguments, so `device_worker.model.sampling.sample(RemoteDiT(worker), ...)` and
code that holds a CFM with `cfm.transformer = RemoteDiT(worker)` run unchanged; see
examples/upstream_style.py. `prepare` only keeps the per-song tensors on the host; each `forward_prepared`
sends them with `x` in one FORWARD, and the worker runs its own `DiT.forward` (prepare + forward_prepared)
on them: the same torch calls, so the same velocity. This is the compatibility path; songs go through
`Worker.submit`, which sends the per-song tensors once.

`RemoteVae` is the worker's VAE the same way: `.decode(latent)` decoded window by window on the worker.

A torch module needs torch: this is the one engine module that imports it, and nothing in the engine
imports this one (tests/test_import_rules.py), so `import engine` stays torch-free; scripts that use it hold
torch anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from device_worker.wire import to_numpy, to_torch
from engine.worker_requests import collect

__all__ = ["RemoteCache", "RemoteDiT", "RemoteVae"]


@dataclass
class RemoteCache:
    """What `prepare` was given, kept on the host for every FORWARD of the song."""

    cond: torch.Tensor
    text: torch.Tensor
    style_prompt: torch.Tensor
    start_time: Any
    duration: Any
    drop_audio_cond: bool
    drop_text: bool
    drop_prompt: bool

    @property
    def batch(self) -> int:
        return int(self.text.shape[0])


class RemoteDiT(torch.nn.Module):
    """The worker's DiT behind the model core's DiT interface. `worker` is an `engine.worker_client.Worker`
    whose backend describes its DiT in READY (`dit.*` info: the torch and ttnn backends do)."""

    device = torch.device("cpu")  # the sampler's tensors stay on the host; each FORWARD carries them

    def __init__(self, worker: Any, timeout_s: float = 300.0) -> None:
        super().__init__()
        info = (worker.ready or worker.wait_ready()).info
        if "dit.mel_dim" not in info:
            raise RuntimeError(f"the worker's READY does not describe its DiT (backend info {sorted(info)}); "
                               "RemoteDiT needs a backend that reports dit.* fields")
        self.worker = worker
        self.timeout_s = timeout_s
        self.config = SimpleNamespace(mel_dim=int(info["dit.mel_dim"]), max_frames=int(info["dit.max_frames"]),
                                   duration_embed=info["dit.duration_embed"] == "1")
        self.dtype: torch.dtype = getattr(torch, info["dit.dtype"])
        self.state_dtype: torch.dtype = getattr(torch, info["dit.state_dtype"])

    def _scalar(self, v: Any) -> Any:
        # The in-process DiT turns a python float into a state-dtype tensor; do the same before sending.
        if v is None:
            return None
        return to_numpy(v if isinstance(v, torch.Tensor) else torch.tensor(float(v), dtype=self.state_dtype))

    def prepare(self, cond: torch.Tensor, text: torch.Tensor, style_prompt: torch.Tensor, start_time: Any = None,
                duration: Any = None, drop_audio_cond: bool = False, drop_text: bool = False,
                drop_prompt: bool = False) -> RemoteCache:
        return RemoteCache(cond, text, style_prompt, start_time, duration, drop_audio_cond, drop_text,
                           drop_prompt)

    def forward_prepared(self, x: torch.Tensor, time: Any, cache: RemoteCache) -> torch.Tensor:
        return self.forward(x, cache.cond, cache.text, time, cache.drop_audio_cond, cache.drop_text,
                            cache.drop_prompt, style_prompt=cache.style_prompt, start_time=cache.start_time,
                            duration=cache.duration)

    def release(self, cache: RemoteCache) -> None:
        """Nothing to free: the worker holds no state between FORWARDs."""

    def forward(self, x: torch.Tensor, cond: torch.Tensor, text: torch.Tensor, time: Any,
                drop_audio_cond: bool = False, drop_text: bool = False, drop_prompt: bool = False,
                style_prompt: torch.Tensor | None = None, start_time: Any = None,
                duration: Any = None) -> torch.Tensor:
        """Upstream `DiT.forward`: x, cond [B, N, 64], text [B, N], time () or [B] -> velocity [B, N, 64]."""
        if style_prompt is None:
            raise ValueError("style_prompt is required (upstream has no default either)")
        tensors = {"x": to_numpy(x), "cond": to_numpy(cond), "text": to_numpy(text.long()), "time": self._scalar(time),
                   "style_prompt": to_numpy(style_prompt)}
        for name, v in (("start_time", start_time), ("duration", duration)):
            if v is not None:
                tensors[name] = self._scalar(v)
        v = self.worker.forward(tensors, drop_audio_cond=bool(drop_audio_cond), drop_text=bool(drop_text),
                                drop_prompt=bool(drop_prompt), timeout_s=self.timeout_s)
        return to_torch(v).to(x.device)  # bfloat16 comes back as raw bits


class RemoteVae:
    """The worker's VAE as an object: `.decode(latent_bcn [B, 64, T])` -> audio [B, 2, T * 2048], decoded
    window by window on the worker (torch in -> torch out, numpy in -> numpy out)."""

    def __init__(self, worker: Any, window: int = 128, overlap: int = 32, timeout_s: float = 600.0) -> None:
        self.worker, self.window, self.overlap, self.timeout_s = worker, window, overlap, timeout_s

    def decode(self, latent_bcn: Any) -> Any:
        lat = to_numpy(latent_bcn)
        if lat.ndim != 3:
            raise ValueError(f"decode takes [B, 64, T], got shape {tuple(lat.shape)}")
        jobs = [self.worker.decode(lat[b], self.window, self.overlap) for b in range(lat.shape[0])]
        out = np.stack([collect(j, self.timeout_s).audio for j in jobs])
        if isinstance(latent_bcn, torch.Tensor):
            return torch.from_numpy(out).to(latent_bcn.device)
        return out
