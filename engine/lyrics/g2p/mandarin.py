"""Mandarin grapheme-to-phoneme onto the model's symbols (initials + toned finals), as upstream does it.

Upstream (`g2p/g2p/mandarin.py`) reads a Chinese segment in these steps, all reproduced here:

1. Arabic numbers -> Chinese numerals (`zh_numbers`: years digit by digit, 3.5 -> 三点五);
2. Chinese punctuation -> ASCII, whitespace removed, everything but U+4E00-U+9FFF and `_,.?!;:'…` removed;
3. jieba words (default dictionary), then three merges: 一 joined to the next word (and 看一看 kept whole),
   不 joined to the next word (a 不 with no word after it, or right after another lone 不, is lost - upstream
   does this), 儿 joined to the word before;
4. a reading per word: a word in upstream's lexicon (`chinese_lexicon.txt`) that is not itself a polyphone
   takes the lexicon's pinyin; otherwise each character: a polyphone (`polychar.txt`) is read by the polyphone
   model in the context of the whole segment, any other character by its lexicon entry, and a character the
   lexicon lacks (e.g. the traditional 賣) is kept as it is - it is not a phone the vocabulary knows, so it
   is dropped when ids are looked up (`MandarinResult.dropped` names it so the report can);
5. tone sandhi inside a word: 3-3 -> 2-3 (3-3-3: upstream appends a rising mark, which yields a bare "↑"
   phone the vocabulary lacks), 不 before a 4th tone -> 2nd, A不A -> neutral, the 一 rules (before a 4th tone
   -> 2nd, before others -> 4th, in numbers and 第一 -> 1st, A一A -> neutral), word-final 儿 -> neutral;
6. pinyin -> bopomofo (`pinyin_2_bpmf.txt`) -> the model's symbols (the table below, applied in order).

Three modes, named in every result:

* ``upstream``: lexicon + polyphone model: upstream's readings exactly;
* ``lexicon``: lexicon without the polyphone model (files or onnxruntime absent): the polyphones of
  `polychar.txt` (when that file is there) take pypinyin's phrase-aware reading of their word, otherwise
  the lexicon's; either can differ from upstream's;
* ``pypinyin``: no lexicon: every word is read by pypinyin (polyphone model unused).

Upstream also maps Latin letters to bopomofo after step 4; step 2 has removed them already, so that
step never changes anything and is left out.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from engine.lyrics.g2p.polyphone import MAX_CHARS, PolyphoneError, PolyphoneModel, load_polyphone_model
from engine.lyrics.g2p.zh_data import POLYPHONE_ROLES, ChineseFiles, Lexicon, load_lexicon, read_pinyin_table
from engine.lyrics.g2p.zh_numbers import numbers_to_chinese

# Multi-letter bopomofo groups first (the table is applied in order, like upstream's).
_BOPOMOFO_TO_SYMBOL = [
    ("ㄅㄛ", "p⁼wo"), ("ㄆㄛ", "pʰwo"), ("ㄇㄛ", "mwo"), ("ㄈㄛ", "fwo"),
    ("ㄧㄢ", "|jɛn"), ("ㄩㄢ", "|ɥæn"), ("ㄧㄣ", "|in"), ("ㄩㄣ", "|ɥn"), ("ㄧㄥ", "|iŋ"),
    ("ㄨㄥ", "|ʊŋ"), ("ㄩㄥ", "|jʊŋ"), ("ㄧㄚ", "|ia"), ("ㄧㄝ", "|iɛ"), ("ㄧㄠ", "|iɑʊ"),
    ("ㄧㄡ", "|ioʊ"), ("ㄧㄤ", "|iɑŋ"), ("ㄨㄚ", "|ua"), ("ㄨㄛ", "|uo"), ("ㄨㄞ", "|uaɪ"),
    ("ㄨㄟ", "|ueɪ"), ("ㄨㄢ", "|uan"), ("ㄨㄣ", "|uən"), ("ㄨㄤ", "|uɑŋ"), ("ㄩㄝ", "|ɥɛ"),
    ("ㄅ", "p⁼"), ("ㄆ", "pʰ"), ("ㄇ", "m"), ("ㄈ", "f"), ("ㄉ", "t⁼"), ("ㄊ", "tʰ"), ("ㄋ", "n"),
    ("ㄌ", "l"), ("ㄍ", "k⁼"), ("ㄎ", "kʰ"), ("ㄏ", "x"), ("ㄐ", "tʃ⁼"), ("ㄑ", "tʃʰ"), ("ㄒ", "ʃ"),
    ("ㄓ", "ts`⁼"), ("ㄔ", "ts`ʰ"), ("ㄕ", "s`"), ("ㄖ", "ɹ`"), ("ㄗ", "ts⁼"), ("ㄘ", "tsʰ"),
    ("ㄙ", "|s"), ("ㄚ", "|a"), ("ㄛ", "|o"), ("ㄜ", "|ə"), ("ㄝ", "|ɛ"), ("ㄞ", "|aɪ"), ("ㄟ", "|eɪ"),
    ("ㄠ", "|ɑʊ"), ("ㄡ", "|oʊ"), ("ㄢ", "|an"), ("ㄣ", "|ən"), ("ㄤ", "|ɑŋ"), ("ㄥ", "|əŋ"),
    ("ㄦ", "əɹ"), ("ㄧ", "|i"), ("ㄨ", "|u"), ("ㄩ", "|ɥ"),
    ("ˉ", "→|"), ("ˊ", "↑|"), ("ˇ", "↓↑|"), ("ˋ", "↓|"), ("˙", "|"),
]
_TONE_MARK = {"0": "˙", "5": "˙", "1": "", "2": "ˊ", "3": "ˇ", "4": "ˋ"}
_MARKS = "˙ˊˇˋ"
_PUNCT = [("，", ","), ("。", "."), ("！", "!"), ("？", "?"), ("；", ";"), ("：", ":"), ("、", ","),
          ("‘", "'"), ("’", "'"), ("⋯", "…"), ("···", "…"), ("・・・", "…"), ("...", "…")]
_KEPT = re.compile(r"[\u4e00-\u9fff\s_,.?!;:'…]")
_HAN = re.compile("[\u4e00-\u9fff]")
_NUMERALS = "零一二三四五六七八九十"
_YI_PUNCT = "：，；。？！“”‘’':,;.?!()（）{}【】[]-~`、 "
_NOT_NEUTRAL_ER = frozenset({"女儿", "老儿", "男儿", "少儿", "小儿"})

UPSTREAM, LEXICON, PYPINYIN = "upstream", "lexicon", "pypinyin"
# why a character yields no phone
UNREAD = "no reading in upstream's lexicon"
OUTSIDE = "outside the characters upstream reads"
MERGED = "lost when upstream joins 不 to the next word"


@dataclass(frozen=True)
class MandarinResult:
    phones: str
    mode: str  # UPSTREAM, LEXICON or PYPINYIN
    # characters of the segment that yield no phone (upstream drops them too), each with the reason
    dropped: tuple[tuple[str, str], ...] = ()


# -- steps 1-2 -------------------------------------------------------------------------------------------
def normalise(text: str) -> str:
    """Numbers read out, punctuation to ASCII, whitespace and unreadable characters removed (upstream)."""
    text = numbers_to_chinese(text.strip())
    for src, dst in _PUNCT:
        text = text.replace(src, dst)
    text = re.sub(r"\s+", "", text)
    text = re.sub(r"[^\u4e00-\u9fff\s_,.?!;:'…]", "", text)
    return re.sub(r"\s*([,.?!;:'…])\s*", r"\1", text)


def _removed_letters(text: str) -> list[str]:
    """Letters and digits that the normalisation removes (kana, CJK outside U+4E00-U+9FFF, ...)."""
    text = numbers_to_chinese(text.strip())
    return [ch for ch in text if unicodedata.category(ch)[0] in "LN" and not _KEPT.match(ch)]


# -- step 3 ----------------------------------------------------------------------------------------------
def merge_yi(words: list[str]) -> list[str]:
    """看 一 看 -> 看一看; then a lone 一 takes the word after it."""
    out: list[str] = []
    n = len(words)
    for i, word in enumerate(words):
        if word == "一" and 0 < i < n - 1 and words[i - 1] == words[i + 1]:
            if i - 1 < len(out):
                out[i - 1] = out[i - 1] + "一" + out[i - 1]
            else:  # an earlier merge shifted the list: keep the three words apart (upstream does)
                out += [word, words[i + 1]]
        elif i >= 2 and words[i - 1] == "一" and words[i - 2] == word:
            continue  # the repeated word was taken with the 一 before it
        else:
            out.append(word)
    merged: list[str] = []
    for word in out:
        if merged and merged[-1] == "一":
            merged[-1] += word
        else:
            merged.append(word)
    return merged


def merge_bu(words: list[str]) -> list[str]:
    """A lone 不 is joined to the next word. As upstream: a 不 right after a lone 不, or at the end, is lost."""
    out: list[str] = []
    last = ""
    for word in words:
        if word != "不":
            if last == "不":
                word = "不" + word
            out.append(word)
        last = word
    return out


def merge_er(words: list[str]) -> list[str]:
    out: list[str] = []
    for i, word in enumerate(words):
        if i > 0 and word == "儿":
            out[-1] += word
        else:
            out.append(word)
    return out


# -- step 5 ----------------------------------------------------------------------------------------------
def _with_tone(syllable: str, mark: str) -> str:
    return (syllable[:-1] if syllable and syllable[-1] in _MARKS else syllable) + mark


def _last(syllables: list[str], i: int) -> str:
    return syllables[i][-1] if -len(syllables) <= i < len(syllables) and syllables[i] else ""


def third_tone_sandhi(word: str, b: list[str]) -> list[str]:
    if len(word) == 3 and _last(b, 0) == "ˇ" and _last(b, 1) == "ˇ" and _last(b, -1) == "ˇ":
        b[0] += "ˊ"  # appended, not replaced (upstream)
        b[1] += "ˊ"
    if len(word) == 2 and _last(b, 0) == "ˇ" and _last(b, -1) == "ˇ":
        b[0] = b[0][:-1] + "ˊ"
    return b


def bu_sandhi(word: str, b: list[str]) -> list[str]:
    if set(word) == {"不"} or word == "不字":
        return b
    if len(word) == 3 and word[1] == "不" and len(b) > 1 and b[1][:-1] == "ㄅㄨ":
        b[1] = b[1][:-1] + "˙"  # A不A
        return b
    for i, ch in enumerate(word):
        if ch == "不" and i + 1 < len(word) and i + 1 < len(b) and _last(b, i + 1) == "ˋ":
            b[i] = b[i][:-1] + "ˊ"
    return b


def yi_sandhi(word: str, b: list[str]) -> list[str]:
    if "一" in word and any(ch.isnumeric() for ch in word if ch != "一"):  # a number: 一 keeps tone 1
        for i, ch in enumerate(word[:len(b)]):
            if i == 0 and ch == "一" and len(word) > 1 and word[1] not in _NUMERALS:
                b[0] = _with_tone(b[0], "ˊ" if _last(b, 1) in ("ˋ", "˙") else "ˋ")
            elif ch == "一":
                b[i] = _with_tone(b[i], "")
    elif len(word) == 3 and word[1] == "一" and word[0] == word[-1] and len(b) > 1:
        b[1] = _with_tone(b[1], "˙")
    elif word.startswith("第一") and len(b) > 1:
        b[1] = _with_tone(b[1], "")
    elif word.startswith(("一月", "一日", "一号")) and b:
        b[0] = _with_tone(b[0], "")
    else:
        for i, ch in enumerate(word[:len(b)]):
            if ch == "一" and i + 1 < len(word):
                if _last(b, i + 1) == "ˋ" and i + 1 < len(b):
                    b[i] = _with_tone(b[i], "ˊ")
                elif word[i + 1] not in _YI_PUNCT:
                    b[i] = _with_tone(b[i], "ˋ")
    return b


def er_sandhi(word: str, b: list[str]) -> list[str]:
    if len(word) > 1 and word[-1] == "儿" and word not in _NOT_NEUTRAL_ER and b:
        b[-1] = _with_tone(b[-1], "˙")
    return b


# -- step 6 ----------------------------------------------------------------------------------------------
def bopomofo_to_symbols(text: str) -> str:
    for src, dst in _BOPOMOFO_TO_SYMBOL:
        text = text.replace(src, dst)
    # syllables with an empty final (zhi, chi, shi, ri, zi, ci, si) get the apical vowel "ɹ"
    text = re.sub("([sɹ]`[⁼ʰ]?)([→↓↑ ]+|$)", r"\1ɹ\2", text)
    text = re.sub("([s][⁼ʰ]?)([→↓↑ ]+|$)", r"\1ɹ\2", text)
    text = re.sub(r"^\||[^\w\s_,.?!;:'…|→↓↑⁼ʰ`]", "", text)
    text = re.sub(r"([,.?!;:'…])", r"|\1|", text)
    return re.sub(r"\|+", "|", text).rstrip("|")


@lru_cache(maxsize=1)
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)  # it prints "Building prefix dict" to stderr otherwise
    return jieba


def _pypinyin(word: str) -> list[str]:
    from pypinyin import Style, lazy_pinyin

    return lazy_pinyin(word, style=Style.BOPOMOFO)


class MandarinReader:
    """Reads Chinese segments with whatever upstream data is available (see the module docstring).

    The lexicon and the polyphone model load on the first segment, once per process (shared by readers)."""

    def __init__(self, files: ChineseFiles | None = None) -> None:
        self.files = files
        self._lock = threading.Lock()
        self._loaded = False
        self._lexicon: Lexicon | None = None
        self._to_bpmf: dict[str, str] = {}
        self._poly: frozenset[str] = frozenset()
        self._model: PolyphoneModel | None = None
        self.problem = ""  # why upstream's readings are not fully available ("" when they are)

    def _load(self) -> None:
        with self._lock:
            if not self._loaded:
                self._loaded = True
                self._load_files()

    def _load_files(self) -> None:
        files = self.files
        if files is None:
            self.problem = "no Chinese g2p files given"
            return
        if not files.lexicon:
            missing = ", ".join(files.missing("lexicon", "pinyin_2_bpmf"))
            self.problem = f"{missing} not found (searched {files.searched})"
            return
        self._to_bpmf = read_pinyin_table(files.paths["pinyin_2_bpmf"])
        self._lexicon = load_lexicon(files.paths["lexicon"])
        if "polychar" in files.paths:
            self._poly = frozenset(
                c for c in files.paths["polychar"].read_text(encoding="utf-8").split("\n") if c)
        poly = files.polyphone
        if poly is None:
            missing = ", ".join(files.missing(*POLYPHONE_ROLES))
            self.problem = f"{missing} not found (searched {files.searched})"
            return
        try:
            self._model = load_polyphone_model(poly)
        except PolyphoneError as exc:
            self.problem = str(exc)
            return
        self._poly = self._model.chars

    @property
    def mode(self) -> str:
        self._load()
        if self._lexicon is None:
            return PYPINYIN
        return UPSTREAM if self._model is not None else LEXICON

    def _syllable(self, pinyin: str | None) -> str | None:
        """'hao3' -> 'ㄏㄠˇ'; None when the table lacks it."""
        if pinyin and pinyin[:-1] in self._to_bpmf and pinyin[-1] in _TONE_MARK:
            return self._to_bpmf[pinyin[:-1]] + _TONE_MARK[pinyin[-1]]
        return None

    def _model_reading(self, segment: str, position: int, rows: list[list[str]]) -> str | None:
        if self._model is None or len(segment) > MAX_CHARS:
            return None
        if not rows:  # the model runs once per segment, on its first polyphone
            rows.append(self._model.readings(segment))
        return self._syllable(rows[0][position]) if position < len(rows[0]) else None

    def _word_readings(self, word: str, start: int, segment: str, rows: list[list[str]]) -> list[str]:
        lex = self._lexicon
        if lex is None:
            return _pypinyin(word)
        entry = lex.get(word) if word not in self._poly else None
        if entry is not None:
            out: list[str] = []
            for py in entry.split(" "):
                syl = self._syllable(py)
                # upstream: a syllable its table cannot convert adds pypinyin's reading of the whole word
                out += [syl] if syl is not None else _pypinyin(word)
            return out
        out = []
        for i, ch in enumerate(word):
            if ch in self._poly:
                syl = self._model_reading(segment, start + i, rows) or _pypinyin_at(word, i)
            elif ch in lex:
                syl = self._syllable(lex.get(ch)) or _pypinyin_at(word, i)
            else:
                syl = ch  # not in the lexicon (e.g. 賣): kept as it is, and dropped with the ids
            out.append(syl)
        return out

    def to_bopomofo(self, segment: str) -> tuple[str, int]:
        """The normalised segment as '|'-joined bopomofo syllables and punctuation (steps 3-5), and how
        many characters the word merges lost."""
        words = merge_er(merge_bu(merge_yi(_jieba().lcut(segment, cut_all=False))))
        text = ""
        start = 0
        rows: list[list[str]] = []
        for word in words:
            syllables = self._word_readings(word, start, segment, rows)
            start += len(word)
            syllables = er_sandhi(word, yi_sandhi(word, bu_sandhi(word, third_tone_sandhi(word, syllables))))
            if not _HAN.search(word):
                text += "|" + word  # punctuation passes through
                continue
            # tone 1 carries no mark in bopomofo; make it explicit so it maps to "→"
            syllables = [re.sub(r"([\u3105-\u3129])$", r"\1ˉ", s) for s in syllables]
            text += ("|" if text else "") + "|".join(syllables)
        return text, len(segment) - start

    def phones(self, text: str) -> MandarinResult:
        """Phone string for a Chinese segment, the reading mode, and the characters that yield no phone."""
        self._load()
        bopomofo, lost = self.to_bopomofo(normalise(text))
        phones = bopomofo_to_symbols(bopomofo)
        dropped = [(ch, OUTSIDE) for ch in _removed_letters(text)] + [("不", MERGED)] * lost
        dropped += [(p, UNREAD) for p in phones.split("|") if _HAN.search(p)]
        return MandarinResult(phones, self.mode, tuple(dropped))


def _pypinyin_at(word: str, i: int) -> str:
    readings = _pypinyin(word)  # phrase-aware: the reading in this word
    return readings[i] if len(readings) == len(word) else _pypinyin(word[i])[0]
