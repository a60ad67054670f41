"""The events a job yields, in order (the ETA model behind their `eta_s` is `engine.eta`).

Order for a healthy job: Queued (one or more, as the position moves) -> Preparing (lyrics, style,
reference) -> per take: Running -> Step 2..N -> Decoding 1..M (each with an AudioChunk) -> TakeDone
(-> LyricsChecked, when the lyrics check is on) -> Done. A take cancelled on its own ends with TakeCancelled; its siblings go on. Terminal events:
Done, Failed, Cancelled; exactly one ends every job. FellBehind reaches only
a subscriber that left audio unread long after the job ended (see `engine.jobs`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np


@dataclass(frozen=True)
class Event:
    job_id: str
    at: float = field(default_factory=time.time, kw_only=True)  # wall clock, for records and UIs

    @property
    def kind(self) -> str:
        return type(self).__name__.lower()

    @property
    def terminal(self) -> bool:
        return False


@dataclass(frozen=True)
class Queued(Event):
    position: int  # 0 = admitted at once; 1 = next to be admitted; 2 = one job ahead ...
    ahead: int  # takes waiting in front of this job's first waiting take
    # The job's takes still waiting (a job can be half admitted: its first takes run, the rest wait).
    takes: tuple[int, ...] = ()
    eta_s: float | None = None  # until the first waiting take is finished; None before any take was timed
    # One per waiting take, as `takes`: the later ones wait for more takes ahead of them.
    etas_s: tuple[float | None, ...] = ()


@dataclass(frozen=True)
class Preparing(Event):
    what: Literal["lyrics", "style", "reference"]
    detail: str = ""


@dataclass(frozen=True)
class Held(Event):
    """A variation ready for the card waits for its sibling `behind` to sound first (engine.units)."""

    take: int
    behind: int


@dataclass(frozen=True)
class Running(Event):
    take: int
    seed: int
    worker: str
    attempt: int = 1


@dataclass(frozen=True)
class Step(Event):
    """`k` of `total` sampling steps, `total` as asked: N steps are N points in time, the first one the
    starting noise, so the worker's N-1 updates read as steps 2..N (the last update is step N of N)."""

    take: int
    k: int
    total: int
    step_s: float  # measured on the worker
    eta_s: float | None


@dataclass(frozen=True)
class Decoding(Event):
    take: int
    j: int  # windows done
    total: int
    window_s: float
    eta_s: float | None


@dataclass(frozen=True, eq=False)
class AudioChunk(Event):
    """One decoded window's new audio, float32 [n, 2] before the song-level peak normalisation
    (early playback only; the file is the reference). `start` is its first sample in the song."""

    take: int
    j: int
    total: int
    start: int
    audio: np.ndarray


@dataclass(frozen=True)
class Retrying(Event):
    take: int
    attempt: int
    reason: str


@dataclass(frozen=True)
class FellBehind(Event):
    """This subscriber had not read `missed` audio chunks `after_s` seconds after the job ended; they
    were dropped (early-playback audio only: the files in Done hold every sample). Every other event
    still follows."""

    missed: int
    after_s: float


@dataclass(frozen=True)
class TakeResult:
    take: int
    seed: int
    files: dict[str, str]  # format -> path; "json" -> the record
    timings: dict[str, float]
    worker: str


@dataclass(frozen=True)
class TakeCancelled(Event):
    """One variation cancelled on its own (`EngineJob.cancel_take`); the job's other takes go on."""

    take: int
    reason: str = "cancelled"


@dataclass(frozen=True)
class TakeDone(Event):
    result: TakeResult


@dataclass(frozen=True)
class LyricsChecked(Event):
    """A written take's lyrics check (engine.hearing): after its TakeDone, before the job's Done. `check`
    is the record's `lyrics_check` (model, per, lines; or `error` / `skipped` saying why there is none)."""

    take: int
    check: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Done(Event):
    takes: tuple[TakeResult, ...]
    timings: dict[str, float]  # whole job: queued, worker_wait, prepare, diffusion, decode, write, total

    @property
    def terminal(self) -> bool:
        return True

    @property
    def files(self) -> list[dict[str, str]]:
        return [t.files for t in self.takes]


@dataclass(frozen=True)
class Failed(Event):
    error: str  # "ExceptionName: message"
    take: int | None = None

    @property
    def terminal(self) -> bool:
        return True


@dataclass(frozen=True)
class Cancelled(Event):
    reason: str = "cancelled"

    @property
    def terminal(self) -> bool:
        return True


def error_text(exc: BaseException) -> str:
    """The one-line form every failure takes: `ExceptionName: message`."""
    text = str(exc)
    # Errors relayed from the worker already read "Name: message"; do not wrap them twice.
    if getattr(exc, "relayed", False):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def event_to_dict(event: Event) -> dict[str, Any]:
    """A JSON-friendly view (audio payloads summarised) for logs, the CLI's --json and the studio."""
    out: dict[str, Any] = {"kind": event.kind}
    for name in event.__dataclass_fields__:
        value = getattr(event, name)
        if isinstance(value, np.ndarray):
            out[name] = {"shape": list(value.shape), "dtype": str(value.dtype)}
        elif isinstance(value, TakeResult):
            out[name] = value.__dict__
        elif isinstance(value, tuple) and value and isinstance(value[0], TakeResult):
            out[name] = [v.__dict__ for v in value]
        else:
            out[name] = value
    return out
