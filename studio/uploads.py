"""Uploaded reference songs that nothing uses are removed after a day (issue 27, finding 4).

A reference song is kept in `DIR/uploads/<digest><suffix>` as soon as it arrives (page upload or
recording, the API's `/upload_reference`), before anything uses it: a musician may upload and never
press Generate, and a client may upload anything at all. Such a file used to stay for ever. Now a file
older than `StudioConfig.upload_max_age_s` that no session's inputs and no take's request names is
removed, checked every `upload_sweep_every_s`; one a session or take names stays as long as they do (a
reopened session plays it, a retry sings from it). Uploading the same file again makes it new
(`Services.keep_upload`), and a form naming a file that is gone says to upload it again (`forms`).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from studio.services import Services

logger = logging.getLogger(__name__)


def sweep(store: Any, uploads_dir: Path, max_age_s: float, now: float | None = None) -> list[str]:
    """Remove the unused uploads older than `max_age_s`; returns their names."""
    now = time.time() if now is None else now
    removed: list[str] = []
    if not uploads_dir.is_dir():
        return removed
    for path in sorted(uploads_dir.iterdir()):
        try:
            if not path.is_file() or now - path.stat().st_mtime < max_age_s:
                continue
        except OSError:  # removed meanwhile
            continue
        if not path.name.endswith(".part") and store.uses_upload(path.name):
            continue
        path.unlink(missing_ok=True)
        removed.append(path.name)
    return removed


def start_sweeping(svc: Services, stop: threading.Event | None = None) -> threading.Event:
    """A daemon thread: a sweep now, then every `upload_sweep_every_s`; set the returned event to stop it."""
    stop = stop or threading.Event()
    config = svc.config

    def loop() -> None:
        while True:
            try:
                gone = sweep(svc.store, config.uploads_dir, config.upload_max_age_s)
                if gone:
                    logger.info("removed %d unused upload(s) older than %.0f h", len(gone), config.upload_max_age_s / 3600)
            except Exception:  # noqa: BLE001 - a store hiccup: try again next round, never stop serving
                logger.exception("sweeping unused uploads failed")
            if stop.wait(config.upload_sweep_every_s):
                return

    threading.Thread(target=loop, name="upload-sweep", daemon=True).start()
    return stop
