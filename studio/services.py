"""What the handlers call: the store, the take runner (when an engine is up), settings, model status.

Built once by `studio serve` (or a test) and passed to `build_app`; handlers never build services.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studio.admission import Admission, Limits
from studio.config import PathRefused, StudioConfig
from studio.identity import Identity
from studio.store import Store
from studio.takes import TakeRunner

logger = logging.getLogger(__name__)

AUDIO_SUFFIXES = {".wav", ".flac", ".mp3", ".ogg", ".oga", ".aiff", ".aif", ".webm", ".m4a"}


class UploadRefused(ValueError):
    """An upload the studio will not keep (too big, too long, not audio); the message says which."""


@dataclass
class ModelStatus:
    """Whether songs can be made, and if not, what is missing and the command that fetches it."""

    ready: bool
    label: str = ""  # e.g. "DiffRhythm 1.2 (base + full)" or "TEST MODEL: random weights, noise not music"
    missing: list[str] = field(default_factory=list)
    fetch_command: str = "studio models fetch"
    detail: str = ""
    workers: str = ""  # e.g. "torch:cpu float32" (precision is a worker setting: `serve --precision`)

    loading: str = ""  # set while the workers start: what they are doing
    problem: str = ""  # the files are there but the workers did not start: their own reason, one line
    can_fetch: bool = False  # online and files missing: the page offers to download them
    downloading: bool = False  # `loading` is a download: minutes, so Generate is refused meanwhile, not held

    def banner_markdown(self) -> str:
        if self.loading and self.downloading:
            return (f"… **Downloading the model:** {self.loading} — the page works meanwhile; songs can be made "
                    "once the files are in.")
        if self.loading:
            return (f"… **Loading the model:** {self.loading} — the page works meanwhile; press Generate now "
                    "and the take waits for the model.")
        running = f" Running on {self.workers}." if self.workers else ""
        if self.ready and "TEST" in self.label.upper():
            return (f"**{self.label}** — the whole studio works, but every song is noise: load the real "
                    f"weights with `{self.fetch_command}` and restart without `--model test`.{running}")
        if self.ready:
            return f"**{self.label or 'The model'}** is ready.{running}"
        if self.problem:
            return (f"⚠ **Songs cannot be made: {self.problem}**\n\nThe page works meanwhile; fix the cause "
                    "and restart `studio serve` (the log has the worker's last lines).")
        lines = ["⚠ **Songs cannot be made yet: model files are missing.**"]
        lines += [f"- `{m}`" for m in self.missing[:12]]
        if len(self.missing) > 12:
            lines.append(f"- … and {len(self.missing) - 12} more (`studio models list` shows them all)")
        how = ("Press **Download the model files** below (progress shows here), or run "
               f"`{self.fetch_command}` and restart `studio serve`" if self.can_fetch else
               f"Fetch them with `{self.fetch_command}`, then restart `studio serve`")
        lines.append(f"\n{how} (or try the whole flow now with `studio serve --model test`).")
        if self.detail:
            lines.append(f"\n{self.detail}")
        return "\n".join(lines)


def worker_summary(infos: list[dict[str, Any]]) -> dict[str, str]:
    """`ModelStatus.workers` from the pool's worker info: where each ready worker runs, in which precision,
    and whether its step is compiled (a failed compile is said, so a slow step has its reason on the page)."""
    parts = []
    for info in infos:
        if info.get("state", "ready") != "ready":
            continue
        text = f"{info.get('device', '?')}, {info.get('precision', '?')}"
        note = str(info.get("compile", "") or "")
        if note == "compiled":
            text += ", compiled step"
        elif note.startswith("uncompiled"):
            text += f", step runs {note.splitlines()[0][:160]}"
        parts.append(text)
    return {"workers": "; ".join(parts)}


class Services:
    def __init__(self, store: Store, config: StudioConfig, *, engine: Any = None,
                 model_status: ModelStatus | None = None) -> None:
        self.store = store
        self.config = config
        self.identity = Identity(config.data_dir)
        # Sessions made before owners were enforced belong to the machine's owner (`studio token`).
        adopted = store.adopt_ownerless(self.identity.cli_owner())
        if adopted:
            logger.info("[studio] %d session(s) without an owner now belong to this machine's token", adopted)
        self._changed = threading.Condition()
        self.engine = engine
        self.runner = TakeRunner(engine, store) if engine is not None else None
        self.model_status = model_status or ModelStatus(ready=engine is not None)
        # per-owner limits on takes, follows and streams
        self.admission = Admission(Limits(takes_per_owner=config.takes_per_owner))
        self.state_holder: Any = None  # Gradio's per-session state, set at launch (studio/gradio_state.py)
        self.on_fetch: Callable[[], bool] | None = None  # set by `studio serve` when it can download files
        for d in (config.uploads_dir, config.styles_dir, config.cache_dir):
            d.mkdir(parents=True, exist_ok=True)

    @property
    def model_status(self) -> ModelStatus:
        return self._model_status

    @model_status.setter
    def model_status(self, status: ModelStatus) -> None:
        with self._changed:
            self._model_status = status
            self._changed.notify_all()

    def attach_engine(self, engine: Any, status: ModelStatus) -> None:
        """Called once the model files are found, before the workers are ready (serve starts them in the
        background so the page opens first): from here on takes queue, and run when a worker is up."""
        with self._changed:
            self.engine = engine
            self.runner = TakeRunner(engine, self.store)
            self.runner.model_loading = lambda: bool(self.model_status.loading)
            self.model_status = status

    def lyric_tokenizer(self) -> Any:
        """The g2p the takes will use, for the live lyric report: the engine's once it is attached; before
        that the test model's own vocabulary (`--model test`), else the model files' (the default lookup)."""
        tokenizer = getattr(self.engine, "tokenizer", None)
        if callable(tokenizer):
            return tokenizer()
        if self.config.test_model:
            from studio.testmodel import lyric_tokenizer

            return lyric_tokenizer()
        from engine.lyrics.layout import default_tokenizer

        return default_tokenizer()

    def wait_for_runner(self, timeout_s: float) -> TakeRunner | None:
        """The take runner, waiting up to `timeout_s` while the model files are still being prepared (the
        test model writes its files, or hub files are being found): a Generate pressed in the first seconds
        is queued rather than refused. None when there is none (files missing, workers failed, timeout)."""
        with self._changed:
            self._changed.wait_for(lambda: self.runner is not None or not self._model_status.loading
                                   or self._model_status.downloading, timeout_s)
            return self.runner

    def close(self) -> None:
        if self.runner is not None:
            self.runner.shutdown()
        close = getattr(self.engine, "close", None)
        if callable(close):
            close()
        self.store.close()

    # ---------------------------------------------------------------- uploads
    def keep_upload(self, tmp_path: str | Path, *, from_client: bool = True) -> tuple[Path, dict[str, Any]]:
        """Check an uploaded (or recorded) audio file against the limits and keep a copy in the data dir.

        `from_client`: the path came in a request, so it must be a file Gradio itself received (its
        upload folder), never any other file the server can read. Returns (kept path, info: seconds,
        rate, channels). Content-addressed, so the same song uploaded twice is kept once and a take's
        record keeps pointing at a file that does not move. Messages name the file, never a server path.
        """
        import soundfile as sf

        src = Path(tmp_path)
        name = src.name
        if from_client and not _inside(src, Path(_upload_folder())):
            raise UploadRefused("Only files uploaded to the studio are accepted, not paths on the server: "
                                "upload the recording itself.")
        if not src.is_file():
            raise UploadRefused(f"{name} did not arrive (no file received); upload it again.")
        size = src.stat().st_size
        limit = self.config.max_upload_mb * 1024 * 1024
        if size == 0:
            raise UploadRefused(f"{name} is empty (0 bytes): nothing was recorded or the upload was cut off.")
        if size > limit:
            raise UploadRefused(f"{name} is {size / 2**20:.1f} MB; uploads are limited to "
                                f"{self.config.max_upload_mb} MB (trim or compress it, e.g. to FLAC or MP3).")
        try:
            info = sf.info(str(src))
        except Exception:  # noqa: BLE001 - libsndfile's text names the server path: not for the musician
            raise UploadRefused(f"{name} is not an audio file this studio can read (WAV, FLAC, OGG, MP3) — "
                                "the format was not recognised.") from None
        seconds = info.frames / info.samplerate if info.samplerate else 0.0
        if seconds > self.config.max_upload_s:
            raise UploadRefused(f"{name} is {_length(seconds)} long; the limit is "
                                f"{_length(self.config.max_upload_s)} (a reference needs 10 s, an edit "
                                "at most the song's length).")
        if seconds <= 0:
            raise UploadRefused(f"{name} holds no audio (0 samples).")
        readable = _decodable_frames(src)
        promised = max(info.frames, _wav_promised_frames(src) or 0)
        if readable < promised * 0.99:
            seconds = promised / info.samplerate
            raise UploadRefused(f"{name} is truncated: its header promises {_length(seconds)}, but only "
                                f"{_length(readable / info.samplerate)} could be read; export it again.")
        digest = _sha256(src)[:20]
        suffix = src.suffix.lower() if src.suffix.lower() in AUDIO_SUFFIXES else ".wav"
        kept = self.config.uploads_dir / f"{digest}{suffix}"
        if not kept.exists():
            tmp = kept.with_suffix(kept.suffix + ".part")
            shutil.copyfile(src, tmp)
            tmp.replace(kept)
        else:
            os.utime(kept)  # uploaded again: new, so the sweep of unused uploads (studio.uploads) keeps it
        return kept, {"seconds": seconds, "rate": info.samplerate, "channels": info.channels, "name": name}

    def style_window_note(self, path: Path, seconds: float) -> str:
        """Which part of a reference MuQ-MuLan hears (upstream: the central 10 s)."""
        try:
            from engine.style import choose_window

            start, length, notes = choose_window(seconds)
        except Exception as exc:  # too short, or the style module missing: say so
            return f"⚠ {exc}"
        text = f"MuQ-MuLan hears {_mmss(start)}–{_mmss(start + length)} of this {_mmss(seconds)} recording."
        return " ".join([text, *notes])

    def save_style(self, name: str, *, owner: str, text: str = "", audio: str | None = None) -> Any:
        """`owner`'s named style: the 512-d embedding (computed by the worker, kept as
        `styles/<owner digest>/<name>.npy`, so owners' names never collide) and, for text, the prompt.
        Without a loaded model a text style is kept as its prompt only."""
        from engine.style import StyleLibrary

        name = name.strip()
        library = StyleLibrary(self.config.styles_dir / hashlib.sha256(owner.encode()).hexdigest()[:16])
        library._path(name)  # validates the name (letters, digits, ' _-.'), with the engine's message
        source = "text" if audio is None else Path(audio).name
        if audio is not None:
            audio = str(self.checked_path(audio))
        styles = getattr(getattr(self.engine, "inputs", None), "styles", None)
        if styles is None:
            if audio is not None:
                raise UploadRefused("A style from a recording needs the model loaded (it is embedded by the worker).")
            return self.store.save_style(name, owner=owner, prompt=text, source=source)
        result = styles.from_audio(audio) if audio is not None else styles.from_text(text)
        path = library.save(name, result.vector, overwrite=True)
        return self.store.save_style(name, owner=owner, prompt=text if audio is None else "", embedding_path=path,
                                     source=source)

    def checked_path(self, path: str | Path) -> Path:
        """A path a client named (API or form); refused unless inside the data directory."""
        return self.config.inside_data(path)


def _upload_folder() -> str:
    """Where Gradio puts what clients upload (gradio.utils.get_upload_folder, without importing gradio)."""
    import tempfile

    return os.environ.get("GRADIO_TEMP_DIR") or str((Path(tempfile.gettempdir()) / "gradio").resolve())


def _inside(path: Path, root: Path) -> bool:
    try:
        p, r = path.resolve(), root.resolve()
    except OSError:
        return False
    return r in p.parents


def _wav_promised_frames(path: Path) -> int | None:
    """The frame count a RIFF/WAVE header's data chunk declares (libsndfile quietly trusts the file size
    instead, so a cut-off WAV otherwise passes as a shorter recording)."""
    import struct

    try:
        with open(path, "rb") as f:
            head = f.read(12)
            if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
                return None
            align = None
            while True:
                chunk = f.read(8)
                if len(chunk) < 8:
                    return None
                cid, size = chunk[:4], struct.unpack("<I", chunk[4:])[0]
                if cid == b"fmt ":
                    fmt = f.read(size)
                    align = struct.unpack("<H", fmt[12:14])[0] if len(fmt) >= 14 else None
                    f.seek(size & 1, 1)
                elif cid == b"data":
                    return size // align if align and size not in (0, 0xFFFFFFFF) else None
                else:
                    f.seek(size + (size & 1), 1)
    except OSError:
        return None


def _decodable_frames(path: Path) -> int:
    """Frames that actually decode (a truncated file's header promises more than it holds)."""
    import soundfile as sf

    n = 0
    try:
        with sf.SoundFile(str(path)) as f:
            while True:
                block = f.read(1 << 16, dtype="int16", always_2d=True)
                if not len(block):
                    break
                n += len(block)
    except Exception:  # noqa: BLE001 - a decode error part-way: what was read so far counts
        pass
    return n


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _length(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def _mmss(t: float) -> str:
    return f"{int(t // 60)}:{t % 60:04.1f}"


__all__ = ["ModelStatus", "PathRefused", "Services", "UploadRefused"]
