"""Split a lyric line into Chinese and English runs, the way upstream's `get_segment` does.

Characters are classed as `zh` (U+4E00-U+9FA5 only), `en` (ASCII letters) or `other`. Runs of one
class form a segment; `other` characters (digits, spaces, punctuation, kana, ...) join the current
segment, and leading `other` characters join the first zh/en segment that follows. A line with no zh or
en character at all is one segment of class `other` (or `""` when empty): upstream raises
"Unknown language" on those; `engine.lyrics.g2p` handles them instead.
"""

from __future__ import annotations


def char_class(ch: str) -> str:
    if "\u4e00" <= ch <= "\u9fa5":
        return "zh"
    if "A" <= ch <= "Z" or "a" <= ch <= "z":
        return "en"
    return "other"


def segments(text: str) -> list[tuple[str, str]]:
    """[(text, language)] with language in {"zh", "en", "other", ""}; never empty."""
    out: list[tuple[str, str]] = []
    current, lang = "", ""
    for ch in text:
        cls = char_class(ch)
        if not current:
            current, lang = ch, cls
        elif lang == "other":
            # leading punctuation/digits belong to whatever language comes next
            current += ch
            lang = cls
        elif cls in (lang, "other"):
            current += ch
        else:
            out.append((current, lang))
            current, lang = ch, cls
    out.append((current, lang))
    return out
