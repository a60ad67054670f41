"""MuQ (the audio tower under MuQ-MuLan) in plain torch: conv subsampling + wav2vec2-conformer.

Module and parameter names mirror the `muq` package (`MuQModel.conv`, `.conformer`) and transformers'
`Wav2Vec2ConformerEncoder`, so the released state dict loads key for key. Only the feature path runs:
MuQ's quantiser, codebook head, cls token and the encoder's `pos_conv_embed` (built by transformers
but never applied in its forward) are not modelled; `load.py` lists them as known, unused keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .mel import MelFrontEnd


@dataclass
class MuQConfig:
    """The fields of `OpenMuQ/MuQ-large-msd-iter/config.json` the feature path needs.

    Defaults are muq's `MuQConfig` / transformers' `Wav2Vec2ConformerConfig` defaults; the released
    config overrides them (read by `from_json`)."""

    n_mels: int = 128
    conv_dim: int = 512
    encoder_dim: int = 1024  # conformer hidden size (muq overrides w2v2_config.hidden_size with it)
    encoder_depth: int = 12  # conformer layers (overrides w2v2_config.num_hidden_layers)
    label_rate: int = 25  # tokens per second -> conv time strides (25 Hz: 2 x 2)
    heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    position_embeddings_type: str | None = "relative"
    rotary_embedding_base: float = 10000.0
    conv_depthwise_kernel_size: int = 31
    layer_norm_eps: float = 1e-5
    mel_mean: float = 0.0
    mel_std: float = 1.0

    @classmethod
    def from_json(cls, cfg: dict) -> MuQConfig:
        w2v2 = cfg.get("w2v2_config") or {}
        stat = cfg.get("stat") or {}
        features = cfg.get("features", ["melspec_2048"])
        if list(features) != ["melspec_2048"]:
            raise ValueError(f"MuQ config asks for features {features!r}; only ['melspec_2048'] is supported")
        d = cls()
        return cls(
            n_mels=int(cfg.get("n_mels", d.n_mels)),
            conv_dim=int(cfg.get("conv_dim", d.conv_dim)),
            encoder_dim=int(cfg.get("encoder_dim", d.encoder_dim)),
            encoder_depth=int(cfg.get("encoder_depth", d.encoder_depth)),
            label_rate=int(cfg.get("label_rate", d.label_rate)),
            heads=int(w2v2.get("num_attention_heads", d.heads)),
            intermediate_size=int(w2v2.get("intermediate_size", d.intermediate_size)),
            hidden_act=str(w2v2.get("hidden_act", d.hidden_act)),
            position_embeddings_type=w2v2.get("position_embeddings_type", d.position_embeddings_type),
            rotary_embedding_base=float(w2v2.get("rotary_embedding_base", d.rotary_embedding_base)),
            conv_depthwise_kernel_size=int(w2v2.get("conv_depthwise_kernel_size", d.conv_depthwise_kernel_size)),
            layer_norm_eps=float(w2v2.get("layer_norm_eps", d.layer_norm_eps)),
            mel_mean=float(stat.get("melspec_2048_mean", 0.0)),
            mel_std=float(stat.get("melspec_2048_std", 1.0)),
        )


_ACTS = {"gelu": F.gelu, "swish": F.silu, "silu": F.silu, "relu": F.relu}


def _act(name: str):
    if name not in _ACTS:
        raise ValueError(f"unsupported conformer activation {name!r} (supported: {sorted(_ACTS)})")
    return _ACTS[name]


class Res2d(nn.Module):
    """muq `Res2dModule`: two 3x3 convs with batch norm and a strided 3x3 shortcut."""

    def __init__(self, idim: int, odim: int, stride: tuple[int, int]) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(idim, odim, 3, padding=1, stride=stride)
        self.bn1 = nn.BatchNorm2d(odim)
        self.conv2 = nn.Conv2d(odim, odim, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(odim)
        self.diff = idim != odim or stride[0] > 1
        if self.diff:
            self.conv3 = nn.Conv2d(idim, odim, 3, padding=1, stride=stride)
            self.bn3 = nn.BatchNorm2d(odim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        if self.diff:
            x = self.bn3(self.conv3(x))
        return F.relu(x + out)


class ConvSubsampling(nn.Module):
    """mel [B, n_mels, T] -> tokens [B, T // 4, encoder_dim] (muq `Conv2dSubsampling`)."""

    def __init__(self, cfg: MuQConfig) -> None:
        super().__init__()
        n_fold = 100 // cfg.label_rate  # mel frames per token (100 Hz mel -> 25 Hz tokens)
        strides = {4: (2, 2), 2: (2, 1)}.get(n_fold)
        if strides is None:
            raise ValueError(f"MuQ label_rate {cfg.label_rate} is not supported (25 or 50 Hz)")
        self.conv = nn.Sequential(
            Res2d(1, cfg.conv_dim, (2, strides[0])), Res2d(cfg.conv_dim, cfg.conv_dim, (2, strides[1]))
        )
        self.linear = nn.Linear(cfg.conv_dim * cfg.n_mels // 4, cfg.encoder_dim)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = self.conv(mel.unsqueeze(1))  # (B, C, F/4, T/4)
        b, c, f, t = x.shape
        x = x.permute(0, 3, 1, 2).reshape(b, t, c * f)  # "b c f t -> b t (c f)"
        return self.linear(x)


class FeedForward(nn.Module):
    def __init__(self, cfg: MuQConfig) -> None:
        super().__init__()
        self.intermediate_dense = nn.Linear(cfg.encoder_dim, cfg.intermediate_size)
        self.output_dense = nn.Linear(cfg.intermediate_size, cfg.encoder_dim)
        self.act = _act(cfg.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(self.act(self.intermediate_dense(x)))


class ConvModule(nn.Module):
    def __init__(self, cfg: MuQConfig) -> None:
        super().__init__()
        d, k = cfg.encoder_dim, cfg.conv_depthwise_kernel_size
        self.layer_norm = nn.LayerNorm(d)
        self.pointwise_conv1 = nn.Conv1d(d, 2 * d, 1, bias=False)
        self.depthwise_conv = nn.Conv1d(d, d, k, padding=(k - 1) // 2, groups=d, bias=False)
        self.batch_norm = nn.BatchNorm1d(d)
        self.pointwise_conv2 = nn.Conv1d(d, d, 1, bias=False)
        self.act = _act(cfg.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer_norm(x).transpose(1, 2)  # (B, D, T)
        x = F.glu(self.pointwise_conv1(x), dim=1)  # (B, 2D, T) -> (B, D, T)
        x = self.act(self.batch_norm(self.depthwise_conv(x)))
        return self.pointwise_conv2(x).transpose(1, 2)  # (B, T, D)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class SelfAttention(nn.Module):
    """Rotary self-attention as transformers' conformer: RoPE on the q/k input (not on v), full mask."""

    def __init__(self, cfg: MuQConfig) -> None:
        super().__init__()
        d = cfg.encoder_dim
        self.heads = cfg.heads
        self.head_size = d // cfg.heads
        self.linear_q = nn.Linear(d, d)
        self.linear_k = nn.Linear(d, d)
        self.linear_v = nn.Linear(d, d)
        self.linear_out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape  # batch, tokens, model width
        h = x.view(B, T, self.heads, self.head_size)
        qk_in = (h * cos + rotate_half(h) * sin).view(B, T, D)  # cos/sin: (T, 1, head_size)
        q = self.linear_q(qk_in).view(B, T, self.heads, self.head_size).transpose(1, 2)  # (B, H, T, hs)
        k = self.linear_k(qk_in).view(B, T, self.heads, self.head_size).transpose(1, 2)
        v = self.linear_v(x).view(B, T, self.heads, self.head_size).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v)  # scale 1/sqrt(hs), no mask
        return self.linear_out(out.transpose(1, 2).reshape(B, T, D))


class ConformerLayer(nn.Module):
    """Macaron block: x + FFN/2 -> + attention -> + conv -> + FFN/2 -> LayerNorm."""

    def __init__(self, cfg: MuQConfig) -> None:
        super().__init__()
        d = cfg.encoder_dim
        self.ffn1_layer_norm = nn.LayerNorm(d)
        self.ffn1 = FeedForward(cfg)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.self_attn = SelfAttention(cfg)
        self.conv_module = ConvModule(cfg)
        self.ffn2_layer_norm = nn.LayerNorm(d)
        self.ffn2 = FeedForward(cfg)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + 0.5 * self.ffn1(self.ffn1_layer_norm(x))
        x = x + self.self_attn(self.self_attn_layer_norm(x), cos, sin)
        x = x + self.conv_module(x)
        x = x + 0.5 * self.ffn2(self.ffn2_layer_norm(x))
        return self.final_layer_norm(x)


def rotary_inv_freq(head_size: int, base: float) -> torch.Tensor:
    """The rotary table transformers' `Wav2Vec2ConformerRotaryPositionalEmbedding` builds:
    1 / base^(2i / head_size) for i < head_size / 2, float32, head_size = hidden_size // heads. On the CPU
    even while the model is built on the meta device, where this arithmetic would import torch._dynamo."""
    return 1.0 / (base ** (torch.arange(0, head_size, 2, dtype=torch.int64, device="cpu").float() / head_size))


class RotaryEmbedding(nn.Module):
    """transformers' `embed_positions` (rotary): holds `inv_freq` as a persistent buffer, as transformers
    does, so the released `...conformer.embed_positions.inv_freq` maps onto it. `load.py` checks the
    file's value against `expected()` (and derives it when a file lacks it)."""

    def __init__(self, cfg: MuQConfig) -> None:
        super().__init__()
        self.head_size = cfg.encoder_dim // cfg.heads
        self.base = cfg.rotary_embedding_base
        self.register_buffer("inv_freq", rotary_inv_freq(self.head_size, self.base))

    def expected(self) -> torch.Tensor:
        return rotary_inv_freq(self.head_size, self.base)

    def cos_sin(self, length: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(T, 1, head_size) each, computed in inv_freq's dtype and cast to `dtype` (as transformers)."""
        t = torch.arange(length, device=device).to(self.inv_freq.dtype)
        freqs = t[:, None] * self.inv_freq  # einsum("i,j->ij")
        emb = torch.cat((freqs, freqs), dim=-1)[:, None, :]
        return emb.cos().to(dtype), emb.sin().to(dtype)


class ConformerEncoder(nn.Module):
    def __init__(self, cfg: MuQConfig) -> None:
        super().__init__()
        if cfg.position_embeddings_type != "rotary":
            # The released MuQ descends from MusicFM, whose conformer is rotary; other kinds add
            # parameters (linear_pos, pos_bias_u/v) this port does not model, so refuse loudly.
            raise ValueError(
                f"MuQ conformer position_embeddings_type={cfg.position_embeddings_type!r} is not supported "
                "by this port (only 'rotary')"
            )
        self.embed_positions = RotaryEmbedding(cfg)
        self.layer_norm = nn.LayerNorm(cfg.encoder_dim, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(ConformerLayer(cfg) for _ in range(cfg.encoder_depth))

    def hidden_state(self, x: torch.Tensor, index: int) -> torch.Tensor:
        """transformers' `hidden_states[index]`: the input of layer `index`, or for the last index the
        final LayerNorm of the last layer's output. Only the layers needed are run."""
        depth = len(self.layers)
        if index < 0:
            index += depth + 1
        if not 0 <= index <= depth:
            raise ValueError(f"hidden state {index} does not exist (conformer has {depth} layers)")
        cos, sin = self.embed_positions.cos_sin(x.shape[1], x.device, x.dtype)  # (T, 1, head_size)
        for layer in self.layers[:index]:
            x = layer(x, cos, sin)
        return self.layer_norm(x) if index == depth else x


class MuQModelCore(nn.Module):
    """muq `MuQModel` (feature path only). wav [B, n] 24 kHz -> hidden state [B, n // 960, D]."""

    def __init__(self, cfg: MuQConfig) -> None:
        super().__init__()
        self.front_end = MelFrontEnd(cfg.mel_mean, cfg.mel_std)
        self.conv = ConvSubsampling(cfg)
        self.conformer = ConformerEncoder(cfg)

    def forward(self, wav: torch.Tensor, layer_index: int) -> torch.Tensor:
        mel = self.front_end(wav).to(self.conv.linear.weight.dtype)  # (B, 128, frames)
        return self.conformer.hidden_state(self.conv(mel), layer_index)


class MuQ(nn.Module):
    """The hub wrapper: muq's `MuQ` holds `MuQModel` as `.model` (hence `...model.model.` in keys)."""

    def __init__(self, cfg: MuQConfig) -> None:
        super().__init__()
        self.model = MuQModelCore(cfg)
