"""The lyrics check on the page: the shown take's marked lines and re-sing panel, waiting for a check
that is still coming (it arrives after the take is playable), and "Re-sing ticked lines"."""

from __future__ import annotations

import time
from typing import Any

import gradio as gr

from device_worker.shapes import FRAME_RATE
from studio import heard_view, present
from studio.handlers.section import Section
from studio.songs import SongRefused

WAIT_FOR_CHECK_S = 120.0  # the check of a 285 s take on a CPU; on a GPU it arrives in seconds
POLL_S = 0.5


class HeardHandlers(Section):
    def _checking(self, take_id: str) -> bool:
        """Whether a check of this take may still come: the check is on and this process made the take
        (a take from before a restart, or made with the check off, is never waited for)."""
        runner = getattr(self.svc, "runner", None)
        return (getattr(getattr(self.svc, "engine", None), "checker", None) is not None and runner is not None
                and runner.live(take_id) is not None)

    def heard_panel(self, take_id: str | None, session_id: str | None, owner: str | None,
                    token: str | None) -> dict:
        """The shown take's marked lyric lines and its re-sing panel (the panel only on one's own take)."""
        r, t = self.page.takes.resing, self.page.takes
        take = self._readable_take(take_id, owner, token) if take_id else None
        own = take is not None and take.session_id == self._own_id(session_id, owner)
        check = heard_view.check_of(take)
        choices, ticked = heard_view.resing_choices(take)
        wav = take is not None and bool(take.files.get("wav"))
        return {t.lyric_lines: present.lyric_lines_html(take) if wav else "",
                r.group: gr.Accordion(visible=own and bool(choices)),
                r.summary: heard_view.summary(take, test_model=self.svc.config.test_model) if check else "",
                r.lines: gr.CheckboxGroup(choices=choices, value=ticked), r.note: ""}

    def heard_wait(self, take_id: str | None, session_id: str | None, owner: str | None, token: str | None) -> dict:
        """As `heard_panel`, once the shown take's check has arrived (it comes after the take is playable)."""
        take = self._readable_take(take_id, owner, token) if take_id else None
        deadline = time.monotonic() + WAIT_FOR_CHECK_S
        while take is not None and heard_view.awaited(take, self._checking(take.id)) and time.monotonic() < deadline:
            time.sleep(POLL_S)
            take = self.svc.store.get_take(take.id)
        return self.heard_panel(take_id, session_id, owner, token)

    def resing_lines(self, take_id: str | None, ticked: Any, session_id: str | None, owner: str | None) -> dict:
        """Start the re-sing edit take of the ticked lines; the note says what was started or why not."""
        from studio.resing import resing

        r, started = self.page.takes.resing, self.page.takes.started
        who = self._owner(owner)
        if who is None or self._own_id(session_id, owner) is None:
            return {r.note: "Open one of your own takes first.", started: ""}
        if not ticked:
            return {r.note: "Tick at least one line to sing again.", started: ""}
        try:
            new, frames = resing(self.svc, who, take_id, list(ticked))
        except SongRefused as exc:
            return {r.note: f"**{exc.headline}:** " + "; ".join(exc.problems), started: ""}
        spans = ", ".join(f"{a / FRAME_RATE:.2f}-{b / FRAME_RATE:.2f} s" for a, b in frames)
        return {r.note: f"Re-singing {spans} as a new take ({new.label}); the rest of the take is kept as it is.",
                started: new.id}
