"""Style on the host side: which part of a reference recording MuQ-MuLan hears, the embedding cache,
named styles and the negative style. The network itself runs in the device worker (`style` op, or
the tests' in-process `LocalStyleEncoder`); this module never imports torch at import time.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from device_worker.audio import STYLE_RATE, resample
from device_worker.audio import STYLE_WINDOW_S as WINDOW_S

from .audio_files import probe, read_span, to_mono

MIN_STYLE_S = 10.0  # upstream (DiffRhythm get_style_prompt) asserts a reference of at least 10 s
DIM = 512
MULAN_ID = "OpenMuQ/MuQ-MuLan-large"


class StyleError(ValueError):
    """A style request cannot be served; the message says why."""


@dataclass
class StyleWindow:
    samples: np.ndarray  # [n] float32, 24 kHz mono
    start_s: float  # where the window starts in the source
    duration_s: float  # window length in the source
    source_s: float  # whole source length
    notes: list[str] = field(default_factory=list)


def choose_window(source_s: float) -> tuple[float, float, list[str]]:
    """Upstream (DiffRhythm `get_style_prompt`): refuse a reference under 10 s, else start at
    `duration // 2 - 5` s (float floor division, as upstream) and read 10 s."""
    if not source_s >= MIN_STYLE_S:
        raise StyleError(
            f"style reference is {source_s:.2f} s long; MuQ-MuLan's style path needs at least "
            f"{MIN_STYLE_S:.0f} s of music (it hears the central 10 s, as upstream DiffRhythm does)"
        )
    return float(source_s // 2 - WINDOW_S / 2), WINDOW_S, []


def style_window(path: str | Path) -> StyleWindow:
    """The 24 kHz mono samples MuQ-MuLan embeds for a reference file, read as upstream's style path reads
    them (`librosa.load(path, sr=24000, offset=start, duration=10)`, see engine.audio_files): the
    duration from the file's header, the window from `choose_window`, int(10 * rate) frames from frame
    int(start * rate), the channel mean, soxr_hq to 24 kHz with librosa's length (240001 samples for a
    44.1 kHz file, which MuQ-MuLan embeds as two clips and averages). Only that span is decoded."""
    info = probe(path)
    start, length, notes = choose_window(info.duration_s)
    data, rate = read_span(info.path, start, length)
    mono = resample(to_mono(data), rate, STYLE_RATE)
    if not np.any(mono):
        notes.append("the chosen 10 s of the style reference are silent; the style will be vague")
    return StyleWindow(mono, start, length, info.duration_s, notes)


class StyleEncoder(Protocol):
    def embed_text(self, texts: list[str]) -> np.ndarray: ...  # [B, 512]

    def embed_audio(self, wavs: np.ndarray) -> np.ndarray: ...  # [B, n] 24 kHz -> [B, 512]


def check_vector(v: np.ndarray, what: str = "style") -> np.ndarray:
    """A usable style embedding: 512 finite values ([512] or [1, 512]); returned as float32 [512]."""
    v = np.asarray(v)
    if v.shape not in ((DIM,), (1, DIM)):
        raise StyleError(f"{what} must be a {DIM}-d embedding, got shape {v.shape}")
    v = v.reshape(DIM).astype(np.float32)
    if not np.isfinite(v).all() or not np.any(v):
        raise StyleError(f"{what} has non-finite or all-zero values")
    return v


def as_model_input(v: np.ndarray) -> np.ndarray:
    """[1, 512] float32 holding fp16-rounded values: upstream casts style embeddings with `.half()`."""
    return check_vector(v).astype(np.float16).astype(np.float32)[None]


class StyleCache:
    """Embeddings on disk, keyed by sha256(model id, kind, text bytes or the exact samples embedded)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @staticmethod
    def key(model_id: str, kind: str, payload: bytes) -> str:
        h = hashlib.sha256()
        for part in (model_id.encode(), kind.encode(), payload):
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
        return h.hexdigest()

    def get(self, key: str) -> np.ndarray | None:
        path = self.root / f"{key}.npy"
        try:
            return check_vector(np.load(path, allow_pickle=False))
        except (OSError, ValueError):
            return None  # absent or damaged: recompute (and overwrite)

    def put(self, key: str, vector: np.ndarray) -> None:
        _atomic_save(self.root / f"{key}.npy", check_vector(vector))


def _atomic_save(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class StyleResult:
    vector: np.ndarray  # [512] float32 as MuQ-MuLan returned it (unit norm for text / one clip)
    kind: str  # "text" or "audio"
    cached: bool
    notes: list[str] = field(default_factory=list)
    window: StyleWindow | None = None


class StyleService:
    def __init__(self, encoder: StyleEncoder, cache_dir: str | Path, *, model_id: str) -> None:
        self.encoder, self.model_id = encoder, model_id  # the cache keys name the model that embedded
        self.cache = StyleCache(cache_dir)

    def from_text(self, text: str) -> StyleResult:
        text = text.strip()
        if not text:
            raise StyleError("the style prompt is empty")
        key = self.cache.key(self.model_id, "text", text.encode("utf-8"))
        if (hit := self.cache.get(key)) is not None:
            return StyleResult(hit, "text", True)
        vec = check_vector(self.encoder.embed_text([text])[0])
        self.cache.put(key, vec)
        return StyleResult(vec, "text", False)

    def from_audio(self, path: str | Path) -> StyleResult:
        window = style_window(path)
        payload = np.ascontiguousarray(window.samples, dtype="<f4").tobytes()
        key = self.cache.key(self.model_id, "audio", payload)
        if (hit := self.cache.get(key)) is not None:
            return StyleResult(hit, "audio", True, list(window.notes), window)
        vec = check_vector(self.encoder.embed_audio(window.samples[None])[0])
        self.cache.put(key, vec)
        return StyleResult(vec, "audio", False, list(window.notes), window)


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$")


class StyleLibrary:
    """Named styles, one `<name>.npy` (float32 [512]) each."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, name: str) -> Path:
        if not _NAME.match(name) or name.endswith((".", " ")):
            raise StyleError(
                f"style name {name!r} is not allowed: use 1-64 letters, digits, spaces, '_', '-' or '.', "
                "starting with a letter or digit"
            )
        return self.root / f"{name}.npy"

    def save(self, name: str, vector: np.ndarray, *, overwrite: bool = False) -> Path:
        path = self._path(name)
        if path.exists() and not overwrite:
            raise StyleError(f"a style named {name!r} already exists (choose another name or overwrite it)")
        _atomic_save(path, check_vector(vector))
        return path

    def load(self, name: str) -> np.ndarray:
        path = self._path(name)
        if not path.is_file():
            raise StyleError(f"no saved style named {name!r} in {self.root}")
        try:
            data = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise StyleError(f"saved style {name!r} cannot be read ({exc})") from None
        return check_vector(data, f"saved style {name!r}")

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.root.glob("*.npy")) if self.root.is_dir() else []

    def delete(self, name: str) -> None:
        self._path(name).unlink(missing_ok=True)


def load_negative_style(path: str | Path | None = None, *, models_dir: str | Path | None = None) -> np.ndarray:
    """Upstream's `vocal.npy` ([1, 512]) as float32 [512]; by default resolved as the `negative-style`
    model file (missing -> ModelFileMissing naming the fetch command)."""
    if path is None:
        from .modelfiles import resolve_file

        path = resolve_file("negative-style", "vocal.npy", models_dir=models_dir)
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise StyleError(f"negative style {path} cannot be read ({exc}); run `studio models verify`") from None
    return check_vector(data, f"negative style {path}")
