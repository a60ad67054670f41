"""An idle studio sleeps: Gradio's queue looks for new events every 1 ms and for progress every 10 ms
even when nothing is queued (gradio/queueing.py, `sleep_when_free`), which kept ~6% of a core busy with
no page open (issue 26, measured with py-spy: all of it in the server's event loop thread). 20 ms / 100 ms
cost nothing a person notices (an event starts at most 20 ms later; the studio's progress is its own HTML,
not Gradio's progress messages) and make idle near zero."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

EVENT_POLL_S = 0.02
PROGRESS_POLL_S = 0.1


def calm_queue(demo: Any) -> None:
    """Slow the launched app's queue polling (read by its loops at every turn, so it applies at once)."""
    queue = getattr(demo, "_queue", None)
    if queue is None or not hasattr(queue, "sleep_when_free"):
        logger.warning("Gradio's queue has no sleep_when_free: idle polling left as it is")
        return
    queue.sleep_when_free = max(queue.sleep_when_free, EVENT_POLL_S)
    if hasattr(queue, "progress_update_sleep_when_free"):
        queue.progress_update_sleep_when_free = max(queue.progress_update_sleep_when_free, PROGRESS_POLL_S)
