"""The studio's first-run download: per-file progress in order, failures named, then the retry hook.

What this pins: the page's banner text during a download and what happens after it, without network
(the download function is a stand-in; `engine.modelfiles` has its own tests).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from studio.fetcher import Fetcher


@dataclass
class Spec:
    filename: str
    size: int | None = None
    approx: str = ""


@dataclass
class Result:
    action: str
    message: str = ""


def run(fetch_file, missing) -> tuple[list[str], list[str]]:
    progress: list[str] = []
    finished = threading.Event()
    failures: list[str] = []

    def done(f: list[str]) -> None:
        failures.extend(f)
        finished.set()

    fetcher = Fetcher(progress.append, done, fetch_file=fetch_file, missing=lambda _d: missing)
    assert fetcher.start()
    assert finished.wait(10)
    return progress, failures


def test_progress_names_each_file_and_done_reports_no_failures() -> None:
    calls = []

    def fetch_file(model, spec, models_dir, *, progress):
        calls.append((model, spec.filename, progress))
        return Result("downloaded")

    missing = [("diffrhythm-1.2", Spec("cfm_model.pt", approx="~2.2 GB")), ("vae", Spec("vae_model.pt", size=2 ** 20))]
    progress, failures = run(fetch_file, missing)
    assert progress == ["downloading file 1 of 2: diffrhythm-1.2 / cfm_model.pt (~2.2 GB)",
                        "downloading file 2 of 2: vae / vae_model.pt (1.0 MB)"]
    assert failures == [] and [c[1] for c in calls] == ["cfm_model.pt", "vae_model.pt"]
    assert all(c[2] is False for c in calls)  # no tqdm bars on the server's stderr


def test_failures_are_named_and_later_files_still_run() -> None:
    def fetch_file(model, spec, models_dir, *, progress):
        if spec.filename == "a.bin":
            raise OSError("connection reset")
        if spec.filename == "b.bin":
            return Result("offline", "cannot download b.bin: offline mode")
        return Result("present")

    _, failures = run(fetch_file, [("m", Spec("a.bin")), ("m", Spec("b.bin")), ("m", Spec("c.bin"))])
    assert failures == ["a.bin: connection reset", "cannot download b.bin: offline mode"]
