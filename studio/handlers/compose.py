"""The compose section: the live per-line lyric report, the timing helper, the examples."""

from __future__ import annotations

import html
from pathlib import Path

from studio import present
from studio.handlers.section import Section


class ComposeHandlers(Section):
    def lyric_report(self, lyrics: str, duration: float, instrumental: bool) -> str:
        """The live per-line report: what the model will sing, what is dropped and why."""
        if instrumental or not (lyrics or "").strip():
            return "<div class='lyric-report'><i>Instrumental: no lyrics will be sung.</i></div>"
        from engine.request import SongRequest, layout_request_lyrics, lyrics_problem

        problem = lyrics_problem(lyrics, duration)  # the size limit before any layout work
        if problem:
            return f"<div class='lyric-report bad'>Cannot lay these lyrics out: {html.escape(problem)}</div>"
        try:
            layout = layout_request_lyrics(SongRequest(lyrics=lyrics, duration=float(duration)),
                                           tokenizer=self.svc.lyric_tokenizer())
        except Exception as exc:  # show the problem where the musician types, never a stack trace
            return f"<div class='lyric-report bad'>Cannot lay these lyrics out: {html.escape(str(exc))}</div>"
        return present.lyric_report_html(layout)

    def time_lyrics(self, plain: str, duration: float, tempo: float | None, intro: float | None) -> dict:
        c = self.page.compose
        if not (plain or "").strip():
            return {c.timing_note: "Paste plain lyrics (optionally with [Verse]/[Chorus] tags) first."}
        try:
            from engine.lyrics import time_lyrics

            lrc = time_lyrics(plain, float(duration), tempo_bpm=tempo or None, intro_s=intro or None,
                              tokenizer=self.svc.lyric_tokenizer())
        except Exception as exc:
            return {c.timing_note: f"⚠ {exc}"}
        return {c.lyrics: lrc, c.timing_note: "Timed — edit the times above if you like; the report updates."}

    def load_example(self, name: str | None) -> dict:
        from studio.ui.compose import lyric_examples

        path = lyric_examples().get(name or "")
        if not path:
            return {}
        text = Path(path).read_text(encoding="utf-8")
        c = self.page.compose
        if path.endswith(".txt"):  # plain, section-tagged lyrics: into the timing helper
            return {c.plain: text, c.timing_note: "Example loaded into the timing helper: press *Time these lyrics*."}
        return {c.lyrics: text, c.instrumental: False}
