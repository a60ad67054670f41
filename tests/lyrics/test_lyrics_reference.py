"""The shared upstream lyric cases (`cases/lrc_*.json`) reproduce exactly, and the crash cases don't crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lyrics_fixtures import tokenizer, vocab_path  # noqa: F401

from engine.lyrics import layout_lyrics, parse_lrc
from engine.lyrics.lrc import LYRIC
from engine.lyrics.report import BREAK, DROPPED, SUNG

CASES = ["beyond_length", "format_quirks", "instrumental", "normal", "overrun", "periods"]


def _case(reference_dir: Path, name: str) -> dict:
    return json.loads((reference_dir / "cases" / f"lrc_{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("variant", ["base", "full"])
@pytest.mark.parametrize("name", CASES)
def test_layout_matches_upstream(reference_dir, tokenizer, name, variant):  # noqa: F811
    case = _case(reference_dir, f"{name}_{variant}")
    layout = layout_lyrics(case["lrc"], case["audio_length"], tokenizer=tokenizer)
    assert layout.max_frames == case["max_frames"]
    assert layout.end_frame == case["end_frame"]
    assert layout.song_duration == case["song_duration"]
    assert layout.song_duration_exact == case["song_duration_exact"]
    assert len(layout.tokens) == layout.end_frame
    assert sum(1 for t in layout.tokens if t) == case["nonzero_frames"]
    assert layout.tokens == case["track"]


@pytest.mark.parametrize("name", CASES)
def test_parsed_lines_and_g2p_match_upstream(reference_dir, tokenizer, name):  # noqa: F811
    case = _case(reference_dir, f"{name}_base")
    lyric = [p for p in parse_lrc(case["lrc"]) if p.kind == LYRIC]
    assert [(p.time, p.text) for p in lyric] == [(e["time"], e["text"]) for e in case["parsed_lines"]]
    for p, expected in zip(lyric, case["parsed_lines"], strict=True):
        assert tokenizer.encode(p.text).tokens == expected["tokens"], p.text


def test_crash_empty_line_becomes_a_break(reference_dir, tokenizer):  # noqa: F811
    case = _case(reference_dir, "crash_empty_line")
    assert case["upstream"] == "raises"
    for duration in (95, 120):
        layout = layout_lyrics(case["lrc"], duration, tokenizer=tokenizer)
        empty = layout.lines[1]
        assert empty.status == BREAK and "a pause in the singing" in empty.reason
        assert layout.tokens[empty.start_frame] == 2  # only the end-of-line period
        assert layout.lines[0].status == SUNG
    # full model: everything sung; base: the last line is the end marker and is reported as dropped
    assert layout_lyrics(case["lrc"], 120, tokenizer=tokenizer).can_sing
    base = layout_lyrics(case["lrc"], 95, tokenizer=tokenizer)
    assert base.lines[2].status == DROPPED and "end marker" in base.lines[2].reason


def test_crash_digits_line_is_read_as_numbers(reference_dir, tokenizer):  # noqa: F811
    case = _case(reference_dir, "crash_digits_line")
    layout = layout_lyrics(case["lrc"], 120, tokenizer=tokenizer)
    digits = layout.lines[1]
    assert digits.status == SUNG and "digits sung as English" in digits.reason
    assert digits.tokens == tokenizer.encode("one two three four").tokens
    assert layout.can_sing
