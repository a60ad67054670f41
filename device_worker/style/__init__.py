"""MuQ-MuLan style encoder, written on plain torch, its tokenizer on the `tokenizers` library (the `muq`
package cannot be installed beside our CPU torch and transformers 5; see docs/models.md).

`load_style_model(mulan_dir, muq_config=..., text_dir=...) -> StyleModel` with
`.embed_text(list[str]) -> [B, 512]` and `.embed_audio(wav_24k_mono [B, n]) -> [B, 512]`, both float32.

| module | role |
|---|---|
| `__init__` | `StyleModel` and `load_style_model`: the two towers behind two calls |
| `load` | the released files read strictly into the port (companion configs, the XLM-R folder) |
| `mel` | MuQ's mel front end (torchaudio's MelSpectrogram, reproduced) |
| `muq` | the audio tower: conv subsampling + wav2vec2-conformer |
| `mulan` | the joint-embedding towers (audio and text) |
| `roberta` | the text tower's XLM-RoBERTa encoder and its tokenizer |
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from device_worker.model.checkpoints import empty_modules

from .load import (
    build_mulan,
    check_buffers,
    companion_paths,
    load_weights,
    read_json,
    read_state_dict,
    weights_file,
)
from .mulan import MuLan, MuLanConfig
from .muq import MuQConfig
from .roberta import Tokenizer

__all__ = ["StyleModel", "load_style_model", "MuLanConfig", "MuQConfig"]

MAX_TEXT_TOKENS = 512  # XLM-R position table; muq would crash past it, we truncate


@dataclass
class StyleModel:
    mulan: MuLan
    tokenizer: Tokenizer
    config: MuLanConfig
    device: torch.device

    @property
    def clip_samples(self) -> int:
        return int(self.config.sr * self.config.clip_secs)

    def clips(self, wav: torch.Tensor) -> torch.Tensor:
        """muq `_get_all_clips`: consecutive 10 s clips; a shorter tail is topped up with audio from
        the start (so a 4 s input becomes one 8 s clip, a 14 s input two 10 s clips). wav: [n]."""
        n, delta = wav.shape[0], self.clip_samples
        starts = list(range(0, n - delta + 1, delta))
        out = [wav[s : s + delta] for s in starts]
        done = len(starts) * delta
        if done < n:
            out.append(torch.cat([wav[done:], wav[: delta - (n - done)]]))
        return out

    @torch.inference_mode()
    def embed_audio(self, wavs: torch.Tensor) -> torch.Tensor:
        """wavs [B, n] float, 24 kHz mono -> [B, 512]: mean of the per-clip unit-norm embeddings."""
        if wavs.ndim != 2 or wavs.shape[1] == 0:
            raise ValueError(f"expected audio [B, n] with n > 0, got {tuple(wavs.shape)}")
        result = []
        for wav in wavs.float():
            lat = [self.mulan.audio_latents(c.to(self.device)[None]) for c in self.clips(wav)]  # each [1, 512]
            result.append(torch.cat(lat).mean(dim=0))
        return torch.stack(result).float().cpu()

    @torch.inference_mode()
    def embed_text(self, texts: list[str]) -> torch.Tensor:
        """texts -> [B, 512] unit-norm. One text per forward, as DiffRhythm calls it (muq's batched
        path averages over pad tokens, so a batch would change shorter texts' embeddings)."""
        if isinstance(texts, str):
            texts = [texts]
        out = []
        for text in texts:
            if not text.strip():
                raise ValueError("empty style text")
            ids, mask = self.tokenizer(text)
            out.append(self.mulan.text_latents(ids.to(self.device), mask.to(self.device)))
        return torch.cat(out).float().cpu()


def load_style_model(
    path: str | Path, *, muq_config: str | Path | None = None, text_dir: str | Path | None = None,
    device: str = "cpu",
) -> StyleModel:
    """`path`: the MuQ-MuLan-large folder. `muq_config`: MuQ-large-msd-iter's config.json; `text_dir`:
    the xlm-roberta-base folder (config.json + tokenizer.json). Either, when omitted, is found as
    `path/muq/config.json` / `path/text`, or beside `path` in a `<dir>/<org>/<repo>` tree or the Hugging
    Face cache (the repos MuQ-MuLan's config names)."""
    path = Path(path)
    cfg = MuLanConfig.from_json(read_json(path / "config.json"))
    if muq_config is None or text_dir is None:
        found_muq, found_text = companion_paths(path, cfg)
        muq_config, text_dir = muq_config or found_muq, text_dir or found_text
    muq_config, text_dir = Path(muq_config), Path(text_dir)
    muq_cfg = MuQConfig.from_json(read_json(muq_config))
    if cfg.audio_model_dim != muq_cfg.encoder_dim:
        raise ValueError(f"MuLan expects a {cfg.audio_model_dim}-d audio model, MuQ config gives {muq_cfg.encoder_dim}")
    sd = read_state_dict(weights_file(path))
    with empty_modules():  # every tensor comes from the checkpoint
        mulan = build_mulan(cfg, muq_cfg, text_dir)
    load_weights(mulan, sd)
    check_buffers(mulan)
    mulan.eval().to(device)
    tokenizer = Tokenizer(text_dir / "tokenizer.json", max_length=MAX_TEXT_TOKENS)
    return StyleModel(mulan=mulan, tokenizer=tokenizer, config=cfg, device=torch.device(device))
