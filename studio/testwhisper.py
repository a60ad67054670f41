"""The test model's Whisper: tiny random weights in the Hugging Face hub layout (no download): config.json,
generation_config.json (with alignment_heads, languages, tasks), model.safetensors, a byte-level BPE
tokenizer (tokenizer.json, vocab.json, merges.txt, tokenizer_config.json) and preprocessor_config.json.

`studio serve --model test` gives it to the workers so the lyrics check runs offline end to end, and the
tests load it through the same loader as a real checkpoint (device_worker.transcribe.load_transcriber);
transformers loads these files too (tests/model/test_whisper.py holds the port to it). Random weights
hear nothing: what it transcribes is arbitrary text, so with it the check's marks say nothing about the
take; only the plumbing is real. Written in a child process (studio.testmodel): it needs torch, which
the studio process never imports."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from device_worker.transcribe import _BYTES

if TYPE_CHECKING:
    import torch

SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|zh|>", "<|translate|>", "<|transcribe|>",
            "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]


def write_tiny_whisper(folder: Path, *, seed: int = 0, max_new_tokens: int = 12, d_model: int = 32, layers: int = 1,
                       heads: int = 2) -> Path:
    """Write the checkpoint into `folder` (created); returns it. `d_model`/`layers`/`heads` other than the
    defaults give a random model of a real one's shape (bench/lyrics_check.py: whisper-small is 768/12/12)."""
    import torch
    from safetensors.torch import save_file

    from device_worker.model.whisper import Whisper, WhisperConfig

    folder.mkdir(parents=True, exist_ok=True)
    vocab = _write_tokenizer(folder)
    ids = {tok: len(vocab) + k for k, tok in enumerate(SPECIALS)}
    eos = ids["<|endoftext|>"]
    ffn = 2 * d_model if d_model == 32 else 4 * d_model
    config = {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper",
              "vocab_size": len(vocab) + len(SPECIALS) + 1,  # + one timestamp token <|0.00|>
              "num_mel_bins": 80, "d_model": d_model, "encoder_layers": layers, "decoder_layers": layers,
              "encoder_attention_heads": heads, "decoder_attention_heads": heads, "encoder_ffn_dim": ffn,
              "decoder_ffn_dim": ffn, "max_source_positions": 1500, "max_target_positions": max(64, max_new_tokens + 8),
              "activation_function": "gelu", "scale_embedding": False, "median_filter_width": 7,
              "pad_token_id": eos, "bos_token_id": eos, "eos_token_id": eos,
              "decoder_start_token_id": ids["<|startoftranscript|>"], "tie_word_embeddings": True}
    generation = {"decoder_start_token_id": ids["<|startoftranscript|>"], "bos_token_id": eos, "eos_token_id": eos,
                  "pad_token_id": eos, "no_timestamps_token_id": ids["<|notimestamps|>"],
                  "lang_to_id": {"<|en|>": ids["<|en|>"], "<|zh|>": ids["<|zh|>"]},
                  "task_to_id": {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
                  "is_multilingual": True, "alignment_heads": [[0, 0], [0, 1]], "max_new_tokens": max_new_tokens,
                  "suppress_tokens": [], "begin_suppress_tokens": [eos]}
    preprocessor = {"feature_extractor_type": "WhisperFeatureExtractor", "feature_size": 80, "sampling_rate": 16000,
                    "hop_length": 160, "n_fft": 400, "chunk_length": 30, "n_samples": 480000, "nb_max_frames": 3000,
                    "padding_side": "right", "padding_value": 0.0, "return_attention_mask": False, "dither": 0.0}
    for name, data in (("config.json", config), ("generation_config.json", generation),
                       ("preprocessor_config.json", preprocessor)):
        (folder / name).write_text(json.dumps(data, indent=2))

    torch.manual_seed(seed)
    model = Whisper(WhisperConfig.from_hub(config))
    for name, p in model.named_parameters():  # Whisper's initialisation: N(0, 0.02), zero biases, unit norms
        if "layer_norm" in name:
            torch.nn.init.ones_(p) if name.endswith("weight") else torch.nn.init.zeros_(p)
        elif name.endswith("bias"):
            torch.nn.init.zeros_(p)
        else:
            torch.nn.init.normal_(p, std=0.02)
    with torch.no_grad():
        model.model.encoder.embed_positions.weight.copy_(_sinusoids(1500, d_model))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    return folder


def _write_tokenizer(folder: Path) -> dict[str, int]:
    """Byte-level BPE over the 256 byte characters plus a few merges (so words are more than one token, as
    in the real tokenizer), then the special tokens and one timestamp token; returns the BPE vocabulary."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {c: i for i, c in enumerate(sorted(_BYTES, key=lambda c: _BYTES[c]))}
    merges = ["Ġ t", "h e", "Ġt he"]
    for m in merges:
        vocab["".join(m.split())] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=dict(vocab), merges=[tuple(m.split()) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in [*SPECIALS, "<|0.00|>"]])
    tok.save(str(folder / "tokenizer.json"))
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "WhisperTokenizer", "bos_token": SPECIALS[0], "eos_token": SPECIALS[0],
         "pad_token": SPECIALS[0], "unk_token": SPECIALS[0], "model_max_length": 1024,
         "extra_special_tokens": [*SPECIALS[1:], "<|0.00|>"]}, indent=2))
    return vocab


def _sinusoids(length: int, channels: int) -> torch.Tensor:
    """Whisper's fixed encoder positions: sines then cosines over geometric timescales up to 10000."""
    import torch

    step = math.log(10000) / (channels // 2 - 1)
    inv = torch.exp(-step * torch.arange(channels // 2))
    t = torch.arange(length)[:, None] * inv[None, :]
    return torch.cat([t.sin(), t.cos()], dim=1)
