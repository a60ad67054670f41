"""The DiffRhythm DiT (the CFM transformer) in plain torch, reproducing upstream `model/dit.py` numerically.

Einsum legend for the shape comments:
    b - batch (2b when both guidance branches run as one batch)
    n - latent frames (the sequence)
    d - model width (`dim`, 2048 in the release)
    h - heads (`n_head`, 32 in every release), k - head width (d / h)
    t - lyric feature width (`text_dim`, 512)
    c - condition width (512: time / start / duration embeddings and the style embedding)
    m - latent channels (`mel_dim`, 64)

Module and parameter names equal the release state dict (minus its `transformer.` prefix), so a checkpoint
loads with a strict `load_state_dict`. The per-song work (lyric features, text-fusion terms, start/duration
embeddings, RoPE tables) lives in `prepare()`; `forward_prepared()` is the per-step part and `forward()` is
the two together, so both paths run the same kernels on the same inputs.

q/k/v and gate/up run as one matmul each (`fuse_on_load`); state dicts in and out keep upstream's names.

Precision: every norm (RMSNorm, LayerNorm, GRN statistic) is computed in float32. With `upcast_residual`
(`load_dit(half_mode="mixed")` for float16/bfloat16 weights) the residual stream and the RoPE rotation
stay in float32 too; without it (fp32, or `half_mode="upstream"`) the model runs in one dtype like
upstream after `model.half()`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from device_worker.model.config import COND_DIM, DiTConfig

# ---------------------------------------------------------------------------------------------------------
# position tables: recomputed per device, never `.to(dtype)`-ed with the weights


def round_fp16(t: torch.Tensor) -> torch.Tensor:
    """Values as upstream sees them after `model.half()` (buffers included), kept in float32."""
    return t.half().float()


def fp16_value(v: float) -> float:
    """A Python float rounded through float16, as upstream's fp16 start_time/song_duration tensors."""
    return float(torch.tensor(v, dtype=torch.float16))


def rope_inv_freq(head_dim: int, exact: bool, device: torch.device | str = "cpu") -> torch.Tensor:
    """LLaMA default RoPE frequencies theta^(-2i/k), theta 1e4: [k/2] float32."""
    inv = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim))
    return inv if exact else round_fp16(inv)


def text_position_table(dim: int, n: int, max_pos: int, exact: bool,
                        device: torch.device | str = "cpu") -> torch.Tensor:
    """Lyric sinusoid rows for frames 0..n-1 (clamped at max_pos-1): [n, t], cos half first."""
    freqs = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, device=device)[: dim // 2].float() / dim))
    pos = torch.arange(n, device=device).clamp(max=max_pos - 1)
    angles = torch.outer(pos, freqs).float()  # (n, t/2)
    table = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)  # (n, t)
    return table if exact else round_fp16(table)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: (b, h, n, k); cos/sin: (1, 1, n, k) in the rotation dtype (x's dtype upstream, fp32 when mixed)
    xr = x.to(cos.dtype)
    return (xr * cos + rotate_half(xr) * sin).to(x.dtype)


class Linear(nn.Linear):
    """nn.Linear applied as one 2-D GEMM. torch's CPU matmul sends a 3-D input without bias through
    batched GEMM with the weight expanded per batch entry: ~10x slower than one GEMM in bfloat16 and no
    faster in float32. Same parameters and state-dict names as nn.Linear; on GPUs the same kernel runs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            return F.linear(x, self.weight, self.bias)
        return F.linear(x.flatten(0, -2), self.weight, self.bias).unflatten(0, x.shape[:-1])


# ---------------------------------------------------------------------------------------------------------
# conditioning embeddings


class TimestepEmbedding(nn.Module):
    """Scalar in [0, 1] -> sinusoid(256, scale 1000, sin first) -> Linear -> SiLU -> Linear: [b, c]."""

    def __init__(self, dim: int = COND_DIM, freq_dim: int = 256):
        super().__init__()
        self.freq_dim = freq_dim
        self.time_mlp = nn.Sequential(Linear(freq_dim, dim), nn.SiLU(), Linear(dim, dim))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.freq_dim // 2
        freqs = torch.exp(torch.arange(half, device=t.device).float() * -(math.log(10000) / (half - 1)))
        # upstream multiplies by 1000 in t's own dtype (fp16 under model.half()), then by fp32 freqs
        angles = 1000 * t.unsqueeze(1) * freqs.unsqueeze(0)  # (b, 128) fp32
        emb = torch.cat((angles.sin(), angles.cos()), dim=-1)
        return self.time_mlp(emb.to(self.time_mlp[0].weight.dtype))  # (b, c)


class GRN(nn.Module):
    """ConvNeXt-V2 global response norm; the L2 statistic runs over TIME (dim 1), as upstream."""

    def __init__(self, dim: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(1, 1, dim))
        self.beta = nn.Parameter(torch.zeros(1, 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gx = torch.norm(x.float(), p=2, dim=1, keepdim=True)  # (b, 1, 2t)
        nx = (gx / (gx.mean(dim=-1, keepdim=True) + 1e-6)).to(x.dtype)
        return self.gamma * (x * nx) + self.beta + x


class ConvNeXtV2Block(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.dwconv = nn.Conv1d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = Linear(dim, hidden)
        self.grn = GRN(hidden)
        self.pwconv2 = Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dwconv(x.transpose(1, 2)).transpose(1, 2)  # (b, n, t)
        h = F.layer_norm(h.float(), h.shape[-1:], self.norm.weight.float(), self.norm.bias.float(), 1e-6)
        h = F.gelu(self.pwconv1(h.to(x.dtype)))  # (b, n, 2t), exact erf GELU
        return x + self.pwconv2(self.grn(h))


class TextEmbedding(nn.Module):
    """Frame-aligned lyric ids [b, n] -> features [b, n, t] (embedding + position table + ConvNeXt)."""

    def __init__(self, config: DiTConfig):
        super().__init__()
        self.text_embed = nn.Embedding(config.text_num_embeds + 1, config.text_dim)  # row 0 = filler
        self.text_blocks = nn.Sequential(
            *[ConvNeXtV2Block(config.text_dim, 2 * config.text_dim) for _ in range(config.conv_layers)]
        )

    def forward(self, text: torch.Tensor, pos_table: torch.Tensor | None) -> torch.Tensor:
        h = self.text_embed(text)  # (b, n, t)
        if len(self.text_blocks) == 0:  # upstream skips the positions too without ConvNeXt layers
            return h
        h = h + pos_table.to(h.dtype)
        return self.text_blocks(h)


class ConvPositionEmbedding(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.conv1d = nn.Sequential(
            nn.Conv1d(dim, dim, kernel_size=31, padding=15, groups=16), nn.Mish(),
            nn.Conv1d(dim, dim, kernel_size=31, padding=15, groups=16), nn.Mish(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1d(x.transpose(1, 2)).transpose(1, 2)  # (b, n, d), convolved over n


class InputEmbedding(nn.Module):
    """Linear over concat(x, cond, text, style, c), then a grouped-conv position embedding (Mish)."""

    def __init__(self, config: DiTConfig):
        super().__init__()
        self.proj = Linear(2 * config.mel_dim + config.text_dim + 2 * COND_DIM, config.dim)
        self.conv_pos_embed = ConvPositionEmbedding(config.dim)

    def forward(self, x: torch.Tensor, static: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        # x: (b, n, m); static: (b, n, m + t + c) = cond | text | style; c: (b, c)
        dt = self.proj.weight.dtype
        c = c.to(dt).unsqueeze(1).expand(-1, x.shape[1], -1)  # (b, n, c)
        h = self.proj(torch.cat((x.to(dt), static, c), dim=-1))  # (b, n, d)
        return self.conv_pos_embed(h) + h


# ---------------------------------------------------------------------------------------------------------
# LLaMA trunk (transformers' LlamaDecoderLayer, rewritten)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(self.weight.dtype)  # returns the weight dtype (the matmul dtype)


def fuse_on_load(module: nn.Module, fused: str, parts: tuple[str, ...]) -> None:
    """Run the checkpoint's Linears `parts` (same input, no bias) as one Linear `fused`: their weights are
    concatenated as a state dict loads and split again (views) when one is written, so checkpoints keep
    upstream's names and `forward` has one path (gpt-fast's load hook). Fewer, larger GEMMs; no more memory."""

    def join(state_dict: dict, prefix: str, *args: object) -> None:
        names = [f"{prefix}{p}.weight" for p in parts]
        if all(n in state_dict for n in names):
            state_dict[f"{prefix}{fused}.weight"] = torch.cat([state_dict.pop(n) for n in names])

    def split(mod: nn.Module, state_dict: dict, prefix: str, local_metadata: object) -> None:
        weight = state_dict.pop(f"{prefix}{fused}.weight")
        for p, chunk in zip(parts, weight.chunk(len(parts)), strict=True):
            state_dict[f"{prefix}{p}.weight"] = chunk

    module._register_load_state_dict_pre_hook(join)
    module.register_state_dict_post_hook(split)


class Attention(nn.Module):
    def __init__(self, config: DiTConfig):
        super().__init__()
        self.n_head, self.head_dim, self.causal = config.n_head, config.head_dim, config.causal
        self.qkv_proj = Linear(config.dim, 3 * config.dim, bias=False)  # checkpoints: q_proj | k_proj | v_proj
        self.o_proj = Linear(config.dim, config.dim, bias=False)
        fuse_on_load(self, "qkv_proj", ("q_proj", "k_proj", "v_proj"))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv_proj(x).split(d, dim=-1)
        q = q.reshape(b, n, self.n_head, self.head_dim).transpose(1, 2)  # (b, h, n, k)
        k = k.reshape(b, n, self.n_head, self.head_dim).transpose(1, 2)
        v = v.reshape(b, n, self.n_head, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        # v1.2 passes an all-zero mask (full attention); dropping it is exact and unlocks flash kernels
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)  # (b, h, n, k)
        return self.o_proj(y.transpose(1, 2).reshape(b, n, d))


class FeedForward(nn.Module):
    def __init__(self, config: DiTConfig):
        super().__init__()
        hidden = config.dim * config.ff_mult
        self.gate_up_proj = Linear(config.dim, 2 * hidden, bias=False)  # checkpoints: gate_proj | up_proj
        self.down_proj = Linear(hidden, config.dim, bias=False)
        fuse_on_load(self, "gate_up_proj", ("gate_proj", "up_proj"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)  # SwiGLU


class TransformerBlock(nn.Module):
    def __init__(self, config: DiTConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.dim)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.dim)
        self.mlp = FeedForward(config)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        # x keeps its dtype (fp32 when the residual is upcast): half outputs add into it
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class AdaLayerNormFinal(nn.Module):
    """LayerNorm (no affine) modulated by c; upstream chunks the projection as (scale, shift)."""

    def __init__(self, dim: int):
        super().__init__()
        self.linear = Linear(COND_DIM, 2 * dim)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        scale, shift = self.linear(F.silu(c)).to(x.dtype).chunk(2, dim=1)  # (b, d) each
        h = F.layer_norm(x.float(), x.shape[-1:], eps=1e-6).to(x.dtype)
        return h * (1 + scale)[:, None, :] + shift[:, None, :]


# ---------------------------------------------------------------------------------------------------------


@dataclass
class SongCache:
    """The timestep-invariant part of a DiT call for one batch of songs (see `DiT.prepare`)."""

    static: torch.Tensor  # (b, n, m + t + c): cond | lyric features | style, in the weight dtype
    fusion: list[torch.Tensor]  # depth//2 x (b, n, d): SiLU(Linear_i(lyric features))
    start: torch.Tensor  # (b, c) start-time embedding
    duration: torch.Tensor | None  # (b, c) duration embedding (v1.2 full only)
    cos: torch.Tensor  # (1, 1, n, k) RoPE tables
    sin: torch.Tensor

    @property
    def batch(self) -> int:
        return self.static.shape[0]


def drop_inputs(cond: torch.Tensor, text: torch.Tensor, style: torch.Tensor, drop_audio_cond: bool = False,
                drop_text: bool = False, drop_prompt: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Upstream's drop flags, applied to the DiT's per-song inputs: the unguided branch sees a zero
    reference latent and lyric id 0 on every frame (the embedding of 0, not zero features); a zero style is
    training only. Every backbone (this DiT, the ttnn one) and the sampler's guidance rows use this."""
    return (torch.zeros_like(cond) if drop_audio_cond else cond, torch.zeros_like(text) if drop_text else text,
            torch.zeros_like(style) if drop_prompt else style)


class DiT(nn.Module):
    def __init__(self, config: DiTConfig, *, exact_buffers: bool = False, upcast_residual: bool = False):
        super().__init__()
        self.config = config
        self.exact_buffers = exact_buffers  # False: fp16-rounded tables, like upstream's model.half()
        self.upcast_residual = upcast_residual  # see the module docstring; load_dit(half_mode="mixed")
        self.time_embed = TimestepEmbedding()
        self.start_time_embed = TimestepEmbedding()
        if config.duration_embed:
            self.duration_time_embed = TimestepEmbedding()
        self.text_embed = TextEmbedding(config)
        self.input_embed = InputEmbedding(config)
        self.transformer_blocks = nn.ModuleList([TransformerBlock(config) for _ in range(config.depth)])
        self.text_fusion_linears = nn.ModuleList(
            [nn.Sequential(Linear(COND_DIM, config.dim), nn.SiLU()) for _ in range(config.depth // 2)]
        )
        self.norm_out = AdaLayerNormFinal(config.dim)
        self.proj_out = Linear(config.dim, config.mel_dim)

    @property
    def dtype(self) -> torch.dtype:
        return self.proj_out.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.proj_out.weight.device

    @property
    def state_dtype(self) -> torch.dtype:
        """Dtype of the residual stream, the Euler state and the guidance arithmetic."""
        return torch.float32 if self.upcast_residual else self.dtype

    def _scalar(self, v: torch.Tensor | float | None, b: int, device: torch.device) -> torch.Tensor:
        if not isinstance(v, torch.Tensor):
            v = torch.tensor(float(v), dtype=self.state_dtype, device=device)
        return v.to(device).reshape(-1).expand(b) if v.numel() == 1 else v.to(device)

    def prepare(
        self,
        cond: torch.Tensor,  # (b, n, m) reference latent (zeros where generated)
        text: torch.Tensor,  # (b, n) long, lyric id per frame
        style_prompt: torch.Tensor,  # (b, c)
        start_time: torch.Tensor | float | None = None,  # (b,) or scalar; default 0
        duration: torch.Tensor | float | None = None,  # (b,) song length / max_frames (full model only)
        drop_audio_cond: bool = False,  # unguided branch: cond -> 0
        drop_text: bool = False,  # unguided branch: ids -> 0 (the embedding of 0, not zero features)
        drop_prompt: bool = False,  # training only: style -> 0
    ) -> SongCache:
        b, n = text.shape
        device, dt = text.device, self.dtype
        cond, text, style_prompt = drop_inputs(cond, text, style_prompt, drop_audio_cond, drop_text, drop_prompt)
        if start_time is None:
            start_time = 0.0
        start = self.start_time_embed(self._scalar(start_time, b, device))
        dur = None
        if self.config.duration_embed:
            if duration is None:  # upstream's value for a song of n frames
                duration = fp16_value(n / self.config.max_frames)
            dur = self.duration_time_embed(self._scalar(duration, b, device))
        pos = text_position_table(self.config.text_dim, n, self.config.text_max_pos, self.exact_buffers, device)
        text_e = self.text_embed(text, pos)  # (b, n, t)
        fusion = [layer(text_e) for layer in self.text_fusion_linears]
        style = style_prompt.to(dt).unsqueeze(1).expand(-1, n, -1)  # (b, n, c)
        static = torch.cat((cond.to(dt), text_e, style), dim=-1)
        inv_freq = rope_inv_freq(self.config.head_dim, self.exact_buffers, device)
        angles = torch.arange(n, device=device).float()[:, None] * inv_freq[None, :]  # (n, k/2)
        emb = torch.cat((angles, angles), dim=-1)[None, None]  # (1, 1, n, k)
        rot = torch.float32 if self.upcast_residual else dt  # upstream: cos/sin computed fp32, cast to x
        return SongCache(static, fusion, start, dur, emb.cos().to(rot), emb.sin().to(rot))

    def release(self, cache: SongCache) -> None:
        """Nothing to free: the cache's tensors go with it (the sampler's `Backbone` protocol)."""

    def forward_prepared(self, x: torch.Tensor, time: torch.Tensor | float, cache: SongCache) -> torch.Tensor:
        """Velocity (b, n, m) of latent x (b, n, m) at flow time `time` for a prepared batch."""
        b = x.shape[0]
        t = self.time_embed(self._scalar(time, b, x.device))  # (b, c)
        c = t + cache.start  # same order of additions as upstream
        if cache.duration is not None:
            c = c + cache.duration
        h = self.input_embed(x, cache.static, c)  # (b, n, d)
        if self.upcast_residual:
            h = h.float()
        for i, block in enumerate(self.transformer_blocks):
            h = block(h, cache.cos, cache.sin)
            if i < len(cache.fusion):
                h = h + cache.fusion[i]
        h = self.norm_out(h, c)
        return self.proj_out(h.to(self.dtype))  # (b, n, m)

    def forward(
        self,
        x: torch.Tensor,  # (b, n, m) noised latent
        cond: torch.Tensor,  # (b, n, m) masked reference latent
        text: torch.Tensor,  # (b, n) lyric ids
        time: torch.Tensor | float,  # () or (b,) flow time
        drop_audio_cond: bool = False,
        drop_text: bool = False,
        drop_prompt: bool = False,
        style_prompt: torch.Tensor | None = None,  # (b, c)
        start_time: torch.Tensor | float | None = None,
        duration: torch.Tensor | float | None = None,
    ) -> torch.Tensor:
        """Upstream `DiT.forward`: same arguments, same velocity (b, n, m); a drop-in `cfm.transformer`."""
        if style_prompt is None:
            raise ValueError("style_prompt is required (upstream has no default either)")
        cache = self.prepare(
            cond, text, style_prompt, start_time, duration, drop_audio_cond, drop_text, drop_prompt
        )
        return self.forward_prepared(x, time, cache)
