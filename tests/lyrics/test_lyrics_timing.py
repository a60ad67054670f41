"""Timing helper: deterministic, explainable, and its LRC always lays out without overruns."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lyrics_fixtures import tokenizer, vocab_path  # noqa: F401

from engine.lyrics import layout_lyrics, plan_timing
from engine.lyrics.report import BREAK, END, IGNORED, SUNG

SONG = """[Verse]
We folded paper into wings
and ran along the railway track

[Chorus]
Paper kites above the town
tell me where the days have gone
"""


def assert_clean(lrc: str, duration: float, tok) -> None:
    layout = layout_lyrics(lrc, duration, tokenizer=tok)
    assert layout.can_sing, [(r.number, r.status, r.reason) for r in layout.lines]
    for r in layout.lines:
        assert r.status in (SUNG, BREAK, END, IGNORED), (r.status, r.reason)
        assert not any(w.startswith(("rushed", "long gap")) for w in r.warnings), r.warnings


@pytest.mark.parametrize("duration", [95, 120, 285])
def test_song_lays_out_clean(tokenizer, duration):  # noqa: F811
    plan = plan_timing(SONG, duration, tokenizer=tokenizer)
    assert_clean(plan.lrc, duration, tokenizer)
    assert plan.lrc.rstrip().splitlines()[-1].endswith("]")  # the end marker / final break
    assert plan == plan_timing(SONG, duration, tokenizer=tokenizer)  # deterministic


def test_tempo_snaps_lines_to_beats_and_intro_is_honoured(tokenizer):  # noqa: F811
    plan = plan_timing(SONG, 180, tempo_bpm=120, intro_s=6.0, tokenizer=tokenizer)
    assert plan.lines[0].start_s == 6.0
    for p in plan.lines:
        assert abs(p.natural_s / 0.5 - round(p.natural_s / 0.5)) < 1e-9
    assert any("phonemes" in row for row in plan.explanation)
    assert_clean(plan.lrc, 180, tokenizer)


def test_too_many_lyrics_is_a_clear_error(tokenizer):  # noqa: F811
    words = "\n".join(["a very long line of lyrics that goes on and on without a rest"] * 80)
    with pytest.raises(ValueError, match="need at least"):
        plan_timing(words, 95, tokenizer=tokenizer)


def test_empty_and_retimed_input(tokenizer):  # noqa: F811
    assert plan_timing("", 120, tokenizer=tokenizer).lrc == ""
    retimed = plan_timing("[ti:x]\n[00:01.00]Hello there\n[00:02.00]Goodbye now", 120, tokenizer=tokenizer)
    assert [p.text for p in retimed.lines] == ["Hello there", "Goodbye now"]


def test_bad_arguments(tokenizer):  # noqa: F811
    with pytest.raises(ValueError):
        plan_timing(SONG, 50, tokenizer=tokenizer)
    with pytest.raises(ValueError):
        plan_timing(SONG, 120, tempo_bpm=5, tokenizer=tokenizer)


WORDS = st.sampled_from("love night fire river light home dream away forever tonight we you I the a "
                        "through across 7 1999 hello 你好 月光 don't".split())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.lists(WORDS, min_size=1, max_size=9).map(" ".join), min_size=1, max_size=6),
                min_size=1, max_size=4),
       st.sampled_from([95, 100, 150, 200, 285]), st.one_of(st.none(), st.integers(60, 180)))
def test_timed_lyrics_never_overrun(tokenizer, sections, duration, tempo):  # noqa: F811
    text = "\n\n".join(f"[Verse {k + 1}]\n" + "\n".join(lines) for k, lines in enumerate(sections))
    try:
        plan = plan_timing(text, duration, tempo_bpm=tempo, tokenizer=tokenizer)
    except ValueError as exc:  # only when the lyrics really cannot fit
        assert "need at least" in str(exc) or "past the" in str(exc)
        return
    layout = layout_lyrics(plan.lrc, duration, tokenizer=tokenizer)
    assert layout.can_sing
    assert not any(r.status == "pushed" for r in layout.lines)
    assert not any(w.startswith(("rushed", "long gap")) for r in layout.lines for w in r.warnings)
