"""Lyrics that follow the music, tap to time, and A/B, in a real browser (issue 18, items 3 and 4),
against a real `studio serve --model test` (cropped songs: about 3 s each, so playback is quick).

- a three-line LRC with no end marker is sung whole: the studio adds the marker and the record says so;
- the take's timed lines light up in order as it plays, and a click on a line seeks the player there;
- tap to time: with the take playing, Space stamps each plain line; the lyrics box ends up holding an
  LRC that `engine.lyrics.parse_lrc` reads line for line, and the page's report calls it singable;
- A/B: two takes of the session at one playhead; the toggle swaps which is heard, keeping the time.
No fixed sleeps: every wait is for a condition in the page.
"""

from __future__ import annotations

import pytest
from browser_shots import save_region
from chromium import ARGS, CHROMIUM, NO_ERRORS, needs_browser
from studio_helpers import page_with_takes

from studio.heard_view import MARK

pytestmark = pytest.mark.browser

LINES = ["Neon rain on the window", "I drive until the morning", "City lights are calling"]
# A plain three-line LRC ending with a sung line, as musicians write it: the studio adds the end marker
# the base model needs, so the third line is sung (and lit) too.
LYRICS = f"[00:00.20]{LINES[0]}\n[00:01.00]{LINES[1]}\n[00:01.90]{LINES[2]}\n"
PLAY_ARGS = [*ARGS, "--autoplay-policy=no-user-gesture-required", "--mute-audio"]
AUDIO = "document.querySelector('#take-audio audio')"
CURRENT = "document.querySelector('#lyric-lines .lrc-line.current')?.innerText || ''"


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory):
    needs_browser()
    tmp = tmp_path_factory.mktemp("browser-lyrics")
    # Two takes: one to follow and tap along, both for A/B.
    with page_with_takes(tmp, CHROMIUM, PLAY_ARGS, 2, lyrics=LYRICS, style="dreamy synthwave, female vocals") as page:
        page.wait_for_selector("#lyric-lines .lrc-line", timeout=30_000)
        yield page, tmp


def _unmarked(text: str) -> str:
    """A lit line's words without its time and its lyrics-check mark (the test model hears nothing)."""
    words = text.split(" ", 1)[1]
    return words.split(" ", 1)[1] if words[:1] in MARK.values() else words


def test_lines_light_up_as_the_take_plays_and_a_click_seeks(studio) -> None:
    page, tmp = studio
    lines = page.locator("#lyric-lines .lrc-line")
    # Each line carries the lyrics check's mark for its status (the check runs after the take is done;
    # a line without a status has no mark).
    page.wait_for_function("[...document.querySelectorAll('#lyric-lines .lrc-line')].every(b => b.dataset.status)",
                           timeout=60_000)
    marks = [MARK[s] + " " for s in lines.evaluate_all("bs => bs.map(b => b.dataset.status)")]
    assert lines.all_inner_texts() == [
        f"00:00.20 {marks[0]}{LINES[0]}", f"00:01.00 {marks[1]}{LINES[1]}", f"00:01.90 {marks[2]}{LINES[2]}"]
    page.get_by_text("Full record").click()  # the record says so
    page.wait_for_function("document.querySelector('#take-record')?.innerText.includes('end marker added')",
                           timeout=30_000)
    # The report under the lyrics said so before Generate, in words (it still shows the lyrics typed).
    assert "end marker added" in page.inner_text("#lyric-report"), page.inner_text("#lyric-report")
    save_region(page, tmp, "end-marker-added.png", "#lyric-report", "#lyric-lines")
    page.get_by_text("Full record").click()
    page.evaluate(f"window.__lit = []; {AUDIO}.currentTime = 0; {AUDIO}.play()")
    # Sampled at every animation frame until the song ends: which line was lit, in order.
    page.wait_for_function(f"""() => {{
        const lit = {CURRENT}; if (lit && window.__lit.at(-1) !== lit) window.__lit.push(lit);
        return {AUDIO}.ended || {AUDIO}.currentTime > 2.4; }}""", polling="raf", timeout=30_000)
    lit = [_unmarked(text) for text in page.evaluate("window.__lit")]
    assert lit == LINES, lit
    # Where the click sends the player: the time it sets, recorded as it is set. (Read at 'seeked', the
    # time had moved on: the click also plays, and on a loaded machine the event's handler ran 85 ms late.)
    page.evaluate(f"""() => {{
        const audio = {AUDIO}, own = Object.getOwnPropertyDescriptor(HTMLMediaElement.prototype, 'currentTime');
        audio.pause(); window.__seeks = []; window.__seeked = false;
        Object.defineProperty(audio, 'currentTime', {{configurable: true, get() {{ return own.get.call(this); }},
            set(t) {{ window.__seeks.push(t); own.set.call(this, t); }}}});
        audio.addEventListener('seeked', () => {{ window.__seeked = true; }}, {{once: true}}); }}""")
    page.locator("#lyric-lines .lrc-line").nth(1).click()
    page.wait_for_function("window.__seeked", timeout=10_000)  # and the player did seek
    assert abs(page.evaluate("window.__seeks[0]") - 1.0) < 0.05
    page.evaluate(f"delete {AUDIO}.currentTime")  # the element's own property again
    page.wait_for_function(f"({CURRENT}).includes('{LINES[1]}')", timeout=10_000)
    page.evaluate(f"{AUDIO}.pause()")
    save_region(page, tmp, "lyrics-follow.png", "#take-audio", "#lyric-lines")
    assert not page.evaluate(NO_ERRORS)


def test_tap_to_time_writes_an_lrc_the_engine_reads(studio) -> None:
    from engine.lyrics import parse_lrc
    from engine.lyrics.lrc import LYRIC

    page, tmp = studio
    page.get_by_text("Timing helper").click()
    page.locator("#plain-lyrics textarea").fill("[Verse]\n" + "\n".join(LINES) + "\n")
    page.click("#tap-time")
    page.wait_for_function("(document.querySelector('#tap-status')?.innerText ?? '').includes('Next:')", timeout=10_000)
    page.evaluate(f"{AUDIO}.currentTime = 0; {AUDIO}.play()")
    for i, at in enumerate((0.3, 1.1, 1.9)):  # press Space as each line starts
        page.wait_for_function(f"{AUDIO}.currentTime >= {at}", polling="raf", timeout=10_000)
        page.keyboard.press(" ")
        page.wait_for_function(f"document.querySelector('#lyrics textarea').value.split('\\n')"
                               f".filter(Boolean).length === {i + 1}", timeout=10_000)
    page.evaluate(f"{AUDIO}.pause()")
    page.wait_for_function("(document.querySelector('#tap-status')?.innerText ?? '').includes('All 3 lines timed')",
                           timeout=10_000)
    lrc = page.locator("#lyrics textarea").input_value()
    lines = [x for x in parse_lrc(lrc) if x.kind == LYRIC]
    assert [x.text for x in lines] == LINES, lrc
    times = [x.time for x in lines]
    assert times == sorted(times) and all(abs(t - at) < 0.5 for t, at in zip(times, (0.3, 1.1, 1.9), strict=True)), times
    # The page took the typed LRC as input: its report lays it out (the end marker added after it).
    page.wait_for_function("(document.querySelector('#lyric-report')?.innerText ?? '').includes('singable')", timeout=30_000)
    assert "end marker added" in page.inner_text("#lyric-report")
    save_region(page, tmp, "tap-to-time.png", "#lyrics", "#lyric-report", "#tap")
    assert not page.evaluate(NO_ERRORS)


def test_ab_swaps_the_take_heard_at_the_same_playhead(studio) -> None:
    page, tmp = studio
    page.get_by_text("A/B: compare two takes").click()
    page.wait_for_selector("#ab-a", state="attached", timeout=30_000)
    page.wait_for_function("document.querySelector('#ab-a').duration > 2 && document.querySelector('#ab-b').duration > 2",
                           timeout=30_000)
    assert page.evaluate("document.querySelector('#ab-a').src !== document.querySelector('#ab-b').src")
    page.evaluate("document.querySelector('#ab-a').play()")
    page.wait_for_function("document.querySelector('#ab-a').currentTime > 0.8", polling="raf", timeout=10_000)
    page.click("#ab-toggle")
    state = page.evaluate("""() => { const a = document.querySelector('#ab-a'), b = document.querySelector('#ab-b');
        return {a: a.muted, b: b.muted, gap: Math.abs(a.currentTime - b.currentTime), t: b.currentTime,
                playing: !b.paused, label: (document.querySelector('#ab-toggle')?.innerText ?? '')}; }""")
    assert state["a"] and not state["b"] and state["playing"] and state["t"] > 0.8, state
    assert state["gap"] < 0.15 and state["label"].startswith("Hearing B"), state
    page.evaluate("document.querySelector('#ab-a').pause()")  # pausing either pauses both
    page.wait_for_function("document.querySelector('#ab-b').paused", timeout=10_000)
    save_region(page, tmp, "ab-compare.png", "#ab")
    assert not page.evaluate(NO_ERRORS)
