"""Shared pieces of the studio tests: the test model, an in-process studio, a `studio serve` process.

What this pins: the studio is driven the way users and scripts drive it (HTTP, gradio_client, a real
`studio serve` process with real worker processes on the test model), never through private calls.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from _worker_util import free_port  # noqa: F401 (the studio tests import it from here)

ROOT = Path(__file__).resolve().parents[1]
LRC = "[00:00.50]hello neon night\n[00:02.00]\n"


def descendants(pid: int) -> list[int]:
    """Child processes of `pid`, recursively (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def api_client(url: str, data_dir: Path | None = None, token: str | None = None) -> Any:
    """A gradio_client with an owner token: the machine's (`studio token`) unless one is given."""
    from gradio_client import Client

    from studio.identity import Identity

    token = token or Identity(data_dir).cli_token()
    return Client(url, verbose=False, headers={"Authorization": f"Bearer {token}"})


def gradio_env(tmp: Path) -> dict[str, str]:
    """A `studio serve` process's environment: Gradio's files in `tmp`, and the log level a musician's
    studio logs at (INFO: one line per job and per Generate, with why one made nothing)."""
    env = dict(os.environ)
    env.update(GRADIO_ANALYTICS_ENABLED="False", GRADIO_TEMP_DIR=str(tmp / "gradio"), STUDIO_LOG_LEVEL="INFO")
    return env


# Every `studio serve` log a test process has written, for the failure report (tests/conftest.py).
SERVE_LOGS: list[Path] = []


@contextmanager
def in_process_studio(data_dir: Path, models: Any | None, *, crop_frames: int = 64, status: Any = None,
                      **config: Any):
    """The app launched in this process (engine with one real CPU worker, or none: no weights). The worker
    is served by a thread of this process over the real socket and messages (`WorkerSpec.in_process`): a
    worker process costs ~1.5 s of CPU to start on the test model; tests of the process itself (faults,
    signals, restarts) start one."""
    from studio.app import build_app, launch
    from studio.config import StudioConfig
    from studio.services import ModelStatus, Services
    from studio.store import Store

    engine = None
    if models is not None:
        from engine.config import EngineConfig, WorkerSpec
        from engine.engine import Engine

        engine = Engine(EngineConfig(data_dir, models, workers=[WorkerSpec(threads=1, in_process=True)],
                                     crop_frames=crop_frames,
                                     lock_dir=str(data_dir / "locks")))
    status = status or (ModelStatus(ready=True, label="TEST MODEL: tiny random weights, noise not music") if engine else
              ModelStatus(ready=False, missing=["model file cfm_model.pt of 'diffrhythm-1.2' is missing; "
                                                "run `studio models fetch`"]))
    config = {"test_model": bool(models is not None and models.test), **config}  # as `serve --model test` says
    svc = Services(Store(data_dir), StudioConfig(data_dir, **config), engine=engine, model_status=status)
    demo = build_app(svc)
    _, url, _ = launch(demo, svc, port=free_port(), block=False)
    try:
        yield url, svc
    finally:
        demo.close()
        svc.close()


class ServeProcess:
    """`studio serve` as its own process group (the worker child dies with it on kill)."""

    def __init__(self, data_dir: Path, tmp: Path, *extra: str, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()  # the same port after a restart: the browser's storage is per origin
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = open(tmp / f"serve-{self.port}.log", "w")
        SERVE_LOGS.append(Path(self.log.name))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "studio.cli", "serve", "--model", "test", "--port", str(self.port),
             "--data-dir", str(data_dir), "--threads", "1", *extra],
            cwd=ROOT, env=gradio_env(tmp), stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout_s: float = 240) -> Any:
        """Wait until the page answers and the engine is attached; returns an API client holding the
        machine's token (the studio creates its key on start, so the token is read after that)."""
        deadline = time.monotonic() + timeout_s
        client = None
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"studio serve exited: {self.read_log()}"
            try:
                if client is None and httpx.get(self.url, timeout=2).status_code == 200:
                    client = api_client(self.url, self.data_dir)
                if client is not None:
                    status = client.predict(api_name="/status")
                    assert not status["problem"] and not status["missing"], status["message"]
                    if status["ready"]:
                        return client
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"studio serve not ready after {timeout_s} s: {self.read_log()}")

    def read_log(self, tail: int | None = 3000) -> str:
        """The log's last `tail` characters (None: all of it)."""
        self.log.flush()
        text = Path(self.log.name).read_text()
        return text if tail is None else text[-tail:]

    def kill(self) -> None:
        """Like a power cut: SIGKILL the studio and its worker processes at once, no cleanup.

        (The workers run in their own sessions, so the process group alone would leave them behind.)
        """
        if self.proc.poll() is None:
            for pid in [*descendants(self.proc.pid), self.proc.pid]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


def form(**overrides: Any) -> dict[str, Any]:
    """The API's Generate form. WAV only unless a test asks for more: a 95 s song's MP3 costs ~2.5 s of CPU
    in the encoder child, more than its 4 steps and decode (tests of the files ask for each format)."""
    base = {"lyrics": LRC, "style_source": "text", "style_text": "dreamy synthwave", "duration": 95,
            "steps": 4, "cfg": 4.0, "random_seed": True, "variations": 1, "formats": ["wav"]}
    base.update(overrides)
    return base


def wait_settled(page: Any, timeout_ms: int = 60_000) -> None:
    """Until no output shows Gradio's 'processing' spinner: while one does, its overlay takes the clicks
    meant for what is under it (a person waits for it too)."""
    page.wait_for_function("!document.body.innerText.includes('processing')", timeout=timeout_ms)


def open_ready_page(browser: Any, url: str, *, lyrics: str | None = None, style: str | None = None) -> Any:
    """A new browser (its own storage) on the studio, once the page has loaded; optionally typed into."""
    page = browser.new_context(viewport={"width": 1440, "height": 1100}).new_page()
    page.goto(url)
    page.wait_for_selector("#lyrics textarea", timeout=30_000)
    wait_settled(page, 30_000)
    if lyrics is not None:
        page.locator("#lyrics textarea").fill(lyrics)
    if style is not None:
        page.locator("#style-text textarea, #style-text input").first.fill(style)
    return page


def open_accordion(page: Any, label: str, inside: str) -> None:
    """Open the accordion `label` until `inside` shows (a second call must not close it). On a loaded
    machine one click was seen to leave it shut for 30 s (CI, the live-playback test): a person who sees
    nothing open clicks again, and so does this."""
    shown = page.locator(inside).first
    for _ in range(4):
        if shown.is_visible():
            return
        page.get_by_text(label).click()
        try:
            shown.wait_for(state="visible", timeout=10_000)
            return
        except Exception:  # playwright's TimeoutError: look again, click again
            continue
    raise AssertionError(f"the {label!r} accordion did not open: {inside} never showed")


def set_advanced(page: Any, **values: int) -> None:
    """Open Advanced and type each slider's number, until the slider holds it. The accordion mounts its
    sliders as it opens, and until the mount has settled the initial value overwrites what was typed: the
    box can show the number for a moment and the slider (what Generate sends) go back to the old one, seen
    on a loaded machine as one variation made where two were asked. So each number is typed until box and
    slider both show it half a second later (a person is never quicker than that to reach Generate)."""
    open_accordion(page, "Advanced", "#steps input[type='number']")
    for name, value in values.items():
        box = page.locator(f"#{name} input[type='number']")
        held = (f"document.querySelector(\"#{name} input[type='number']\")?.value === '{value}' && "
                f"document.querySelector(\"#{name} input[type='range']\")?.value === '{value}'")
        for _ in range(20):
            if not page.evaluate(held):
                box.fill(str(value))
                box.press("Enter")
            page.wait_for_timeout(500)
            if page.evaluate(held):
                break
        assert page.evaluate(held), f"{name} did not take {value}: it shows {box.input_value()}"


DONE_COUNT = ("(document.querySelector('#takes')?.innerText ?? '').split('\\n')"
              ".filter(l => l.trim().endsWith('done')).length")


QUIET = """() => {
    const busy = document.querySelectorAll("[data-testid=status-tracker]:not(.hide)").length > 0;
    if (busy) { window.quietSince = null; return false; }
    window.quietSince = window.quietSince ?? performance.now();
    return performance.now() - window.quietSince > 500;
}"""


def wait_quiet(page: Any, timeout_ms: int = 60_000) -> None:
    """Until no event of the page is pending (no status tracker shown) for half a second. A take's
    follow ends with `show_finished` (the list and the take redrawn): a click made before it answers is
    undone by it, on a loaded machine seconds later (the regions test opened one take and continued
    another). A person sees those spinners too."""
    page.evaluate("window.quietSince = null")
    page.wait_for_function(QUIET, timeout=timeout_ms)


def wait_done(page: Any, count: int, timeout_ms: int = 240_000) -> None:
    """Until the takes list shows `count` finished takes and the page has redrawn them (`wait_quiet`); on
    a timeout, the failure says what the page showed instead (its message under Generate, the takes list,
    any toast), not only that it waited."""
    try:
        page.wait_for_function(f"{DONE_COUNT} === {count}", timeout=timeout_ms)
    except Exception as exc:  # playwright's TimeoutError
        shown = page.evaluate("""() => ({
            message: document.querySelector('#gen-message')?.innerText ?? '',
            takes: document.querySelector('#takes')?.innerText ?? '',
            toasts: [...document.querySelectorAll('.toast-body')].map(t => t.innerText)})""")
        raise AssertionError(f"{count} finished takes never showed: {shown}") from exc
    wait_quiet(page)


def open_page(context: Any, url: str) -> Any:
    """A new tab on the studio, once its form is there and Gradio has finished loading it."""
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#lyrics textarea", timeout=60_000)
    wait_settled(page)
    return page


@contextmanager
def fresh_studio(tmp_path_factory: Any):
    """A module's own in-process studio on the test model (its files as `studio serve --model test` keeps
    them), in fresh data folders: yields (url without the trailing slash, services)."""
    tmp = tmp_path_factory.mktemp("studio")
    with studio_on_test_model(tmp) as (url, svc):
        yield url.rstrip("/"), svc


@contextmanager
def studio_on_test_model(tmp: Path, **config: Any):
    """`in_process_studio` on the test model's files (as `studio serve --model test` keeps them), with its
    data in `tmp/data` and Gradio's uploads in `tmp/gradio`: yields (url, services)."""
    from studio.testmodel import ensure_test_models

    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    os.environ["GRADIO_TEMP_DIR"] = str(tmp / "gradio")
    with in_process_studio(tmp / "data", ensure_test_models(), **config) as (url, svc):
        yield url, svc


@contextmanager
def page_with_takes(tmp: Path, chromium: str, args: list[str], takes: int, *, lyrics: str | None = None,
                    style: str | None = None):
    """An in-process studio on the cropped test model, and a browser page on it that generated `takes`
    variations and shows the newest finished one: for a module of browser tests on finished takes (what
    they read is the page; tests of the `studio serve` process itself start one)."""
    from playwright.sync_api import sync_playwright

    with studio_on_test_model(tmp, crop_frames=64) as (url, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        try:
            page = open_ready_page(browser, url, lyrics=lyrics, style=style)
            set_advanced(page, variations=takes)
            page.click("#generate")
            wait_done(page, takes)
            page.wait_for_function("document.querySelector('#take-audio audio')?.duration > 2", timeout=30_000)
            yield page
        finally:
            browser.close()
