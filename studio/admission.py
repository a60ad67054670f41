"""Per-owner admission: no one owner can fill the take queue or the follow/stream slots everyone shares.

- Takes: an owner may have `takes_per_owner` takes queued or rendering; a submit over it, or one the
  engine's queue has no room for, is refused *before* anything is stored (no session, no failed takes).
- Follows (API `/follow`, the page's watch) and live streams: an owner holds at most `follows_per_owner`
  / `streams_per_owner` at once; one more is refused at once instead of waiting in Gradio's queue,
  which every user's events share (80 never-read follows from one token had filled it for everyone).
- A follow ends after `follow_max_s` whatever its reader does, so a slot is never held for ever.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


class AdmissionRefused(RuntimeError):
    """Over a per-owner or studio-wide limit; the message says which and what to do."""


@dataclass(frozen=True)
class Limits:
    takes_per_owner: int = 16  # one request's 16 variations fit; a second such request waits its turn
    follows_per_owner: int = 4  # a page's watch plus a few scripts
    streams_per_owner: int = 4  # live listeners: one per tab is the usual case
    follow_max_s: float = 3 * 3600.0  # the longest song behind a long queue still finishes well inside


class Admission:
    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._lock = threading.Lock()
        self._held: Counter[tuple[str, str]] = Counter()
        # Serialises count-then-store, so two submits of one owner cannot both pass a check made for one.
        self.submitting = threading.Lock()

    def check_takes(self, store: Any, engine: Any, owner: str, new: int) -> None:
        """Refuse `new` takes for `owner` now (call under `submitting`, before anything is stored)."""
        active = store.count_active_takes(owner)
        if active + new > self.limits.takes_per_owner:
            raise AdmissionRefused(
                f"You have {active} take(s) queued or rendering; the limit is {self.limits.takes_per_owner} "
                f"per person so everyone gets a turn. Wait for some to finish, or cancel some.")
        stats = getattr(engine, "stats", None)
        if callable(stats):
            st = stats()
            waiting, limit = st.get("waiting"), st.get("queue_limit")
            if isinstance(waiting, int) and isinstance(limit, int) and waiting + new > limit:
                raise AdmissionRefused(f"The studio's queue is full ({waiting} takes waiting, limit {limit}); "
                                       "try again in a few minutes.")

    @contextmanager
    def hold(self, owner: str, kind: str) -> Iterator[None]:
        """One `kind` slot ("follow" or "stream") for `owner` while the block runs."""
        self.acquire(owner, kind)
        try:
            yield
        finally:
            self.release(owner, kind)

    def acquire(self, owner: str, kind: str) -> None:
        """One `kind` slot for `owner`, or AdmissionRefused at once; pair with `release`."""
        limit = self.limits.follows_per_owner if kind == "follow" else self.limits.streams_per_owner
        with self._lock:
            if self._held[(owner, kind)] >= limit:
                raise AdmissionRefused(f"You already follow {limit} take(s) at once ({kind}); close one first.")
            self._held[(owner, kind)] += 1

    def release(self, owner: str, kind: str) -> None:
        with self._lock:
            self._held[(owner, kind)] -= 1
            if self._held[(owner, kind)] <= 0:
                del self._held[(owner, kind)]

    def held(self, owner: str, kind: str) -> int:
        with self._lock:
            return self._held[(owner, kind)]
