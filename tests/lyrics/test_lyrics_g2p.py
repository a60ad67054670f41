"""g2p: upstream's English ids, mixed-language segmentation, the Chinese fallback, the vocab loader."""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lyrics_fixtures import tokenizer, vocab_path  # noqa: F401

from engine.lyrics.g2p import LyricTokenizer, english
from engine.lyrics.g2p.english import merge_phones, normalise_numbers, normalise_text
from engine.lyrics.g2p.mandarin import bopomofo_to_symbols
from engine.lyrics.g2p.segment import segments
from engine.lyrics.g2p.zh_numbers import numbers_to_chinese
from engine.lyrics.vocab import VocabError, load_vocab


def test_hello_world_matches_upstream(tokenizer):  # noqa: F811
    # the example in the upstream notes: h|ə|l|oʊ|_|w|ɜː|l|d
    assert tokenizer.encode("Hello world").tokens == [42, 58, 51, 24, 5, 49, 8, 51, 31]


def test_english_normalisation_rules():
    assert normalise_numbers("$5.50").split() == "five dollars, fifty cents".split()
    assert normalise_numbers("1999").strip() == "nineteen ninety-nine"
    assert normalise_numbers("2005").strip() == "two thousand five"
    assert normalise_numbers("1/2 of 3/4").strip().startswith("one half")
    assert normalise_text("Mr. Smith ... said") == "mister.Smith…said"
    assert merge_phones("t|ɹ|iː|_|ɐ") == "tɹ|iː|_|ɚ"


def test_segments_like_upstream():
    assert segments("你好，hello world") == [("你好，", "zh"), ("hello world", "en")]
    assert segments("  123 abc") == [("  123 abc", "en")]
    assert segments("1 2 3") == [("1 2 3", "other")]
    assert segments("") == [("", "")]


def test_chinese_fallback_says_so(tmp_path, vocab_path):  # noqa: F811
    enc = LyricTokenizer(vocab_path, chinese_data_dir=tmp_path).encode("我爱你")  # a folder without the files
    assert enc.chinese_mode == "pypinyin" and enc.languages == ("zh",)
    assert enc.phones == "uo↓↑|aɪ↓|n|i↓↑" and not enc.unknown_phones
    assert all(t > 75 or t in (45, 46, 51, 34) for t in enc.tokens)  # Mandarin symbols + shared n/m/l/f


def test_chinese_sandhi_and_apical_vowels():
    assert bopomofo_to_symbols("ㄓˋ|ㄙˉ|ㄋㄧˇ") == "ts`⁼ɹ↓|sɹ→|n|i↓↑"
    assert numbers_to_chinese("2024") == "二千零二十四" and numbers_to_chinese("10") == "十"
    assert numbers_to_chinese("3.14") == "三点一四" and numbers_to_chinese("2024年") == "二零二四年"


def test_chinese_lexicon_mode(tmp_path, vocab_path):  # noqa: F811
    (tmp_path / "chinese_lexicon.txt").write_text("你好\tni3 hao3\n", encoding="utf-8")
    (tmp_path / "pinyin_2_bpmf.txt").write_text("ni\tㄋㄧ\nhao\tㄏㄠ\n", encoding="utf-8")
    lex = LyricTokenizer(vocab_path, chinese_data_dir=tmp_path).encode("你好")
    assert lex.chinese_mode == "lexicon" and lex.phones == "n|i↑|x|ɑʊ↓↑"


def test_mixed_line_keeps_upstream_boundaries(tokenizer):  # noqa: F811
    mixed = tokenizer.encode("你好 hello")
    assert mixed.languages == ("zh", "en")
    assert mixed.tokens == tokenizer.encode("你好").tokens + tokenizer.encode("hello").tokens


def test_lines_upstream_crashes_on(tokenizer):  # noqa: F811
    assert tokenizer.encode("").kind == "break" and tokenizer.encode("").tokens == []
    assert tokenizer.encode("...!").kind == "break"
    assert tokenizer.encode("안녕하세요").kind == "unsupported"
    assert tokenizer.encode("42").tokens == tokenizer.encode("forty-two").tokens
    assert tokenizer.encode("42", digits_language="zh").phones == "sɹ↓|s`ɹ↑|əɹ↓"  # 四十二


def test_cache_returns_the_same_result(tokenizer):  # noqa: F811
    assert tokenizer.encode("cache me") is tokenizer.encode("cache me")


def test_vocab_loading(tmp_path, vocab_path, monkeypatch):  # noqa: F811
    assert len(load_vocab(vocab_path)) == 363
    monkeypatch.setenv("STUDIO_LYRICS_VOCAB", str(vocab_path))
    assert load_vocab().path == str(vocab_path)
    with pytest.raises(VocabError, match="missing: run `studio models fetch --only vocab`") as missing:
        load_vocab(tmp_path / "missing.json")
    assert str(tmp_path) not in str(missing.value)  # the message reaches the page: no server path
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"nope": 1}))
    with pytest.raises(VocabError, match="unreadable"):
        load_vocab(bad)


# Upstream's number rules as it writes them (unanchored, nested quantifiers): the reference for what the
# linear-time rules must produce on every input upstream handles.
_UPSTREAM_RULES = [
    (r"([0-9][0-9,]+[0-9])", lambda m: m.group(1).replace(",", "")),
    (r"£([0-9,]*[0-9]+)", r"\1 pounds"),
    (r"\$([0-9.,]*[0-9]+)", english._say_dollars),
    (r"([0-9]+)/([0-9]+)", english._say_fraction),
    (r"([0-9]+\.[0-9]+)", lambda m: m.group(1).replace(".", " point ")),
    (r"([0-9.,]*[0-9]+%)", lambda m: m.group(1).replace("%", " percent ")),
    (r"[0-9]+(st|nd|rd|th)", lambda m: " " + english._inflect_engine().number_to_words(m.group(0)) + " "),
    (r"[0-9]+", english._say_number),
]


def _upstream_numbers(text: str) -> str:
    for pattern, replacement in _UPSTREAM_RULES:
        text = re.sub(pattern, replacement, text)
    return text


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.text(alphabet="0123456789.,/%$£stndrh x", max_size=40))
def test_number_rules_match_upstream(text):
    assert normalise_numbers(text) == _upstream_numbers(text)


@pytest.mark.parametrize("text", [
    "1" * 20_000, "1," * 10_000, "$" + "1." * 10_000, "1" * 20_000 + "%x", "." * 20_000 + "5",
    "1" * 20_000 + "/", "1" * 20_000 + ".", "1" * 20_000 + "s", "$" * 20_000, "1" * 10_000 + "/" + "2" * 10_000,
])
def test_number_rules_are_linear(text):
    english._inflect_engine()  # its import is not the rules' time
    start = time.process_time()  # this process's CPU time: what other processes do to the machine is not ours
    out = normalise_numbers(text)
    assert time.process_time() - start < 1.0, "quadratic again (these took 30 s and more)"
    assert out.strip()


def test_numbers_past_inflect_are_read_digit_by_digit():
    # inflect raises past 36 digits and int() past 4300: upstream crashes on these lines.
    assert normalise_numbers("1" * 37).split() == ["one"] * 37
    assert normalise_numbers("9" * 36).startswith(" nine hundred ninety-nine decillion,")
    assert normalise_numbers("0" * 40 + "7").split() == ["seven"]  # leading zeros do not make it long
    assert normalise_numbers("2" * 40 + "nd").split() == ["two"] * 40 + ["nd"]
    assert normalise_numbers("1" * 40 + "/" + "3").split() == ["one"] * 40 + ["over", "three"]
    dollars = normalise_numbers("$" + "5" * 5000 + ".01").split()
    assert dollars[:2] == ["five", "five"] and dollars[-3:] == ["dollars,", "one", "cent"]
