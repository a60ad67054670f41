"""Layout outcomes for every case upstream crashes on or drops silently, and the warnings."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lyrics_fixtures import tokenizer, vocab_path  # noqa: F401

from engine.lyrics import layout_lyrics
from engine.lyrics.layout import fp16
from engine.lyrics.report import (
    BREAK,
    DROPPED,
    END,
    IGNORED,
    PUSHED,
    SKIPPED,
    SUNG,
    TRUNCATED,
    UNSUNG,
    render_text,
)


def statuses(layout):
    return [r.status for r in layout.lines]


def test_instrumental_is_all_zero(tokenizer):  # noqa: F811
    layout = layout_lyrics("", 120, tokenizer=tokenizer)
    assert layout.tokens == [0] * 2583 and layout.can_sing and layout.lines == []
    assert "instrumental" in render_text(layout)


def test_kana_line_is_unsung_and_reported(tokenizer):  # noqa: F811
    layout = layout_lyrics("[00:01.00]hello\n[00:04.00]こんにちは\n[00:08.00]bye", 120, tokenizer=tokenizer)
    kana = layout.lines[1]
    assert kana.status == UNSUNG and "Hiragana" in kana.reason
    assert layout.tokens[kana.start_frame] == 2 and not layout.can_sing


def test_unparseable_and_metadata_lines(tokenizer):  # noqa: F811
    layout = layout_lyrics("[ti:t]\nno timestamp\n[00:02.00]a\n\n[00:05.00]", 95, tokenizer=tokenizer)
    assert statuses(layout) == [IGNORED, SKIPPED, SUNG, IGNORED, END]
    assert not layout.can_sing  # the untimed line's words are lost


def test_lines_past_the_end_and_truncation(tokenizer):  # noqa: F811
    text = "[00:10.00]early\n[01:59.90]one two three four five six\n[02:10.00]never"
    layout = layout_lyrics(text, 120, tokenizer=tokenizer)
    assert statuses(layout) == [SUNG, TRUNCATED, DROPPED]
    trunc = layout.lines[1]
    assert trunc.start_frame + trunc.placed == layout.end_frame and trunc.lost > 0
    assert "02:10.00" in layout.lines[2].reason


def test_base_model_last_line(tokenizer):  # noqa: F811
    worded = layout_lyrics("[00:01.00]a\n[00:03.00]last words", 95, tokenizer=tokenizer)
    assert statuses(worded) == [SUNG, DROPPED] and not worded.can_sing
    marked = layout_lyrics("[00:01.00]a\n[00:03.00]last words\n[00:06.00]", 95, tokenizer=tokenizer)
    assert statuses(marked) == [SUNG, SUNG, END] and marked.can_sing


def test_rushed_pushed_and_backwards(tokenizer):  # noqa: F811
    text = "[00:01.00]Thirty thousand voices singing through the endless night\n[00:01.50]next\n" \
           "[00:10.00]later\n[00:05.00]earlier"
    layout = layout_lyrics(text, 120, tokenizer=tokenizer)
    first, nxt, later, earlier = layout.lines
    assert any(w.startswith("rushed") for w in first.warnings)
    assert nxt.status == PUSHED and "still running" in nxt.reason
    assert earlier.status == PUSHED and "earlier than the line before" in earlier.reason
    assert any("backwards" in w for w in earlier.warnings)
    assert layout.can_sing  # pushed lines are still sung


def test_long_gap_and_tight_warnings(tokenizer):  # noqa: F811
    text = "[00:01.00]hi\n[00:30.00]Thirty thousand voices singing through the endless night\n[00:32.50]end\n[00:40.00]"
    layout = layout_lyrics(text, 120, tokenizer=tokenizer)
    assert any(w.startswith("long gap") for w in layout.lines[0].warnings)
    assert any(w.startswith("tight") for w in layout.lines[1].warnings)
    assert not any(w.startswith("long gap") for w in layout.lines[2].warnings)
    assert layout.lines[3].status == BREAK


def test_song_duration_is_fp16_rounded():
    assert fp16(2583 / 6144) == 0.42041015625
    assert fp16(3811 / 6144) != 3811 / 6144 and abs(fp16(3811 / 6144) - 3811 / 6144) < 5e-4


def test_unsupported_duration_raises(tokenizer):  # noqa: F811
    with pytest.raises(ValueError, match="95"):
        layout_lyrics("[00:01.00]a", 60, tokenizer=tokenizer)


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("[]0123456789:. \nabcxyz你好こ-")), max_size=160),
       st.sampled_from([95, 96, 150, 285]))
def test_layout_never_raises_and_accounts_for_every_line(tokenizer, text, duration):  # noqa: F811
    layout = layout_lyrics(text, duration, tokenizer=tokenizer)
    assert len(layout.tokens) == layout.end_frame
    assert len(layout.lines) == len([ln for ln in text.strip().replace("\r", "\n").split("\n")]) or not text.strip()
    placed = sum(r.placed for r in layout.lines)
    assert placed == sum(1 for t in layout.tokens if t)  # every placed token is non-zero and on the track


def test_no_long_gap_before_the_end_marker_and_cut_lines_say_so(tokenizer):  # noqa: F811
    # 95 s base model: the last timed line is the end marker; the silence after the last sung line is
    # the ending, not a gap the voice must fill.
    layout = layout_lyrics("[00:01.00]hi there\n[01:20.00]\n", 95, tokenizer=tokenizer)
    assert layout.lines[1].status == END
    assert not any(w.startswith("long gap") for w in layout.lines[0].warnings), layout.lines[0].warnings
    long_line = "la " * 40
    text = render_text(layout_lyrics(f"[00:01.00]{long_line}\n[00:20.00]\n", 95, tokenizer=tokenizer))
    assert ("la " * 40)[:59] + "…" in text
