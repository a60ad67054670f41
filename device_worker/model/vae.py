"""The Oobleck VAE (stable-audio-tools family, DiffRhythm's `vae_model.pt`) in plain torch.

    decoder: [B, 64, T] latents -> [B, 2, T * 2048] audio at 44.1 kHz
    encoder: [B, 2, T * 2048] audio -> [B, 128, T] = mean (64) || scale (64), upstream `encode_export`

Module names and nesting follow stable-audio-tools (`decoder.layers.N.layers.M`), so the reference
TorchScript file's state dict loads as is; other layouts are mapped in `vae_checkpoint.py`.

Precision: float32 is the reference (bit-equal to upstream's TorchScript on the tiny vectors).
`dtype=torch.float16` / `torch.bfloat16` (for GPUs) stores weights and runs the convolutions in that type
(half the activation memory); Snake activations are computed in float32 and cast back, and decoded
audio and encoder outputs are always returned as float32. On the random tiny reference (peak 2.3) the
decode error is ~0.02 in fp16 and ~0.14 in bf16 (8 mantissa bits): prefer fp16 when memory forces a
half type, float32 for final audio.

Memory: a conv VAE's activations grow with the number of frames (~24 GB for a 285 s song in one call
with the release's width), so songs are decoded in windows (`decode_windows`) and long audio is encoded
in windows; one window's activations live at a time.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from device_worker.model.checkpoints import empty_modules
from device_worker.model.vae_checkpoint import (
    CheckpointError,
    OobleckConfig,
    canonical_state_dict,
    check_against,
    infer_config,
    read_state_dict,
)
from device_worker.shapes import DECODE_OVERLAP, DECODE_WINDOW, Window, plan_windows

__all__ = ["CheckpointError", "OobleckConfig", "OobleckVAE", "draw_latent", "load_vae", "vae_from_state_dict"]


class SnakeBeta(nn.Module):
    """y = x + sin^2(e^alpha * x) / (e^beta + 1e-9), per channel; alpha and beta are stored as logs."""

    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, C, T]
        # Always in float32: in bf16 the phase e^alpha * x keeps ~2 digits (tiny reference decode, peak
        # 2.3: bf16 error 0.19 -> 0.14, fp16 0.034 -> 0.023 with fp32 snakes). Costs one transient fp32
        # copy of one activation in half-precision modes; a no-op in float32.
        y = x.float()
        freq = self.alpha.float().exp()[None, :, None]  # [1, C, 1]
        inv_mag = (self.beta.float().exp() + 1e-9).reciprocal()[None, :, None]  # [1, C, 1]
        return (y + inv_mag * torch.sin(y * freq).pow(2)).to(x.dtype)


class ResidualUnit(nn.Module):
    """x + conv1x1(snake(conv7_dilated(snake(x)))); length-preserving."""

    def __init__(self, channels: int, dilation: int):
        super().__init__()
        self.layers = nn.Sequential(
            SnakeBeta(channels),
            nn.Conv1d(channels, channels, 7, dilation=dilation, padding=3 * dilation),
            SnakeBeta(channels),
            nn.Conv1d(channels, channels, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, C, T] -> [B, C, T]
        return x + self.layers(x)


class EncoderBlock(nn.Module):
    """Three residual units at `cin`, then a strided conv: [B, cin, T] -> [B, cout, T / stride]."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.layers = nn.Sequential(
            ResidualUnit(cin, 1),
            ResidualUnit(cin, 3),
            ResidualUnit(cin, 9),
            SnakeBeta(cin),
            nn.Conv1d(cin, cout, 2 * stride, stride=stride, padding=math.ceil(stride / 2)),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class DecoderBlock(nn.Module):
    """Snake, transposed conv (k = 2s, exact x s for even s), three residual units:
    [B, cin, T] -> [B, cout, T * stride]."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.layers = nn.Sequential(
            SnakeBeta(cin),
            nn.ConvTranspose1d(cin, cout, 2 * stride, stride=stride, padding=math.ceil(stride / 2)),
            ResidualUnit(cout, 1),
            ResidualUnit(cout, 3),
            ResidualUnit(cout, 9),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def _widths(config: OobleckConfig) -> list[int]:
    # stable-audio-tools prepends a 1 to c_mults: the stem conv works at `channels`.
    return [config.channels * m for m in (1, *config.c_mults)]


class OobleckEncoder(nn.Module):
    def __init__(self, config: OobleckConfig):
        super().__init__()
        w = _widths(config)
        self.layers = nn.Sequential(
            nn.Conv1d(config.io_channels, w[0], 7, padding=3),
            *[EncoderBlock(w[i], w[i + 1], s) for i, s in enumerate(config.strides)],
            SnakeBeta(w[-1]),
            nn.Conv1d(w[-1], config.encoder_latent_dim, 3, padding=1),
        )

    def forward(self, audio: torch.Tensor) -> torch.Tensor:  # [B, 2, n] -> [B, 128, n / hop]
        return self.layers(audio)


class OobleckDecoder(nn.Module):
    def __init__(self, config: OobleckConfig):
        super().__init__()
        w = _widths(config)
        n = len(config.strides)
        self.layers = nn.Sequential(
            nn.Conv1d(config.decoder_latent_dim, w[-1], 7, padding=3),
            *[DecoderBlock(w[i + 1], w[i], config.strides[i]) for i in reversed(range(n))],
            SnakeBeta(w[0]),
            nn.Conv1d(w[0], config.io_channels, 7, padding=3, bias=False),  # no bias, no tanh (final_tanh=False)
        )

    def forward(self, latent: torch.Tensor) -> torch.Tensor:  # [B, 64, T] -> [B, 2, T * hop]
        return self.layers(latent)


class OobleckVAE(nn.Module):
    """Encoder + decoder with DiffRhythm's calling conventions (channels-first latents)."""

    def __init__(self, config: OobleckConfig):
        super().__init__()
        self.config = config
        self.hop = config.hop
        self.encoder = OobleckEncoder(config)
        self.decoder = OobleckDecoder(config)

    @property
    def device(self) -> torch.device:
        return self.decoder.layers[0].weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.decoder.layers[0].weight.dtype

    def _check_latent(self, latent: torch.Tensor) -> None:
        want = self.config.decoder_latent_dim
        if latent.ndim != 3 or latent.shape[1] != want or latent.shape[2] == 0:
            hint = (
                " (channels-last? pass latent.transpose(1, 2))"
                if latent.ndim == 3 and latent.shape[2] == want
                else ""
            )
            raise ValueError(
                f"decode takes a [B, {want}, T] latent with T > 0, got {tuple(latent.shape)}{hint}"
            )

    def _decode(self, latent: torch.Tensor) -> torch.Tensor:  # [B, 64, t] -> [B, 2, t * hop] float32
        with torch.inference_mode():
            return self.decoder(latent.to(self.device, self.dtype)).float()

    def decode(self, latent_bcn: torch.Tensor) -> torch.Tensor:
        """Whole latent in one call, as upstream `decode_export`: [B, 64, T] -> [B, 2, T * 2048].
        Memory grows with T; use `decode_windows` for songs."""
        self._check_latent(latent_bcn)
        return self._decode(latent_bcn)

    def decode_windows(
        self, latent_bcn: torch.Tensor, window: int = DECODE_WINDOW, overlap: int = DECODE_OVERLAP
    ) -> Iterator[torch.Tensor]:
        """Decode window by window (`shapes.plan_windows`) and yield each window's kept samples as soon as
        they exist: consecutive [B, 2, n_k] float32 blocks whose concatenation is the song [B, 2, T * 2048].

        With window=128, overlap=32 this is upstream's chunked decode sample for sample (hard splice in
        the middle of each overlap, later windows win); larger windows keep the same splice rule. Every
        kept sample is >= overlap/2 frames from any window edge inside the song; with overlap >= 20 that
        is beyond the decoder's ~9-frame receptive field, so the song equals `decode` up to rounding.
        Arguments are checked now; decoding starts at the first `next()`, and only one window's
        activations exist at a time.
        """
        self._check_latent(latent_bcn)
        plan = plan_windows(latent_bcn.shape[2], window, overlap)  # raises now on a bad window/overlap
        return self._decode_plan(latent_bcn, plan)

    def _decode_plan(self, latent_bcn: torch.Tensor, plan: list[Window]) -> Iterator[torch.Tensor]:
        hop = self.hop
        for w in plan:
            audio = self._decode(latent_bcn[:, :, w.start : w.start + w.length])  # [B, 2, length * hop]
            a, b = (w.keep_start - w.start) * hop, (w.keep_end - w.start) * hop
            block = audio[:, :, a:b].clone()  # own storage, so the rest of the window can be freed now
            del audio
            yield block

    def encode(
        self, audio: torch.Tensor, window: int | None = DECODE_WINDOW, overlap: int = DECODE_OVERLAP
    ) -> torch.Tensor:
        """[B, 2, n] audio (44.1 kHz) -> [B, 128, ceil(n / 2048)] float32, mean || scale (`encode_export`).

        n is zero-padded up to a multiple of 2048 (upstream leaves it and floors the frame count). Audio
        of at most `window` frames is encoded in one call (= `encode_export`; upstream's chunked encode
        crashes there); longer audio in windows like upstream's edit-mode chunked encode (128-frame
        windows, 32-frame overlap, hard splice), so memory stays bounded. `window=None`: one call.
        """
        if audio.ndim != 3 or audio.shape[1] != self.config.io_channels or audio.shape[2] == 0:
            raise ValueError(
                f"encode takes [B, {self.config.io_channels}, n] audio with n > 0, got {tuple(audio.shape)}"
            )
        hop = self.hop
        n_frames = -(-audio.shape[2] // hop)
        pad = n_frames * hop - audio.shape[2]
        if window is None:  # one call over everything
            window, overlap = n_frames, 0
        with torch.inference_mode():
            out = torch.empty(audio.shape[0], self.config.encoder_latent_dim, n_frames, device=self.device)
            for w in plan_windows(n_frames, window, overlap):
                chunk = audio[:, :, w.start * hop : (w.start + w.length) * hop].to(self.device, self.dtype)
                if pad and w.start + w.length == n_frames:
                    chunk = F.pad(chunk, (0, pad))  # [B, 2, length * hop]
                z = self.encoder(chunk).float()  # [B, 128, length]
                out[:, :, w.keep_start : w.keep_end] = z[:, :, w.keep_start - w.start : w.keep_end - w.start]
        return out


def draw_latent(encoded: torch.Tensor, seed: int) -> torch.Tensor:
    """Upstream `vae_sample`: [B, 128, T] mean || scale -> [B, 64, T] = mean + (softplus(scale) + 1e-4) * eps.

    eps comes from a CPU generator seeded with `seed`, in float32, so a seed gives the same latent on
    every device."""
    if encoded.ndim != 3 or encoded.shape[1] % 2:
        raise ValueError(f"draw_latent takes [B, 2 * D, T] (mean || scale), got {tuple(encoded.shape)}")
    mean, scale = encoded.float().chunk(2, dim=1)  # [B, 64, T] each
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    eps = torch.randn(mean.shape, generator=gen, dtype=torch.float32).to(mean.device)
    return mean + (F.softplus(scale) + 1e-4) * eps


def vae_from_state_dict(
    state_dict: dict[str, torch.Tensor],
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> OobleckVAE:
    """Build the VAE that a state dict describes (any accepted layout, see `vae_checkpoint`), strictly."""
    sd = canonical_state_dict(state_dict)
    config = infer_config(sd)
    with empty_modules():  # every tensor comes from the checkpoint
        model = OobleckVAE(config)
    check_against(model.state_dict(), sd)
    model.load_state_dict(sd, strict=True, assign=True)
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)


def load_vae(
    path: str | Path, *, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
) -> OobleckVAE:
    """The release's TorchScript `vae_model.pt` (or a `.safetensors` / weights-only state dict) ->
    OobleckVAE on `device` in `dtype`. Raises CheckpointError naming any key that does not map."""
    return vae_from_state_dict(read_state_dict(path), device=device, dtype=dtype)
