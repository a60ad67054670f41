"""Issue 27, finding 3 in a real browser: `/?key=<token>` silently replaced a browser's identity (its
sessions vanished and its next songs went to the link-maker's account) and stayed in the address bar.

Now a browser with a key of its own is asked; "Keep mine" changes nothing, "Use the link's key" switches
and keeps the old key one click away; a browser with no key yet takes the link's key without asking.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chromium import ARGS, CHROMIUM, NO_ERRORS
from studio_helpers import LRC, ServeProcess, form, open_page

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore::ResourceWarning")]

FIELD = "#title textarea, #title input"


def sessions_include(page, title: str) -> None:
    page.wait_for_function(f"document.querySelector('#sessions')?.innerText.includes('{title}')", timeout=60_000)


def test_key_link_asks_before_replacing_a_browsers_identity(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    from studio.identity import Identity

    data = tmp_path / "data"
    studio = ServeProcess(data, tmp_path, "--test-crop-frames", "64")
    try:
        api = studio.wait_ready()
        api.predict(form(title="Made by a script"), "", api_name="/submit")
        link = f"{studio.url}?key={Identity(data).cli_token()}"
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = open_page(browser.new_context(), studio.url)
            page.locator(FIELD).first.fill("Mine")
            page.locator("#lyrics textarea").fill(LRC)
            page.locator("#style-text textarea, #style-text input").first.fill("sea shanty, male choir")
            page.click("#generate")
            sessions_include(page, "Mine")

            page.goto(link)
            page.wait_for_selector("#key-prompt", state="visible", timeout=60_000)
            page.wait_for_function("!window.location.search.includes('key=')", timeout=30_000)
            sessions_include(page, "Mine")  # nothing switched while asking
            assert "Made by a script" not in page.inner_text("#sessions")
            page.click("#key-keep")
            page.wait_for_selector("#key-prompt", state="hidden", timeout=30_000)
            page.reload()
            page.wait_for_selector("#lyrics textarea", timeout=60_000)
            sessions_include(page, "Mine")  # kept: still this browser's own key

            page.goto(link)
            page.click("#key-accept", timeout=60_000)
            sessions_include(page, "Made by a script")
            assert "Mine" not in page.inner_text("#sessions")
            page.click("#key-back", timeout=30_000)  # the old key was kept, one click away
            sessions_include(page, "Mine")
            assert "Made by a script" not in page.inner_text("#sessions")
            assert not page.evaluate(NO_ERRORS), page.inner_text("body")[:2000]

            fresh = open_page(browser.new_context(), link)  # no key of its own: nothing to lose, no question
            sessions_include(fresh, "Made by a script")
            assert not fresh.is_visible("#key-prompt")
            browser.close()
    finally:
        studio.stop()
