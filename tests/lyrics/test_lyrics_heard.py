"""The lyrics check's alignment and scoring (engine.lyrics.heard) on synthetic "heard" word lists:
exact, skipped words, a stuttered repeat, a line early or late by a second, Chinese characters heard as
homophones, numbers written as digits. The layout and phonemes come from the studio's real g2p."""

from __future__ import annotations

import pytest
from lyrics_fixtures import tokenizer, vocab_path  # noqa: F401 - fixtures

from device_worker.shapes import FRAME_RATE
from engine.lyrics import layout_lyrics
from engine.lyrics.heard import (
    MISSED,
    PARTLY,
    SUNG,
    HeardWord,
    check_lyrics,
    line_windows,
    resing_segments,
    semiglobal,
    tokenizer_phonemize,
)

LRC = """[00:05.00]Hello darkness my old friend
[00:10.00]I have come to talk with you again
[00:16.00]Because a vision softly creeping
[00:22.00]
"""


def spoken(text: str, start: float, per_word: float = 0.4) -> list[HeardWord]:
    """Words said one after another from `start` (Chinese: one character per word)."""
    items = text.split() if " " in text else list(text)
    return [HeardWord(w, start + k * per_word, start + (k + 1) * per_word - 0.05) for k, w in enumerate(items)]


def check(tokenizer, lrc: str, heard: list[HeardWord], duration: float = 95, lang: str = "en"):  # noqa: F811
    layout = layout_lyrics(lrc, duration, tokenizer=tokenizer)
    windows = line_windows([r.to_dict() for r in layout.lines], layout.end_frame)
    return windows, check_lyrics(windows, heard, tokenizer_phonemize(tokenizer, lang), model="test")


def test_semiglobal_ignores_neighbours_and_counts_inside() -> None:
    assert semiglobal(list("abc"), list("xxabcyy")) == (0, 2, 5)
    assert semiglobal(list("abc"), list("xxacyy"))[0] == 1  # a skipped phoneme
    assert semiglobal(list("abc"), list("abbc"))[0] == 1  # a stutter: one inserted phoneme
    assert semiglobal(list("abc"), [])[0] == 3
    assert semiglobal([], list("abc"))[0] == 0


def test_windows_run_from_each_line_to_the_next(tokenizer) -> None:  # noqa: F811
    layout = layout_lyrics(LRC, 95, tokenizer=tokenizer)
    windows = line_windows([r.to_dict() for r in layout.lines], layout.end_frame)
    assert [w.text for w in windows] == ["Hello darkness my old friend", "I have come to talk with you again",
                                         "Because a vision softly creeping"]
    assert windows[0].frames == (int(5 * 44100 / 2048), int(10 * 44100 / 2048))
    assert windows[1].frames[0] == windows[0].frames[1]
    assert windows[2].frames[1] == int(22 * 44100 / 2048)  # the break ends the last line
    assert windows[0].start == pytest.approx(windows[0].frames[0] / FRAME_RATE)


def test_exact_take_is_all_sung(tokenizer) -> None:  # noqa: F811
    heard = (spoken("Hello darkness my old friend", 5.1) + spoken("I have come to talk with you again", 10.2)
             + spoken("Because a vision softly creeping", 16.0))
    _, result = check(tokenizer, LRC, heard)
    assert [ln.status for ln in result.lines] == [SUNG, SUNG, SUNG]
    assert result.per == 0.0
    assert result.lines[0].heard == "Hello darkness my old friend"
    assert result.lines[0].score == 1.0


def test_skipped_words_and_a_missed_line(tokenizer) -> None:  # noqa: F811
    heard = spoken("Hello my friend", 5.1) + spoken("Because a vision softly creeping", 16.0)
    _, result = check(tokenizer, LRC, heard)
    first, second, third = result.lines
    assert first.status == PARTLY and 0.3 <= first.score < 0.7
    assert second.status == MISSED and second.heard == ""
    assert third.status == SUNG
    assert 0.4 < result.per < 0.8
    assert [ln.index for ln in result.missed] == [second.index]


def test_stutter_still_sung_but_costs(tokenizer) -> None:  # noqa: F811
    heard = spoken("Hello Hello darkness my my old friend", 5.0)
    _, result = check(tokenizer, LRC, heard)
    line = result.lines[0]
    assert line.status == SUNG and line.score < 1.0 and line.errors > 0


@pytest.mark.parametrize("shift", [-1.0, 1.0])
def test_lines_a_second_early_or_late_are_found(tokenizer, shift: float) -> None:  # noqa: F811
    heard = (spoken("Hello darkness my old friend", 5.1 + shift)
             + spoken("I have come to talk with you again", 10.2 + shift)
             + spoken("Because a vision softly creeping", 16.0 + shift))
    _, result = check(tokenizer, LRC, heard)
    assert [ln.status for ln in result.lines] == [SUNG, SUNG, SUNG]
    assert result.per == 0.0  # the neighbours' words that the slack lets in cost nothing
    assert result.lines[1].heard == "I have come to talk with you again"


def test_chinese_heard_as_homophones_is_sung(tokenizer) -> None:  # noqa: F811
    lrc = "[00:03.00]我爱你中国\n[00:08.00]亲爱的母亲\n[00:14.00]\n"
    # 妮 for 你 (another tone), 亲 heard as 琴: the same syllables, other characters
    heard = spoken("我爱妮中国", 3.1) + spoken("亲爱的母琴", 8.2)
    _, result = check(tokenizer, lrc, heard, lang="zh")
    assert [ln.status for ln in result.lines] == [SUNG, SUNG]
    assert result.per == 0.0
    wrong = spoken("他们不在家", 3.1) + spoken("亲爱的母亲", 8.2)
    _, result = check(tokenizer, lrc, wrong, lang="zh")
    assert result.lines[0].status == MISSED and result.lines[1].status == SUNG


def test_numbers_heard_as_digits_or_words(tokenizer) -> None:  # noqa: F811
    lrc = "[00:02.00]I got ninety nine problems\n[00:07.00]\n"
    _, result = check(tokenizer, lrc, spoken("I got 99 problems", 2.1))
    assert result.lines[0].status == SUNG and result.lines[0].score > 0.85
    lrc_digits = "[00:02.00]I got 99 problems\n[00:07.00]\n"
    _, result = check(tokenizer, lrc_digits, spoken("I got ninety nine problems", 2.1))
    assert result.lines[0].status == SUNG and result.lines[0].score > 0.85


def test_resing_segments_merge_adjacent_lines(tokenizer) -> None:  # noqa: F811
    heard = spoken("Hello darkness my old friend", 5.1)
    _, result = check(tokenizer, LRC, heard)
    stored = result.to_dict()
    a, b, c = (ln["frames"] for ln in stored["lines"])
    assert resing_segments(stored) == [[b[0], c[1]]]  # lines 2 and 3 missed, adjacent: one range
    assert resing_segments(stored, [stored["lines"][0]["index"], stored["lines"][2]["index"]]) == [a, c]
    with pytest.raises(ValueError, match="no checked sung line"):
        resing_segments(stored, [99])
