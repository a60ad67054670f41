"""MuQ-MuLan's joint-embedding towers in plain torch (names mirror the `muq` package's modules).

audio: wav 24 kHz -> MuQ hidden state [B, T, 1024] -> proj -> 8-layer transformer -> mean over T
       -> audio_to_latents -> L2 norm  = [B, 512]
text:  tokens -> XLM-RoBERTa last hidden state [B, L, 768] -> (proj) -> 8-layer transformer -> mean
       over L -> text_to_latents -> L2 norm = [B, 512]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .muq import MuQ, MuQConfig


@dataclass
class TowerConfig:
    """muq's AudioTransformerConfig / TextTransformerConfig (same fields and defaults)."""

    dim: int = 768
    tf_depth: int = 8
    heads: int = 8
    dim_head: int = 64
    ff_mult: int = 4


@dataclass
class MuLanConfig:
    """`OpenMuQ/MuQ-MuLan-large/config.json`, the parts inference reads."""

    sr: int = 24_000
    clip_secs: float = 10.0
    dim_latent: int = 512
    audio_model_name: str = "OpenMuQ/MuQ-large-msd-iter"
    audio_model_dim: int = 1024
    use_layer_idx: int = -1  # which MuQ hidden state feeds the audio tower
    text_model_name: str = "xlm-roberta-base"
    text_model_dim: int | None = None
    audio: TowerConfig = field(default_factory=TowerConfig)
    text: TowerConfig = field(default_factory=TowerConfig)
    norm_type: str = "l2norm"

    @classmethod
    def from_json(cls, cfg: dict) -> MuLanConfig:
        def tower(d: dict) -> TowerConfig:
            keys = ("dim", "tf_depth", "heads", "dim_head", "ff_mult")
            return TowerConfig(**{k: int(d[k]) for k in keys if k in d})

        mulan = cfg.get("mulan", {})
        audio_model = cfg.get("audio_model", {})
        text_model = cfg.get("text_model", {})
        return cls(
            sr=int(mulan.get("sr", 24_000)),
            clip_secs=float(mulan.get("clip_secs", 10)),
            dim_latent=int(mulan.get("dim_latent", 512)),
            audio_model_name=str(audio_model.get("name", cls.audio_model_name)),
            audio_model_dim=int(audio_model.get("model_dim") or 1024),
            use_layer_idx=int(audio_model.get("use_layer_idx", -1)),
            text_model_name=str(text_model.get("name", cls.text_model_name)),
            text_model_dim=text_model.get("model_dim"),
            audio=tower(cfg.get("audio_transformer", {})),
            text=tower(cfg.get("text_transformer", {})),
        )


class LayerNorm(nn.Module):
    """Bias-free LayerNorm with a learned gain named `learned_gamma` (muq's naming)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.learned_gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], self.learned_gamma)


class Attention(nn.Module):
    """Pre-norm attention with L2-normalised q/k, learned per-dim q/k scales and a fixed scale of 8."""

    def __init__(self, dim: int, heads: int, dim_head: int) -> None:
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.norm = LayerNorm(dim)
        self.to_q = nn.Linear(dim, inner, bias=False)
        self.to_kv = nn.Linear(dim, inner * 2, bias=False)
        self.q_scale = nn.Parameter(torch.ones(dim_head))
        self.k_scale = nn.Parameter(torch.ones(dim_head))
        self.to_out = nn.Sequential(nn.Linear(inner, dim, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, _ = x.shape  # batch, tokens, width
        x = self.norm(x)
        q, k, v = (self.to_q(x), *self.to_kv(x).chunk(2, dim=-1))
        q, k, v = (t.view(B, N, self.heads, -1).transpose(1, 2) for t in (q, k, v))  # (B, H, N, dh)
        q = F.normalize(q, dim=-1) * self.q_scale
        k = F.normalize(k, dim=-1) * self.k_scale
        out = F.scaled_dot_product_attention(q, k, v, scale=8.0)
        return self.to_out(out.transpose(1, 2).reshape(B, N, -1))


class GEGLU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, gate = x.chunk(2, dim=-1)
        return F.gelu(gate) * x


def feed_forward(dim: int, mult: int) -> nn.Sequential:
    hidden = int(dim * mult * 2 / 3)
    # Index 3 was a Dropout in muq; an Identity keeps the checkpoint indices (0, 1, 4) in place.
    return nn.Sequential(
        LayerNorm(dim), nn.Linear(dim, hidden * 2, bias=False), GEGLU(), nn.Identity(),
        nn.Linear(hidden, dim, bias=False),
    )


class Transformer(nn.Module):
    def __init__(self, cfg: TowerConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            nn.ModuleList([Attention(cfg.dim, cfg.heads, cfg.dim_head), feed_forward(cfg.dim, cfg.ff_mult)])
            for _ in range(cfg.tf_depth)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        return x


class AudioTower(nn.Module):
    def __init__(self, cfg: MuLanConfig, muq_cfg: MuQConfig) -> None:
        super().__init__()
        self.use_layer_idx = cfg.use_layer_idx
        self.model = MuQ(muq_cfg)
        self.transformer = Transformer(cfg.audio)
        self.proj = nn.Linear(cfg.audio_model_dim, cfg.audio.dim)
        self.dim = cfg.audio.dim

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        h = self.model.model(wav, self.use_layer_idx)  # (B, T, 1024)
        return self.transformer(self.proj(h)).mean(dim=-2)  # (B, dim)


class TextTower(nn.Module):
    def __init__(self, cfg: MuLanConfig, text_model: nn.Module) -> None:
        super().__init__()
        self.model = text_model  # XLM-R (roberta.XLMRoberta), as muq builds it
        self.transformer = Transformer(cfg.text)
        model_dim = cfg.text_model_dim
        self.proj = nn.Linear(model_dim, cfg.text.dim) if model_dim and model_dim != cfg.text.dim else nn.Identity()
        self.dim = cfg.text.dim

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.model(input_ids, attention_mask)  # (B, L, 768)
        # muq runs its transformer and mean without the mask (pads count); we embed one text at a time.
        return self.transformer(self.proj(h)).mean(dim=-2)


class MuLan(nn.Module):
    def __init__(self, cfg: MuLanConfig, muq_cfg: MuQConfig, text_model: nn.Module) -> None:
        super().__init__()
        if cfg.norm_type != "l2norm":
            raise ValueError(f"MuLan norm_type {cfg.norm_type!r} is not supported (only 'l2norm')")
        self.audio = AudioTower(cfg, muq_cfg)
        self.text = TextTower(cfg, text_model)
        self.text_to_latents = nn.Linear(cfg.text.dim, cfg.dim_latent)
        self.audio_to_latents = nn.Linear(cfg.audio.dim, cfg.dim_latent)

    def audio_latents(self, wav: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.audio_to_latents(self.audio(wav)), dim=-1)

    def text_latents(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.text_to_latents(self.text(input_ids, attention_mask)), dim=-1)
