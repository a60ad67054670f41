"""A job: one request's ordered event stream, followed by any number of subscribers.

Every subscriber sees every event from the first, in order (a browser tab that opens late still sees
`queued`). Iterate synchronously (`for ev in job`) or with asyncio (`async for ev in job`). The engine
publishes from its own threads; asyncio subscribers are woken through their loop's thread-safe call.

A job started from an interactive session (`interactive=True`) is cancelled when its last subscriber
goes away (a closed tab): nobody is left to hear the song.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from engine.events import AudioChunk, Done, Event, Failed

logger = logging.getLogger(__name__)

_DROPPED: Any = object()  # stands in for a pruned audio chunk


class Job:
    def __init__(self, request: Any, *, interactive: bool = False, job_id: str | None = None,
                 on_cancel: Callable[[Job, str], None] | None = None):
        self.id = job_id or uuid.uuid4().hex[:16]
        self.request = request
        self.interactive = interactive
        self._events: list[Event] = []
        self._cond = threading.Condition()
        self._subscribers = 0
        self._async_waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._cancel_requested = threading.Event()
        self._cancel_reason = ""
        self._on_cancel = on_cancel

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
            self._on_cancel(self, reason)

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
            if event.terminal:
                # Early-playback audio is useless once the files exist; drop it so finished jobs kept
                # for history cost no memory (late subscribers get the files from Done). Slots stay, so
                # every subscriber's cursor keeps its meaning.
                self._events = [_DROPPED if isinstance(e, AudioChunk) else e for e in self._events]
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

    def _attach(self) -> None:
        with self._cond:
            self._subscribers += 1

    def _detach(self) -> None:
        with self._cond:
            self._subscribers -= 1
            last = self._subscribers == 0
        if last and self.interactive and not self.finished:
            self.cancel("the last listener left")

    @property
    def subscribers(self) -> int:
        with self._cond:
            return self._subscribers

    def _next(self, cursor: int, timeout: float | None) -> tuple[int, Event | None, bool]:
        """(new cursor, event or None on timeout, ended) for a subscriber at `cursor`."""
        with self._cond:
            self._cond.wait_for(lambda: cursor < len(self._events) or self._ended_at(cursor), timeout)
            return self._take(cursor)

    def _take(self, cursor: int) -> tuple[int, Event | None, bool]:
        while cursor < len(self._events) and self._events[cursor] is _DROPPED:
            cursor += 1
        if cursor < len(self._events):
            return cursor + 1, self._events[cursor], False
        return cursor, None, self._ended_at(cursor)

    def _ended_at(self, cursor: int) -> bool:
        return bool(self._events) and self._events[-1].terminal and cursor >= len(self._events)

    def __repr__(self) -> str:
        return f"Job({self.id}, {self.status}, {len(self._events)} events)"


class Subscription:
    """One listener's cursor into a job's events. Close it (or leave the `with` block) when done."""

    def __init__(self, job: Job):
        self.job = job
        self._cursor = 0
        self._closed = False
        job._attach()

    def get(self, timeout: float | None = None) -> Event | None:
        """The next event, or None when the job has ended and every event was read (or on timeout)."""
        self._cursor, event, _ = self.job._next(self._cursor, timeout)
        return event

    def __iter__(self) -> Iterator[Event]:
        while True:
            self._cursor, event, ended = self.job._next(self._cursor, None)
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
                    self._cursor, event, ended = job._take(self._cursor)
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
            self.job._detach()

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
