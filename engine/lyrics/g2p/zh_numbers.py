"""Arabic numbers inside Chinese text read as Chinese numerals, the way upstream reads them.

Upstream's Mandarin front end calls `cn2an.transform(text, "an2cn")` before anything else. Its observable
rules, reproduced here (and checked against cn2an 0.5.23 in tests/lyrics/test_lyrics_zh.py):

1. dates: the digits of a year (`2024年`, 2-4 digits before 年) are read one by one (二零二四年); a
   month or day number (`12月25日`) is read as a number (十二月二十五日);
2. fractions `3/4` -> 四分之三; percentages `-5.5%` -> 百分之负五点五; `30℃` -> 三十摄氏度;
3. any other number, with an optional sign and decimals: `3.5` -> 三点五, `-2` -> 负二, `1024` -> 一千零二十四
   (integers up to 16 digits; decimals digit by digit, at most 16 of them).

A number that cannot be read (more than 16 integer digits, digits of another script) is left as it is;
the normalisation after this step then removes it, as upstream does.
"""

from __future__ import annotations

import re

_DIGIT = "零一二三四五六七八九"
_UNIT = ["", "十", "百", "千", "万", "十", "百", "千", "亿", "十", "百", "千", "万", "十", "百", "千"]
_FULL_WIDTH = str.maketrans("０１２３４５６７８９", "0123456789")

_DATE = re.compile(r"(\d{2,4}年)?(\d{1,2}月)?(\d{1,2}日)?")
_YEAR = re.compile(r"\d+(?=年)")
_DIGITS = re.compile(r"\d+")
_FRACTION = re.compile(r"\d+/\d+")
_PERCENT = re.compile(r"-?(\d+\.)?\d+%")
_CELSIUS = re.compile(r"\d+℃")
_NUMBER = re.compile(r"-?(\d+\.)?\d+")


def _checked(number: str) -> tuple[str, str]:
    """(sign, digits) of a number string; ValueError when it holds anything but ASCII digits, '.' and '-'."""
    number = number.translate(_FULL_WIDTH)
    if not number or any(ch not in "0123456789.-" for ch in number):
        raise ValueError(number)
    if number[0] == "-":
        return "负", number[1:]
    return "", number


def _integer(digits: str) -> str:
    digits = str(int(digits))  # leading zeros go: 007 -> 7
    n = len(digits)
    if n > len(_UNIT):
        raise ValueError(digits)
    out = ""
    for i, ch in enumerate(digits):
        place = n - i - 1
        if ch != "0":
            out += _DIGIT[int(ch)] + _UNIT[place]
            continue
        if place % 4 == 0:  # a zero where 万/亿 stands still writes the unit
            out += "零" + _UNIT[place]
        if i > 0 and out[-1] != "零":
            out += "零"
    out = out.replace("零零", "零").replace("零万", "万").replace("零亿", "亿").replace("亿万", "亿").strip("零")
    if out.startswith("一十"):
        out = out[1:]
    return out or "零"


def read_number(number: str) -> str:
    """'3.5' -> 三点五, '-12' -> 负十二 (cn2an's "low" reading); ValueError when it cannot be read."""
    sign, body = _checked(number)
    parts = body.split(".")
    if len(parts) == 1:
        return sign + _integer(parts[0])
    if len(parts) != 2:
        raise ValueError(number)
    whole, frac = parts
    return sign + _integer(whole) + ("点" if frac else "") + "".join(_DIGIT[int(c)] for c in frac[:16])


def read_digits(number: str) -> str:
    """'2024' -> 二零二四 (a year: digit by digit)."""
    sign, body = _checked(number)
    return sign + "".join("点" if c == "." else _DIGIT[int(c)] for c in body)


def _safe(fn, text: str) -> str:
    try:
        return fn(text)
    except ValueError:
        return text


def _date(m: re.Match[str]) -> str:
    text = m.group(0)
    if not text:
        return text
    try:
        text = _YEAR.sub(lambda y: read_digits(y.group(0)), text)
        return _DIGITS.sub(lambda d: read_number(d.group(0)), text)
    except ValueError:
        return m.group(0)


def _fraction(m: re.Match[str]) -> str:
    numerator, denominator = m.group(0).split("/")
    try:
        return f"{read_number(denominator)}分之{read_number(numerator)}"
    except ValueError:
        return m.group(0)


def numbers_to_chinese(text: str) -> str:
    """Every Arabic number in `text` read as Chinese numerals (upstream's an2cn transform)."""
    text = _DATE.sub(_date, text)
    text = _FRACTION.sub(_fraction, text)
    text = _PERCENT.sub(lambda m: _safe(lambda s: "百分之" + read_number(s[:-1]), m.group(0)), text)
    text = _CELSIUS.sub(lambda m: _safe(lambda s: read_number(s[:-1]) + "摄氏度", m.group(0)), text)
    return _NUMBER.sub(lambda m: _safe(read_number, m.group(0)), text)
