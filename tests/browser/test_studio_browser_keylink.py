"""Issue 27, finding 3 in a real browser: `/?key=<token>` silently replaced a browser's identity (its
sessions vanished and its next songs went to the link-maker's account) and stayed in the address bar.

Now a browser with a key of its own is asked; "Keep mine" changes nothing, "Use the link's key" switches
and keeps the old key one click away; a browser with no key yet takes the link's key without asking.
Leaving a session (another owner's key, a new session) also stops the page following the old session's
takes: that follow used to draw the old take list over the new page, and the next event was refused.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from chromium import ARGS, CHROMIUM, NO_ERRORS, needs_browser
from studio_helpers import LRC, ServeProcess, form, open_page, open_ready_page, set_advanced

pytestmark = pytest.mark.browser

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


TAKE_OPTIONS = "document.querySelectorAll('#takes input[type=radio]').length"


def test_leaving_a_session_stops_following_its_takes(tmp_path: Path) -> None:
    """A reloaded page follows its session's running take (the watch); "+ New session" while it renders
    must leave the new page blank until, and after, the old take ends, and the page keeps working."""
    needs_browser()
    from playwright.sync_api import sync_playwright

    from studio.store import Store

    studio = ServeProcess(tmp_path / "data", tmp_path)  # full-length test songs: a take renders a while
    try:
        studio.wait_ready()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = open_ready_page(browser, studio.url, lyrics=LRC, style="sea shanty, male choir")
            page.locator(FIELD).first.fill("Left behind")
            set_advanced(page, steps=32)
            page.click("#generate")
            page.wait_for_function("/step/.test(document.querySelector('#progress-list')?.innerText || '')",
                                   timeout=120_000)
            page.reload()  # the reopened session's running take is followed again
            page.wait_for_function("/step/.test(document.querySelector('#progress-list')?.innerText || '')",
                                   timeout=60_000)
            assert page.evaluate(TAKE_OPTIONS) == 1
            page.click("#new-session")
            page.wait_for_function(f"{TAKE_OPTIONS} === 0", timeout=30_000)

            store = Store(tmp_path / "data")
            try:
                take = store.list_takes(store.list_sessions()[0].id)[0]
                deadline = time.monotonic() + 300
                ended_at = None
                # Sampled while the old take renders and for a few seconds after it ends (its follow's
                # last redraw comes then): the new page's take list stays empty throughout.
                while ended_at is None or time.monotonic() - ended_at < 4:
                    assert time.monotonic() < deadline, "the old take did not end"
                    assert page.evaluate(TAKE_OPTIONS) == 0, page.inner_text("#takes")
                    if ended_at is None and store.get_take(take.id).status in ("done", "failed", "cancelled"):
                        ended_at = time.monotonic()
                    page.wait_for_timeout(250)
                assert store.get_take(take.id).status == "done"  # leaving the page's follow left the take alone
            finally:
                store.close()

            # The page takes events again (a stale take id would be refused): a new song in the new session.
            page.locator(FIELD).first.fill("Fresh start")
            page.locator("#lyrics textarea").fill(LRC)
            page.locator("#style-text textarea, #style-text input").first.fill("sea shanty, male choir")
            page.click("#generate")
            try:
                page.wait_for_function(f"{TAKE_OPTIONS} === 1", timeout=60_000)
            except Exception:
                raise AssertionError(page.inner_text("body")[:3000]) from None
            assert not page.evaluate(NO_ERRORS), page.inner_text("body")[:2000]
            browser.close()
    finally:
        studio.stop()
