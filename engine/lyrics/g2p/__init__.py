"""Lyric line -> model token ids (vocab id + 1), as upstream's `CNENTokenizer.encode`, minus its crashes.

A line is split into Chinese/English runs (`segment.py`), each run is phonemised (`english.py`,
`mandarin.py`) and the phones are looked up in `vocab.json` (unknown phones dropped, as upstream).
If the last run is English and its phones end with a word boundary, that boundary is removed.

Where upstream raises "Unknown language" (a line with no ASCII letter and no CJK character), this
tokenizer decides instead, and says what it did in `LineTokens.note`:

* empty or punctuation-only text -> no phonemes (`kind="break"`): the layout then places only the
  end-of-line period, the same thing upstream's layout does for a line without phonemes;
* digits (with spaces/punctuation) -> read as numbers in the song's language (English by default,
  Chinese numerals when `digits_language="zh"`), the same reading the digits would get inside a word
  line;
* letters of other scripts (kana, hangul, Cyrillic, ...) -> no phonemes (`kind="unsupported"`): the
  model's vocabulary has no symbols for them, so the words cannot be sung.

Results are cached per (line, digits language).
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field

from engine.lyrics.g2p.english import EspeakMissing, english_phones, espeak_available
from engine.lyrics.g2p.mandarin import mandarin_phones
from engine.lyrics.g2p.segment import segments
from engine.lyrics.vocab import Vocab, load_vocab

__all__ = ["EspeakMissing", "LineTokens", "LyricTokenizer", "espeak_available", "segments"]

CHINESE_DATA_ENV = "STUDIO_CHINESE_G2P_DIR"
_CACHE_LIMIT = 8192


@dataclass(frozen=True)
class LineTokens:
    tokens: list[int]  # model ids (vocab id + 1), without the period the layout appends
    phones: str
    languages: tuple[str, ...]
    kind: str = "words"  # "words", "break" (nothing to sing), "unsupported" (script without symbols)
    note: str = ""
    chinese_mode: str = ""  # "", "lexicon" or "pypinyin"
    unknown_phones: tuple[str, ...] = field(default=())


class LyricTokenizer:
    """Upstream-compatible g2p with a per-line cache. Needs espeak-ng for English."""

    def __init__(self, vocab: Vocab | str | os.PathLike[str] | None = None,
                 chinese_data_dir: str | os.PathLike[str] | None = None) -> None:
        self.vocab = vocab if isinstance(vocab, Vocab) else load_vocab(vocab)
        data = chinese_data_dir if chinese_data_dir is not None else os.environ.get(CHINESE_DATA_ENV)
        self.chinese_data_dir = str(data) if data else None
        self._cache: dict[tuple[str, str], LineTokens] = {}

    def encode(self, text: str, *, digits_language: str = "en") -> LineTokens:
        key = (text, digits_language)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._encode(text, digits_language)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def _phones(self, seg: str, lang: str) -> tuple[str, str]:
        if lang == "zh":
            res = mandarin_phones(seg, self.chinese_data_dir)
            return res.phones, res.mode
        return english_phones(seg), ""

    def _encode(self, text: str, digits_language: str) -> LineTokens:
        segs = segments(text)
        if len(segs) == 1 and segs[0][1] in ("", "other"):
            return self._encode_other(text, digits_language)
        all_phones, tokens, modes = "", [], set()
        for index, (seg, lang) in enumerate(segs):
            phones, mode = self._phones(seg, lang)
            if mode:
                modes.add(mode)
            all_phones += phones + "|"
            tokens += self.vocab.model_ids(phones)
            # upstream drops a trailing word boundary after a line-final English run
            if lang == "en" and index == len(segs) - 1 and len(all_phones) >= 2 and all_phones[-2] == "_":
                all_phones = all_phones[:-2]
                tokens = tokens[:-1]
        mode = "pypinyin" if "pypinyin" in modes else ("lexicon" if modes else "")
        unknown = tuple(self.vocab.unknown(all_phones.strip("|")))
        return LineTokens(tokens, all_phones.rstrip("|"), tuple(lang for _, lang in segs),
                          chinese_mode=mode, unknown_phones=unknown)

    def _encode_other(self, text: str, digits_language: str) -> LineTokens:
        lang = "zh" if digits_language == "zh" else "en"
        if re.search(r"[0-9]", text):
            phones, mode = self._phones(text, lang)
            tokens = self.vocab.model_ids(phones)
            if lang == "en" and phones.endswith("_") and tokens:
                tokens = tokens[:-1]
                phones = phones[:-2]
            words = "Chinese numerals" if lang == "zh" else "English number words"
            return LineTokens(tokens, phones, (lang,), note=f"digits read as {words} (upstream crashes here)",
                              chinese_mode=mode)
        letters = [ch for ch in text if unicodedata.category(ch).startswith("L")]
        if not letters:
            note = "empty line: a break (only the end-of-line mark is placed; upstream crashes here)" if not \
                text.strip() else "no words: a break (only the end-of-line mark is placed; upstream crashes here)"
            return LineTokens([], "", (), kind="break", note=note)
        script = _script_name(letters[0])
        return LineTokens([], "", (), kind="unsupported",
                          note=f"{script} text has no symbols in the model's vocabulary and cannot be sung "
                               "(upstream crashes here); write it in Chinese characters, pinyin or English")


def _script_name(ch: str) -> str:
    name = unicodedata.name(ch, "")
    for script in ("HIRAGANA", "KATAKANA", "HANGUL", "CYRILLIC", "GREEK", "ARABIC", "HEBREW", "THAI",
                   "DEVANAGARI", "CJK"):
        if name.startswith(script):
            return {"CJK": "CJK (outside the model's Chinese range)"}.get(script, script.capitalize())
    return "Non-Latin"
