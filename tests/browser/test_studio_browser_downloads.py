"""Issue 26, "Downloads collide", in a real browser: what Chromium saves a take's files as.

The walk saw an edit and an extension of one take all download as `<title>-t0-s<seed>.wav`, a rename
leave the file name as it was, and a "×" beside each download that looked like delete. A real studio
(test model) makes a take, an edit and an extension of it; the page's Downloads list is clicked for
each and Playwright's download event says the name Chromium chose (the link's `download` attribute and
the route's Content-Disposition, which must agree); a rename in the page renames the next download.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from chromium import ARGS, CHROMIUM, needs_browser
from studio_helpers import api_client, form, fresh_studio, open_page, wait_settled

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory):
    with fresh_studio(tmp_path_factory) as (url, svc):
        yield url, svc


def _finished(client, request: dict, sid: str) -> dict:
    r = client.predict(form(formats=["wav", "flac"], title="Night Drive", **request), sid, api_name="/submit")
    take = list(client.submit(r["takes"][0], api_name="/follow"))[-1]
    assert take["status"] == "done", take
    return take | {"session_id": r["session_id"]}


def _downloads(page, take: dict, tmp: Path) -> dict[str, str]:
    """Open `take` in the list (by its seed) and download each of its files: extension -> saved name."""
    wait_settled(page)  # CI: the click waited 30 s on a list under a redraw's overlay, on a loaded machine
    label = page.locator("#takes label").filter(has_text=re.compile(rf"seed {take['seed']}\b")).first
    try:
        label.wait_for(timeout=30_000)
    except Exception as exc:  # say what the list held instead
        raise AssertionError(f"no take with seed {take['seed']} in the list: {page.locator('#takes').inner_text()!r}") from exc
    label.click()
    links = page.locator("#take-files a[download]")
    page.wait_for_function(f"[...document.querySelectorAll('#take-files a[download]')]"
                           f".some(a => a.href.includes('/studio/file/{take['id']}/'))", timeout=60_000)
    saved: dict[str, str] = {}
    for i in range(links.count()):
        with page.expect_download(timeout=30_000) as info:
            links.nth(i).click()
        download = info.value
        target = tmp / download.suggested_filename
        download.save_as(target)
        assert target.stat().st_size > 0
        # The route's header says the same name as the page's link.
        header = httpx.get(links.nth(i).get_attribute("href"), timeout=10).headers["content-disposition"]
        assert f'filename="{download.suggested_filename}"' in header, header
        assert links.nth(i).get_attribute("download") == download.suggested_filename
        saved[Path(download.suggested_filename).suffix] = download.suggested_filename
    return saved


def test_each_take_downloads_under_its_own_name_and_a_rename_renames_it(studio, tmp_path: Path) -> None:
    needs_browser()
    from playwright import sync_api

    url, svc = studio
    token = svc.identity.cli_token()
    owner = api_client(url, token=token)
    source = _finished(owner, {}, "")
    sid = source["session_id"]
    edit = _finished(owner, {"edit_mode": "edit", "edit_take": source["id"], "edit_ranges": "0.5-1.5"}, sid)
    ext = _finished(owner, {"edit_mode": "continue", "edit_take": source["id"], "continue_from": 1.0}, sid)

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = open_page(browser.new_context(accept_downloads=True), f"{url}/?key={token}")
        page.locator("#sessions").get_by_text("Night Drive").first.click()
        page.wait_for_function("document.querySelectorAll('#takes label').length === 3", timeout=60_000)
        names = {k: _downloads(page, t, tmp_path) for k, t in
                 (("source", source), ("edit", edit), ("ext", ext))}
        # The "×" Gradio puts on each row only hid it, and looked like delete: nobody sees it now.
        clear = page.locator("#take-files .label-clear-button")
        assert clear.count() >= 1 and not any(clear.nth(i).is_visible() for i in range(clear.count()))

        page.locator("#take-name input, #take-name textarea").first.fill("Chorus fix")
        page.click("#take-rename")
        page.wait_for_function("(document.querySelector('#takes')?.innerText ?? '').includes('Chorus fix')", timeout=30_000)
        page.wait_for_function("[...document.querySelectorAll('#take-files a[download]')]"
                               ".some(a => a.download.startsWith('Chorus-fix'))", timeout=30_000)
        renamed = _downloads(page, ext | {"name": "Chorus fix"}, tmp_path)
        browser.close()

    assert names["source"] == {".wav": "Night-Drive-take1.wav", ".flac": "Night-Drive-take1.flac",
                               ".json": "Night-Drive-take1.json"}
    assert names["edit"][".wav"] == "Night-Drive-take2-edit-of-take1.wav"
    assert names["ext"][".wav"] == "Night-Drive-take3-extension-of-take1.wav"
    assert renamed == {".wav": "Chorus-fix-take3.wav", ".flac": "Chorus-fix-take3.flac",
                       ".json": "Chorus-fix-take3.json"}
    every = [n for d in names.values() for n in d.values()]
    assert len(set(every)) == len(every)  # nothing collides
    ids = [t["id"] for t in (source, edit, ext)]
    assert not any(i in n for i in ids for n in every)  # no take id (nor server name) in what is saved
