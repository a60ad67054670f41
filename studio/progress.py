"""How an engine event shows as a take's progress, and how a written take is stored: one rule for the page,
the API and `studio render`."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from studio.store import DONE, Store

logger = logging.getLogger(__name__)

PROGRESS_WRITE_S = 0.5  # at most two progress writes per second per take: WAL writes are cheap, not free
PREPARE_SHARE, DIFFUSION_SHARE = 0.05, 0.80  # of a take's progress bar; decoding gets the rest


def progress_of(e: Any) -> tuple[float, str] | None:
    """(fraction, phase) of a Step or Decoding event; None for any other event."""
    from engine import events as ev

    if isinstance(e, ev.Step):
        return PREPARE_SHARE + DIFFUSION_SHARE * e.k / max(e.total, 1), f"step {e.k} of {e.total}"
    if isinstance(e, ev.Decoding):
        decode = 1 - PREPARE_SHARE - DIFFUSION_SHARE
        return (min(PREPARE_SHARE + DIFFUSION_SHARE + decode * e.j / max(e.total, 1), 0.99),
                f"making the audio: part {e.j} of {e.total}")
    return None


def unit_of(e: Any) -> tuple[str, int, int] | None:
    """("step", k, N) of a Step event, ("window", j, M) of a Decoding one (the VAE's windows); None else.
    For callers that count units themselves (MCP progress notifications) instead of reading the phase."""
    from engine import events as ev

    if isinstance(e, ev.Step):
        return ("step", e.k, e.total)
    if isinstance(e, ev.Decoding):
        return ("window", e.j, e.total)
    return None


def store_finished(store: Store, take_id: str, seed: int, files: Mapping[str, str],
                   timings: Mapping[str, float]) -> None:
    """A written take into the store: its files (the JSON record among them), timings, and the record's
    content and model ids."""
    record = read_record(files.get("json"))
    store.update_take(take_id, status=DONE, progress=1.0, phase="done", seed=seed, files=dict(files),
                      timings=dict(timings), record=record, models=dict(record.get("models") or {}), error=None)


def read_record(path: str | None) -> dict[str, Any]:
    """A take's JSON record, or {} (logged) when it cannot be read."""
    if not path:
        return {}
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        logger.warning("[studio] cannot read take record path=%s: %s", path, exc)
        return {}
