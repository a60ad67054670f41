"""Shared fixtures: the reference folder beside the checkout, tiny checkpoints, temp data dirs."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from shared_paths import REFERENCE

# The product finds the phone vocabulary only where a musician's machine has it (the model files); tests
# that read real lyrics use the reference copy, handed over the documented way (subprocesses inherit it).
if (REFERENCE / "g2p" / "g2p" / "vocab.json").is_file():
    os.environ.setdefault("STUDIO_LYRICS_VOCAB", str(REFERENCE / "g2p" / "g2p" / "vocab.json"))


def _no_stray_event_loops() -> None:
    """Gradio makes its queue's and server's asyncio locks with a helper that, outside a running loop, creates
    a new event loop, sets it as the thread's, and never closes it: every app built left two or three open
    loops behind (`ResourceWarning: unclosed event loop`, eleven in one three-test module), which 25 test
    modules silenced, and with them any socket or file a test really leaked. On Python >= 3.10 a lock or
    event binds to the loop that first waits on it, so the loop made beforehand is never used: tests make
    them plainly. The studio process builds its app once; its two idle loops are left to Gradio."""
    import gradio.queueing
    import gradio.utils

    for module in (gradio.utils, gradio.queueing):  # (queueing imported the helper by name)
        module.safe_get_lock = asyncio.Lock
    gradio.utils.safe_get_stop_event = asyncio.Event


_no_stray_event_loops()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A failed test's report ends with the tail of each `studio serve` log written while it ran: what the
    studio did (a Generate refused, a job queued, a worker lost) is what a page-level failure leaves out,
    and on CI the temp folders holding the logs are gone."""
    outcome = yield
    report = outcome.get_result()
    if call.when == "setup":
        item.stash[_STARTED] = call.start
    if not report.failed:
        return
    from studio_helpers import SERVE_LOGS

    started = item.stash.get(_STARTED, call.start)
    for log in dict.fromkeys(SERVE_LOGS):
        try:
            if log.stat().st_mtime >= started:
                report.sections.append((f"studio serve log {log.name} (last 40 lines)",
                                        "\n".join(log.read_text(errors="replace").splitlines()[-40:])))
        except OSError:
            continue


_STARTED = pytest.StashKey[float]()


def pytest_configure(config: pytest.Config) -> None:
    """A test process of a suite run in several (pytest-xdist) computes on one thread: three processes on two
    cores gain nothing from torch's intra-op threads and pay for their hand-offs (each op's threads spin
    before they sleep). The VAE window and Whisper modules alone took 37.7 core-s on two threads, 29.7 on
    one. (The workers and studios the tests start are given one thread already; a test that needs another
    count sets it.)"""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one test process per core, and one more. On this 2-core machine the serial suite kept 1.2
    cores busy (most tests wait on a studio, a worker process, a browser or a Ray node), and three processes
    finished it in 735 s where one took 1009 s. At most eight: each may hold a studio, a browser and a worker."""
    return min(len(os.sched_getaffinity(0)) + 1, 8)


@pytest.fixture(scope="session")
def test_models():
    """The test model's files (`studio.testmodel`), written once to the user cache as `studio serve --model
    test` writes them; read-only for every test. (Eleven modules wrote a copy each: ~4 s apiece.)"""
    from studio.testmodel import ensure_test_models

    return ensure_test_models()


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """`../shared/reference/diffrhythm`, or skip saying why."""
    if not REFERENCE.is_dir():
        pytest.skip(f"upstream reference vectors not found at {REFERENCE} (CI keeps ../shared beside the checkout)")
    return REFERENCE


@pytest.fixture(scope="session")
def tiny_dit_base(reference_dir: Path) -> Path:
    return reference_dir / "dit-tiny-base"


@pytest.fixture(scope="session")
def tiny_dit_full(reference_dir: Path) -> Path:
    return reference_dir / "dit-tiny-full"


@pytest.fixture(scope="session")
def tiny_vae(reference_dir: Path) -> Path:
    return reference_dir / "vae-tiny" / "vae_model.pt"
