"""A job: one request's ordered event stream, followed by any number of subscribers.

Every subscriber sees every event from the first, in order (a browser tab that opens late still sees
`queued`). Iterate synchronously (`for ev in job`) or with asyncio (`async for ev in job`). The engine
publishes from its own threads; asyncio subscribers are woken through their loop's thread-safe call.

Memory, by rule rather than by dropping what a listener has not read:
- while the job runs it keeps every event, audio chunks included (a listener that joins late still
  hears the song from its start);
- once a take is settled (its files are written, `TakeDone`, or it was cancelled on its own) or the job
  has ended, that take's audio chunks are dropped from history as soon as every live subscriber has read
  them (a subscriber that joins after that gets the files from `TakeDone` instead of early-playback
  audio). Per take, not per job: a job's `Done` waits for its takes' lyrics checks, and holding every
  written take's audio until then kept hundreds of MB in the studio under load (issue 27, finding 7);
- a live subscriber that is still behind `audio_linger_s` seconds after a take settled (or the job
  ended) has fallen behind: the settled audio it had not read is dropped, and it reads one
  `FellBehind(missed=n)` in its place, then the rest of the events (every non-audio event is kept for
  good).
A live subscriber never loses an event any other way; a slow reader is never overtaken.

A job started from an interactive session (`interactive=True`) is cancelled when its last subscriber
goes away (a closed tab): nobody is left to hear the song.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from engine.events import AudioChunk, Done, Event, Failed, FellBehind, TakeCancelled, TakeDone

logger = logging.getLogger(__name__)

_DROPPED: Any = object()  # stands in for a pruned audio chunk
AUDIO_LINGER_S = 120.0  # how long after its end a job keeps audio a live subscriber has not read yet


class EngineJob:
    def __init__(self, request: Any, *, interactive: bool = False, job_id: str | None = None,
                 audio_linger_s: float = AUDIO_LINGER_S):
        self.id = job_id or uuid.uuid4().hex[:16]
        self.request = request
        self.interactive = interactive
        self.audio_linger_s = audio_linger_s
        self._events: list[Event] = []
        self._cond = threading.Condition()  # an RLock inside: a Subscription's __del__ may close under it
        self._subscribers = 0
        self._live: weakref.WeakSet[Subscription] = weakref.WeakSet()  # their cursors bound the pruning
        self._pruned = 0  # audio chunks before this index are dropped (once the job has ended)
        self._settled: set[int] = set()  # takes written or cancelled: their audio goes once read
        self._linger: threading.Timer | None = None
        self._async_waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._cancel_requested = threading.Event()
        self._cancel_reason = ""
        self._on_cancel: Callable[[str], None] | None = None  # set by route_cancels
        self._on_cancel_take: Callable[[int, str], bool] | None = None

    # -- state ------------------------------------------------------------------------------------
    @property
    def events(self) -> list[Event]:
        with self._cond:
            return [e for e in self._events if e is not _DROPPED]

    @property
    def final(self) -> Event | None:
        """The terminal event (Done, Failed or Cancelled), or None while the job runs."""
        with self._cond:
            return self._events[-1] if self._events and self._events[-1].terminal else None

    @property
    def finished(self) -> bool:
        return self.final is not None

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested.is_set()

    @property
    def status(self) -> str:
        final = self.final
        if final is not None:
            return final.kind
        return "cancelling" if self.cancel_requested else "running" if self._events else "new"

    def wait(self, timeout: float | None = None) -> Event:
        """Block until the job ends; returns its terminal event (TimeoutError after `timeout` s)."""
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._events) and self._events[-1].terminal, timeout):
                raise TimeoutError(f"job {self.id} still running after {timeout} s")
            return self._events[-1]

    def result(self, timeout: float | None = None) -> Done:
        """The Done event; raises JobFailed / JobCancelled otherwise."""
        final = self.wait(timeout)
        if isinstance(final, Done):
            return final
        if isinstance(final, Failed):
            raise JobFailed(final.error)
        raise JobCancelled(getattr(final, "reason", "cancelled"))

    # -- control ----------------------------------------------------------------------------------
    def cancel(self, reason: str = "cancelled by user") -> None:
        """No new work starts for this job; the unit in flight on the card finishes, then it is freed."""
        if self.finished or self._cancel_requested.is_set():
            return
        self._cancel_reason = reason
        self._cancel_requested.set()
        logger.info("job %s: cancel requested (%s)", self.id, reason)
        if self._on_cancel is not None:
            self._on_cancel(reason)

    def cancel_take(self, take: int, reason: str = "cancelled by user") -> bool:
        """Cancel one variation only (a TakeCancelled event follows); the job's other takes go on, and
        the job ends Done with the rest (Cancelled when every take was cancelled). False when that take
        has already ended."""
        if self.finished or self._cancel_requested.is_set() or self._on_cancel_take is None:
            return False
        logger.info("job %s: cancel of take %d requested (%s)", self.id, take, reason)
        return bool(self._on_cancel_take(take, reason))

    def route_cancels(self, cancel: Callable[[str], None], cancel_take: Callable[[int, str], bool]) -> None:
        """Where `cancel` and `cancel_take` go once the job is queued: set by the pipeline that holds it."""
        self._on_cancel, self._on_cancel_take = cancel, cancel_take

    @property
    def cancel_reason(self) -> str:
        return self._cancel_reason

    # -- engine side ------------------------------------------------------------------------------
    def publish(self, event: Event) -> bool:
        """Append an event; ignored (returns False) once the job has ended, so the stream ends once."""
        with self._cond:
            if self._events and self._events[-1].terminal:
                return False
            self._events.append(event)
            if isinstance(event, (TakeDone, TakeCancelled)):
                self._settled.add(event.result.take if isinstance(event, TakeDone) else event.take)
            if event.terminal or isinstance(event, (TakeDone, TakeCancelled)):
                # Early-playback audio is useless once the files exist: drop what every live subscriber
                # has read (finished jobs kept for history cost no memory); the rest goes as they read
                # it, or when the linger ends. Slots stay, so every cursor keeps its meaning.
                self._prune()
                if self._unread_audio():
                    if self._linger is not None:
                        self._linger.cancel()  # a later settling gives the slowest reader the whole linger
                    self._linger = threading.Timer(self.audio_linger_s, self._expire)
                    self._linger.daemon = True
                    self._linger.start()
            self._cond.notify_all()
            waiters = list(self._async_waiters)
        for loop, flag in waiters:
            try:
                loop.call_soon_threadsafe(flag.set)
            except RuntimeError:  # that subscriber's loop is closed: it is gone
                pass
        return True

    # -- subscribing ------------------------------------------------------------------------------
    def subscribe(self) -> Subscription:
        return Subscription(self)

    def __iter__(self) -> Iterator[Event]:
        with self.subscribe() as sub:
            yield from sub

    async def __aiter__(self) -> AsyncIterator[Event]:
        sub = self.subscribe()
        try:
            async for event in sub.aiter():
                yield event
        finally:
            sub.close()

    def _attach(self, sub: Subscription) -> None:
        with self._cond:
            self._subscribers += 1
            self._live.add(sub)

    def _detach(self, sub: Subscription) -> None:
        with self._cond:
            self._subscribers -= 1
            self._live.discard(sub)
            last = self._subscribers == 0
            self._prune()
        if last and self.interactive and not self.finished:
            self.cancel("the last listener left")

    # -- memory (see the module docstring) ----------------------------------------------------------
    def _ended(self) -> bool:
        return bool(self._events) and self._events[-1].terminal

    def _settled_audio(self, event: Event) -> bool:
        """An audio chunk no one will need once read: its take is settled or the job has ended."""
        return isinstance(event, AudioChunk) and (event.take in self._settled or self._ended())

    def _prune(self) -> None:
        """Drop every settled audio chunk all live subscribers have read (under the lock)."""
        low = min((sub._cursor for sub in self._live), default=len(self._events))
        for i in range(self._pruned, low):
            if self._settled_audio(self._events[i]):
                self._events[i] = _DROPPED
        if self._ended():  # everything below `low` is dropped for good: start there next time
            self._pruned = max(self._pruned, low)
        if self._linger is not None and not self._unread_audio():
            self._linger.cancel()  # every chunk is read: nothing left to expire
            self._linger = None

    def _unread_audio(self) -> bool:
        return any(self._settled_audio(e) for e in self._events[self._pruned:])

    def _expire(self) -> None:
        """The linger after the end is over: subscribers still behind lose the audio they had not read,
        and each reads one FellBehind saying how many chunks that was."""
        with self._cond:
            for sub in list(self._live):
                missed = sum(self._settled_audio(e) for e in self._events[sub._cursor:])
                if missed:
                    sub._missed += missed
                    logger.warning("job %s: a subscriber fell %d audio chunk(s) behind; dropped after %.0f s",
                                   self.id, missed, self.audio_linger_s)
            # Only settled audio goes: a take still rendering keeps its chunks for late listeners.
            self._events = [_DROPPED if self._settled_audio(e) else e for e in self._events]
            if self._ended():
                self._pruned = len(self._events)
            self._linger = None
            self._cond.notify_all()
            waiters = list(self._async_waiters)
        for loop, flag in waiters:
            try:
                loop.call_soon_threadsafe(flag.set)
            except RuntimeError:
                pass

    @property
    def subscribers(self) -> int:
        with self._cond:
            return self._subscribers

    def _next(self, sub: Subscription, timeout: float | None) -> tuple[Event | None, bool]:
        """(event or None on timeout, ended) for `sub`, moving its cursor."""
        with self._cond:
            self._cond.wait_for(lambda: sub._missed or sub._cursor < len(self._events)
                                or self._ended_at(sub._cursor), timeout)
            return self._take(sub)

    def _take(self, sub: Subscription) -> tuple[Event | None, bool]:
        """(next event or None, ended) for `sub`, moving its cursor (under the lock)."""
        if sub._missed:
            missed, sub._missed = sub._missed, 0
            return FellBehind(self.id, missed=missed, after_s=self.audio_linger_s), False
        cursor = sub._cursor
        while cursor < len(self._events) and self._events[cursor] is _DROPPED:
            cursor += 1
        event = None
        if cursor < len(self._events):
            event = self._events[cursor]
            cursor += 1
        sub._cursor = cursor
        if event is not None and self._settled_audio(event):
            self._prune()  # read by this one: maybe by every live one now
        return event, event is None and self._ended_at(cursor)

    def _ended_at(self, cursor: int) -> bool:
        return bool(self._events) and self._events[-1].terminal and cursor >= len(self._events)

    def __repr__(self) -> str:
        return f"EngineJob({self.id}, {self.status}, {len(self._events)} events)"


class Subscription:
    """One listener's cursor into a job's events. Close it (or leave the `with` block) when done."""

    def __init__(self, job: EngineJob):
        self.job = job
        self._cursor = 0  # index of the next event to read; the job drops audio only behind every cursor
        self._missed = 0  # audio chunks dropped before this subscriber read them (it fell behind)
        self._closed = False
        job._attach(self)

    def get(self, timeout: float | None = None) -> Event | None:
        """The next event, or None when the job has ended and every event was read (or on timeout)."""
        event, _ = self.job._next(self, timeout)
        return event

    def __iter__(self) -> Iterator[Event]:
        while True:
            event, ended = self.job._next(self, None)
            if ended:
                return
            if event is not None:
                yield event

    async def aiter(self) -> AsyncIterator[Event]:
        loop = asyncio.get_running_loop()
        flag = asyncio.Event()
        waiter = (loop, flag)
        job = self.job
        with job._cond:
            job._async_waiters.add(waiter)
        try:
            while True:
                flag.clear()  # clear before reading, so a publish in between sets it again
                with job._cond:
                    event, ended = job._take(self)
                if ended:
                    return
                if event is not None:
                    yield event
                    continue
                await flag.wait()
        finally:
            with job._cond:
                job._async_waiters.discard(waiter)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.job._detach(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a dropped subscriber counts as gone
        try:
            self.close()
        except Exception:
            pass


class JobFailed(RuntimeError):
    pass


class JobCancelled(RuntimeError):
    pass
