"""Hearing a take while it is made, in a real browser (issue 18 item 2), against a real `studio serve
--model test` with one CPU worker and a full-length 95 s song (16 decode windows).

The page's live player (assets/ui/live.js) starts sounding with the first decoded windows, while the
rest of the song is still being decoded; it plays the whole song from one stream on one audio clock
(one start, no gap, no restart) and its samples add up to the finished file's. No fixed sleeps.
"""

from __future__ import annotations

import json
import re

import pytest
import soundfile as sf
from browser_shots import save_viewport_below
from chromium import ARGS, CHROMIUM, NO_ERRORS, needs_browser
from studio_helpers import ServeProcess, open_ready_page, set_advanced

pytestmark = pytest.mark.browser

PLAY_ARGS = [*ARGS, "--autoplay-policy=no-user-gesture-required", "--mute-audio"]
LYRICS = "[00:01.00]Neon rain on the window\n[00:04.00]I drive until the morning\n"
LIVE = "window.studioLive"


def test_the_song_plays_while_it_is_decoded_without_a_restart(tmp_path) -> None:
    needs_browser()
    from playwright.sync_api import sync_playwright

    server = ServeProcess(tmp_path / "data", tmp_path)  # no crop: the song is 95 s long
    try:
        server.wait_ready()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=PLAY_ARGS)
            page = open_ready_page(browser, server.url, lyrics=LYRICS, style="dreamy synthwave, female vocals")
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            set_advanced(page, steps=4)
            page.click("#generate")

            page.wait_for_function(f"{LIVE}.scheduled > 0", timeout=180_000)  # the first sound
            at_first = page.evaluate(f"({{...{LIVE}}})")
            # It sounds while the song is still being made: the page still shows the take rendering.
            assert re.search(r"step|making the audio", at_first["progressAtFirstSound"]), at_first
            assert "done" not in at_first["progressAtFirstSound"]
            page.wait_for_function(f"{LIVE}.heard > 0.5", timeout=30_000)  # and the clock runs
            page.wait_for_function("/[1-9] heard/.test(document.querySelector('#live-player')?.innerText ?? '')")
            save_viewport_below(page, tmp_path, "live-playback.png", "#progress")
            heard = [page.evaluate(f"{LIVE}.heard")]
            page.wait_for_function(f"{LIVE}.state === 'ended'", timeout=180_000)
            page.wait_for_function(f"{LIVE}.heard > {heard[0] + 0.5}", timeout=30_000)  # still playing on
            end = page.evaluate(f"({{...{LIVE}}})")
            page.wait_for_function("(document.querySelector('#takes')?.innerText ?? '').includes('done')", timeout=60_000)
            shown_error = page.evaluate(NO_ERRORS)
            browser.close()
    finally:
        server.stop()

    assert not errors, errors
    assert not shown_error
    assert end["error"] is None and end["starts"] == 1 and end["underruns"] == 0, end  # one clock, no gap
    # The first sound came when only part of the song had arrived.
    assert 0 < end["receivedAtFirstSound"] < end["received"] / 2, end
    wav = next((tmp_path / "data").rglob("*.wav"))
    assert sf.info(str(wav)).frames == end["scheduled"] == end["received"] // 4  # every sample, once
    record = json.loads(next(wav.parent.glob("*.json")).read_text())
    t = record["timings_s"]
    # The record's time to first sound: the DiT plus the first window, not the whole decode.
    assert t["first_sound"] < t["queued"] + t["prepare"] + t["diffusion"] + t["decode"] / 2, t
    print(f"\n[live] record: first_sound {t['first_sound']:.2f} s = prepare {t['prepare']:.2f} + diffusion "
          f"{t['diffusion']:.2f} + one of {t['decode']:.2f} s of decode; page: first sound {end['firstSoundMs'] / 1000:.2f} s after Generate; "
          f"{end['receivedAtFirstSound'] / 4 / 44100:.1f} s of {end['scheduled'] / 44100:.1f} s had arrived")
