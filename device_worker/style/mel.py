"""MuQ's mel front end in plain torch (torchaudio is not installable beside our CPU torch).

Reproduces `torchaudio.transforms.MelSpectrogram(sample_rate=24000, n_fft=2048, hop_length=240,
n_mels=128)` with every other argument at torchaudio's default (Hann window, periodic, power 2,
center=True, reflect padding, HTK mel scale, no filter normalisation), followed by
`AmplitudeToDB(stype="power")` (10*log10, amin 1e-10, ref 1.0, top_db None), then MuQ's own steps:
drop the last frame and normalise with the mean/std from the MuQ config's `stat`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

SAMPLE_RATE = 24_000
N_FFT = 2048
HOP = 240
N_MELS = 128


def _hz_to_mel_htk(f: float) -> float:
    return 2595.0 * math.log10(1.0 + f / 700.0)


def mel_filterbank(
    n_freqs: int = N_FFT // 2 + 1, n_mels: int = N_MELS, sample_rate: int = SAMPLE_RATE
) -> torch.Tensor:
    """Triangular HTK mel filters [n_freqs, n_mels], as torchaudio's `melscale_fbanks` (norm=None)."""
    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs, device="cpu")
    m_pts = torch.linspace(_hz_to_mel_htk(0.0), _hz_to_mel_htk(sample_rate / 2), n_mels + 2, device="cpu")
    f_pts = 700.0 * (10.0 ** (m_pts / 2595.0) - 1.0)
    return triangular_filters(all_freqs, f_pts)


def triangular_filters(freqs: torch.Tensor, f_pts: torch.Tensor) -> torch.Tensor:
    """Triangles over the STFT bin frequencies `freqs` [n_freqs], filter k rising from f_pts[k] to its peak
    at f_pts[k + 1] and falling to f_pts[k + 2]: [n_freqs, len(f_pts) - 2], unnormalised (Whisper's front
    end shares it, on the Slaney scale)."""
    f_diff = f_pts[1:] - f_pts[:-1]  # (n_mels + 1,)
    slopes = f_pts.unsqueeze(0) - freqs.unsqueeze(1)  # (n_freqs, n_mels + 2)
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return torch.clamp(torch.minimum(down, up), min=0.0)


class MelFrontEnd(nn.Module):
    """wav [B, n] at 24 kHz -> normalised log-mel [B, 128, n // 240] (float32)."""

    def __init__(self, mean: float, std: float) -> None:
        super().__init__()
        # Not persistent: MuQ's MelSTFT is a plain object, so these never appear in its checkpoints. Made on
        # the CPU even when the module is built on the meta device (`empty_modules`): no file fills them.
        self.register_buffer("window", torch.hann_window(N_FFT, periodic=True, device="cpu"), persistent=False)
        self.register_buffer("fb", mel_filterbank(), persistent=False)
        self.mean = float(mean)
        self.std = float(std)

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        wav = wav.float()  # MuQ always computes features in fp32
        spec = torch.stft(
            wav, N_FFT, hop_length=HOP, win_length=N_FFT, window=self.window,
            center=True, pad_mode="reflect", normalized=False, onesided=True, return_complex=True,
        )  # (B, 1025, 1 + n // 240)
        power = spec.real.square() + spec.imag.square()
        mel = torch.matmul(power.transpose(1, 2), self.fb).transpose(1, 2)  # (B, 128, frames)
        db = 10.0 * torch.log10(torch.clamp(mel, min=1e-10))
        db = db[..., :-1]  # MuQ drops the last (centre-padded) frame: 10 s -> 1000 frames
        return (db - self.mean) / self.std
