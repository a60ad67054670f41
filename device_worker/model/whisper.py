"""Whisper in plain torch: the network, its log-mel front end and greedy decoding for the lyrics check.

Parameter names are transformers' (`WhisperForConditionalGeneration`), so a hub checkpoint's
model.safetensors loads strictly. Decoding is what `generate(task="transcribe",
return_token_timestamps=True)` does for windows of at most 30 s: the prompt <|startoftranscript|>
<|lang|> <|transcribe|> <|notimestamps|>, greedy tokens with the checkpoint's suppressed tokens, and the
cross-attention of every step kept for the `alignment_heads` (word times: device_worker.transcribe).
tests/model/test_whisper.py holds it to transformers token for token. Why not transformers itself: its
import, and torch._dynamo's with it, cost ~2.5 s of CPU in each worker's first lyrics check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from device_worker.style.mel import triangular_filters


@dataclass(frozen=True)
class WhisperConfig:
    n_mels: int
    n_vocab: int
    d_model: int
    n_audio_ctx: int  # encoder positions: 1500 for 30 s
    n_text_ctx: int  # decoder positions
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    encoder_ffn: int
    decoder_ffn: int
    scale_embedding: bool = False
    median_filter_width: int = 7

    @classmethod
    def from_hub(cls, cfg: dict[str, Any]) -> WhisperConfig:
        """transformers' config.json -> WhisperConfig (only what the network and the word times read)."""
        if cfg.get("activation_function", "gelu") != "gelu":
            raise ValueError(f"activation {cfg['activation_function']!r}: only Whisper's gelu is supported")
        return cls(cfg["num_mel_bins"], cfg["vocab_size"], cfg["d_model"], cfg["max_source_positions"],
                   cfg["max_target_positions"], cfg["encoder_layers"], cfg["decoder_layers"],
                   cfg["encoder_attention_heads"], cfg["decoder_attention_heads"], cfg["encoder_ffn_dim"],
                   cfg["decoder_ffn_dim"], bool(cfg.get("scale_embedding", False)),
                   int(cfg.get("median_filter_width", 7)))


class Attention(nn.Module):
    def __init__(self, d: int, n_head: int) -> None:
        super().__init__()
        self.n_head, self.scale = n_head, (d // n_head) ** -0.5
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)

    def heads(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, C] -> [B, H, T, C/H]
        return x.view(x.shape[0], x.shape[1], self.n_head, -1).transpose(1, 2)

    def kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.heads(self.k_proj(x)), self.heads(self.v_proj(x))

    def forward(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Queries from x against k/v; `weights`: also return the softmax (the word times read it), else the
        fused kernel runs. The query is scaled before the product, as Whisper's own code does."""
        q = self.heads(self.q_proj(x) * self.scale)
        w = None
        if weights:
            w = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
            y = w @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1.0)
        return self.out_proj(y.transpose(1, 2).reshape(x.shape)), w


class Block(nn.Module):
    """Pre-norm: self-attention, cross-attention (decoder only), MLP."""

    def __init__(self, d: int, n_head: int, ffn: int, cross: bool) -> None:
        super().__init__()
        self.self_attn, self.self_attn_layer_norm = Attention(d, n_head), nn.LayerNorm(d)
        if cross:
            self.encoder_attn, self.encoder_attn_layer_norm = Attention(d, n_head), nn.LayerNorm(d)
        self.fc1, self.fc2, self.final_layer_norm = nn.Linear(d, ffn), nn.Linear(ffn, d), nn.LayerNorm(d)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x))))


class Encoder(nn.Module):
    def __init__(self, c: WhisperConfig) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(c.n_mels, c.d_model, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(c.d_model, c.d_model, kernel_size=3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(c.n_audio_ctx, c.d_model)
        self.layers = nn.ModuleList(Block(c.d_model, c.encoder_heads, c.encoder_ffn, False)
                                    for _ in range(c.encoder_layers))
        self.layer_norm = nn.LayerNorm(c.d_model)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:  # [B, n_mels, 3000] -> [B, 1500, d]
        x = F.gelu(self.conv2(F.gelu(self.conv1(mel)))).transpose(1, 2)
        x = x + self.embed_positions.weight
        for layer in self.layers:
            h = layer.self_attn_layer_norm(x)
            x = x + layer.self_attn(h, *layer.self_attn.kv(h))[0]
            x = layer.mlp(x)
        return self.layer_norm(x)


class Decoder(nn.Module):
    def __init__(self, c: WhisperConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(c.n_vocab, c.d_model)
        self.embed_positions = nn.Embedding(c.n_text_ctx, c.d_model)
        self.layers = nn.ModuleList(Block(c.d_model, c.decoder_heads, c.decoder_ffn, True)
                                    for _ in range(c.decoder_layers))
        self.layer_norm = nn.LayerNorm(c.d_model)
        self.embed_scale = math.sqrt(c.d_model) if c.scale_embedding else 1.0

    def forward(self, tokens: torch.Tensor, cache: list[list[torch.Tensor]], cross: list[tuple[torch.Tensor, ...]],
                keep: dict[int, list[int]]) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
        """tokens [B, T] after the `cache`d positions -> logits [B, T, vocab] and, for each layer in `keep`,
        its cross-attention weights [B, H, T, 1500] of the heads listed. `cache` (self-attention k/v per
        layer) grows in place; `cross` holds each layer's encoder k/v."""
        start = cache[0][0].shape[2] if cache[0] else 0
        x = self.embed_tokens(tokens) * self.embed_scale + self.embed_positions.weight[start:start + tokens.shape[1]]
        kept = {}
        for i, layer in enumerate(self.layers):
            h = layer.self_attn_layer_norm(x)
            k, v = layer.self_attn.kv(h)
            if cache[i]:
                k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
            cache[i][:] = [k, v]
            x = x + layer.self_attn(h, k, v, causal=start == 0 and tokens.shape[1] > 1)[0]
            y, w = layer.encoder_attn(layer.encoder_attn_layer_norm(x), *cross[i], weights=i in keep)
            if w is not None:
                kept[i] = w[:, keep[i]]
            x = layer.mlp(x + y)
        return self.layer_norm(x) @ self.embed_tokens.weight.T, kept


class WhisperModel(nn.Module):
    def __init__(self, c: WhisperConfig) -> None:
        super().__init__()
        self.encoder, self.decoder = Encoder(c), Decoder(c)


class Whisper(nn.Module):
    """`model.encoder` / `model.decoder` as in transformers; the output projection is the token embedding."""

    def __init__(self, c: WhisperConfig) -> None:
        super().__init__()
        self.config = c
        self.model = WhisperModel(c)

    @torch.inference_mode()
    def encode(self, mel: torch.Tensor) -> torch.Tensor:
        """mel [B, n_mels, 3000] -> the encoder's output [B, 1500, d], read by every decoder step."""
        return self.model.encoder(mel.to(self.model.encoder.conv1.weight.dtype))

    @torch.inference_mode()
    def generate(self, audio: torch.Tensor, prompt: torch.Tensor, d: Decoding,
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy decoding: encoded audio [B, 1500, d], prompt [B, P] -> tokens [B, L] (prompt included,
        ended rows padded with `pad`) and the alignment heads' cross-attention [B, heads, L - P - 1, 1500]:
        one row per generated token but the last, as transformers keeps them (none is computed for it)."""
        dec = self.model.decoder
        cross = [layer.encoder_attn.kv(audio) for layer in dec.layers]
        keep: dict[int, list[int]] = {}
        for layer, head in d.alignment_heads:
            keep.setdefault(layer, []).append(head)
        order = [(layer, keep[layer].index(head)) for layer, head in d.alignment_heads]
        cache: list[list[torch.Tensor]] = [[] for _ in dec.layers]
        tokens, rows = prompt, []
        limit = d.length_limit(prompt.shape[1], self.config.n_text_ctx)
        done = torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
        step_in = prompt
        while tokens.shape[1] < limit:
            logits, kept = dec(step_in, cache, cross, keep)
            if tokens.shape[1] > prompt.shape[1]:  # the prompt's own rows are not aligned
                rows.append(torch.stack([kept[layer][:, h] for layer, h in order], 1).float())
            scores = logits[:, -1].float()
            scores[:, list(d.suppress)] = -math.inf
            if tokens.shape[1] == prompt.shape[1]:
                scores[:, list(d.suppress_at_begin)] = -math.inf
            nxt = torch.where(done, d.pad, scores.argmax(-1))
            tokens = torch.cat([tokens, nxt[:, None]], 1)
            done |= nxt == d.eos
            if bool(done.all()):
                break
            step_in = nxt[:, None]
        weights = torch.cat(rows, 2) if rows else audio.new_zeros(audio.shape[0], len(order), 0, audio.shape[1]).float()
        return tokens, weights

    @torch.inference_mode()
    def detect_language(self, audio: torch.Tensor, d: Decoding) -> list[int]:
        """The most likely language token per clip (encoded audio), from one decoder step on
        <|startoftranscript|>."""
        dec = self.model.decoder
        cross = [layer.encoder_attn.kv(audio) for layer in dec.layers]
        start = torch.full((audio.shape[0], 1), d.start, dtype=torch.long, device=audio.device)
        logits = dec(start, [[] for _ in dec.layers], cross, {})[0][:, -1].float()
        ids = torch.tensor(sorted(d.languages.values()), device=audio.device)
        return ids[logits[:, ids].argmax(-1)].tolist()


@dataclass(frozen=True)
class Decoding:
    """What generation_config.json says about decoding (the fields transformers reads for our case)."""

    start: int
    eos: int
    pad: int
    no_timestamps: int | None
    languages: dict[str, int]  # "<|en|>" -> id
    tasks: dict[str, int]
    suppress: tuple[int, ...]
    suppress_at_begin: tuple[int, ...]
    max_new_tokens: int | None
    max_length: int | None
    alignment_heads: tuple[tuple[int, int], ...]
    multilingual: bool

    @classmethod
    def from_hub(cls, gen: dict[str, Any]) -> Decoding:
        eos = gen["eos_token_id"]
        eos = eos[0] if isinstance(eos, list) else eos
        return cls(gen["decoder_start_token_id"], eos, gen.get("pad_token_id", eos), gen.get("no_timestamps_token_id"),
                   dict(gen.get("lang_to_id") or {}), dict(gen.get("task_to_id") or {}),
                   tuple(gen.get("suppress_tokens") or ()), tuple(gen.get("begin_suppress_tokens") or ()),
                   gen.get("max_new_tokens"), gen.get("max_length", 20),
                   tuple((int(a), int(b)) for a, b in gen.get("alignment_heads") or ()),
                   bool(gen.get("is_multilingual", bool(gen.get("lang_to_id")))))

    def length_limit(self, n_prompt: int, n_text_ctx: int) -> int:
        """The longest sequence, prompt included (transformers' rule: max_new_tokens wins over max_length,
        which counts from the prompt's start; never past the decoder's positions)."""
        if self.max_new_tokens is not None:
            return min(n_prompt + self.max_new_tokens, n_text_ctx)
        return min((self.max_length or 20) + min(n_text_ctx // 2 - 1, n_prompt), n_text_ctx)

    def language_id(self, language: str) -> int:
        token = language if language.startswith("<|") else f"<|{language.lower()}|>"
        if token not in self.languages:
            known = ", ".join(t.strip("<|>") for t in self.languages)
            raise ValueError(f"language {language!r} is not one this Whisper knows ({known})")
        return self.languages[token]

    def prompt(self, language_ids: list[int | None]) -> list[list[int]]:
        """One prompt per clip: <|startoftranscript|> [<|lang|> <|transcribe|>] <|notimestamps|>."""
        out = []
        for lang in language_ids:
            p = [self.start]
            if self.multilingual and lang is not None:
                p.append(lang)
                if "transcribe" in self.tasks:
                    p.append(self.tasks["transcribe"])
            if self.no_timestamps is not None:
                p.append(self.no_timestamps)
            out.append(p)
        return out


class LogMel:
    """Whisper's features: each clip zero-padded to 30 s, 25 ms Hann frames every 10 ms, Slaney mel filters,
    log10 floored at 8 below the clip's peak, scaled as (x + 4) / 4; also each clip's length in frames."""

    def __init__(self, n_mels: int, *, n_fft: int = 400, hop: int = 160, sample_rate: int = 16_000,
                 n_samples: int = 480_000) -> None:
        self.n_fft, self.hop, self.n_samples = n_fft, hop, n_samples
        self.window = torch.hann_window(n_fft, device="cpu")
        self.filters = slaney_filters(n_fft // 2 + 1, n_mels, sample_rate).T.contiguous()  # [n_mels, freqs]

    def __call__(self, clips: list[np.ndarray]) -> tuple[torch.Tensor, list[int]]:
        wav = torch.zeros(len(clips), self.n_samples)
        frames = []
        for i, clip in enumerate(clips):
            n = min(len(clip), self.n_samples)
            wav[i, :n] = torch.from_numpy(np.asarray(clip[:n], np.float32))
            frames.append(max(1, -(-n // self.hop)))
        spec = torch.stft(wav, self.n_fft, self.hop, window=self.window, return_complex=True)
        power = (spec[..., :-1].abs() ** 2).contiguous()
        log = torch.clamp(self.filters @ power, min=1e-10).log10()
        log = torch.maximum(log, log.amax(dim=(1, 2), keepdim=True) - 8.0)
        return (log + 4.0) / 4.0, frames


def slaney_filters(n_freqs: int, n_mels: int, sample_rate: int) -> torch.Tensor:
    """Slaney-scale mel filters [n_freqs, n_mels], area-normalised (librosa's default, Whisper's)."""
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, math.log(6.4) / 27.0

    def to_mel(f: float) -> float:
        return f / f_sp if f < min_log_hz else min_log_hz / f_sp + math.log(f / min_log_hz) / logstep

    mels = torch.linspace(to_mel(0.0), to_mel(sample_rate / 2), n_mels + 2, dtype=torch.float64)
    hz = torch.where(mels < min_log_hz / f_sp, mels * f_sp,
                     min_log_hz * torch.exp(logstep * (mels - min_log_hz / f_sp)))
    freqs = torch.linspace(0, sample_rate // 2, n_freqs, dtype=torch.float64)
    fb = triangular_filters(freqs, hz) * (2.0 / (hz[2:] - hz[:-2]))
    return fb.float()
