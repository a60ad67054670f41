"""The test model's Whisper: tiny random weights in the Hugging Face hub layout (no download): config.json,
generation_config.json (with alignment_heads, languages, tasks), model.safetensors, a byte-level BPE
tokenizer (vocab.json, merges.txt, the special tokens) and preprocessor_config.json.

`studio serve --model test` gives it to the workers so the lyrics check runs offline end to end, and the
tests load it through the same loader as a real checkpoint (device_worker.transcribe.load_transcriber).
Random weights hear nothing: what it transcribes is arbitrary text, so with it the check's marks say
nothing about the take; only the plumbing is real. Written in a child process (studio.testmodel): it
needs torch and transformers, which the studio process never imports."""

from __future__ import annotations

import json
from pathlib import Path

from device_worker.transcribe import _BYTES

SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|zh|>", "<|translate|>", "<|transcribe|>",
            "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]


def write_tiny_whisper(folder: Path, *, seed: int = 0, max_new_tokens: int = 12, d_model: int = 32, layers: int = 1,
                       heads: int = 2) -> Path:
    """Write the checkpoint into `folder` (created); returns it. `d_model`/`layers`/`heads` other than the
    defaults give a random model of a real one's shape (bench/lyrics_check.py: whisper-small is 768/12/12)."""
    import torch
    from transformers import (
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperTokenizer,
    )

    folder.mkdir(parents=True, exist_ok=True)
    byte_chars = sorted(_BYTES, key=lambda c: _BYTES[c])
    vocab = {c: i for i, c in enumerate(byte_chars)}
    # a few merges so words are more than one token, as in the real tokenizer
    merges = ["Ġ t", "h e", "Ġt he"]
    for m in merges:
        vocab["".join(m.split())] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    ids = {tok: len(vocab) + k for k, tok in enumerate(SPECIALS)}
    n_vocab = len(vocab) + len(SPECIALS) + 1  # + one timestamp token <|0.00|>
    tok = WhisperTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), unk_token="<|endoftext|>",
                           bos_token="<|endoftext|>", eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    tok.add_special_tokens({"additional_special_tokens": SPECIALS[1:] + ["<|0.00|>"]})
    assert tok.convert_tokens_to_ids("<|notimestamps|>") == ids["<|notimestamps|>"], "special token ids moved"
    tok.save_pretrained(str(folder))
    WhisperFeatureExtractor(feature_size=80).save_pretrained(str(folder))

    cfg = WhisperConfig(vocab_size=n_vocab, num_mel_bins=80, d_model=d_model, encoder_layers=layers,
                        decoder_layers=layers, encoder_attention_heads=heads, decoder_attention_heads=heads,
                        encoder_ffn_dim=2 * d_model if d_model == 32 else 4 * d_model,
                        decoder_ffn_dim=2 * d_model if d_model == 32 else 4 * d_model,
                        max_source_positions=1500, max_target_positions=max(64, max_new_tokens + 8), pad_token_id=ids["<|endoftext|>"],
                        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|endoftext|>"],
                        decoder_start_token_id=ids["<|startoftranscript|>"])
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(cfg)
    gen = model.generation_config
    gen.decoder_start_token_id = ids["<|startoftranscript|>"]
    gen.eos_token_id = gen.pad_token_id = ids["<|endoftext|>"]
    gen.no_timestamps_token_id = ids["<|notimestamps|>"]
    gen.lang_to_id = {"<|en|>": ids["<|en|>"], "<|zh|>": ids["<|zh|>"]}
    gen.task_to_id = {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]}
    gen.is_multilingual = True
    gen.alignment_heads = [[0, 0], [0, 1]]
    gen.max_length = None
    gen.max_new_tokens = max_new_tokens
    gen._from_model_config = False  # a hub file, not one derived from config.json (else it is ignored on load)
    gen.suppress_tokens = []
    gen.begin_suppress_tokens = [ids["<|endoftext|>"]]
    model.save_pretrained(str(folder), safe_serialization=True)
    return folder
