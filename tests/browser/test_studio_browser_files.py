"""Issue 27 finding 2, the page: its players and downloads use the same signed, owner- or share-bound
URLs as the API, so revoking a share link or deleting a take kills every file URL the page showed.

It used to hand Gradio the take's server path: the page's audio and downloads were `/gradio_api/file=
<absolute path>` (takes/ and uploads/ were Gradio's `allowed_paths`) or Gradio's cache copies, readable by
anyone holding the path, after a revoke or a delete too. A real studio (test model) and a real browser:
a share viewer's page and the owner's page read their take through the URLs they were shown; after the
revoke the viewer's are 404 (the owner's still play), after the delete the owner's are 404 too; no page
response names a server path, and Gradio's cache holds no copy of the take.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from chromium import ARGS, CHROMIUM
from studio_helpers import api_client, form, fresh_studio, open_page

pytestmark = pytest.mark.browser

URLS = """() => [...document.querySelectorAll('#take-audio audio[src], #take-files a[href]')]
                 .map(e => e.getAttribute('src') || e.getAttribute('href'))"""


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory):
    with fresh_studio(tmp_path_factory) as (url, svc):
        yield url, svc


def page_urls(context, address: str, bodies: list[str]) -> list[str]:
    page = open_page(context, address)
    page.on("response", lambda r: bodies.append(_text(r)))
    page.wait_for_function(f"({URLS})().length >= 3", timeout=60_000)  # the player, wav and flac downloads
    return page.evaluate(URLS)


def _text(response) -> str:
    try:
        return response.text()
    except Exception:  # noqa: BLE001 - a stream still open, a redirect: no body to read
        return ""


def test_finding_2_page_file_urls_die_after_revoke_and_delete(studio) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    url, svc = studio
    token = svc.identity.cli_token()
    owner = api_client(url, token=token)
    r = owner.predict(form(formats=["wav", "flac"], title="Files test"), "", api_name="/submit")
    take = list(owner.submit(r["takes"][0], api_name="/follow"))[-1]
    assert take["status"] == "done", take
    sid = r["session_id"]
    wav = Path(svc.store.get_take(take["id"]).files["wav"]).read_bytes()
    link = owner.predict(sid, api_name="/share")

    bodies: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        viewer = page_urls(browser.new_context(), f"{url}/?s={link['token']}", bodies)
        # A browser with no key of its own takes the machine's from `?key=` and opens the session.
        mine_page = open_page(browser.new_context(), f"{url}/?key={token}")
        mine_page.on("response", lambda resp: bodies.append(_text(resp)))
        mine_page.locator("#sessions").get_by_text("Files test").first.click()
        mine_page.wait_for_function(f"({URLS})().length >= 3", timeout=60_000)
        mine = mine_page.evaluate(URLS)
        browser.close()

    for urls in (viewer, mine):
        assert all("/studio/file/" + take["id"] in u and "/gradio_api/file=" not in u for u in urls), urls
        assert httpx.get(urls[0], timeout=10).content == wav  # the player plays the take itself
        assert all(httpx.get(u, timeout=10).status_code == 200 for u in urls)
    assert set(viewer).isdisjoint(mine)  # signed for different grants

    # No page response named a server path; Gradio's cache holds no copy of the take's audio.
    data = str(svc.config.data_dir.resolve())
    assert bodies and not [b for b in bodies if data in b or str(svc.config.data_dir) in b]
    gradio_cache = Path(os.environ["GRADIO_TEMP_DIR"])
    copies = [f for f in gradio_cache.rglob("*") if f.is_file() and f.stat().st_size == len(wav)]
    assert not copies, copies

    # Holding the path is worth nothing: Gradio serves no take folder.
    path = svc.store.get_take(take["id"]).files["wav"]
    assert httpx.get(f"{url}/gradio_api/file={path}", timeout=10).status_code in (403, 404)

    owner.predict(sid, link["token"], api_name="/revoke")
    assert [httpx.get(u, timeout=10).status_code for u in viewer] == [404] * len(viewer)
    assert all(httpx.get(u, timeout=10).status_code == 200 for u in mine)  # the owner's still play
    owner.predict(sid, take["id"], "", "", "true", api_name="/set_take")  # deleted
    assert [httpx.get(u, timeout=10).status_code for u in mine] == [404] * len(mine)
