"""Give back the memory Gradio keeps per session (issue 27 finding 7).

Gradio makes a `SessionState` for every session hash it sees, with a copy of every block's config
(~270 KB for the studio's page), and keeps it until 10,000 sessions exist. Every API call from a fresh
client is a new session, so 600 `/styles` calls grew the studio by 160 MB that never came back. Sessions
that hold no state (API calls) are dropped once idle for `IDLE_S`; a page's session (it holds its share
token and the key-link prompt in `gr.State`) stays while open and goes `CLOSED_S` after its tab closed
(Gradio's own grace period for reopening it).
"""

from __future__ import annotations

import datetime
import logging
import threading
from typing import Any

logger = logging.getLogger(__name__)

IDLE_S = 20.0  # longer than any gap between one API call's join and its answer being read
CLOSED_S = 3600.0
EVERY_S = 5.0


def prune(holder: Any, now: datetime.datetime | None = None) -> int:
    """Drop idle stateless and long-closed sessions from Gradio's state holder; returns how many."""
    now = now or datetime.datetime.now()
    dropped = 0
    with holder.lock:
        for sid, last in list(holder.time_last_used.items()):
            state = holder.session_data.get(sid)
            idle = (now - last).total_seconds()
            if state is None or (not state.state_data and idle > IDLE_S) or (state.is_closed and idle > CLOSED_S):
                holder.session_data.pop(sid, None)
                holder.time_last_used.pop(sid, None)
                dropped += 1
    return dropped


def start_pruning(blocks: Any, stop: threading.Event | None = None) -> threading.Event:
    """A daemon thread pruning `blocks`' sessions every `EVERY_S`; set the returned event to stop it."""
    stop = stop or threading.Event()

    def loop() -> None:
        while not stop.wait(EVERY_S):
            try:
                prune(blocks.state_holder)
            except Exception:  # noqa: BLE001 - Gradio internals moved: log once a round, never crash serving
                logger.exception("pruning Gradio sessions failed")

    threading.Thread(target=loop, name="gradio-state-prune", daemon=True).start()
    return stop
