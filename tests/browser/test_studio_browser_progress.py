"""Honest progress in a real browser (issue 18, item 5), against a real `studio serve --model test` with
one CPU worker: a take that waits shows its place in line and an ETA, steps read "k of N" as asked and
only go up, the ETA runs down across diffusion and decode without jumping, and "Cancel this take only"
leaves the sibling variations running.

No fixed sleeps: the page is sampled while a condition is awaited (`wait_for_function` polls it).
Screenshots go to the test's tmp dir (and docs/screenshots/ with STUDIO_UPDATE_SCREENSHOTS=1).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from browser_shots import save_region
from chromium import ARGS, CHROMIUM, NO_ERRORS, needs_browser
from studio_helpers import LRC, ServeProcess, open_ready_page, set_advanced

from studio.handlers.generate import DRAW_GAP_S

pytestmark = pytest.mark.browser

LYRICS = "[00:01.00]Neon rain on the window\n[00:04.00]I drive until the morning\n"
# Records #progress-list's text at every poll, and is true once every take there has ended.
SAMPLE_UNTIL_DONE = """() => {
  const t = document.querySelector('#progress-list')?.innerText || '';
  (window.__seen ||= []).push(t);
  return t && !/(waiting|starting|preparing|step|making the audio)/.test(t);
}"""
# How much of its bar the (one) take's fill covers on screen: the drawn bar, not the number in its style.
FILLED = """() => {
  const bar = document.querySelector('#progress-list .tp-bar'), fill = bar?.querySelector('.tp-fill');
  return fill ? fill.getBoundingClientRect().width / bar.getBoundingClientRect().width : null;
}"""


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory):
    needs_browser()
    tmp = tmp_path_factory.mktemp("browser-progress")
    server = ServeProcess(tmp / "data", tmp)  # one CPU worker, full-length test songs (~0.2 s a step)
    try:
        client = server.wait_ready()
        yield server, client, tmp
    finally:
        server.stop()


def step_s_of(data_dir: Path, steps: int) -> float:
    """Seconds a step took in the one written take of `steps` steps (its record's diffusion time)."""
    records = [r for f in data_dir.glob("takes/*/*/*.json")
               if (r := json.loads(f.read_text()))["request"].get("steps") == steps]
    assert len(records) == 1, [r["request"] for r in records]
    return records[0]["timings_s"]["diffusion"] / (steps - 1)  # N points in time, N-1 updates


def api_form(**kw) -> dict:
    return {"lyrics": LRC, "style_text": "synth", "steps": 4, "variations": 1, "formats": ["wav"], **kw}


def open_page(browser, url: str):
    return open_ready_page(browser, url, lyrics=LYRICS, style="dreamy synthwave, female vocals")


def test_waiting_take_shows_its_place_and_the_eta_runs_down(serve) -> None:
    from playwright.sync_api import sync_playwright

    server, client, tmp = serve
    warm = client.predict(api_form(), "", api_name="/submit")  # one timed take: waiting ETAs need one
    assert list(client.submit(warm["takes"][0], api_name="/follow"))[-1]["status"] == "done"
    # Four takes fill one worker's admission (2 x workers + 2); the page's take then waits its turn.
    busy = client.predict(api_form(steps=12, variations=4), "", api_name="/submit")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = open_page(browser, server.url)
            set_advanced(page, steps=8)
            page.click("#generate")
            page.wait_for_function("/waiting: .* left/.test(document.querySelector('#progress-list')?.innerText)",
                                   timeout=60_000)
            waiting = page.inner_text("#progress-list")
            assert page.evaluate(FILLED) == 0, "a waiting take's bar is drawn filled"
            save_region(page, tmp, "queue-position.png", "#generate", "#progress")
            page.wait_for_function("/step \\d+ of 8/.test(document.querySelector('#progress-list')?.innerText)",
                                   timeout=180_000)
            save_region(page, tmp, "progress-eta.png", "#generate", "#progress")
            page.wait_for_function(SAMPLE_UNTIL_DONE, polling=100, timeout=180_000)
            seen = page.evaluate("window.__seen")
            page.wait_for_function(f"({FILLED})() > 0.99", timeout=10_000)  # done: the whole bar, once it has slid
            assert not page.evaluate(NO_ERRORS)
        finally:
            browser.close()
    assert re.search(r"waiting: (next in line|\d+(st|nd|rd|th) in line) · about \d+ s left", waiting), waiting
    steps = [int(m.group(1)) for t in seen if (m := re.search(r"step (\d+) of 8", t))]
    # Up to 8, never past it. The page shows the newest snapshot, redrawn at most every DRAW_GAP_S and read
    # here every 100 ms: the steps made within one gap and one poll may go unseen, the last ones included
    # (one was, on a loaded machine, before the gap), so the last reading is 8 less those at most.
    unseen = max(1, math.ceil((DRAW_GAP_S + 0.1) / step_s_of(server.data_dir, 8)))
    assert steps and steps == sorted(steps) and 8 - unseen <= steps[-1] <= 8 and steps[0] >= 2, (steps, unseen)
    assert any("making the audio" in t for t in seen[seen.index(next(t for t in seen if "step" in t)):]), seen
    assert "done" in seen[-1], seen[-1]
    # One ETA across diffusion and decode: from the first step on it only runs down (a reading may
    # wobble by the measured step time, never jump up as it did when the decode began).
    etas = [int(m.group(1)) for t in seen if re.search(r"step \d+ of|making the audio", t)
            and (m := re.search(r"about (\d+) s left", t))]
    assert len(etas) >= 3, seen
    for before, after in zip(etas, etas[1:], strict=False):
        assert after <= before + max(2, before // 4), etas
    assert etas[-1] <= 2, etas
    # The takes it waited behind all finish too (a freed slot lets it start before the last of them ends).
    assert all(list(client.submit(i, api_name="/follow"))[-1]["status"] == "done" for i in busy["takes"])


def test_cancelling_one_variation_leaves_its_siblings(serve) -> None:
    from playwright.sync_api import sync_playwright

    server, client, tmp = serve
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = open_page(browser, server.url)
            set_advanced(page, steps=16, variations=3)
            page.click("#generate")
            # First sound first: the later variations wait for an earlier one to sound, and say so.
            page.wait_for_function("/#[23] [^\\n]*waits for #[12] to sound first/"
                                   ".test(document.querySelector('#progress-list')?.innerText)", timeout=120_000)
            page.wait_for_function("/#2 [^\\n]*step \\d+ of 16/"
                                   ".test(document.querySelector('#progress-list')?.innerText)", timeout=180_000)
            rows = page.locator("#takes label:has(input[type=radio])")
            assert rows.count() == 3
            middle_row = rows.filter(has_text=" #2 · ")
            middle = middle_row.inner_text()
            middle_row.click()
            page.locator("#take-cancel").wait_for(state="visible", timeout=30_000)  # offered while it renders
            page.click("#take-cancel")
            page.wait_for_function("(document.querySelector('#take-note')?.innerText ?? '').includes('only')", timeout=30_000)
            page.wait_for_function("(document.querySelector('#progress-list')?.innerText ?? '').includes('cancelled on its own')",
                                   timeout=60_000)
            # Its siblings are still being made (or the first already done): none of them was cancelled.
            others = [ln for ln in page.inner_text("#progress-list").splitlines() if " #2 · " not in ln and "Take" in ln]
            assert len(others) == 2 and not any("cancelled" in ln for ln in others), others
            save_region(page, tmp, "cancel-one-variation.png", "#progress")
            save_region(page, tmp, "cancel-one-variation-takes.png", "#takes", "#take-cancel", "#take-note")
            page.wait_for_function(
                "(document.querySelector('#takes')?.innerText ?? '').split('\\n').filter(l => l.includes('Take '))"
                ".every(l => /(done|cancelled)$/.test(l.trim()))", timeout=180_000)
            listing = page.inner_text("#takes")
            assert not page.evaluate(NO_ERRORS)
        finally:
            browser.close()
    lines = [line.strip() for line in listing.splitlines() if "Take " in line]
    assert sorted(line.rsplit(" ", 1)[-1] for line in lines) == ["cancelled", "done", "done"], lines
    seed = re.search(r"seed (\d+)", middle).group(1)
    assert any(f"seed {seed}" in line and line.endswith("cancelled") for line in lines), (middle, lines)
