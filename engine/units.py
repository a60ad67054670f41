"""The pieces of work the pipeline moves: a job's shared context and its takes (one device job each)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from engine.eta import TakeEta
from engine.events import TakeResult
from engine.jobs import EngineJob


class BusyError(RuntimeError):
    """The engine's queue is full: submit again later (raised at once, nothing was queued)."""


class Stopping(Exception):
    """Raised inside a stage when the job is being cancelled or has failed: drop the unit quietly."""


@dataclass
class Prepared:
    """Host-input results shared by every take of a job (what the device job needs besides the seed)."""

    tokens: np.ndarray  # int64 [frames], one lyric token per latent frame
    style: np.ndarray  # float32 [512]
    negative_style: np.ndarray  # float32 [512]
    song_duration: float | None  # fp16-rounded end_frame / max_frames (upstream's value)
    cond: np.ndarray | None = None  # float32 [frames, 64] reference latent (edit/continuation)
    edit_segments: list[list[int]] | None = None  # frames, end-exclusive
    effective: dict[str, Any] = field(default_factory=dict)  # what the record shows as "effective"
    lyrics_report: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # worker_wait, prepare

    @property
    def frames(self) -> int:
        return int(self.tokens.shape[0])


class JobContext:
    """A job's state inside the engine: its takes, the shared preparation, how it ends."""

    def __init__(self, job: EngineJob, request: Any, seeds: list[int], *, validation: Any = None,
                 out_dir: Path | None = None):
        self.job = job
        self.request = request
        self.seeds = seeds
        self.validation = validation
        self.out_dir = out_dir
        self.submitted = time.monotonic()
        self.prepared: Prepared | None = None
        self.prepare_lock = threading.Lock()
        self.results: dict[int, TakeResult] = {}
        self.unfinished: set[int] = set()  # takes admitted and not yet finished (any outcome)
        self.waiting = len(seeds)  # takes not yet admitted
        self.error: str | None = None
        self.ended = False
        self.last_position: tuple[int, tuple[int, ...]] | None = None  # (position, waiting takes) last published
        self.cancelled: dict[int, str] = {}  # takes cancelled on their own -> reason (their siblings go on)
        self.checking = 0  # written takes whose lyrics check is still running (the job's Done waits)

    @property
    def stopping(self) -> bool:
        return self.error is not None or self.job.cancel_requested


MAX_CHARGED = 2  # a take whose worker dies while it runs alone there is retried once, then fails


@dataclass
class Unit:
    """One take of one job: the unit of admission, placement, retry and output."""

    ctx: JobContext
    take: int
    seed: int
    attempt: int = 1
    charged: int = 0  # worker deaths counted against it: those it was alone on the worker for
    isolate: bool = False  # lost once: runs alone on a worker, so another death names it (engine.pool)
    worker: str = ""
    admitted: float = 0.0
    blocks: list[tuple[int, np.ndarray]] = field(default_factory=list)  # (start sample, [2, n])
    device_timings: dict[str, float] = field(default_factory=dict)
    device_memory: dict[str, float] = field(default_factory=dict)  # device_peak_mb, from the worker's DONE
    style_heard: dict[str, Any] = field(default_factory=dict)  # DONE's style embedding + window, or its error
    first_sound_at: float | None = None  # monotonic time its first decoded window arrived
    eta: TakeEta | None = None
    handle: Any = None  # the device stage's handle for cancel

    @property
    def job(self) -> EngineJob:
        return self.ctx.job

    @property
    def key(self) -> str:
        return f"{self.job.id}/{self.take}"

    def charge(self, alone: bool) -> bool:
        """Its worker died: whether to run it again. The death counts against it only when it was alone
        on the worker (it may have caused it); one that shared the worker is retried free. Either way
        the retry runs isolated (`engine.pool`), so a second death names the culprit."""
        if alone:
            self.charged += 1
            if self.charged >= MAX_CHARGED:
                return False
        self.attempt += 1
        self.isolate = True
        return True

    @property
    def stopping(self) -> bool:
        """Its job is being cancelled or has failed, or this take was cancelled on its own."""
        return self.ctx.stopping or self.take in self.ctx.cancelled

    def audio(self) -> np.ndarray:
        """The decoded song, float32 [2, n], from the windows in order."""
        if not self.blocks:
            raise RuntimeError("the worker finished without sending audio")
        blocks = sorted(self.blocks, key=lambda b: b[0])
        expected = 0
        for start, block in blocks:
            if start != expected:
                raise RuntimeError(f"audio windows do not join: a window starts at {start}, expected {expected}")
            expected += block.shape[-1]
        return np.concatenate([b for _, b in blocks], axis=-1)


class DeviceSink(Protocol):
    """What the device stage reports about a unit (called from the device stage's threads)."""

    def running(self, unit: Unit, worker: str) -> None: ...
    def held(self, unit: Unit, behind: int) -> None: ...
    def step(self, unit: Unit, k: int, total: int, seconds: float) -> None: ...
    def window(self, unit: Unit, j: int, total: int, seconds: float, start: int, audio: np.ndarray) -> None: ...
    def done(self, unit: Unit, timings: dict[str, float]) -> None: ...
    def error(self, unit: Unit, text: str) -> None: ...
    def cancelled(self, unit: Unit) -> None: ...
    def lost(self, unit: Unit, reason: str, alone: bool = True) -> None: ...


class DeviceStage(Protocol):
    """Runs units on the card(s). `place` may block until a worker has room (that is the back-pressure);
    it must report every unit it accepts exactly once as done, error, cancelled or lost."""

    def place(self, unit: Unit, sink: DeviceSink) -> None: ...
    def cancel(self, unit: Unit) -> None: ...
    def units_of(self, ctx: JobContext) -> list[Unit]: ...  # the job's units placed and not yet reported


def sibling_sounds_first(unit: Unit, on_worker: Iterable[Unit]) -> int | None:
    """The take `unit` should wait for, or None: an earlier variation of the same request on that worker
    that has not sounded yet. Stepping beside it would delay the first sound by the number of variations (they all step
    together, one unit each in turn); holding the later ones until the first decoded window lets the
    musician hear the first take as soon as a single take would sound. The card does the same work either
    way, only the order changes; a worker without such a sibling (another card) takes the variation at once."""
    return min((u.take for u in on_worker if u.ctx is unit.ctx and u.take < unit.take and u.first_sound_at is None),
               default=None)


# Moments, not durations: the job's is its earliest take's (summing them gave a first sound later than the
# whole job's total).
_EARLIEST = ("first_sound",)


def job_timings(ctx: JobContext, takes: tuple[TakeResult, ...]) -> dict[str, float]:
    """A finished job's timings: its takes' durations summed, its moments the earliest take's."""
    out: dict[str, float] = {}
    for take in takes:
        for key, value in take.timings.items():
            if key in _EARLIEST:
                out[key] = round(min(out.get(key, value), value), 6)
            else:
                out[key] = round(out.get(key, 0.0) + value, 6)
    out["total"] = round(time.monotonic() - ctx.submitted, 6)
    return out
