"""XLM-RoBERTa, the MuLan text tower's encoder, in plain torch, and its tokenizer read from tokenizer.json.

Parameter names are transformers' `XLMRobertaModel` (`embeddings.word_embeddings`, `encoder.layer.N.
attention.self.query`, ..., `pooler.dense`), so the MuQ-MuLan file loads strictly. The pooler is built
because the file holds it, and never run: MuLan reads the last hidden state. The tokenizer is the
`tokenizers` library on xlm-roberta-base's tokenizer.json, which is what transformers' fast tokenizer
runs; neither needs transformers itself, whose import costs a worker about two seconds of CPU at start.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class RobertaConfig:
    vocab_size: int = 250002
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 514
    type_vocab_size: int = 1
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1
    hidden_act: str = "gelu"

    @classmethod
    def from_json(cls, path: Path) -> RobertaConfig:
        """xlm-roberta-base's config.json; keys this encoder does not use (dropout, ids of bos/eos) are left."""
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        cfg = cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})
        if cfg.hidden_act != "gelu":
            raise ValueError(f"XLM-R hidden_act {cfg.hidden_act!r} is not supported (only 'gelu')")
        if cfg.hidden_size % cfg.num_attention_heads:
            raise ValueError(f"XLM-R hidden_size {cfg.hidden_size} is not a multiple of {cfg.num_attention_heads} heads")
        return cfg


class Embeddings(nn.Module):
    def __init__(self, cfg: RobertaConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.pad = cfg.pad_token_id

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # RoBERTa counts positions from pad + 1 and gives pads the pad position.
        real = ids.ne(self.pad).int()
        positions = torch.cumsum(real, dim=1) * real + self.pad
        h = self.word_embeddings(ids) + self.position_embeddings(positions.long())
        h = h + self.token_type_embeddings.weight[0]  # one segment: type 0 everywhere
        return self.LayerNorm(h)


class SelfAttention(nn.Module):
    def __init__(self, cfg: RobertaConfig) -> None:
        super().__init__()
        self.query = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.heads = cfg.num_attention_heads

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = (proj(x).view(b, n, self.heads, d // self.heads).transpose(1, 2)
                   for proj in (self.query, self.key, self.value))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out.transpose(1, 2).reshape(b, n, d)


class AddNorm(nn.Module):
    """`dense`, then the residual and a post-norm (BERT's `*Output` blocks)."""

    def __init__(self, d_in: int, cfg: RobertaConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(d_in, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class Attention(nn.Module):
    def __init__(self, cfg: RobertaConfig) -> None:
        super().__init__()
        self.self = SelfAttention(cfg)
        self.output = AddNorm(cfg.hidden_size, cfg)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x, mask), x)


class Intermediate(nn.Module):
    def __init__(self, cfg: RobertaConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(x))  # exact (erf) GELU, transformers' "gelu"


class Layer(nn.Module):
    def __init__(self, cfg: RobertaConfig) -> None:
        super().__init__()
        self.attention = Attention(cfg)
        self.intermediate = Intermediate(cfg)
        self.output = AddNorm(cfg.intermediate_size, cfg)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.attention(x, mask)
        return self.output(self.intermediate(h), h)


class Encoder(nn.Module):
    def __init__(self, cfg: RobertaConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(Layer(cfg) for _ in range(cfg.num_hidden_layers))


class Pooler(nn.Module):
    def __init__(self, cfg: RobertaConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)


class XLMRoberta(nn.Module):
    """`forward` returns the last hidden state [B, L, hidden], as transformers' `.last_hidden_state`."""

    def __init__(self, cfg: RobertaConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embeddings = Embeddings(cfg)
        self.encoder = Encoder(cfg)
        self.pooler = Pooler(cfg)  # in the checkpoint (muq builds it), unused by MuLan

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.embeddings(input_ids)
        mask = attention_mask[:, None, None, :].bool()  # keys a query may attend to
        for layer in self.encoder.layer:
            h = layer(h, mask)
        return h


class Tokenizer:
    """xlm-roberta-base's tokenizer.json through the `tokenizers` library: `<s> ... </s>` ids, truncated
    to `max_length` tokens with the two specials included, as transformers' fast tokenizer does."""

    def __init__(self, path: Path, max_length: int) -> None:
        from tokenizers import Tokenizer as FastTokenizer

        self._tok = FastTokenizer.from_file(str(path))
        self._tok.no_padding()
        self._tok.enable_truncation(max_length=max_length)

    def __call__(self, text: str) -> tuple[torch.Tensor, torch.Tensor]:
        """One text -> (input_ids [1, L], attention_mask [1, L]) int64."""
        enc = self._tok.encode(text)
        return torch.tensor([enc.ids]), torch.tensor([enc.attention_mask])
