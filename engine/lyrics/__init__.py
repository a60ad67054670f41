"""Lyrics the model can sing: LRC parsing, g2p, frame layout with a per-line report, a timing helper.

Public interface (docs/CONTRACTS.md): `layout_lyrics(text, duration_s, *, tokenizer=None) -> LyricLayout`
and `time_lyrics(plain_text, duration_s, *, tempo_bpm=None, intro_s=None) -> str`.
No torch, no gradio: the studio checks lyrics before any device time is spent.

| module | role |
|---|---|
| `lrc` | LRC parsing: upstream's grammar, a few extras, a reason for every line |
| `g2p/` | a line -> model token ids (English and Mandarin, as upstream; its own notes) |
| `vocab` | the model's phone vocabulary and where to find it |
| `layout` | tokens laid out on the latent frames, as upstream's `get_lrc_token` |
| `report` | the per-line report: what happens to each line, and why |
| `timing` | plain lyrics + a duration -> a timed LRC |
| `heard` | the lyrics check: what a recogniser heard, scored line by line in phonemes |
"""

from __future__ import annotations

from engine.lyrics.g2p import EspeakMissing, LineTokens, LyricTokenizer
from engine.lyrics.layout import LyricLayout, layout_lyrics
from engine.lyrics.lrc import LrcLine, parse_lrc
from engine.lyrics.report import LineReport, render_text
from engine.lyrics.timing import TimingPlan, plan_timing, time_lyrics
from engine.lyrics.vocab import Vocab, VocabError, load_vocab

__all__ = [
    "EspeakMissing", "LineReport", "LineTokens", "LrcLine", "LyricLayout", "LyricTokenizer", "TimingPlan",
    "Vocab", "VocabError", "layout_lyrics", "load_vocab", "parse_lrc", "plan_timing", "render_text",
    "time_lyrics",
]
