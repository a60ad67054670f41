"""The first minute on a fresh machine, as a newcomer has it.

What this pins: a copy of the repository in a temporary folder with nothing beside it (no ../shared), an
empty HOME (no model cache, no studio folder) and no STUDIO_* variables, started with the README's serve
command, makes a song in the browser with the page opened the moment it answers (before the model is
ready): Generate is queued, not refused, the status line updates by itself, and no server path reaches the
page. The API path is pinned the same way (a take submitted while loading says it waits for the model).
The CI venv is reused (the README's pip step is what .ci/run already did); the copy's own code runs.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from browser_shots import save_page
from chromium import ARGS, CHROMIUM, needs_browser
from studio_helpers import api_client, descendants, form, free_port

ROOT = Path(__file__).resolve().parents[2]
# A plain three-line lyric whose last line is sung (timed, as the page's lyrics box takes them).
LYRICS = "[00:00.50]Neon rain on the window\n[00:02.00]I drive until the morning\n[00:03.50]Home is where the lights are\n"
SONG_LIMIT_S = 300  # Generate to a playable take on a loaded 2-core CI machine, model loading included


def readme_serve_command() -> str:
    """The README's first command, as written (the test runs its last step: the venv is CI's)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"Run the studio.*?```bash\n(.*?)\n```", text, re.S)
    assert block, "README.md lost its 'Run the studio' command"
    return block.group(1).strip()


def fresh_copy(tmp: Path) -> Path:
    """The repository's files (what `git clone` of this working tree gives) alone in `tmp/clone`."""
    clone = tmp / "clone"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / name)
    assert not (clone.parent / "shared").exists()
    return clone


def newcomer_env(tmp: Path) -> dict[str, str]:
    """An empty HOME, no STUDIO_* or cache variables: nothing a newcomer's machine would not have."""
    home = tmp / "home"
    home.mkdir()
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "TERM")}
    return {**keep, "HOME": str(home), "GRADIO_ANALYTICS_ENABLED": "False"}


class Newcomer:
    """The README's serve command, run in the fresh copy (its code, CI's interpreter) on a free port."""

    def __init__(self, tmp: Path) -> None:
        command = readme_serve_command()
        assert command.endswith(".venv/bin/studio serve --model test"), command
        self.tmp, self.clone, self.env = tmp, fresh_copy(tmp), newcomer_env(tmp)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = open(tmp / "serve.log", "w")
        # `studio serve --model test` from the copy: `-m` with the copy as the working folder imports its
        # packages, not the checkout's (the venv's editable install points at the checkout).
        self.proc = subprocess.Popen([sys.executable, "-m", "studio.cli", "serve", "--model", "test",
                                      "--port", str(self.port)], cwd=self.clone, env=self.env,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_for_page(self, timeout_s: float = 120) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            assert self.proc.poll() is None, self.read_log()
            try:
                if httpx.get(self.url, timeout=1).status_code == 200:
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"the page did not answer in {timeout_s} s: {self.read_log()}")

    def data_dir(self) -> Path:
        return Path(self.env["HOME"]) / ".local" / "share" / "diffrhythm-studio"

    def read_log(self) -> str:
        self.log.flush()
        return (self.tmp / "serve.log").read_text()[-4000:]

    def server_paths(self) -> list[str]:
        """Absolute paths a message must never show: the temp folder, the home folder, the data folder."""
        return [str(self.tmp), self.env["HOME"], str(self.data_dir()), str(ROOT)]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                for pid in [*descendants(self.proc.pid), self.proc.pid]:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        self.log.close()


def _serving(tmp: Path):
    studio = Newcomer(tmp)
    try:
        yield studio
    finally:
        studio.stop()


@pytest.fixture
def newcomer(tmp_path: Path):
    yield from _serving(tmp_path)


@pytest.fixture(scope="module")
def api_newcomer(tmp_path_factory: pytest.TempPathFactory):
    """One newcomer studio for the API tests: the first submits while it loads, the refusals need only
    its folders. (A studio each cost the second one a fresh copy, the test model written again and a
    worker started: 26 s in the suite.)"""
    yield from _serving(tmp_path_factory.mktemp("newcomer-api"))


def test_a_newcomer_makes_a_song_in_the_browser_opened_before_the_model_is_ready(newcomer: Newcomer) -> None:
    needs_browser()
    from playwright import sync_api
    answered = newcomer.wait_for_page()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(newcomer.url)
            page.wait_for_selector("#lyrics textarea", timeout=60_000)
            banner = page.locator("#model-banner")
            loading = banner.inner_text()
            print(f"page answered after {answered:.1f} s; status line: {loading!r}")
            page.locator("#lyrics textarea").fill(LYRICS)
            page.locator("#style-text textarea, #style-text input").first.fill("dreamy synthwave, female vocal")
            save_page(page, newcomer.tmp, "first-minute-loading.png")
            t0 = time.monotonic()
            page.click("#generate")
            # The status line follows the model by itself (no reload) until it names where it runs.
            page.wait_for_function("(document.querySelector('#model-banner')?.innerText ?? '').includes('Running on')",
                                   timeout=SONG_LIMIT_S * 1000)
            ready_text = banner.inner_text()
            try:
                page.wait_for_function("document.querySelector('#take-audio audio')?.duration > 2",
                                       timeout=SONG_LIMIT_S * 1000)
            except sync_api.TimeoutError:  # say what the page said instead of a song
                save_page(page, newcomer.tmp, "first-minute-no-take.png")
                raise AssertionError(f"no take with audio in {SONG_LIMIT_S} s; the page says: "
                                     f"{page.inner_text('#gen-message')!r} / {page.inner_text('#progress')!r}; "
                                     f"the studio's log ends: {newcomer.read_log()[-1500:]}") from None
            took = time.monotonic() - t0
            print(f"Generate -> a take with audio in {took:.1f} s; status line: {ready_text!r}")
            save_page(page, newcomer.tmp, "first-minute-take.png")
            text = page.evaluate("document.body.innerText")
            assert "Loading the model" in loading or "Running on" in loading, loading
            assert "Songs cannot be made" not in text and "VocabError" not in text
            assert page.get_by_role("button", name="Refresh the take list").count() == 1  # ↻ has a name
            for path in newcomer.server_paths():
                assert path not in text, f"the page shows a server path ({path})"
        finally:
            browser.close()
    log = newcomer.read_log()
    assert "ready:" in log and "on cpu" in log, log  # --device auto chose the CPU here, and says so


def test_a_take_submitted_while_the_model_loads_waits_for_it_and_runs(api_newcomer: Newcomer) -> None:
    api_newcomer.wait_for_page()
    client = api_client(api_newcomer.url, api_newcomer.data_dir())
    status = client.predict(api_name="/status")
    r = client.predict(form(steps=4), "", api_name="/submit")
    first = client.predict(r["takes"][0], api_name="/take")
    if status["loading"]:  # the page answers well before the test model is written and a worker is up
        assert first["status"] == "queued" and first["phase"].startswith("waiting for the model"), first
    final = list(client.submit(r["takes"][0], api_name="/follow"))[-1]
    assert final["status"] == "done", final
    worker = final["record"]["worker"]
    assert worker["device"] == "cpu" and worker["precision"] in ("float32", "bfloat16"), worker
    status = client.predict(api_name="/status")
    assert status["ready"] and status["workers"].startswith("cpu, "), status
    assert f"Running on {status['workers']}" in status["message"]


def test_refusals_name_no_server_path(api_newcomer: Newcomer) -> None:
    """Every refusal the API gives for bad input, read for the temp, home and data folders."""
    from gradio_client.exceptions import AppError

    api_newcomer.wait_for_page()
    client = api_client(api_newcomer.url, api_newcomer.data_dir())
    home = api_newcomer.env["HOME"]
    bad_forms = [
        form(style_source="audio", style_audio=f"{home}/secret.wav"),
        form(style_source="audio", style_audio="/etc/passwd"),
        form(duration=9999),
        form(style_text=""),
        form(lyrics="[00:00.50]" + "la " * 20000),
        form(style_source="saved", style_saved="no-such-style"),
        form(edit_mode="continue", edit_take="no-such-take"),
    ]
    messages = []
    for bad in bad_forms:
        with pytest.raises(AppError) as refused:
            client.predict(bad, "", api_name="/submit")
        messages.append(str(refused.value))
    for call, args in (("/take", ("no-such-take",)), ("/lyrics_report", ("[00:00.50]la " * 9000, 95)),
                       ("/retry", ("nope", "nope")), ("/save_style", ("bad/name", "x"))):
        try:
            client.predict(*args, api_name=call)
        except AppError as exc:
            messages.append(str(exc))
    assert len(messages) >= len(bad_forms)
    for message in messages:
        assert "Traceback" not in message, message
        for path in api_newcomer.server_paths():
            assert path not in message, f"{path} in {message!r}"
