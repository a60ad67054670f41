"""The Oobleck decoder on one p100a (ttnn): `reference_vae.DeviceShapedOobleck` op for op.

Activations are channels-last [1, 1, L, C] bf16 (what ttnn.conv1d / conv_transpose2d of height 1 take);
weights go up as float32 host tensors and are prepared on the device by the first call of each conv at
each window length (a weight prepared for another length is not reused: tt_dit warns such a weight
"decodes to garbage without raising"). The windows of a song all have the same length, so a worker
that decodes one window at start-up (`warm`) has every VAE program compiled and every prepared weight
allocated before any song's DiT tensors exist (the port saw 20-40 s recompiles otherwise, because
allocation state changes the compiled programs). Windows stream: `decode_windows` yields each kept
block as soon as its window is read back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import torch

from device_worker.backends.ttnn.precision import DRPrecision
from device_worker.backends.ttnn.reference_vae import ConvSpec, decoder_plan
from device_worker.backends.ttnn.runtime import require_ttnn
from device_worker.backends.ttnn.tt_common import MEM, kernel_config, upload
from device_worker.shapes import DECODE_OVERLAP, DECODE_WINDOW, plan_windows

ttnn = require_ttnn()
logger = logging.getLogger(__name__)


class TtOobleck:
    def __init__(self, dev: Any, weights: dict[str, torch.Tensor], prec: DRPrecision) -> None:
        self.dev, self.prec = dev, prec
        self.plan = decoder_plan(weights)
        self.hop = self.plan.hop
        self.host_w = {k: ttnn.from_torch(v.float().contiguous(), dtype=ttnn.float32)
                       for k, v in weights.items() if k.endswith((".weight4", ".bias_row"))}
        self.snake = {k: upload(dev, v.float(), ttnn.bfloat16)
                      for k, v in weights.items() if k.endswith((".alpha_exp", ".inv_beta"))}
        self.prepared: dict[tuple[str, int], tuple[Any, Any]] = {}  # (conv, input length) -> device w, b
        self.ck = kernel_config(dev, prec.vae_fidelity, True)
        self.lengths: set[int] = set()  # window lengths decoded at least once (compiled)

    # ---- ops ---------------------------------------------------------------------------------------------
    def _conv_config(self, c: ConvSpec) -> Any:
        cfg = ttnn.Conv2dConfig(weights_dtype=ttnn.bfloat16, config_tensors_in_dram=True)
        # port's VAE conv sweep: 64-row activation blocks on the long, narrow late layers (<= 256 ch)
        if max(c.cin, c.cout) <= self.prec.vae_act_block_h_max_channels and self.prec.vae_act_block_h:
            cfg.act_block_h_override = self.prec.vae_act_block_h
        return cfg

    def _conv(self, x: Any, c: ConvSpec, length: int) -> tuple[Any, int]:
        """x [1, 1, length, cin] -> ([1, 1, length', cout] TILE bf16, length')."""
        key = (c.name, length)
        w, b = self.prepared.get(key) or (self.host_w[f"{c.name}.weight4"], self.host_w.get(f"{c.name}.bias_row"))
        common = dict(device=self.dev, in_channels=c.cin, out_channels=c.cout, batch_size=1, bias_tensor=b,
                      dtype=ttnn.bfloat16, conv_config=self._conv_config(c), compute_config=self.ck,
                      return_output_dim=True, return_weights_and_bias=True)
        if c.transpose:
            out, dims, (w, b) = ttnn.conv_transpose2d(
                input_tensor=x, weight_tensor=w, input_height=1, input_width=length, kernel_size=(1, c.kernel),
                stride=(1, c.stride), padding=(0, c.pad), output_padding=(0, 0), dilation=(1, 1), groups=1,
                **common)
            out_len = dims[1] if isinstance(dims, (tuple, list)) else dims
        else:
            out, out_len, (w, b) = ttnn.conv1d(
                input_tensor=x, weight_tensor=w, input_length=length, kernel_size=c.kernel, stride=1,
                padding=c.pad, dilation=c.dilation, groups=1, **common)
        self.prepared[key] = (w, b)
        if out.layout != ttnn.TILE_LAYOUT:
            t = ttnn.to_layout(out, ttnn.TILE_LAYOUT)
            ttnn.deallocate(out)
            out = t
        return ttnn.reshape(out, [1, 1, out_len, c.cout]), out_len

    def _snake(self, x: Any, name: str) -> Any:
        """x + inv_beta * sin(alpha x)^2 in two passes (multiply with fused SIN, SQUARE; addcmul)."""
        act = [ttnn.UnaryWithParam(ttnn.UnaryOpType.SIN), ttnn.UnaryWithParam(ttnn.UnaryOpType.SQUARE)]
        sq = ttnn.multiply(x, self.snake[f"{name}.alpha_exp"], activations=act, memory_config=MEM)
        out = ttnn.addcmul(x, sq, self.snake[f"{name}.inv_beta"], value=1.0, memory_config=MEM)
        ttnn.deallocate(sq)
        return out

    def _snake_conv(self, x: Any, snake: str, c: ConvSpec, length: int) -> tuple[Any, int]:
        s = self._snake(x, snake)
        out = self._conv(s, c, length)
        ttnn.deallocate(s)
        return out

    # ---- public ------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """[64, L] latent -> [2, L * hop] float32 audio (one window)."""
        length = latent.shape[-1]
        x = upload(self.dev, latent.float().t().reshape(1, 1, length, -1), ttnn.bfloat16)
        h, n = self._conv(x, self.plan.stem, length)
        ttnn.deallocate(x)
        for blk in self.plan.blocks:
            up, n2 = self._snake_conv(h, blk.snake, blk.up, n)
            ttnn.deallocate(h)
            h, n = up, n2
            for u in blk.units:
                y, _ = self._snake_conv(h, u.snake1, u.conv1, n)
                z, _ = self._snake_conv(y, u.snake2, u.conv2, n)
                ttnn.deallocate(y)
                h2 = ttnn.add(h, z, memory_config=MEM)
                ttnn.deallocate(h)
                ttnn.deallocate(z)
                h = h2
        out, n = self._snake_conv(h, self.plan.snake_out, self.plan.conv_out, n)
        ttnn.deallocate(h)
        audio = ttnn.to_torch(out).float().reshape(n, -1)[:, : self.plan.conv_out.cout].t().contiguous()
        ttnn.deallocate(out)
        self.lengths.add(length)
        return audio

    def decode_windows(self, latent: torch.Tensor, window: int = DECODE_WINDOW,
                       overlap: int = DECODE_OVERLAP) -> Iterator[torch.Tensor]:
        """[64, T] -> kept blocks [2, n_k], yielded as each window finishes (upstream's splice rule)."""
        for w in plan_windows(latent.shape[-1], window, overlap):
            audio = self.decode(latent[:, w.start : w.start + w.length])
            a, b = (w.keep_start - w.start) * self.hop, (w.keep_end - w.start) * self.hop
            yield audio[:, a:b].clone()

    def warm(self, window: int) -> float:
        """Decode one zero window of `window` frames (compiles it, prepares weights); returns seconds."""
        import time

        started = time.perf_counter()
        self.decode(torch.zeros(self.plan.stem.cin, window))
        return time.perf_counter() - started
