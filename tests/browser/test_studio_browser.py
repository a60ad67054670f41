"""The studio in a real browser: Debian's Chromium driven by Playwright's Python package (no download).

Fill lyrics and style, Generate, wait for the audio, share, open the link in a second browser profile
(read-only view, "copy into my sessions"). Screenshots go to the test's tmp dir; with
STUDIO_UPDATE_SCREENSHOTS=1 they also replace the README's pictures in docs/screenshots/.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from browser_shots import save_page as save
from chromium import ARGS, CHROMIUM, NO_ERRORS, needs_browser
from studio_helpers import in_process_studio, set_advanced, studio_on_test_model

pytestmark = pytest.mark.browser

BUSY = "document.body.innerText.includes('processing')"  # gradio's per-output spinner text
LYRICS = ("[00:00.50]Neon rain on the window\n[00:01.60]I drive until the morning\n[00:02.60]\n")


@pytest.fixture(scope="module")
def studio_url(tmp_path_factory: pytest.TempPathFactory):
    needs_browser()
    tmp = tmp_path_factory.mktemp("browser")
    with studio_on_test_model(tmp, crop_frames=64) as (url, svc):
        yield url, svc, tmp


def test_compose_generate_listen_share(studio_url) -> None:
    from playwright.sync_api import sync_playwright

    url, svc, tmp = studio_url
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(url)
            page.wait_for_selector("#lyrics textarea", timeout=30_000)
            page.locator("#title textarea, #title input").first.fill("Neon rain")
            page.locator("#lyrics textarea").fill(LYRICS)
            page.locator("#style-text textarea, #style-text input").first.fill("dreamy synthwave, female vocals")
            # The live lyric report appears while typing (what the model will sing, line by line).
            page.wait_for_function("(document.querySelector('#lyric-report')?.innerText ?? '').includes('singable')",
                                   timeout=30_000)
            page.click("#generate")
            # Progress is shown while the song is made, then the finished take's player.
            page.wait_for_selector("#take-audio audio[src], #take-audio [data-testid='waveform-Take']",
                                   state="attached", timeout=120_000)
            page.wait_for_function("(document.querySelector('#takes')?.innerText ?? '').includes('done')", timeout=60_000)
            page.wait_for_selector("#take-regions .wr-canvas", state="attached", timeout=30_000)  # waveform drawn
            page.wait_for_function(f"!({BUSY})", timeout=30_000)
            save(page, tmp, "studio.png")
            assert not page.evaluate(NO_ERRORS), "an error toast or error status is on the page"
            assert not page.locator("#take-cancel").is_visible()  # a finished take has nothing to cancel
            assert page.locator("#take-regions .wr-repaint").is_visible()  # the owner may edit regions
            takes = svc.store.list_takes(svc.store.list_sessions()[0].id)
            assert takes and takes[0].status == "done" and Path(takes[0].files["wav"]).is_file()
            # What was typed is what was rendered (a slow page load must not reset the form).
            assert "Neon rain" in takes[0].request["lyrics"]
            assert takes[0].request["style"]["text"] == "dreamy synthwave, female vocals"

            page.get_by_text("Share this session").click()
            page.click("#share")
            page.wait_for_function(
                "(document.querySelector('#share-link textarea, #share-link input') || {}).value?.includes('?s=')",
                timeout=30_000)
            link = page.locator("#share-link textarea, #share-link input").first.input_value()
            assert link.startswith("http://127.0.0.1") and "?s=" in link

            other = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()  # another person
            other.goto(link)
            other.wait_for_function(
                "document.querySelector('#shared-banner')?.innerText.includes('Shared session')", timeout=30_000)
            other.wait_for_function("(document.querySelector('#takes')?.innerText ?? '').includes('done')", timeout=30_000)
            assert not other.locator("#generate").is_visible()  # read-only: no Generate
            assert not other.locator("#take-delete").is_visible()
            # The take's waveform loops regions for a listener, but offers no edits and no cancel.
            other.wait_for_selector("#take-regions .wr-canvas", state="attached", timeout=30_000)
            assert other.locator("#take-regions .wr-repaint, #take-regions .wr-extend").count() == 0
            assert not other.locator("#take-cancel").is_visible()
            other.wait_for_function(f"!({BUSY})", timeout=30_000)
            save(other, tmp, "shared.png")
            assert not other.evaluate(NO_ERRORS), "an error toast or error status is on the page"
            other.click("#copy-shared")
            other.wait_for_function("(document.querySelector('#gen-message')?.innerText ?? '').includes('Copied')",
                                    timeout=30_000)
            assert other.locator("#generate").is_visible()  # the copy is theirs to work on
            other.wait_for_function("!window.location.search.includes('s=')", timeout=10_000)  # refresh = the copy
            assert len(svc.store.list_sessions()) == 2
        finally:
            browser.close()


def test_without_weights_the_page_says_what_is_missing_and_downloads_with_progress(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    from studio.services import ModelStatus

    missing = ["diffrhythm-1.2: cfm_model.pt", "vae: vae_model.pt", "mulan: pytorch_model.bin"]
    status = ModelStatus(ready=False, missing=missing, can_fetch=True)
    os.environ["GRADIO_TEMP_DIR"] = str(tmp_path / "gradio")
    with in_process_studio(tmp_path / "data", None, status=status) as (url, svc):
        started = []

        def fake_fetch() -> bool:  # the real one downloads; here only the banner's progress matters
            started.append(True)
            svc.model_status = ModelStatus(ready=False, loading="downloading file 2 of 3: vae / vae_model.pt (~600 MB)",
                                           downloading=True)
            return True

        svc.on_fetch = fake_fetch
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.goto(url)
                page.wait_for_function(
                    "document.querySelector('#model-banner')?.innerText.includes('studio models fetch')",
                    timeout=30_000)
                assert "cfm_model.pt" in page.inner_text("#model-banner")
                page.wait_for_function(f"!({BUSY})", timeout=30_000)
                save(page, tmp_path, "no-weights.png")
                page.click("#fetch-models")
                page.wait_for_function(
                    "document.querySelector('#model-banner')?.innerText.includes('downloading file 2 of 3')",
                    timeout=30_000)
                assert started == [True]
            finally:
                browser.close()


def slow_first_load(svc, monkeypatch, seconds: float = 3.0) -> None:
    """The page's first load on a machine busy with other work: the browser's new key comes late."""
    import time

    new_token = svc.identity.new_token

    def slow_new_token() -> str:
        time.sleep(seconds)
        return new_token()

    monkeypatch.setattr(svc.identity, "new_token", slow_new_token)


FORM = ("() => [document.querySelector('#title textarea, #title input').value,"  # title, lyrics, style
        " document.querySelector('#lyrics textarea').value,"
        " document.querySelector('#style-text textarea, #style-text input').value]")
HLS = "**/assets/hls-*.js"  # the audio players' streaming library


def hold_back_hls(page) -> list:
    """Hold the page's request for hls.js, as a slow machine delays it: Gradio sends the page's first load
    once every component is ready, the audio players too. Call before the page loads; answer the held
    requests with `route.continue_()`."""
    held: list = []
    page.route(HLS, lambda route: held.append(route))
    return held


def wait_held(page, held: list) -> None:
    """Until the page has asked for hls.js (and is held there)."""
    import time

    deadline = time.monotonic() + 30
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert held, "the page no longer loads hls.js: hold back another part the first load waits for"


def test_generate_waits_for_the_browsers_key_instead_of_refusing(studio_url, monkeypatch) -> None:
    """A newcomer on a loaded machine typed and pressed Generate before the page's first load had handed the
    browser its key: the page answered "no key yet: reload it" and made nothing. Generate stays off until
    the key is there, then makes the take."""

    from playwright.sync_api import sync_playwright

    url, svc, tmp = studio_url
    slow_first_load(svc, monkeypatch)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url)
            page.wait_for_selector("#lyrics textarea", timeout=30_000)
            assert page.locator("#generate").is_disabled()  # the key is still on its way
            page.locator("#lyrics textarea").fill(LYRICS)
            page.locator("#style-text textarea, #style-text input").first.fill("slow ambient pads")
            page.click("#generate")  # Playwright waits until the button can be pressed, as a musician would
            page.wait_for_function("(document.querySelector('#gen-message')?.innerText ?? '').includes('Submitted 1 take')",
                                   timeout=30_000)
            page.wait_for_function("(document.querySelector('#takes')?.innerText ?? '').includes('done')", timeout=120_000)
        finally:
            browser.close()


def test_what_is_typed_while_the_page_first_loads_is_kept(studio_url, monkeypatch) -> None:
    """CI, on a loaded machine: the trust test typed a title, lyrics and a style, pressed Generate, and the
    page answered "Describe the style". Gradio sends the page's first load once every component on it is
    ready, which can be after the first text boxes can be typed in. The title, typed first, had written a
    draft; the first load sent it as this browser's unsent draft and restored it, and wiped the lyrics and
    style typed while it ran. Here the audio players' streaming library is held back, as a slow machine
    delays it, until the title is typed, and the first load is slowed while the rest is typed."""

    from playwright.sync_api import sync_playwright

    url, svc, tmp = studio_url
    slow_first_load(svc, monkeypatch)
    typed = ["Typed early", LYRICS, "slow ambient pads"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            held = hold_back_hls(page)  # answered after the title
            page.goto(url)
            page.wait_for_selector("#lyrics textarea", timeout=30_000)
            wait_held(page, held)
            page.locator("#title textarea, #title input").first.fill(typed[0])
            page.wait_for_function("localStorage.getItem('diffrhythm-studio-draft') !== null", timeout=30_000)
            with page.expect_request(lambda r: "/queue/join" in r.url, timeout=30_000):
                for route in held:
                    route.continue_()
            page.locator("#lyrics textarea").fill(typed[1])
            page.locator("#style-text textarea, #style-text input").first.fill(typed[2])
            assert page.locator("#generate").is_disabled(), "the first load ended before the typing: nothing tested"
            page.wait_for_function("document.querySelector('#generate')?.disabled === false", timeout=30_000)
            page.wait_for_function("!document.body.innerText.includes('processing')", timeout=30_000)
            page.wait_for_timeout(500)  # a late redraw of the form would land here
            assert page.evaluate(FORM) == typed
            # A reload is a new page: the draft the typing wrote comes back there.
            page.unroute(HLS)
            page.reload()
            page.wait_for_function("document.querySelector('#generate')?.disabled === false", timeout=30_000)
            page.wait_for_function(f"document.querySelector('#lyrics textarea').value === {typed[1]!r}",
                                   timeout=30_000)
            assert page.evaluate(FORM) == typed
            page.click("#generate")
            page.wait_for_function("(document.querySelector('#gen-message')?.innerText ?? '').includes('Submitted 1 take')",
                                   timeout=30_000)
        finally:
            browser.close()


def test_an_earlier_draft_and_what_is_typed_before_the_first_load_are_both_kept(studio_url) -> None:
    """Lyrics typed and never generated, then a reload on a loaded machine, and a title and a style typed
    at once before the new page's first load went out: both stay, and the earlier page's lyrics come back.
    (Dropping the new page's own draft alone lost the lyrics: that draft had replaced the earlier one in
    storage.)"""

    from playwright.sync_api import sync_playwright

    url, svc, tmp = studio_url
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url)
            page.wait_for_function("document.querySelector('#generate')?.disabled === false", timeout=30_000)
            page.locator("#lyrics textarea").fill(LYRICS)
            page.wait_for_function("localStorage.getItem('diffrhythm-studio-draft') !== null", timeout=30_000)
            held = hold_back_hls(page)  # answered after the title
            page.reload()
            page.wait_for_selector("#lyrics textarea", timeout=30_000)
            wait_held(page, held)
            page.locator("#title textarea, #title input").first.fill("Typed on the new page")
            page.locator("#style-text textarea, #style-text input").first.fill("typed at once")
            assert page.locator("#generate").is_disabled(), "the first load ran before the typing: nothing tested"
            for route in held:
                route.continue_()
            page.wait_for_function("document.querySelector('#generate')?.disabled === false", timeout=30_000)
            page.wait_for_function("!document.body.innerText.includes('processing')", timeout=30_000)
            page.wait_for_timeout(500)  # a late redraw of the form would land here
            assert page.evaluate(FORM) == ["Typed on the new page", LYRICS, "typed at once"]
        finally:
            browser.close()


def test_a_session_opened_as_the_page_loads_keeps_its_takes(studio_url, monkeypatch) -> None:
    """CI's downloads test opened a session the moment the page had loaded: its three takes were listed,
    then vanished. The page's first load ends by following the open session's takes (none, on a blank
    page) and then redrawing the list for the session it read as it began, the blank one; on a loaded
    machine that redraw landed after the click and emptied the list. A follow that followed nothing
    redraws nothing now. Here that step is slowed as a busy machine slows it."""
    import sys
    import time

    from playwright.sync_api import sync_playwright
    from studio_helpers import api_client, form

    url, svc, tmp = studio_url
    token = svc.identity.cli_token()
    r = api_client(url, token=token).predict(form(title="Opened at once"), "", api_name="/submit")
    take = list(api_client(url, token=token).submit(r["takes"][0], api_name="/follow"))[-1]
    assert take["status"] == "done", take
    owner_of = svc.identity.owner_of

    def slow_after_follow(value):  # only in the step that runs after a follow ends
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name != "show_finished":
            frame = frame.f_back
        if frame is not None:
            time.sleep(4)
        return owner_of(value)

    monkeypatch.setattr(svc.identity, "owner_of", slow_after_follow)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{url.rstrip('/')}/?key={token}")
            page.locator("#sessions").get_by_text("Opened at once").first.click()
            label = page.locator("#takes label").filter(has_text=f"seed {take['seed']}")
            label.wait_for(timeout=30_000)
            time.sleep(6)  # past the slowed step
            assert label.count() == 1, page.locator("#takes").inner_text()
        finally:
            browser.close()


def test_refresh_cancel_take_actions_and_history(studio_url) -> None:
    """A refresh mid-song re-attaches to it; Cancel works; delete/undo, star, rename; reopen a session."""
    from playwright.sync_api import TimeoutError as PageTimeout
    from playwright.sync_api import sync_playwright

    url, svc, tmp = studio_url
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
            page.goto(url)
            page.wait_for_selector("#lyrics textarea", timeout=30_000)
            page.wait_for_function(f"!({BUSY})", timeout=30_000)
            page.locator("#title textarea, #title input").first.fill("Long night")
            page.locator("#lyrics textarea").fill(LYRICS)
            page.locator("#style-text textarea, #style-text input").first.fill("slow ambient pads")
            # Sixteen variations of 200 steps (the page's maxima): long enough on the cropped test model to
            # reload mid-way and still cancel before they all finish (eight were not, on an idle machine).
            # Typed until the boxes hold them: a value typed as Advanced opens can be reset to 32 steps,
            # and sixteen takes of 32 steps may all finish before Cancel lands.
            set_advanced(page, steps=200, variations=16)
            page.click("#generate")
            # Once the last waiting take has an ETA, each take further back reads a later (or equal) one.
            page.wait_for_function("/waiting: 12th in line · about/.test("
                                   "document.querySelector('#progress')?.innerText)", timeout=60_000)
            lines = page.inner_text("#progress").splitlines()
            etas = [float(m.group(1)) * (60 if m.group(2) == "min" else 1) for line in lines if "waiting" in line
                    and (m := re.search(r"about (\d+(?:\.\d+)?) (s|min) left", line))]
            assert len(etas) == 12 and etas == sorted(etas) and etas[-1] > etas[0], lines
            save(page, tmp, "generating.png")

            page.reload()  # the session and its running take come back from the store, progress re-attaches
            page.wait_for_function("document.querySelector('#title textarea, #title input')?.value === 'Long night'",
                                   timeout=30_000)
            page.wait_for_function("document.querySelector('#progress')?.innerText.includes('step')", timeout=60_000)
            page.click("#cancel")
            # Takes that finished before the cancel landed stay done (how many depends on the machine's
            # speed); wait until every take has settled, then count.
            page.wait_for_function(
                "(document.querySelector('#takes')?.innerText ?? '').split('\\n').filter(l => l.includes('Take '))"
                ".every(l => /(done|cancelled)$/.test(l.trim()))", timeout=90_000)
            n_cancelled = page.inner_text("#takes").count("cancelled")
            assert n_cancelled >= 1, "Cancel caught no take: " + page.inner_text("#takes")

            # The list is re-sorted after the generation ends; a click before that lands is undone by it.
            page.wait_for_function(f"!({BUSY})", timeout=30_000)
            page.locator("#takes").get_by_text("cancelled").first.click()  # open the take
            page.wait_for_selector("#take-retry", state="visible", timeout=30_000)
            page.click("#take-delete")
            page.wait_for_function("(document.querySelector('#take-note')?.innerText ?? '').includes('Deleted')",
                                   timeout=30_000)
            # The list is redrawn by the delete and again by the re-sort after it: wait for it to settle.
            page.wait_for_function(
                "(document.querySelector('#takes')?.innerText ?? '').split('\\n').filter(l => l.trim().endsWith('cancelled'))"
                f".length === {n_cancelled - 1}", timeout=30_000)
            page.click("#take-undo")
            page.wait_for_function("(document.querySelector('#take-note')?.innerText ?? '').includes('Restored')",
                                   timeout=30_000)
            page.click("#take-star")
            page.wait_for_function("(document.querySelector('#takes')?.innerText ?? '').includes('★')", timeout=30_000)
            page.locator("#take-name input, #take-name textarea").first.fill("keeper")
            page.click("#take-rename")
            session = next(s for s in svc.store.list_sessions() if s.title == "Long night")
            try:
                page.wait_for_function("(document.querySelector('#takes')?.innerText ?? '').includes('keeper')",
                                       timeout=30_000)
            except PageTimeout:  # (seen once, in a loaded run of tests/browser): say what each side held
                raise AssertionError(
                    f"no 'keeper' in the list 30 s after Rename; name box "
                    f"{page.locator('#take-name input, #take-name textarea').first.input_value()!r}, note "
                    f"{page.inner_text('#take-note')!r}, store {[(t.id, t.name, t.starred) for t in svc.store.list_takes(session.id) if t.name or t.starred]}, "
                    f"list {page.inner_text('#takes')[:600]!r}") from None
            takes = svc.store.list_takes(session.id)
            statuses = [t.status for t in takes]
            assert len(takes) == 16 and set(statuses) <= {"cancelled", "done"}, statuses
            assert {t.request["steps"] for t in takes} == {200}  # what was typed is what was rendered
            assert statuses.count("cancelled") == n_cancelled, statuses
            assert len({t.seed for t in takes}) == 16
            assert [(t.name, t.starred) for t in takes if t.name] == [("keeper", True)]

            page.click("#new-session")
            page.wait_for_function("document.querySelector('#title textarea, #title input')?.value === ''",
                                   timeout=30_000)
            page.locator("#search textarea, #search input").first.fill("ambient")
            page.wait_for_function("(document.querySelector('#sessions')?.innerText ?? '').includes('Long night')",
                                   timeout=30_000)
            page.locator("#sessions").get_by_text("Long night").click()
            page.wait_for_function("document.querySelector('#title textarea, #title input')?.value === 'Long night'",
                                   timeout=30_000)
            assert "slow ambient pads" in page.locator("#style-text textarea, #style-text input").first.input_value()
            assert not page.evaluate(NO_ERRORS), "an error toast or error status is on the page"
        finally:
            browser.close()
