"""The generate section: Generate submits to the engine and then only follows the take runner's live
state (progress with ETAs, the live audio of the first take rendering); Cancel; the watch that follows a
reopened session's takes after a reload. Long work never runs here."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import gradio as gr

from studio import live, present, seedbox, songs
from studio.admission import AdmissionRefused
from studio.handlers.section import Section
from studio.handlers.sessions import SessionHandlers
from studio.handlers.takes import TakeHandlers
from studio.page import Page
from studio.services import Services
from studio.store import ACTIVE_STATUSES

logger = logging.getLogger(__name__)
# The progress pane is redrawn at most this often (5 a second; the changes between come in one redraw).
# Each redraw is a message to the page and a re-render of every take's bar. Following sixteen takes on the
# test model at every change (~30 redraws a second) kept Chromium's renderer at 0.9 of a core and a script
# round trip at 36 ms; 0.52 and 9 ms with the gap, 0.38 with the bars also scaled rather than sized
# (assets/ui/studio.css; bench/page_redraws.py). In CI, on two cores, two such pages each left a Cancel
# click unanswered for 30 s.
DRAW_GAP_S = 0.2


class GenerateHandlers(Section):
    def __init__(self, svc: Services, page: Page, takes: TakeHandlers, sessions: SessionHandlers) -> None:
        super().__init__(svc, page)
        self.takes, self.sessions = takes, sessions  # what a generation redraws as it goes

    def generate(self, values: dict) -> Iterator[dict]:
        p, g = self.page, self.page.gen
        follows_nothing = {p.takes.followed: ""}  # a refusal follows nothing: the step after it redraws nothing
        # Each outcome is logged: a Generate that made nothing must say why in the studio's log too.
        if values.get(p.token):
            logger.info("[generate] refused: a read-only shared view")
            yield {g.message: "This is a read-only shared session: copy it into your sessions to make takes.", **follows_nothing}
            return
        owner = self._owner(values.get(p.owner))
        if owner is None:
            logger.info("[generate] refused: the page has no key")
            yield {g.message: "⚠ This page has no key yet: reload it, then Generate.", **follows_nothing}
            return
        own = self._own_session(values.get(p.session), values.get(p.owner))
        try:
            started = songs.start(self.svc, owner, own, p.read_form(values))
        except songs.SongRefused as exc:
            logger.info("[generate] refused: %s: %s", exc.headline, "; ".join(map(str, exc.problems)))
            listed = "\n".join(f"- {pr}" for pr in exc.problems)
            yield {g.message: f"⚠ {exc.headline}:\n{listed}", **follows_nothing}
            return
        session_id, takes = started.session.id, started.takes
        logger.info("[generate] session=%s takes=%s", session_id, ",".join(t.id for t in takes))
        seeds = ", ".join(str(t.seed) for t in takes)
        first: dict[Any, Any] = {g.seed: seedbox.drawn(takes[0].seed)} if values.get(g.random_seed) and takes else {}
        yield {p.session: session_id, g.message: f"Submitted {len(takes)} take(s), seed(s) {seeds}.",
               **self.takes.listing(session_id), **self.sessions.listed(values.get(p.owner)), **first}
        yield from self._follow(session_id, [t.id for t in takes], values.get(p.takes.listing))

    def _follow(self, session_id: str, take_ids: list[str], picked: str | None) -> Iterator[dict]:
        """Follow takes until they end: progress bars with ETA, and the live audio of the first take
        still rendering (studio/live.py: the page plays its decoded windows as they arrive). `picked`: the
        take picked in the list as it began; which take is shown after is decided against it (show_finished)."""
        g = self.page.gen
        runner = self.svc.runner
        labels = {t.id: t.label for t in map(self.svc.store.get_take, take_ids) if t}
        session = self.svc.store.get_session(session_id)
        urls: dict[str, str] = {}
        last_status: dict[str, str] = {}
        for snap in runner.follow(take_ids, min_gap_s=DRAW_GAP_S):
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
                out.update(self.takes.listing(session_id))
            yield out
        final = [self.svc.store.get_take(t) for t in take_ids]
        summary = ", ".join(f"{t.label}: {t.status}" + (f" ({t.error})" if t.error else "") for t in final if t)
        # Which take to show is decided after the follow, against what the page has picked by then.
        t = self.page.takes
        yield {g.message: summary, **self.takes.listing(session_id), t.followed: " ".join(take_ids),
               t.picked_before: picked if isinstance(picked, str) else ""}

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

    def watch(self, session_id: str | None, owner: str | None, picked: str | None = None,
              started: str | None = None) -> Iterator[dict]:
        """After a refresh: follow this session's takes that are still rendering in this process. After
        Retry or Re-sing: those and the take the click `started`, even if it has already ended (a cropped
        take on a loaded machine can end before this follow begins, and the list was never redrawn)."""
        session_id = self._own_id(session_id, owner)
        follows_nothing = {self.page.gen.progress: gr.skip(), self.page.takes.followed: ""}  # (show_finished: no redraw)
        if not session_id or self.svc.runner is None:
            yield follows_nothing
            return
        begun = set(started.split()) if isinstance(started, str) else set()
        active = [t.id for t in self.svc.store.list_takes(session_id)
                  if t.id in begun or (t.status in ACTIVE_STATUSES and self.svc.runner.live(t.id) is not None)]
        who = self._owner(owner)
        if active and who is not None:
            try:  # per owner: a flood of page events must not hold every follow slot
                self.svc.admission.acquire(who, "watch")
            except AdmissionRefused:
                yield follows_nothing
                return
            try:
                yield from self._follow(session_id, active, picked)
            finally:
                self.svc.admission.release(who, "watch")
        else:
            yield follows_nothing
