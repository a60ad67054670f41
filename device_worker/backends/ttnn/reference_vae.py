"""The Oobleck decoder computed the way the card computes it, in plain torch, plus the layer plan both use.

The card has no conv1d/ConvTranspose1d of its own: a conv1d is a conv2d over an image of height 1
(`ttnn.conv1d`), a ConvTranspose1d is `conv_transpose2d` with a (1, 2s) kernel, stride (1, s) and padding
(0, ceil(s/2)); Snake runs in two passes, sq = sin(alpha x)^2 (a multiply with two fused unary ops), then
x + sq * inv_beta (one addcmul), with alpha = exp(log alpha) and inv_beta = 1 / (exp(log beta) + 1e-9)
precomputed per channel. `DeviceShapedOobleck` runs exactly that on `convert_vae` weights so the layouts
and the plan are checked against the model core (`device_worker.model.vae`) on CPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from device_worker.shapes import DECODE_OVERLAP, DECODE_WINDOW, plan_windows

DILATIONS = (1, 3, 9)  # the three residual units of every decoder block


@dataclass(frozen=True)
class ConvSpec:
    """One decoder conv: `name` is its canonical prefix (`decoder.layers.1.layers.1`)."""

    name: str
    cin: int
    cout: int
    kernel: int
    pad: int
    dilation: int = 1
    stride: int = 1
    transpose: bool = False
    bias: bool = True


@dataclass(frozen=True)
class UnitSpec:
    snake1: str
    conv1: ConvSpec
    snake2: str
    conv2: ConvSpec


@dataclass(frozen=True)
class BlockSpec:
    snake: str
    up: ConvSpec
    units: tuple[UnitSpec, ...]


@dataclass(frozen=True)
class DecoderPlan:
    stem: ConvSpec
    blocks: tuple[BlockSpec, ...]
    snake_out: str
    conv_out: ConvSpec

    @property
    def hop(self) -> int:
        return math.prod(b.up.stride for b in self.blocks)


def _conv(w: dict[str, torch.Tensor], name: str, pad: int, dilation: int = 1, transpose: bool = False) -> ConvSpec:
    shape = w[f"{name}.weight4"].shape  # conv [out, in, 1, k]; ConvT [in, out, 1, k]
    cin, cout = (shape[0], shape[1]) if transpose else (shape[1], shape[0])
    k = shape[-1]
    stride = k // 2 if transpose else 1
    return ConvSpec(name, cin, cout, k, math.ceil(stride / 2) if transpose else pad, dilation, stride, transpose,
                    f"{name}.bias_row" in w)


def decoder_plan(w: dict[str, torch.Tensor]) -> DecoderPlan:
    """The decoder's layers read off `convert_vae` weights (strides from the ConvT kernel widths)."""
    p = "decoder.layers"
    n_blocks = len({k.split(".")[2] for k in w if k.startswith(p + ".") and ".layers." in k[len(p) + 1:]})
    blocks = []
    for i in range(1, n_blocks + 1):
        b = f"{p}.{i}.layers"
        units = tuple(UnitSpec(f"{b}.{j + 2}.layers.0", _conv(w, f"{b}.{j + 2}.layers.1", 3 * d, d),
                               f"{b}.{j + 2}.layers.2", _conv(w, f"{b}.{j + 2}.layers.3", 0))
                      for j, d in enumerate(DILATIONS))
        blocks.append(BlockSpec(f"{b}.0", _conv(w, f"{b}.1", 0, transpose=True), units))
    last = n_blocks + 1
    return DecoderPlan(_conv(w, f"{p}.0", 3), tuple(blocks), f"{p}.{last}", _conv(w, f"{p}.{last + 1}", 3))


class DeviceShapedOobleck:
    """Decoder on `convert_vae` weights, as the card runs it. Activations [1, C, 1, L] (height-1 images)."""

    def __init__(self, weights: dict[str, torch.Tensor]) -> None:
        self.w = {k: v.float() for k, v in weights.items()}
        self.plan = decoder_plan(self.w)

    def _conv(self, x: torch.Tensor, c: ConvSpec) -> torch.Tensor:
        w = self.w[f"{c.name}.weight4"]
        b = self.w[f"{c.name}.bias_row"].reshape(-1) if c.bias else None
        if c.transpose:
            return F.conv_transpose2d(x, w, b, stride=(1, c.stride), padding=(0, c.pad))
        return F.conv2d(x, w, b, padding=(0, c.pad), dilation=(1, c.dilation))

    def _snake(self, x: torch.Tensor, name: str) -> torch.Tensor:
        alpha = self.w[f"{name}.alpha_exp"].reshape(1, -1, 1, 1)
        inv_beta = self.w[f"{name}.inv_beta"].reshape(1, -1, 1, 1)
        sq = torch.sin(x * alpha).square()  # pass 1: multiply + SIN + SQUARE
        return x + sq * inv_beta  # pass 2: addcmul

    @torch.inference_mode()
    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """[64, L] latent -> [2, L * hop] float32 audio."""
        plan = self.plan
        h = self._conv(latent.float()[None, :, None, :], plan.stem)  # [1, C, 1, L]
        for blk in plan.blocks:
            h = self._conv(self._snake(h, blk.snake), blk.up)
            for u in blk.units:
                y = self._conv(self._snake(h, u.snake1), u.conv1)
                h = h + self._conv(self._snake(y, u.snake2), u.conv2)
        out = self._conv(self._snake(h, plan.snake_out), plan.conv_out)  # [1, 2, 1, L * hop]
        return out[0, :, 0, :]

    def decode_windows(self, latent: torch.Tensor, window: int = DECODE_WINDOW,
                       overlap: int = DECODE_OVERLAP) -> Iterator[torch.Tensor]:
        """Kept blocks [2, n_k] window by window (`shapes.plan_windows`, upstream's splice rule)."""
        hop = self.plan.hop
        for w in plan_windows(latent.shape[-1], window, overlap):
            audio = self.decode(latent[:, w.start : w.start + w.length])
            yield audio[:, (w.keep_start - w.start) * hop : (w.keep_end - w.start) * hop]
