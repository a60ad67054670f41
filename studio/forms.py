"""The compose form as one dataclass: UI values in, an engine `SongRequest` out, session inputs kept.

Everything the Generate button sends goes through `ComposeForm`, so the UI, the API endpoints and a
reopened session all agree on one field list (instead of positional tuples whose order lives in a
comment).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from device_worker import controls
from studio import access
from studio.access import Who
from studio.config import StudioConfig
from studio.store import Store

STYLE_SOURCES = ("text", "audio", "saved")
EDIT_MODES = ("none", "edit", "continue")


class FormError(ValueError):
    """A form value the studio refuses before the engine sees it (message shown as is)."""


@dataclass
class ComposeForm:
    """What the musician filled in. Field comments give the valid range the UI offers."""

    title: str = ""
    lyrics: str = ""
    instrumental: bool = False  # True: the lyrics are ignored and the song has no vocals
    style_source: str = "text"  # one of STYLE_SOURCES; choosing one clears the others in the UI
    style_text: str = ""
    style_audio: str | None = None  # a stored upload inside the data directory
    style_saved: str | None = None  # name of a saved style
    duration: int = 95  # 95 = base model (95.1 s); 96-285 = full model
    steps: int = int(controls.STEPS.default)  # ranges: device_worker.controls
    cfg: float = controls.CFG.default
    seed: int | str = int(controls.SEED.default)  # the page sends text ("" while random)
    random_seed: bool = True  # draw a fresh seed per Generate (the drawn seed is recorded)
    variations: int = int(controls.VARIATIONS.default)
    formats: list[str] = field(default_factory=lambda: ["wav", "flac", "mp3"])
    edit_mode: str = "none"  # one of EDIT_MODES
    edit_take: str | None = None  # the source take of an edit or continuation
    edit_ranges: str = ""  # "10-20, 1:05-1:20, 80-end" (seconds or m:ss; start/end allowed)
    continue_from: float = 0.0  # seconds: keep the song up to here and generate the rest

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, *, strict: bool = False) -> ComposeForm:
        """Missing keys take defaults. Unknown keys: ignored for what the studio stored itself (an older
        studio's sessions), refused by name with `strict` (what a client sends)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(k for k in (d or {}) if k not in names)
        if strict and unknown:
            raise FormError(f"unknown field(s) {', '.join(map(repr, unknown))}; the form's fields are: "
                            f"{', '.join(sorted(names))}")
        form = cls(**{k: v for k, v in (d or {}).items() if k in names})
        form.formats = list(form.formats or ["wav"])
        return form

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def session_inputs(self) -> dict[str, Any]:
        """What the session keeps: the whole form, plus a plain `style` string for history search."""
        d = self.to_dict()
        # An edit or continuation is a one-off: the session reopens on "New song", never on a source take
        # whose id the take list may not offer yet (that sent a value outside the choices: a bare "Error").
        d.update(edit_mode="none", edit_take=None)
        d["style"] = self.style_text if self.style_source == "text" else (
            self.style_saved or Path(self.style_audio or "").name
        )
        return d

    @classmethod
    def of_take(cls, take: Any, session: Any) -> ComposeForm:
        """The form that remakes `take` (its request and actual seed, one variation); what the request
        does not hold (a saved style's name, the title) comes from its session's inputs."""
        form = cls.from_dict(session.inputs if session else None)
        req = take.request
        style = req.get("style") or {}
        form.lyrics, form.instrumental = req.get("lyrics", ""), not (req.get("lyrics") or "").strip()
        form.duration = int(req.get("duration", 95))
        form.steps, form.cfg = int(req.get("steps", controls.STEPS.default)), float(req.get("cfg", controls.CFG.default))
        form.seed, form.random_seed, form.variations = int(take.seed or 0), False, 1
        form.formats = list(req.get("formats") or ["wav"])
        form.edit_mode, form.edit_take = "none", None
        if style.get("text") is not None:
            form.style_source, form.style_text = "text", style["text"]
        elif style.get("audio"):
            form.style_source, form.style_audio = "audio", style["audio"]
        return form

    def to_request(self, store: Store, config: StudioConfig, who: Who | None = None) -> Any:
        """The engine request; refuses paths outside the data directory, unknown takes/styles and an
        edit source that is not a finished take of `who`'s own (`access.edit_source`)."""
        from engine.request import Reference, SongRequest, Style

        style = self._style(store, config, Style, who.owner if who else None)
        edit = None
        if self.edit_mode != "none":
            if not self.edit_take:
                raise FormError("Pick the take to edit or continue first.")
            try:
                take = access.edit_source(store, self.edit_take, who or access.Who())
            except access.AccessDenied as exc:
                raise FormError(str(exc)) from None
            song = take.files["wav"]  # from the store, not the client: trusted even outside the data dir
            if self.edit_mode == "edit":
                edit = Reference.edit(song, parse_ranges(self.edit_ranges))
            else:
                edit = Reference.continuation(song, _number("continue_from", self.continue_from))
        formats = self.formats if isinstance(self.formats, (list, tuple)) else [self.formats]
        if not all(isinstance(f, str) for f in formats):
            raise FormError("formats must be a list of names such as [\"wav\", \"flac\"].")
        for name in ("lyrics", "title", "style_text"):
            if not isinstance(getattr(self, name), str):
                raise FormError(f"{name} must be text.")
        return SongRequest(
            lyrics="" if self.instrumental else self.lyrics,
            style=style,
            duration=_number("duration", self.duration),  # out of range: the engine's validation names it
            steps=_number("steps", self.steps, whole=True),
            cfg=_number("cfg", self.cfg),
            seed=None if self.random_seed else _number("seed", self.seed, whole=True),
            variations=_number("variations", self.variations, whole=True),
            edit=edit,
            formats=tuple(formats or ("wav",)),
            title=self.title,
        )

    def _style(self, store: Store, config: StudioConfig, style_cls: Any, owner: str | None) -> Any:
        if self.style_source == "audio":
            if not self.style_audio:
                raise FormError("Upload or record a reference song, or switch the style to text.")
            kept = config.inside_data(self.style_audio)
            if not kept.is_file():  # unused uploads go after a day (studio.uploads)
                raise FormError("That reference song is no longer kept (an upload nothing used is removed after "
                                "a day): upload it again.")
            return style_cls(audio=str(kept))
        if self.style_source == "saved":
            saved = store.get_style(self.style_saved or "", owner)  # the owner's own, else a shared one
            if saved is None:
                raise FormError(f"No saved style named {self.style_saved!r}.")
            if saved.embedding_path:
                return style_cls(embedding=str(config.inside_data(saved.embedding_path)))
            return style_cls(text=saved.prompt)
        if not self.style_text.strip():
            raise FormError("Describe the style (e.g. 'dreamy synthwave, female vocals') or pick an example.")
        return style_cls(text=self.style_text.strip())


def _number(name: str, value: Any, *, whole: bool = False) -> Any:
    """A form number as given (never clamped: the range check refuses and names the range)."""
    import math

    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise FormError(f"{name} must be a number, got {value!r}.") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FormError(f"{name} must be a finite number, got {value!r}.")
    if whole:
        if value != int(value):
            raise FormError(f"{name} must be a whole number, got {value!r}.")
        return int(value)
    return float(value)


_TIME = r"(?:\d+:\d{1,2}(?:\.\d+)?|\d+(?:\.\d+)?|start|end)"
_RANGE = re.compile(rf"^\s*({_TIME})\s*(?:-|–|to)\s*({_TIME})\s*$", re.IGNORECASE)


def parse_time(text: str) -> float:
    """"75", "1:15", "1:15.5" -> seconds; "start"/"end" -> -1 (upstream's open end)."""
    text = text.strip().lower()
    if text in ("start", "end"):
        return -1.0
    if ":" in text:
        m, s = text.split(":", 1)
        return int(m) * 60 + float(s)
    return float(text)


def parse_ranges(text: str) -> list[tuple[float, float]]:
    """"10-20, 1:05-1:20, 80-end" -> [(10, 20), (65, 80), (80, -1)], with a message naming the bad part."""
    out: list[tuple[float, float]] = []
    for part in filter(None, (p.strip() for p in re.split(r"[,;\n]", text or ""))):
        m = _RANGE.match(part)
        if not m:
            raise FormError(f"Cannot read the range {part!r}: write start-end in seconds or m:ss, e.g. 10-20 or 1:05-1:20.")
        out.append((parse_time(m.group(1)), parse_time(m.group(2))))
    if not out:
        raise FormError("Mark at least one time range to regenerate, e.g. 10-20.")
    return out
