"""Flow-matching sampler: upstream `CFM.sample` (Euler, classifier-free guidance, edit segments).

One sampler for any network, as F5-TTS's `cfm.py` keeps it: the backbone is passed in (`Backbone`: the
torch `DiT`, the ttnn backend's `TtBackbone`, the engine's `RemoteDiT`). Noise, the time grid, sway, the
guidance batch, edit masks and the reference paste live here and nowhere else.

`sample()` is `start_song` + `step_song` x (steps - 1) + `finish_song`; every worker backend drives the
same three calls, so both produce the same bytes. Per step: one backbone call over a batch of 2B
(conditional items first, then unconditional: cond -> 0, lyric ids -> 0, negative style),
`v = v_c + (v_c - v_u) * cfg`, `x = x + (t[k+1] - t[k]) * v`. The lyric features, text-fusion terms,
start/duration embeddings and RoPE tables are computed once per song (`Backbone.prepare`).

Precision modes (the DiT's dtype and `load_dit(precision=...)` choose):
- float32: the reference; reproduces upstream's fp32 runs to ~1e-6 on CPU (use no TF32 on GPUs).
- float16 / bfloat16, half_mode="mixed" (for GPUs): matmuls, attention and convolutions in half precision;
  RMSNorm/LayerNorm/GRN statistics, the residual stream, the RoPE rotation, the time grid, the guidance
  arithmetic (which multiplies the branch difference by cfg = 4) and the Euler state in float32.
- float16, half_mode="upstream": everything in float16 as upstream after `model.half()` (fp16 time grid,
  fp16 guidance and Euler state); norms still computed in float32. Matches upstream's fp16 CPU reference
  within its tolerance.

Noise: per batch item `manual_seed(seed); randn(N, 64)` in float32 on the CPU (a private generator, so the
global RNG is untouched), then moved to the device: one seed is the same song on every backend. Upstream
re-seeds before each item, so with one seed every item gets the same noise; pass a list of seeds for
different noise per item.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from device_worker.model.dit import drop_inputs, fp16_value
from device_worker.protocol import SongParams

_DEFAULT = SongParams()  # never mutated: a default argument

__all__ = ["Backbone", "SamplingStopped", "SongState", "sample", "start_song", "step_song", "finish_song", "release_song",
           "make_noise"]


@runtime_checkable
class Backbone(Protocol):
    """The network the sampler drives (F5-TTS's `transformer`).

    `prepare` takes one batch's per-song inputs (with guidance: the conditional rows, then the unconditional
    ones) and returns an opaque cache; `forward_prepared` is one velocity call on it; `release` frees what
    the cache holds on a device, once the last step ran or when a song is dropped mid-way."""

    config: Any  # .mel_dim, .max_frames, .duration_embed (DiTConfig or the worker's description of it)

    @property
    def device(self) -> torch.device:
        """Where the sampler builds noise, masks, the time grid and the Euler state."""
        ...

    @property
    def state_dtype(self) -> torch.dtype:
        """Dtype of the time grid, the guidance arithmetic and the Euler state."""
        ...

    def prepare(self, cond: torch.Tensor, text: torch.Tensor, style_prompt: torch.Tensor,
                start_time: torch.Tensor | None = None, duration: torch.Tensor | None = None) -> Any:
        """cond (b, n, m), text (b, n) ids, style (b, c), start/duration (b,) -> the song's cache."""
        ...

    def forward_prepared(self, x: torch.Tensor, time: torch.Tensor, cache: Any) -> torch.Tensor:
        """Velocity (b, n, m) of the latent x (b, n, m) at flow time `time` (a 0-d tensor)."""
        ...

    def release(self, cache: Any) -> None:
        """Free the cache's device memory (a no-op where tensors go with the cache)."""
        ...


class SamplingStopped(Exception):
    """The progress callback returned False (named apart from `engine.events.Cancelled` and `protocol.JobCancelled`)."""


@dataclass
class SongState:
    x: torch.Tensor  # (b, n, m) Euler state in the state dtype
    t: torch.Tensor  # (steps,) time grid in the state dtype
    cache: Any  # the backbone's prepared inputs, batch 2b with guidance (conditional half first), else b;
    # None once released
    cond: torch.Tensor  # (b, n, m) reference latent, pasted back outside pred_mask
    pred_mask: torch.Tensor  # (n,) bool, True = generated frame
    cfg: float  # guidance strength
    seed: int | list[int]  # the seed(s) the noise came from (drawn when none was given)
    k: int = 0  # Euler steps done

    @property
    def total(self) -> int:
        return self.t.numel() - 1

    @property
    def done(self) -> bool:
        return self.k >= self.total

    @property
    def guided(self) -> bool:
        return is_guided(self.cfg)


def is_guided(cfg: float) -> bool:
    """Whether the unconditional branch runs: upstream skips it below this guidance strength."""
    return cfg >= 1e-5


def make_noise(seeds: Sequence[int], n: int, channels: int = 64) -> torch.Tensor:
    """(b, n, channels) float32 CPU noise, item i = `manual_seed(seeds[i]); randn(n, channels)`."""
    return torch.stack([torch.randn(n, channels, generator=torch.Generator().manual_seed(s)) for s in seeds])


def _batch(v: torch.Tensor, b: int, what: str) -> torch.Tensor:
    if v.shape[0] == b:
        return v
    if v.shape[0] == 1:
        return v.expand(b, *v.shape[1:])
    raise ValueError(f"{what} has batch {v.shape[0]}, expected {b} (or 1)")


def _pred_mask(n: int, edit_segments: Sequence[tuple[int, int]] | None, device: torch.device) -> torch.Tensor:
    if edit_segments is None:
        return torch.ones(n, dtype=torch.bool, device=device)
    frames = torch.arange(n, device=device)
    mask = torch.zeros(n, dtype=torch.bool, device=device)
    for start, end in edit_segments:
        mask |= (frames >= int(start)) & (frames < int(end))
    return mask


@torch.inference_mode()
def start_song(
    dit: Backbone,
    *,
    text: torch.Tensor,  # (b, n) lyric id per frame
    style: torch.Tensor,  # (b, 512)
    negative_style: torch.Tensor,  # (b, 512), used by the unconditional branch
    duration: int,  # n frames
    cond: torch.Tensor | None = None,  # (b, n', m) reference latent; padded with zeros / cropped to n
    params: SongParams = _DEFAULT,  # steps, cfg, seed, sway, start_time, song_duration, edit_segments
    noise: torch.Tensor | None = None,  # (b, n, m), overrides params.seed
) -> SongState:
    """Everything before the first Euler step: noise, masks, time grid and the prepared DiT inputs."""
    device, sd = dit.device, dit.state_dtype
    n, m = int(duration), dit.config.mel_dim
    steps, seed, sway = params.steps, params.seed, params.sway
    if text.ndim != 2 or text.shape[1] != n:
        raise ValueError(f"text must be (batch, {n}) lyric ids (one per frame), got {tuple(text.shape)}")
    if steps < 2:
        raise ValueError("steps must be >= 2 (steps points, steps - 1 Euler updates)")
    b = text.shape[0]
    text = text.to(device=device, dtype=torch.long)
    style = _batch(style, b, "style").to(device)
    negative_style = _batch(negative_style, b, "negative_style").to(device)

    if cond is None:
        cond = torch.zeros(b, n, m)
    cond = _batch(cond, b, "cond")[:, :n]  # upstream crashes on a longer reference; crop it
    if cond.shape[1] < n:
        cond = torch.nn.functional.pad(cond, (0, 0, 0, n - cond.shape[1]))
    cond = cond.to(device=device, dtype=sd)
    pred_mask = _pred_mask(n, params.edit_segments, device)
    step_cond = torch.where(pred_mask[None, :, None], 0, cond)

    if noise is None:
        if seed is None:
            seed = secrets.randbits(63)
        seeds = [int(seed)] * b if isinstance(seed, int) else [int(s) for s in seed]
        if len(seeds) != b:
            raise ValueError(f"{len(seeds)} seeds for a batch of {b}")
        noise = make_noise(seeds, n, m)
        seed = seeds[0] if isinstance(seed, int) else seeds
    elif tuple(noise.shape) != (b, n, m):
        raise ValueError(f"noise must be {(b, n, m)}, got {tuple(noise.shape)}")
    x = noise.to(device=device, dtype=sd)

    t = torch.linspace(0, 1, steps, device=device, dtype=sd)
    if sway is not None:
        t = t + sway * (torch.cos(math.pi / 2 * t) - 1 + t)

    # upstream builds start_time / song_duration as fp16 tensors: round the values the same way
    start = torch.full((b,), fp16_value(params.start_time), device=device, dtype=sd)
    dur = None
    if dit.config.duration_embed:
        song_duration = n / dit.config.max_frames if params.song_duration is None else params.song_duration
        dur = torch.full((b,), fp16_value(song_duration), device=device, dtype=sd)

    if is_guided(params.cfg):  # one batch of 2b: conditional items, then the unconditional ones (upstream's drop flags)
        u_cond, u_text, _ = drop_inputs(step_cond, text, negative_style, drop_audio_cond=True, drop_text=True)
        cache = dit.prepare(
            torch.cat((step_cond, u_cond)),
            torch.cat((text, u_text)),
            torch.cat((style, negative_style)),
            start.repeat(2),
            None if dur is None else dur.repeat(2),
        )
    else:
        cache = dit.prepare(step_cond, text, style, start, dur)
    return SongState(x, t, cache, cond, pred_mask, float(params.cfg), seed)


@torch.inference_mode()
def step_song(dit: Backbone, state: SongState) -> None:
    """One guided Euler step (in place on `state`)."""
    if state.done:
        raise RuntimeError(f"song already finished ({state.total} steps)")
    k, x = state.k, state.x
    t0, t1 = state.t[k], state.t[k + 1]
    if state.guided:
        v_c, v_u = dit.forward_prepared(torch.cat((x, x)), t0, state.cache).to(x.dtype).chunk(2)
        v = v_c + (v_c - v_u) * state.cfg
    else:
        v = dit.forward_prepared(x, t0, state.cache).to(x.dtype)
    state.x = x + (t1 - t0) * v
    state.k = k + 1


def finish_song(dit: Backbone, state: SongState) -> torch.Tensor:
    """(b, n, m) float32 latent: the sampled frames inside pred_mask, the reference outside. Releases the
    song's prepared inputs first (a card then decodes in the device state it compiled its decoder in)."""
    if not state.done:
        raise RuntimeError(f"song not finished: {state.k} of {state.total} steps done")
    release_song(dit, state)
    return torch.where(state.pred_mask[None, :, None], state.x, state.cond).float()


def release_song(dit: Backbone, state: SongState) -> None:
    """Free the song's prepared inputs on the backbone's device; safe to call twice."""
    if state.cache is not None:
        dit.release(state.cache)
        state.cache = None


def sample(
    dit: Backbone,
    *,
    text: torch.Tensor,
    style: torch.Tensor,
    negative_style: torch.Tensor,
    duration: int,
    cond: torch.Tensor | None = None,
    params: SongParams = _DEFAULT,
    noise: torch.Tensor | None = None,
    callback: Callable[[int, int], bool | None] | None = None,
) -> torch.Tensor:
    """Sample a latent (b, n, 64); `callback(step, total)` after each step, returning False cancels."""
    state = start_song(dit, text=text, style=style, negative_style=negative_style, duration=duration, cond=cond,
                       params=params, noise=noise)
    try:
        while not state.done:
            step_song(dit, state)
            if callback is not None and callback(state.k, state.total) is False:
                raise SamplingStopped(f"cancelled after step {state.k} of {state.total}")
        return finish_song(dit, state)
    finally:
        release_song(dit, state)
