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

Chinese runs are read by `mandarin.MandarinReader` with upstream's lexicon and polyphone model when their
files are found (`zh_data.find_chinese_files`: an explicit folder, else the model-file lookup with
`models_dir`, else beside the vocab); `LineTokens.chinese_mode` says which readings were used and
`LineTokens.dropped` names characters that yield no phone (upstream drops them too).

Results are cached per (line, digits language).

| module | role |
|---|---|
| `__init__` | `LyricTokenizer`: a line -> token ids, with what it did (`LineTokens`) |
| `segment` | a line split into Chinese and English runs |
| `english` | English g2p, reproducing upstream's phone strings |
| `mandarin`, `polyphone` | Mandarin g2p with upstream's lexicon; the polyphone tagger (ONNX) |
| `zh_data`, `zh_numbers` | the Chinese data files and the compact lexicon; numbers read as Chinese numerals |
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field

from engine.lyrics.g2p.english import EspeakMissing, english_phones, espeak_available
from engine.lyrics.g2p.mandarin import LEXICON, MERGED, OUTSIDE, PYPINYIN, UNREAD, UPSTREAM, MandarinReader
from engine.lyrics.g2p.segment import segments
from engine.lyrics.g2p.zh_data import CHINESE_DATA_ENV, find_chinese_files
from engine.lyrics.vocab import Vocab, load_vocab

__all__ = ["CHINESE_DATA_ENV", "LEXICON", "PYPINYIN", "UPSTREAM", "EspeakMissing", "LineTokens", "LyricTokenizer",
           "chinese_note", "dropped_warning", "espeak_available", "segments"]

_CACHE_LIMIT = 8192
_FULL_WIDTH_DIGITS = str.maketrans("０１２３４５６７８９", "0123456789")


@dataclass(frozen=True)
class LineTokens:
    tokens: list[int]  # model ids (vocab id + 1), without the period the layout appends
    phones: str
    languages: tuple[str, ...]
    kind: str = "words"  # "words", "break" (nothing to sing), "unsupported" (script without symbols)
    note: str = ""
    chinese_mode: str = ""  # "" (no Chinese), "upstream", "lexicon" or "pypinyin" (mandarin.py)
    unknown_phones: tuple[str, ...] = field(default=())
    dropped: tuple[tuple[str, str], ...] = field(default=())  # (character, why) not sung, as upstream


class LyricTokenizer:
    """Upstream-compatible g2p with a per-line cache. Needs espeak-ng for English."""

    def __init__(self, vocab: Vocab | str | os.PathLike[str] | None = None,
                 chinese_data_dir: str | os.PathLike[str] | None = None, *,
                 models_dir: str | os.PathLike[str] | None = None) -> None:
        self.vocab = vocab if isinstance(vocab, Vocab) else load_vocab(vocab, models_dir=models_dir)
        self.chinese_files = find_chinese_files(chinese_data_dir, models_dir=models_dir, vocab_path=self.vocab.path)
        self.mandarin = MandarinReader(self.chinese_files)  # loads its data on the first Chinese line
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

    def _phones(self, seg: str, lang: str, dropped: list[tuple[str, str]]) -> tuple[str, str]:
        if lang == "zh":
            res = self.mandarin.phones(seg)
            dropped += res.dropped
            return res.phones, res.mode
        return english_phones(seg), ""

    def _encode(self, text: str, digits_language: str) -> LineTokens:
        segs = segments(text)
        if len(segs) == 1 and segs[0][1] in ("", "other"):
            return self._encode_other(text, digits_language)
        all_phones, tokens, modes = "", [], set()
        dropped: list[tuple[str, str]] = []
        for index, (seg, lang) in enumerate(segs):
            phones, mode = self._phones(seg, lang, dropped)
            if mode:
                modes.add(mode)
            all_phones += phones + "|"
            tokens += self.vocab.model_ids(phones)
            # upstream drops a trailing word boundary after a line-final English run
            if lang == "en" and index == len(segs) - 1 and len(all_phones) >= 2 and all_phones[-2] == "_":
                all_phones = all_phones[:-2]
                tokens = tokens[:-1]
        mode = next(iter(modes), "")  # one reader: one mode
        unknown = tuple(self.vocab.unknown(all_phones.strip("|")))
        return LineTokens(tokens, all_phones.rstrip("|"), tuple(lang for _, lang in segs),
                          chinese_mode=mode, unknown_phones=unknown, dropped=tuple(dropped))

    def _encode_other(self, text: str, digits_language: str) -> LineTokens:
        lang = "zh" if digits_language == "zh" else "en"
        text = text.translate(_FULL_WIDTH_DIGITS)
        if re.search(r"[0-9]", text):
            phones, mode = self._phones(text, lang, [])
            tokens = self.vocab.model_ids(phones)
            if lang == "en" and phones.endswith("_") and tokens:
                tokens = tokens[:-1]
                phones = phones[:-2]
            words = "Chinese numerals" if lang == "zh" else "English number words"
            return LineTokens(tokens, phones, (lang,), note=f"digits sung as {words}",
                              chinese_mode=mode)
        letters = [ch for ch in text if unicodedata.category(ch).startswith("L")]
        if not letters:
            note = "empty line: a pause in the singing" if not text.strip() else "no words: a pause in the singing"
            return LineTokens([], "", (), kind="break", note=note)
        script = _script_name(letters[0])
        return LineTokens([], "", (), kind="unsupported",
                          note=f"{script} text cannot be sung: the model only knows Chinese and English "
                               "sounds; write it in Chinese characters, pinyin or English")


_DROP_ADVICE = {
    UNREAD: "DiffRhythm's pronunciation dictionary has no reading for {it}; write the simplified character or another word",
    OUTSIDE: "the model reads Chinese characters (U+4E00-U+9FFF) and English letters only",
    MERGED: "DiffRhythm joins 不 to the word after it, so a 不 at the end of a phrase (or after another 不) is "
            "lost; put a word after it",
}


def dropped_warning(dropped: tuple[tuple[str, str], ...]) -> str:
    """'not sung: 賣 (upstream's lexicon has no reading for it; ...)', grouped by reason."""
    by_reason: dict[str, list[str]] = {}
    for ch, why in dropped:
        by_reason.setdefault(why, []).append(ch)
    parts = []
    for why, chars in by_reason.items():
        unique = list(dict.fromkeys(chars))
        advice = _DROP_ADVICE.get(why, why).format(it="it" if len(unique) == 1 else "them")
        parts.append(f"{' '.join(unique)} ({advice})")
    return "not sung: " + "; ".join(parts)


def chinese_note(tokenizer: LyricTokenizer) -> str:
    """The song-level note for Chinese lines not read with upstream's lexicon and polyphone model."""
    reader = tokenizer.mandarin
    why = reader.problem or "unknown reason"
    if reader.mode == LEXICON:
        fix = "pip install onnxruntime" if "onnxruntime" in why else "studio models fetch --only polyphone"
        return (f"Chinese lines laid out without the polyphone model: {why}. Polyphones such as 还 得 为 may "
                f"be read differently from DiffRhythm's own reading; to fix: {fix}")
    return (f"Chinese lines laid out without DiffRhythm's pronunciation dictionary and polyphone model: {why}. They are read by "
            "pypinyin, so readings may differ from DiffRhythm's own; to fix: studio models fetch --only chinese-lexicon "
            "--only polyphone")


def _script_name(ch: str) -> str:
    name = unicodedata.name(ch, "")
    for script in ("HIRAGANA", "KATAKANA", "HANGUL", "CYRILLIC", "GREEK", "ARABIC", "HEBREW", "THAI",
                   "DEVANAGARI", "CJK"):
        if name.startswith(script):
            return {"CJK": "CJK (outside the model's Chinese range)"}.get(script, script.capitalize())
    return "Non-Latin"
