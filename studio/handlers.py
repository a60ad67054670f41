"""Handlers for composing and generating: thin calls into the engine, the take runner and the store.

Each returns (or yields) a `{component: value}` dict. Long work never runs here: Generate submits to
the engine and then only follows the take runner's live state.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr

from studio import live, present, seedbox, songs
from studio.admission import AdmissionRefused
from studio.handlers_resing import ResingHandlers
from studio.handlers_takes import TakeHandlers
from studio.page import Page
from studio.services import Services, UploadRefused
from studio.store import ACTIVE_STATUSES

log = logging.getLogger(__name__)


class Handlers(TakeHandlers, ResingHandlers):
    def __init__(self, svc: Services, page: Page) -> None:
        self.svc = svc
        self.page = page

    # ------------------------------------------------------------------ lyrics
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

    # ------------------------------------------------------------------ style
    def style_source(self, source: str) -> dict:
        """Choosing one style source clears the others, so a request never carries two."""
        s = self.page.style
        return {
            s.text_group: gr.Group(visible=source == "text"), s.audio_group: gr.Group(visible=source == "audio"),
            s.saved_group: gr.Group(visible=source == "saved"),
            s.text: "" if source != "text" else gr.skip(), s.audio: None if source != "audio" else gr.skip(),
            s.audio_path: "" if source != "audio" else gr.skip(), s.window_note: "" if source != "audio" else gr.skip(),
            s.saved: None if source != "saved" else gr.skip(),
        }

    def style_audio(self, tmp_path: str | None, owner: str | None = None, *, from_client: bool = True) -> dict:
        """Keep a reference song the page uploaded or recorded: only for a page with its owner key."""
        s = self.page.style
        if not tmp_path:
            return {s.audio_path: "", s.window_note: ""}
        if from_client and self._owner(owner) is None:
            return {s.audio: None, s.audio_path: "", s.window_note: "⚠ This page has no key yet: reload it, then upload."}
        try:
            kept, info = self.svc.keep_upload(tmp_path, from_client=from_client)
        except UploadRefused as exc:
            return {s.audio: None, s.audio_path: "", s.window_note: f"⚠ {exc}"}
        # Named relative to the data folder: the page never sees a server path.
        return {s.audio_path: f"uploads/{kept.name}", s.window_note: self.svc.style_window_note(kept, info["seconds"])}

    def save_style(self, name: str, source: str, text: str, audio_path: str, owner: str | None) -> dict:
        """Saved for this page's owner only: other owners neither see nor overwrite it."""
        s = self.page.style
        who = self._owner(owner)
        if who is None:
            return {s.save_note: "⚠ This page has no key yet: reload it, then save."}
        if source == "text" and not (text or "").strip() or source == "audio" and not audio_path:
            return {s.save_note: "Fill in a text prompt or a reference song first."}
        if source == "saved":
            return {s.save_note: "This is already a saved style."}
        try:
            style = self.svc.save_style(name, owner=who, text=text if source == "text" else "",
                                        audio=audio_path if source == "audio" else None)
        except Exception as exc:  # bad name, path outside the data dir, model not loaded
            return {s.save_note: f"⚠ {exc}"}
        names = [x.name for x in self.svc.store.list_styles(who)]
        return {s.save_note: f"Saved as **{style.name}**.", s.saved: gr.Dropdown(choices=names)}

    # ------------------------------------------------------------------ generate
    def generate(self, values: dict) -> Iterator[dict]:
        p, g = self.page, self.page.gen
        if values.get(p.token):
            yield {g.message: "This is a read-only shared session: copy it into your sessions to make takes."}
            return
        owner = self._owner(values.get(p.owner))
        if owner is None:
            yield {g.message: "⚠ This page has no key yet: reload it, then Generate."}
            return
        own = self._own_session(values.get(p.session), values.get(p.owner))
        try:
            started = songs.start(self.svc, owner, own, p.read_form(values))
        except songs.SongRefused as exc:
            listed = "\n".join(f"- {pr}" for pr in exc.problems)
            yield {g.message: f"⚠ {exc.headline}:\n{listed}"}
            return
        session_id, takes = started.session.id, started.takes
        seeds = ", ".join(str(t.seed) for t in takes)
        first: dict[Any, Any] = {g.seed: seedbox.drawn(takes[0].seed)} if values.get(g.random_seed) and takes else {}
        yield {p.session: session_id, g.message: f"Submitted {len(takes)} take(s), seed(s) {seeds}.",
               **self._listing(session_id), **self._sessions(values.get(p.owner)), **first}
        yield from self._follow(session_id, [t.id for t in takes])

    def _follow(self, session_id: str, take_ids: list[str]) -> Iterator[dict]:
        """Follow takes until they end: progress bars with ETA, and the live audio of the first take
        still rendering (studio/live.py: the page plays its decoded windows as they arrive)."""
        g = self.page.gen
        runner = self.svc.runner
        labels = {t.id: t.label for t in map(self.svc.store.get_take, take_ids) if t}
        session = self.svc.store.get_session(session_id)
        urls: dict[str, str] = {}
        last_status: dict[str, str] = {}
        for snap in runner.follow(take_ids):
            html_out = present.progress_html(snap, labels)
            rendering = [t for t, lv in snap.items() if lv.status in ACTIVE_STATUSES and not lv.preview_dropped]
            if rendering and session is not None:
                tid = rendering[0]
                url = urls.setdefault(tid, live.live_url(self.svc, tid, session.owner))
                html_out += live.live_html(url, labels.get(tid, ""))
            out: dict[Any, Any] = {g.progress: html_out}
            changed = {t: lv.status for t, lv in snap.items()} != last_status
            last_status = {t: lv.status for t, lv in snap.items()}
            if changed:
                out.update(self._listing(session_id))
            yield out
        final = [self.svc.store.get_take(t) for t in take_ids]
        done = [t for t in final if t and t.status == "done"]
        summary = ", ".join(f"{t.label}: {t.status}" + (f" ({t.error})" if t.error else "") for t in final if t)
        out = {g.message: summary, **self._listing(session_id, select=done[0].id if done else None)}
        if done:
            out.update(self.take_detail(done[0].id, session_id))
        yield out

    def cancel(self, session_id: str | None, owner: str | None) -> dict:
        g = self.page.gen
        session_id = self._own_id(session_id, owner)
        if not session_id or self.svc.runner is None:
            return {g.message: "Nothing is rendering."}
        active = [t for t in self.svc.store.list_takes(session_id) if t.status in ACTIVE_STATUSES]
        n = sum(self.svc.runner.cancel_job(t.id) for t in active)
        return {g.message: f"Cancelling {len(active)} take(s): the step in flight finishes, then the card is freed."
                if n else "Nothing is rendering in this session."}

    def cancel_take(self, take_id: str | None, session_id: str | None, owner: str | None) -> dict:
        """The selected take only; its sibling variations go on."""
        t = self.page.takes
        take = self.svc.store.get_take(take_id) if isinstance(take_id, str) and take_id else None
        own = self._own_id(session_id, owner)
        if take is None or own is None or take.session_id != own:
            return {t.note: "Pick one of your takes first."}
        if self.svc.runner is None or not self.svc.runner.cancel(take.id):
            return {t.note: f"**{take.label}** is not rendering."}
        return {t.note: f"Cancelling **{take.label}** only: its sibling variations go on."}

    def watch(self, session_id: str | None, owner: str | None) -> Iterator[dict]:
        """After a refresh: follow this session's takes that are still rendering in this process."""
        session_id = self._own_id(session_id, owner)
        if not session_id or self.svc.runner is None:
            # One real dict entry: an empty dict counts as "no values" and a silent generator blanks them.
            yield {self.page.gen.progress: gr.skip()}
            return
        active = [t.id for t in self.svc.store.list_takes(session_id)
                  if t.status in ACTIVE_STATUSES and self.svc.runner.live(t.id) is not None]
        who = self._owner(owner)
        if active and who is not None:
            try:  # per owner: a flood of page events must not hold every follow slot
                self.svc.admission.acquire(who, "watch")
            except AdmissionRefused:
                yield {self.page.gen.progress: gr.skip()}
                return
            try:
                yield from self._follow(session_id, active)
            finally:
                self.svc.admission.release(who, "watch")
        else:
            yield {self.page.gen.progress: gr.skip()}
