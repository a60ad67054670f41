"""LRC parsing: upstream's fixed-slice grammar, the extras, and a reason for every line."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.lyrics.lrc import BLANK, LYRIC, METADATA, SECTION, UNPARSEABLE, format_time, parse_lrc


def kinds(text: str) -> list[str]:
    return [p.kind for p in parse_lrc(text)]


def test_upstream_grammar_and_quirks():
    lines = parse_lrc("[00:04.10]Hello\n[01:34.95] padded \n[00:14.500]three\n[00:01.00][00:20.00]twice")
    assert [(p.time, p.text, p.grammar) for p in lines] == [
        (4.1, "Hello", "upstream"), (94.95, "padded", "upstream"), (14.5, "]three", "upstream"),
        (1.0, "[00:20.00]twice", "upstream")]
    assert "three-decimal" in lines[2].note
    assert "another timestamp" in lines[3].note


def test_extensions_whole_seconds_bom_and_line_ends():
    lines = parse_lrc("\ufeff[1:05]one\r\n[12:30]two\rthree")
    assert [(p.number, p.kind, p.time, p.text) for p in lines[:2]] == [(1, LYRIC, 65.0, "one"), (2, LYRIC, 750.0, "two")]
    assert lines[1].grammar == "extended"
    assert lines[2].kind == UNPARSEABLE and lines[2].number == 3


def test_one_digit_minute_with_centiseconds_is_reported_not_read():
    (line,) = parse_lrc("[0:12.00]skipped as upstream")
    assert line.kind == UNPARSEABLE and "[00:12.00]" in line.note


def test_line_numbers_follow_the_file_despite_leading_blank_lines():
    lines = parse_lrc("\n\n  \n[ti:x]\n\n[00:01.00]a\n[Chorus]\nplain\n")
    assert [(p.number, p.kind) for p in lines] == [
        (4, METADATA), (5, BLANK), (6, LYRIC), (7, SECTION), (8, UNPARSEABLE)]


def test_non_finite_and_negative_times():
    nan, inf, neg = parse_lrc("[00:nan  ]x\n[00:-inf ]y\n[00:-1.00]z")
    assert nan.kind == inf.kind == UNPARSEABLE and "finite" in inf.note
    assert neg.kind == LYRIC and neg.time == -1.0 and "negative" in neg.note


def test_format_time_round_trips_through_the_parser():
    for t in (0.0, 4.1, 59.99, 94.95, 119.4, 285.0):
        (line,) = parse_lrc(f"[{format_time(t)}]x")
        assert line.time == t


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300))
def test_parser_never_raises_on_arbitrary_text(text):
    lines = parse_lrc(text)
    assert all(p.kind in {LYRIC, BLANK, METADATA, SECTION, UNPARSEABLE} for p in lines)
    assert all(p.time is not None for p in lines if p.kind == LYRIC)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 99), st.integers(0, 59), st.integers(0, 99),
                          st.text(alphabet="abc xyz.,!'", max_size=20)), max_size=8))
def test_every_upstream_line_is_read_with_upstreams_time(rows):
    text = "\n".join(f"[{m:02d}:{s:02d}.{cs:02d}]{t}" for m, s, cs, t in rows)
    lyric = [p for p in parse_lrc(text) if p.kind == LYRIC]
    assert [(p.time, p.text) for p in lyric] == [(m * 60 + float(f"{s:02d}.{cs:02d}"), t.strip()) for m, s, cs, t in rows]
