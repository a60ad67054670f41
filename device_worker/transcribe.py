"""Whisper in the worker: what words a take sings, with times (the lyrics check, issue 30).

`load_transcriber(path)` reads a Whisper checkpoint in the Hugging Face hub layout (config.json,
generation_config.json with `alignment_heads`, model.safetensors, the tokenizer files,
preprocessor_config.json) through `transformers`, which is already a dependency of the worker. It is
loaded on the first TRANSCRIBE call and kept resident, like the style model.

Word times come from the cross-attention alignment that transformers computes for
`return_token_timestamps=True` (dynamic time warping over the heads named in `alignment_heads`, as
Whisper's own word timestamps). Long takes are not cut blindly at 30 s: the caller sends the windows
to hear (the engine groups whole lyric lines into windows of at most 30 s), so no word is split at a
window edge. No engine or studio import: this runs in the card's own Python.
"""

from __future__ import annotations

import logging
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

SAMPLE_RATE = 16_000  # Whisper hears 16 kHz mono
WINDOW_S = 30.0  # Whisper's input span
BATCH = 8  # windows per generate call: bounds the memory of a 285 s take


@dataclass(frozen=True)
class Word:
    text: str
    start: float  # seconds in the audio sent
    end: float


def _byte_decoder() -> dict[str, int]:
    """Byte-level BPE's printable stand-ins for bytes, inverted (the GPT-2 table Whisper's tokenizer uses)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = keep[:]
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(keep, chars, strict=True)}


_BYTES = _byte_decoder()


def _is_cjk(ch: str) -> bool:
    return "CJK" in unicodedata.name(ch, "")


def group_words(pieces: Sequence[tuple[bytes, float, float]]) -> list[Word]:
    """Token byte pieces with times -> words: a piece starting with a space starts a word; Chinese
    characters are words of their own (the word's time shared evenly among them); punctuation is dropped.
    Bytes are joined before decoding, so a character split over two tokens is read whole."""
    words: list[Word] = []
    buf, t0, t1 = b"", 0.0, 0.0

    def flush() -> None:
        text = buf.decode("utf-8", errors="ignore").strip()
        text = "".join(ch for ch in text if not unicodedata.category(ch).startswith(("P", "S")) or ch in "'%$")
        if not text:
            return
        runs: list[str] = []
        for ch in text:
            if _is_cjk(ch) or not runs or _is_cjk(runs[-1][-1]):
                runs.append(ch)
            else:
                runs[-1] += ch
        step = (t1 - t0) / len(runs)
        for k, run in enumerate(runs):
            words.append(Word(run, round(t0 + k * step, 3), round(t0 + (k + 1) * step, 3)))

    for raw, start, end in pieces:
        if raw[:1] == b" " and buf:
            flush()
            buf = b""
        if not buf:
            t0 = start
        buf += raw
        t1 = end
    if buf:
        flush()
    return words


class Transcriber:
    """A Whisper model and its processor on one device; `transcribe` is safe to call from one thread."""

    def __init__(self, model: Any, processor: Any, model_id: str, device: str) -> None:
        self.model, self.processor, self.model_id, self.device = model, processor, model_id, device
        tok = processor.tokenizer
        self._special = set(tok.all_special_ids)
        gen = model.generation_config
        self._timestamp_begin = int(getattr(gen, "no_timestamps_token_id", -1)) + 1 or None

    def transcribe(self, audio: np.ndarray, windows: Sequence[tuple[float, float]] | None = None,
                   language: str | None = None) -> list[Word]:
        """16 kHz mono float32 [n] -> words with times in the audio. `windows` ([start_s, end_s], each at
        most 30 s) say what to hear; None: consecutive 30 s windows over the whole audio."""
        import torch

        total = len(audio) / SAMPLE_RATE
        if windows is None:
            windows = [(s, min(s + WINDOW_S, total)) for s in np.arange(0.0, max(total, 1e-3), WINDOW_S)]
        spans = []
        for a, b in windows:
            a, b = max(float(a), 0.0), min(float(b), total)
            if b - a > WINDOW_S + 1e-6:
                raise ValueError(f"a window is at most {WINDOW_S:g} s, got [{a:.2f}, {b:.2f}]")
            if b > a:
                spans.append((a, b))
        words: list[Word] = []
        for i in range(0, len(spans), BATCH):
            batch = spans[i:i + BATCH]
            clips = [audio[int(a * SAMPLE_RATE):int(b * SAMPLE_RATE)] for a, b in batch]
            feats = self.processor.feature_extractor(clips, sampling_rate=SAMPLE_RATE, return_tensors="pt",
                                                     return_attention_mask=True)
            features = feats.input_features.to(self.device, self.model.dtype)
            # the mask tells the alignment where each clip's audio ends, so short windows get true times
            kwargs: dict[str, Any] = {"task": "transcribe", "attention_mask": feats.attention_mask.to(self.device)}
            if language:
                kwargs["language"] = language
            with torch.inference_mode():
                out = self.model.generate(features, return_token_timestamps=True, return_dict_in_generate=True,
                                          **kwargs)
            seqs = out["sequences"].cpu().tolist()
            stamps = out["token_timestamps"].float().cpu().numpy()
            for (a, b), seq, ts in zip(batch, seqs, stamps, strict=True):
                words += [w for w in self._words(seq, ts, a) if w.start < b + 0.5]
        return words

    def _words(self, seq: list[int], ts: np.ndarray, offset: float) -> list[Word]:
        tok = self.processor.tokenizer
        pieces = []
        for k, t in enumerate(seq):
            if t in self._special or (self._timestamp_begin and t >= self._timestamp_begin):
                continue
            token = tok.convert_ids_to_tokens(int(t))
            if token is None:
                continue
            raw = bytes(_BYTES[c] for c in token if c in _BYTES)
            start = float(ts[k - 1]) if k > 0 and k - 1 < len(ts) else float(ts[k])
            end = float(ts[k]) if k < len(ts) else start
            pieces.append((raw, offset + start, offset + max(end, start)))
        return group_words(pieces)


_lock = threading.Lock()


def load_transcriber(path: str | Path, *, device: str = "cpu", dtype: Any = None) -> Transcriber:
    """A Whisper checkpoint folder (hub layout) -> Transcriber. Eager attention: the word times need
    the cross-attention weights, which fused kernels do not return."""
    import torch
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder.name}: not a Whisper checkpoint folder (no config.json)")
    with _lock:  # transformers' lazy module imports are not thread-safe on first use
        model = WhisperForConditionalGeneration.from_pretrained(
            str(folder), attn_implementation="eager", dtype=dtype or torch.float32)
        processor = WhisperProcessor.from_pretrained(str(folder))
    if not getattr(model.generation_config, "alignment_heads", None):
        raise ValueError(f"{folder.name}: generation_config.json has no alignment_heads; word times need them")
    model.to(device).eval()
    return Transcriber(model, processor, folder.name, device)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m device_worker.transcribe FOLDER AUDIO.npy WINDOWS.json [LANGUAGE] [DEVICE]`: the words
    heard, as JSON on stdout. `studio lyrics heard` runs it in a child process, so the command never loads
    the DiT and the studio process never imports torch."""
    import json
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3:
        print(main.__doc__, file=sys.stderr)
        return 2
    folder, audio_path, windows_path = args[:3]
    language = args[3] if len(args) > 3 else ""
    device = args[4] if len(args) > 4 else "cpu"
    t = load_transcriber(folder, device=device)
    audio = np.load(audio_path).astype(np.float32)
    windows = json.loads(Path(windows_path).read_text()) or None
    words = t.transcribe(audio, windows, language or None)
    print(json.dumps({"model": t.model_id, "words": [[w.text, w.start, w.end] for w in words]}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
