"""A reopened session's style-reference player plays the reference song it was made with (issue 27).

The page used to leave that player empty (the uploads folder is not served): a musician reopening a
session made from an uploaded song could not hear which song it was. Now the session handlers fill it
with a URL signed for the session's owner (`access.signed_reference_url`); the URL plays the upload
itself, is refused once tampered with, and names no server path. A song uploaded on the page (which
sends its owner key with it: a page event without one keeps nothing) is kept and its window named.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest
import soundfile as sf
from chromium import ARGS, CHROMIUM, needs_browser
from studio_helpers import api_client, form, fresh_studio, open_page

pytestmark = pytest.mark.browser

# The reference player is an editable gr.Audio: it plays through its waveform (the plain <audio> stays
# hidden and empty), and offers the file it plays as its download link.
PLAYER = "document.querySelector('#style-audio a[data-testid=download-link]')?.getAttribute('href') || ''"
DURATION = "document.querySelector('#style-audio #duration')?.innerText || ''"


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory):
    with fresh_studio(tmp_path_factory) as (url, svc):
        yield url, svc


def test_reopened_session_plays_its_reference_song(studio, tmp_path) -> None:
    needs_browser()
    from gradio_client import handle_file
    from playwright.sync_api import sync_playwright

    url, svc = studio
    song = tmp_path / "my-reference.wav"
    t = np.arange(12 * 44100) / 44100
    sf.write(song, np.stack([np.sin(2 * np.pi * 220 * t), np.sin(2 * np.pi * 330 * t)], 1) * 0.3, 44100)
    token = svc.identity.cli_token()
    client = api_client(url, token=token)
    kept = client.predict(handle_file(str(song)), api_name="/upload_reference")["file"]
    sid = client.predict(form(style_source="audio", style_audio=kept, title="Reference test"), "",
                         api_name="/submit")["session_id"]
    from studio import access
    session = svc.store.get_session(sid)
    assert access.session_reference(session, svc.config.inside_data) is not None, session.inputs

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = open_page(browser.new_context(), f"{url}/?key={token}")
        page.locator("#sessions").get_by_text("Reference test").first.click()
        page.wait_for_function(f"({PLAYER}).includes('/studio/reference/')", timeout=60_000)
        page.wait_for_function(f"({DURATION}) === '0:12'", timeout=30_000)  # the waveform loaded the song
        src = page.evaluate(PLAYER)

        # A song uploaded on the page (its owner key sent with it) is kept and its 10 s window named.
        page.click("#new-session")
        page.locator("#style-source").get_by_text("Reference song").click()
        page.locator("#style-audio input[type=file]").set_input_files(str(tmp_path / "my-reference.wav"))
        page.wait_for_function(r"/hears .* of this 0:12(\.0)? recording/.test("
                               "document.querySelector('#style-window')?.innerText || '')", timeout=60_000)
        browser.close()

    data = str(svc.config.data_dir.resolve())
    assert "/gradio_api/file=" not in src and data not in src, src
    answer = httpx.get(src, timeout=10)
    assert answer.status_code == 200
    assert answer.content == (svc.config.data_dir / kept).read_bytes()  # the upload itself
    forged = src[:-4] + ("0000" if not src.endswith("0000") else "1111")
    assert httpx.get(forged, timeout=10).status_code == 404
