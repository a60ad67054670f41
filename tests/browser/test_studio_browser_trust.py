"""Sessions in a real browser across a studio restart, kept private, shared read-only, revoked.

`studio serve` runs as its own process and is restarted on the same port (a browser's storage is
per origin). Browser A makes a session; after the restart and a reload it is still A's, with its take
and an unsent draft. Browser B sees none of it; A's share link shows B exactly that session read-only;
a revoked link says so in words; sessions made by API scripts and `studio render` (the machine's token)
are invisible to both browsers until one is opened with `?key=`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chromium import ARGS, CHROMIUM, NO_ERRORS
from studio_helpers import LRC, ServeProcess, form, open_page

pytestmark = pytest.mark.browser

TITLE = "Harbour lights"
FIELD = "#title textarea, #title input"


def sessions_text(page) -> str:
    return page.inner_text("#sessions")


def test_sessions_survive_a_restart_stay_private_and_share_read_only(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    data = tmp_path / "data"
    studio = ServeProcess(data, tmp_path, "--test-crop-frames", "64")
    port = studio.port
    try:
        api = studio.wait_ready()
        made = api.predict(form(title="Made by a script"), "", api_name="/submit")
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            a, b = browser.new_context(), browser.new_context()  # two browsers: separate storage
            page = open_page(a, studio.url)
            page.locator(FIELD).first.fill(TITLE)
            page.locator("#lyrics textarea").fill(LRC)
            page.locator("#style-text textarea, #style-text input").first.fill("sea shanty, male choir")
            page.click("#generate")
            page.wait_for_function("document.querySelector('#takes')?.innerText.includes('done')", timeout=120_000)
            page.wait_for_function(f"document.querySelector('#sessions')?.innerText.includes('{TITLE}')",
                                   timeout=30_000)
            assert "Made by a script" not in sessions_text(page)
            # A draft typed in a new session and never generated.
            page.click("#new-session")
            page.wait_for_function(f"document.querySelector('{FIELD}')?.value === ''", timeout=30_000)
            page.locator("#lyrics textarea").fill("[00:01.00]a draft never sent\n[00:03.00]\n")
            page.wait_for_function("localStorage.getItem('diffrhythm-studio-draft') !== null", timeout=30_000)

            studio.stop()
            studio = ServeProcess(data, tmp_path, "--test-crop-frames", "64", port=port)
            studio.wait_ready()

            page.reload()
            page.wait_for_function(f"document.querySelector('#sessions')?.innerText.includes('{TITLE}')",
                                   timeout=60_000)
            assert "a draft never sent" in page.locator("#lyrics textarea").input_value()
            page.locator("#sessions").get_by_text(TITLE).click()
            page.wait_for_function(f"document.querySelector('{FIELD}')?.value === '{TITLE}'", timeout=30_000)
            page.wait_for_function("document.querySelector('#takes')?.innerText.includes('done')", timeout=30_000)
            assert not page.evaluate(NO_ERRORS)

            other = open_page(b, studio.url)
            assert TITLE not in sessions_text(other) and "Made by a script" not in sessions_text(other)

            page.get_by_text("Share this session").click()
            page.click("#share")
            page.wait_for_function("document.querySelector('#share-link input, #share-link textarea')"
                                   "?.value.includes('?s=')", timeout=30_000)
            link = page.locator("#share-link input, #share-link textarea").first.input_value()
            other.goto(link)
            other.wait_for_function("document.querySelector('#shared-banner')?.innerText.includes('read-only')",
                                    timeout=60_000)
            assert TITLE in other.inner_text("#shared-banner")
            assert TITLE not in sessions_text(other)  # shown, not handed over
            assert not other.locator("#generate").is_visible()
            assert not other.evaluate(NO_ERRORS)

            page.click("#revoke")
            page.wait_for_function("document.body.innerText.includes('Link revoked')", timeout=30_000)
            other.reload()
            other.wait_for_function("document.querySelector('#shared-banner')?.innerText.includes('revoked')",
                                    timeout=60_000)
            assert not other.evaluate(NO_ERRORS), other.inner_text("body")[:2000]

            # A's own shared view: picking one of its sessions there opens it, editable, with no error.
            page.goto(link.split("?")[0])
            page.wait_for_function(f"document.querySelector('#sessions')?.innerText.includes('{TITLE}')",
                                   timeout=60_000)
            assert "Made by a script" not in sessions_text(page)
            # `studio token`'s link hands the machine's key to this browser: now it sees the script's session.
            from studio.identity import Identity

            page.goto(f"{studio.url}?key={Identity(data).cli_token()}")
            page.click("#key-accept", timeout=60_000)  # asked first: this browser has a key of its own
            page.wait_for_function("document.querySelector('#sessions')?.innerText.includes('Made by a script')",
                                   timeout=60_000)
            assert made["session_id"]
            browser.close()
    finally:
        studio.stop()
