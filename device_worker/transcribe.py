"""Whisper in the worker: what words a take sings, with times (the lyrics check, issue 30).

`load_transcriber(path)` reads a Whisper checkpoint in the Hugging Face hub layout (config.json,
generation_config.json with `alignment_heads`, model.safetensors, tokenizer.json or vocab.json,
preprocessor_config.json) into the plain-torch port (device_worker.model.whisper). It is loaded on the
first TRANSCRIBE call and kept resident, like the style model.

Word times are transformers' `return_token_timestamps=True` (Whisper's own word timestamps): the
cross-attention of the heads named in `alignment_heads`, cut to each clip's audio, normalised per frame,
median-filtered, averaged over the heads, and aligned to the tokens by dynamic time warping. Long takes are
not cut blindly at 30 s: the caller sends the windows to hear (the engine groups whole lyric lines into
windows of at most 30 s), so no word is split at a window edge. No engine or studio import: this runs in
the card's own Python.
"""

from __future__ import annotations

import logging
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
    """A Whisper model on one device; `transcribe` is safe to call from one thread."""

    def __init__(self, model: Any, decoding: Any, frontend: Any, tokens: dict[int, bytes], model_id: str,
                 device: str) -> None:
        self.model, self.decoding, self.frontend = model, decoding, frontend
        self.tokens, self.model_id, self.device = tokens, model_id, device

    def transcribe(self, audio: np.ndarray, windows: Sequence[tuple[float, float]] | None = None,
                   language: str | None = None) -> list[Word]:
        """16 kHz mono float32 [n] -> words with times in the audio. `windows` ([start_s, end_s], each at
        most 30 s) say what to hear; None: consecutive 30 s windows over the whole audio. `language`
        ("en", "zh", ...): None detects it per window."""
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
        lang = self.decoding.language_id(language) if language else None
        words: list[Word] = []
        for i in range(0, len(spans), BATCH):
            batch = spans[i:i + BATCH]
            mel, frames = self.frontend([audio[int(a * SAMPLE_RATE):int(b * SAMPLE_RATE)] for a, b in batch])
            encoded = self.model.encode(mel.to(self.device))  # once, for the language and the words
            langs = [lang] * len(batch) if lang is not None or not self.decoding.languages \
                else self.model.detect_language(encoded, self.decoding)
            prompt = torch.tensor(self.decoding.prompt(langs), device=encoded.device)
            seqs, weights = self.model.generate(encoded, prompt, self.decoding)
            stamps = token_times(weights.cpu(), frames, prompt.shape[1], self.model.config.median_filter_width)
            for (a, b), seq, ts in zip(batch, seqs.cpu().tolist(), stamps, strict=True):
                words += [w for w in self._words(seq, ts, a) if w.start < b + 0.5]
        return words

    def _words(self, seq: list[int], ts: np.ndarray, offset: float) -> list[Word]:
        """A token's time runs from the previous token's DTW time to its own (as the times were read with
        transformers); special and timestamp tokens carry no text."""
        pieces = []
        for k, t in enumerate(seq):
            raw = self.tokens.get(int(t))
            if raw is None:
                continue
            start = float(ts[k - 1]) if k > 0 and k - 1 < len(ts) else float(ts[k])
            end = float(ts[k]) if k < len(ts) else start
            pieces.append((raw, offset + start, offset + max(end, start)))
        return group_words(pieces)


def token_times(weights: Any, frames: Sequence[int], n_prompt: int, filter_width: int,
                precision: float = 0.02) -> np.ndarray:
    """Alignment heads' cross-attention [B, heads, rows, positions] -> a time (s) per sequence position
    [B, n_prompt + rows + 1]: 0 for the prompt, each generated token's start by DTW, the last repeated.
    Each clip is cut to its own audio (`frames` // 2 encoder positions), normalised over the tokens,
    median-filtered over time and averaged over the heads first."""
    import torch

    batch, _, rows, _ = weights.shape
    out = np.zeros((batch, n_prompt + rows + 1), np.float32)
    if rows == 0:
        return out
    for b in range(batch):
        m = weights[b, :, :, :max(1, frames[b] // 2)]
        std, mean = torch.std_mean(m, dim=-2, keepdim=True, unbiased=False)
        m = _median_filter((m - mean) / std, filter_width).mean(0)
        text, time = dtw(-m.double().numpy())
        first = np.concatenate([[True], np.diff(text) != 0])
        jumps = time[first] * precision
        out[b, n_prompt:] = np.concatenate([jumps, jumps[-1:]])
    return out


def _median_filter(x: Any, width: int) -> Any:
    """Median over the last axis in a window of odd `width`, edges reflected (left as is when too short)."""
    import torch

    pad = width // 2
    if x.shape[-1] <= pad:
        return x
    x = torch.nn.functional.pad(x, (pad, pad, 0, 0), mode="reflect")
    return x.unfold(-1, width, 1).sort()[0][..., pad]


def dtw(cost_in: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cheapest monotonic path through cost_in [text, time] from (0, 0) to the far corner: (text index,
    time index) per path cell. Costs add up in float32 and a tie goes to the step along time, then to
    the step along text (as Whisper's and transformers' loops do); cells on one anti-diagonal only depend
    on the two before it, so each diagonal is one vector step instead of a Python loop per cell."""
    n, m = cost_in.shape
    cost = np.full((n + 1, m + 1), np.inf, np.float32)
    trace = np.full((n + 1, m + 1), -1, np.int8)
    cost[0, 0] = 0
    for d in range(2, n + m + 1):
        i = np.arange(max(1, d - m), min(n, d - 1) + 1)
        j = d - i
        c0, c1, c2 = cost[i - 1, j - 1], cost[i - 1, j], cost[i, j - 1]
        t = np.where((c0 < c1) & (c0 < c2), 0, np.where((c1 < c0) & (c1 < c2), 1, 2))
        c = np.choose(t, [c0, c1, c2])
        cost[i, j] = (cost_in[i - 1, j - 1] + c.astype(np.float64)).astype(np.float32)
        trace[i, j] = t
    trace[0, :], trace[:, 0] = 2, 1
    i, j, text, time = n, m, [], []
    while i > 0 or j > 0:
        text.append(i - 1)
        time.append(j - 1)
        step = trace[i, j]
        i, j = (i - 1, j - 1) if step == 0 else (i - 1, j) if step == 1 else (i, j - 1)
    return np.array(text[::-1]), np.array(time[::-1])


def _read_tokens(folder: Path, timestamp_begin: int | None) -> dict[int, bytes]:
    """id -> the bytes it spells, for every token that carries text (special and timestamp tokens left out):
    tokenizer.json's BPE vocabulary and added tokens, or the older vocab.json + added_tokens.json."""
    import json

    special: set[int] = set()
    if (folder / "tokenizer.json").is_file():
        data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        vocab = dict(data["model"]["vocab"])
        for t in data.get("added_tokens", []):
            vocab[t["content"]] = t["id"]
            if t.get("special"):
                special.add(t["id"])
    elif (folder / "vocab.json").is_file():
        vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        added = folder / "added_tokens.json"
        extra = json.loads(added.read_text(encoding="utf-8")) if added.is_file() else {}
        vocab.update(extra)
        special = {i for t, i in extra.items() if t.startswith("<|")}
    else:
        raise FileNotFoundError(f"{folder.name}: no tokenizer.json or vocab.json")
    return {int(i): bytes(_BYTES[c] for c in tok if c in _BYTES) for tok, i in vocab.items()
            if int(i) not in special and (timestamp_begin is None or int(i) < timestamp_begin)}


def load_transcriber(path: str | Path, *, device: str = "cpu", dtype: Any = None) -> Transcriber:
    """A Whisper checkpoint folder (hub layout) -> Transcriber (float32 unless `dtype` says otherwise)."""
    import json

    import torch
    from safetensors.torch import load_file

    from device_worker.model.checkpoints import CheckpointError, check_keys, empty_modules
    from device_worker.model.whisper import Decoding, LogMel, Whisper, WhisperConfig

    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder.name}: not a Whisper checkpoint folder (no config.json)")
    gen_file = folder / "generation_config.json"
    gen = json.loads(gen_file.read_text()) if gen_file.is_file() else {}
    if not gen.get("alignment_heads"):
        raise ValueError(f"{folder.name}: generation_config.json has no alignment_heads; word times need them")
    config = WhisperConfig.from_hub(json.loads((folder / "config.json").read_text()))
    decoding = Decoding.from_hub(gen)
    pre_file = folder / "preprocessor_config.json"
    pre = json.loads(pre_file.read_text()) if pre_file.is_file() else {}
    frontend = LogMel(int(pre.get("feature_size", config.n_mels)), n_fft=int(pre.get("n_fft", 400)),
                      hop=int(pre.get("hop_length", 160)), n_samples=int(pre.get("n_samples", 480_000)))
    if not (folder / "model.safetensors").is_file():
        raise FileNotFoundError(f"{folder.name}: no model.safetensors")
    state = load_file(str(folder / "model.safetensors"))
    state.pop("proj_out.weight", None)  # tied to the token embedding
    with empty_modules():
        model = Whisper(config)
    check_keys({k: v.shape for k, v in model.state_dict().items()}, {k: v.shape for k, v in state.items()},
               f"{folder.name}/model.safetensors")
    model.load_state_dict(state, strict=True, assign=True)
    if any(layer >= config.decoder_layers or head >= config.decoder_heads for layer, head in decoding.alignment_heads):
        raise CheckpointError(f"{folder.name}: alignment_heads name a layer or head the decoder does not have")
    model.to(device, dtype or torch.float32).eval()
    ts_begin = decoding.no_timestamps + 1 if decoding.no_timestamps is not None else None
    return Transcriber(model, decoding, frontend, _read_tokens(folder, ts_begin), folder.name, device)

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
