"""Mandarin grapheme-to-phoneme onto the model's symbols (initials + toned finals).

Upstream reads Chinese through jieba words, its own word lexicon (`chinese_lexicon.txt`), a BERT
polyphone tagger (ONNX) and pinyin -> bopomofo -> IPA-like symbols with tone arrows
(tone 1 "→", 2 "↑", 3 "↓↑", 4 "↓", neutral none). The lexicon and tagger are model files the product
may not have; so two modes exist, and every result says which one produced it:

* ``lexicon``: a data folder holding `chinese_lexicon.txt` and `pinyin_2_bpmf.txt` (as the model-file
  manager lays them out) gives word readings; words it lacks fall back to pypinyin. The polyphone
  tagger is not run (no onnxruntime dependency), so polyphones outside lexicon words are pypinyin's.
* ``pypinyin`` (fallback): pypinyin's phrase-aware bopomofo readings (it also applies 不/一 sandhi).

Both then follow upstream's observable steps: digits read as Chinese numerals, punctuation mapped to
ASCII, non-Chinese characters removed, third-tone sandhi inside 2- and 3-character words, and the
same bopomofo -> symbol table, so the symbols are the ones the model was trained on even where a
reading differs from upstream's tagger.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

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
_PUNCT = [("，", ","), ("。", "."), ("！", "!"), ("？", "?"), ("；", ";"), ("：", ":"), ("、", ","),
          ("‘", "'"), ("’", "'"), ("⋯", "…"), ("···", "…"), ("・・・", "…"), ("...", "…")]
_DIGITS = "零一二三四五六七八九"
_UNITS = ["", "十", "百", "千"]

LEXICON_FILE = "chinese_lexicon.txt"
PINYIN_BPMF_FILE = "pinyin_2_bpmf.txt"


@dataclass(frozen=True)
class MandarinResult:
    phones: str
    mode: str  # "lexicon" or "pypinyin"


def _read_four(n: int) -> str:
    """0 < n < 10000 in Chinese numerals (一千零二十四)."""
    out, zero = "", False
    for pos in range(3, -1, -1):
        d = n // 10**pos % 10
        if d == 0:
            zero = bool(out)
            continue
        if zero:
            out += "零"
            zero = False
        out += _DIGITS[d] + _UNITS[pos]
    return out[1:] if out.startswith("一十") else out


def number_to_chinese(num: str) -> str:
    """Integers up to 10^12 read as numerals, decimals digit by digit, longer strings digit by digit."""
    whole, _, frac = num.partition(".")
    if len(whole) > 12:
        return "".join(_DIGITS[int(c)] for c in num if c.isdigit())
    n = int(whole)
    if n == 0:
        text = "零"
    else:
        parts, text = [(n // 10**8, "亿"), (n // 10**4 % 10**4, "万"), (n % 10**4, "")], ""
        for chunk, unit in parts:
            if chunk:
                if text and chunk < 1000:  # a gap inside the number is read as one 零
                    text += "零"
                text += _read_four(chunk) + unit
        text = text.replace("零零", "零")
    if frac:
        text += "点" + "".join(_DIGITS[int(c)] for c in frac)
    return text


def normalise(text: str) -> str:
    text = re.sub(r"[0-9]+(?:\.[0-9]+)?", lambda m: number_to_chinese(m.group(0)), text.strip())
    for src, dst in _PUNCT:
        text = text.replace(src, dst)
    text = re.sub(r"\s+", "", text)
    text = re.sub(r"[^\u4e00-\u9fff\s_,.?!;:'…]", "", text)
    return re.sub(r"\s*([,.?!;:'…])\s*", r"\1", text)


@lru_cache(maxsize=4)
def _lexicon(data_dir: str) -> tuple[dict[str, str], dict[str, str]] | None:
    folder = Path(data_dir)
    lex_path, bpmf_path = folder / LEXICON_FILE, folder / PINYIN_BPMF_FILE
    if not (lex_path.is_file() and bpmf_path.is_file()):
        return None
    words: dict[str, str] = {}
    for line in lex_path.read_text(encoding="utf-8").splitlines():
        if "\t" in line:
            word, pinyin = line.strip().split("\t", 1)
            words[word] = pinyin
    to_bpmf: dict[str, str] = {}
    for line in bpmf_path.read_text(encoding="utf-8").splitlines():
        if "\t" in line:
            py, bpmf = line.strip().split("\t", 1)
            to_bpmf[py] = bpmf
    return (words, to_bpmf) if words else None


@lru_cache(maxsize=1)
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)  # it prints "Building prefix dict" to stderr otherwise
    return jieba


def _pypinyin_bopomofo(word: str) -> list[str]:
    from pypinyin import Style, lazy_pinyin

    return lazy_pinyin(word, style=Style.BOPOMOFO)


def _word_bopomofo(word: str, lexicon: tuple[dict[str, str], dict[str, str]] | None) -> list[str]:
    if lexicon is not None:
        words, to_bpmf = lexicon
        pinyins = words.get(word, "").split()
        if pinyins and len(pinyins) == len(word) and all(p[:-1] in to_bpmf and p[-1] in _TONE_MARK
                                                         for p in pinyins):
            return [to_bpmf[p[:-1]] + _TONE_MARK[p[-1]] for p in pinyins]
    return _pypinyin_bopomofo(word)


def _third_tone_sandhi(word: str, syllables: list[str]) -> list[str]:
    """3-3 -> 2-3 inside a word (and 3-3-3 -> 2-2-3 for three-character words), as upstream."""
    tone3 = [s.endswith("ˇ") for s in syllables]
    if len(word) == 3 and len(syllables) == 3 and all(tone3):
        return [syllables[0][:-1] + "ˊ", syllables[1][:-1] + "ˊ", syllables[2]]
    if len(word) == 2 and len(syllables) == 2 and all(tone3):
        return [syllables[0][:-1] + "ˊ", syllables[1]]
    return syllables


def to_bopomofo(text: str, lexicon: tuple[dict[str, str], dict[str, str]] | None = None) -> str:
    out: list[str] = []
    for word in _jieba().lcut(text, cut_all=False):
        if not re.search("[\u4e00-\u9fff]", word):
            out.append(word)  # punctuation passes through
            continue
        syllables = _third_tone_sandhi(word, _word_bopomofo(word, lexicon))
        # tone 1 carries no mark in bopomofo; make it explicit so it maps to "→"
        out.extend(re.sub(r"([\u3105-\u3129])$", r"\1ˉ", s) for s in syllables)
    return "|".join(out)


def bopomofo_to_symbols(text: str) -> str:
    for src, dst in _BOPOMOFO_TO_SYMBOL:
        text = text.replace(src, dst)
    # syllables with an empty final (zhi, chi, shi, ri, zi, ci, si) get the apical vowel "ɹ"
    text = re.sub("([sɹ]`[⁼ʰ]?)([→↓↑ ]+|$)", r"\1ɹ\2", text)
    text = re.sub("([s][⁼ʰ]?)([→↓↑ ]+|$)", r"\1ɹ\2", text)
    text = re.sub(r"^\||[^\w\s_,.?!;:'…|→↓↑⁼ʰ`]", "", text)
    text = re.sub(r"([,.?!;:'…])", r"|\1|", text)
    return re.sub(r"\|+", "|", text).rstrip("|")


def mandarin_phones(text: str, data_dir: str | None = None) -> MandarinResult:
    """Phone string for a Chinese segment, and which reading source produced it."""
    lexicon = _lexicon(str(data_dir)) if data_dir else None
    phones = bopomofo_to_symbols(to_bopomofo(normalise(text), lexicon))
    return MandarinResult(phones, "lexicon" if lexicon is not None else "pypinyin")
