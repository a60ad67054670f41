"""First-run download of the model files from inside the studio (as ACE-Step offers on first run).

The page's banner shows which file is downloading (k of n, its size) while this runs in a background
thread, then the workers start. Offline (`HF_HUB_OFFLINE`), nothing is offered: the banner names the
missing files and `studio models fetch`. The downloading itself is `engine.modelfiles`' (resume,
checksums, Hugging Face cache).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


def missing_files(models_dir: str | None = None) -> list[tuple[str, Any]]:
    """(model name, FileSpec) of every file of the default models that is missing or damaged."""
    from engine import modelfiles as mf

    out = []
    for model in mf.chosen(None):
        for status in mf.check_model(model, models_dir):
            if not status.ok:
                out.append((model.name, status.spec))
    return out


def can_fetch() -> bool:
    from engine.modelfiles import hf_offline

    return not hf_offline()


class Fetcher:
    """Downloads the missing files one by one, reporting progress through `on_progress(text)`."""

    def __init__(self, on_progress: Callable[[str], None], on_done: Callable[[list[str]], None], *,
                 models_dir: str | None = None, fetch_file: Callable[..., Any] | None = None,
                 missing: Callable[[str | None], list[tuple[str, Any]]] = missing_files) -> None:
        self.on_progress, self.on_done = on_progress, on_done
        self.models_dir = models_dir
        self._fetch_file = fetch_file
        self._missing = missing
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> bool:
        """Start downloading (False when a download is already running)."""
        with self._lock:
            if self.running:
                return False
            self._thread = threading.Thread(target=self._run, name="model-fetch", daemon=True)
            self._thread.start()
            return True

    def _run(self) -> None:
        fetch_file = self._fetch_file
        if fetch_file is None:
            from engine.modelfiles.fetch import fetch_file
        todo = self._missing(self.models_dir)
        failures: list[str] = []
        for k, (model, spec) in enumerate(todo, 1):
            size = spec.approx or (f"{spec.size / 2**20:.1f} MB" if spec.size else "size unknown")
            self.on_progress(f"downloading file {k} of {len(todo)}: {model} / {spec.filename} ({size})")
            try:
                result = fetch_file(model, spec, self.models_dir, progress=False)
            except Exception as exc:  # one line per file; the next file still runs
                failures.append(f"{spec.filename}: {exc}")
                continue
            if result.action not in ("present", "downloaded"):
                failures.append(result.message or f"{spec.filename}: {result.action}")
        logger.info("[studio] model fetch finished files=%d failures=%d", len(todo), len(failures))
        self.on_done(failures)
