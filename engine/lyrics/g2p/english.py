"""English grapheme-to-phoneme, reproducing upstream DiffRhythm's phone strings.

The model was trained on phones produced by a specific pipeline (upstream `g2p/g2p/english.py` and
`text_tokenizers.py`), so every step here mirrors that pipeline's observable behaviour:

1. abbreviations (mr -> mister, ...), then numbers spelled out with inflect (money, fractions,
   decimals, percent, ordinals, years read in pairs);
2. punctuation normalised (Chinese marks -> ASCII, "..." -> "…"), characters outside
   ``\\w \\s _ , . ? ! ; : ' …`` removed, spaces around punctuation removed;
3. espeak-ng (en-us) through phonemizer: no stress, no ties, language-switch flags removed,
   phones separated by "|" and words by "|_|", punctuation kept;
4. each punctuation mark becomes its own phone, a trailing "|_" is added after a final phone letter,
   and a fixed list of phone merges is applied (t|ɹ -> tɹ, ɐ -> ɚ, ...).

Reproducing upstream's ids matters more than linguistic nicety: a "better" phonemisation would feed
the model symbol sequences it never saw in training.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any

PUNCTUATION_MARKS = ",.?!;:'…"

# Upstream's abbreviation table (whole words, case-insensitive), applied in this order.
_ABBREVIATIONS = [
    ("mrs", "misess"), ("mr", "mister"), ("dr", "doctor"), ("st", "saint"), ("co", "company"),
    ("jr", "junior"), ("maj", "major"), ("gen", "general"), ("drs", "doctors"), ("rev", "reverend"),
    ("lt", "lieutenant"), ("hon", "honorable"), ("sgt", "sergeant"), ("capt", "captain"),
    ("esq", "esquire"), ("ltd", "limited"), ("col", "colonel"), ("ft", "fort"), ("etc", "et cetera"),
    ("btw", "by the way"),
]
_ABBREVIATION_RES = [(re.compile(rf"\b{short}\b", re.IGNORECASE), long) for short, long in _ABBREVIATIONS]

# Phone merges applied to the "|"-separated phone string, in order, each until it no longer matches.
_PHONE_MERGES = [
    ("t|ɹ", "tɹ"), ("d|ɹ", "dɹ"), ("t|s", "ts"), ("d|z", "dz"), ("ɪ|ɹ", "ɪɹ"), ("ɐ", "ɚ"), ("ᵻ", "ɪ"),
    ("əl", "l"), ("x", "k"), ("ɬ", "l"), ("ʔ", "t"), ("n̩", "n"), ("oː|ɹ", "oːɹ"),
]
_MERGE_RES = [
    (re.compile(r"(^|[_|])" + re.escape(src) + r"([_|]|$)"), dst) for src, dst in _PHONE_MERGES
]
# A phone string whose last character is one of these gets a trailing word boundary.
_PHONE_CHARS = "p⁼ʰmftnlkxʃs`ɹaoəɛɪeɑʊŋiuɥwæjː"

_CHINESE_PUNCTUATION = [
    ("，", ","), ("。", "."), ("！", "!"), ("？", "?"), ("；", ";"), ("：", ":"), ("、", ","),
    ("‘", "'"), ("’", "'"), ("⋯", "…"), ("···", "…"), ("・・・", "…"), ("...", "…"),
]


class EspeakMissing(RuntimeError):
    """espeak-ng (the library phonemizer drives) is not installed."""


_import_lock = threading.Lock()


@lru_cache(maxsize=1)
def _inflect_engine():
    """inflect, imported on the first number. Its functions are decorated with typeguard's `@typechecked`,
    which at import re-parses and recompiles each one from its source (3.6 s of CPU here: a studio's live
    lyric report stalled that long on the first digit typed) and then type-checks every call (~0.1 ms).
    We only pass it ints and strs, so the decorator is made a no-op for the import: 0.26 s, and the
    spelled words are the same (tests/lyrics/test_lyrics_reference.py, tests/lyrics/test_lyrics_g2p.py)."""
    with _import_lock:  # the swap is process-wide: one import at a time, and always undone
        import typeguard

        checked = typeguard.typechecked
        typeguard.typechecked = _unchecked
        try:
            import inflect
        finally:
            typeguard.typechecked = checked
    return inflect.engine()


def _unchecked(target: Any = None, **_: Any) -> Any:
    """`@typechecked` and `@typechecked(...)` as the identity."""
    return target if target is not None else (lambda f: f)


# inflect spells numbers up to 36 digits and raises past that (and int() refuses > 4300 digits): longer
# digit runs are read digit by digit, which upstream never reaches (it raises on them).
_MAX_SPELLED_DIGITS = 36
_DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _say_digits(digits: str) -> str:
    return " " + " ".join(_DIGIT_WORDS[int(d)] for d in digits) + " "


def _spellable(digits: str) -> bool:
    return len(digits.lstrip("0")) <= _MAX_SPELLED_DIGITS


def _say_dollars(m: re.Match[str]) -> str:
    amount = m.group(1)
    parts = amount.split(".")
    if len(parts) > 2:
        return f" {amount} dollars "
    # Kept as digit strings (leading zeros dropped, as int() would): the number rules below spell them.
    dollars = parts[0].lstrip("0") or "0"
    cents = (parts[1].lstrip("0") or "0") if len(parts) > 1 else "0"
    d_unit = "dollar" if dollars == "1" else "dollars"
    c_unit = "cent" if cents == "1" else "cents"
    if dollars != "0" and cents != "0":
        return f" {dollars} {d_unit}, {cents} {c_unit} "
    if dollars != "0":
        return f" {dollars} {d_unit} "
    if cents != "0":
        return f" {cents} {c_unit} "
    return " zero dollars "


def _say_fraction(m: re.Match[str]) -> str:
    if not (_spellable(m.group(1)) and _spellable(m.group(2))):
        return f"{_say_digits(m.group(1))}over{_say_digits(m.group(2))}"
    eng = _inflect_engine()
    num, den = int(m.group(1)), int(m.group(2))
    if (num, den) == (1, 2):
        return " one half "
    if (num, den) == (1, 4):
        return " one quarter "
    if den == 2:
        return f" {eng.number_to_words(num)} halves "
    if den == 4:
        return f" {eng.number_to_words(num)} quarters "
    return f" {eng.number_to_words(num)} {eng.ordinal(eng.number_to_words(den))} "


def _say_ordinal(m: re.Match[str]) -> str:
    if not _spellable(m.group(1)):
        return _say_digits(m.group(1)) + m.group(2) + " "
    return " " + _inflect_engine().number_to_words(m.group(0)) + " "


def _say_number(m: re.Match[str]) -> str:
    if not _spellable(m.group(0)):
        return _say_digits(m.group(0))
    return _spoken_number(m.group(0))


@lru_cache(maxsize=4096)
def _spoken_number(digits: str) -> str:
    """Cached: inflect type-checks every call (~0.1 ms), and a lyric repeats its numbers (10 000 calls in
    `$1.1.1...` took 1.6 s of CPU)."""
    eng = _inflect_engine()
    num = int(digits)
    if 1000 < num < 3000:  # read like a year
        if num == 2000:
            return " two thousand "
        if 2000 < num < 2010:
            return f" two thousand {eng.number_to_words(num % 100)} "
        if num % 100 == 0:
            return f" {eng.number_to_words(num // 100)} hundred "
        return " " + eng.number_to_words(num, andword="", zero="oh", group=2).replace(", ", " ") + " "
    return " " + eng.number_to_words(num, andword="") + " "


# Upstream's rules, written to run in linear time with the same matches: each is anchored at the start of
# a run ((?<![0-9]) etc.; unanchored, a failing match is retried from every digit of a long run), and
# `[0-9.,]*[0-9]+` became `[0-9.,]*[0-9]` (the nested quantifiers backtracked over every split point).
# Quadratic before: 2000 digits took seconds. tests/lyrics/test_lyrics_g2p.py checks both give the same text.
_NUMBER_RULES: list[tuple[re.Pattern[str], Any]] = [
    (re.compile(r"(?<![0-9])([0-9][0-9,]+[0-9])"), lambda m: m.group(1).replace(",", "")),
    (re.compile(r"£([0-9,]*[0-9])"), r"\1 pounds"),
    (re.compile(r"\$([0-9.,]*[0-9])"), _say_dollars),
    (re.compile(r"(?<![0-9])([0-9]+)/([0-9]+)"), _say_fraction),
    (re.compile(r"(?<![0-9])([0-9]+\.[0-9]+)"), lambda m: m.group(1).replace(".", " point ")),
    (re.compile(r"(?<![0-9.,])([0-9.,]*[0-9]%)"), lambda m: m.group(1).replace("%", " percent ")),
    (re.compile(r"(?<![0-9])([0-9]+)(st|nd|rd|th)"), _say_ordinal),
    (re.compile(r"[0-9]+"), _say_number),
]


def normalise_numbers(text: str) -> str:
    """Spell out numbers the way upstream does (order of the rules matters), in time linear in the text."""
    for pattern, replacement in _NUMBER_RULES:
        text = pattern.sub(replacement, text)
    return text


def normalise_text(text: str) -> str:
    """Abbreviations, numbers, then the punctuation clean-up upstream applies before espeak."""
    for regex, long in _ABBREVIATION_RES:
        text = regex.sub(long, text)
    text = normalise_numbers(text)
    text = text.strip()
    for src, dst in _CHINESE_PUNCTUATION:
        text = text.replace(src, dst)
    text = re.sub(r"[^\w\s_,.?!;:'…]", "", text)
    text = re.sub(r"\s*([,.?!;:'…])\s*", r"\1", text)
    return re.sub(r"\s+", " ", text)


def merge_phones(phones: str) -> str:
    for regex, dst in _MERGE_RES:
        while regex.search(phones):
            phones = regex.sub(lambda m, d=dst: m.group(1) + d + m.group(2), phones)
    return phones


@lru_cache(maxsize=1)
def _backend():
    try:
        from phonemizer.backend import EspeakBackend
    except ImportError as exc:  # pragma: no cover - phonemizer is a dependency
        raise EspeakMissing(f"phonemizer is not installed: {exc}") from exc
    if not EspeakBackend.is_available():
        raise EspeakMissing("espeak-ng is not installed (Debian/Ubuntu: apt-get install espeak-ng)")
    import logging

    # phonemizer logs a warning per line whose word count changed; upstream ignores those too.
    logger = logging.getLogger("phonemizer-quiet")
    logger.setLevel(logging.ERROR)
    return EspeakBackend(
        "en-us",
        punctuation_marks=PUNCTUATION_MARKS,
        preserve_punctuation=True,
        with_stress=False,
        tie=False,
        language_switch="remove-flags",
        words_mismatch="ignore",
        logger=logger,
    )


def espeak_available() -> bool:
    try:
        _backend()
    except EspeakMissing:
        return False
    return True


def english_phones(text: str) -> str:
    """Upstream's phone string ("a|b|_|c") for an English (or digit/punctuation) segment."""
    from phonemizer.separator import Separator

    normalised = normalise_text(text)
    out = _backend().phonemize([normalised], separator=Separator(word="|_|", syllable="-", phone="|"),
                               strip=True, njobs=1)
    phones = out[0] if out else ""
    phones = re.sub(r"([,.?!;:'…])", r"|\1|", phones)
    phones = re.sub(r"\|+", "|", phones).rstrip("|")
    if phones and phones[-1] in _PHONE_CHARS:
        phones += "|_"
    return merge_phones(phones)
