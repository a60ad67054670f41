"""The whole page as one object: every section's components, the form field map, per-browser state.

Handlers return `{component: value}` dicts (Gradio's dict returns), never positional tuples, and the
form is read through `FORM_FIELDS`, so adding a field is one line here and one in `ComposeForm`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from studio import seedbox
from studio.forms import ComposeForm
from studio.ui.compose import ComposeUI
from studio.ui.generate import GenerateUI
from studio.ui.history import HistoryUI, SharedUI
from studio.ui.style import StyleUI
from studio.ui.takes import TakesUI


@dataclass
class Page:
    banner: gr.Markdown
    shared: SharedUI
    compose: ComposeUI
    style: StyleUI
    gen: GenerateUI
    takes: TakesUI
    history: HistoryUI
    # Per-browser, in the browser's local storage (survive a refresh; nothing lives only in gr.State):
    owner: gr.BrowserState  # a random key naming "my sessions"
    session: gr.BrowserState  # the session this browser has open
    # The share token of a read-only view (from `?s=` in the URL, so a refresh restores it too).
    token: gr.State
    editable: list[gr.components.Component]  # what a read-only view disables

    def form_fields(self) -> dict[str, gr.components.Component]:
        c, s, g = self.compose, self.style, self.gen
        return {
            "title": c.title, "lyrics": c.lyrics, "instrumental": c.instrumental,
            "style_source": s.source, "style_text": s.text, "style_audio": s.audio_path, "style_saved": s.saved,
            "duration": g.duration, "steps": g.steps, "cfg": g.cfg, "seed": g.seed,
            "random_seed": g.random_seed, "variations": g.variations, "formats": g.formats,
            "edit_mode": g.edit_mode, "edit_take": g.edit_take,
            "edit_ranges": g.edit_ranges, "continue_from": g.continue_from,
        }

    def form_inputs(self) -> set[gr.components.Component]:
        return set(self.form_fields().values()) | {self.owner, self.session, self.token, self.takes.listing}

    def read_form(self, values: dict[Any, Any]) -> ComposeForm:
        return ComposeForm.from_dict({name: values.get(comp) for name, comp in self.form_fields().items()})

    def form_updates(self, form: ComposeForm) -> dict[Any, Any]:
        d = form.to_dict()
        out: dict[Any, Any] = {comp: d[name] for name, comp in self.form_fields().items()}
        out[self.style.text_group] = gr.Group(visible=form.style_source == "text")
        out[self.style.audio_group] = gr.Group(visible=form.style_source == "audio")
        out[self.style.saved_group] = gr.Group(visible=form.style_source == "saved")
        # A stored reference is named relative to the data folder (`uploads/<digest>.wav`): no server path
        # goes to the page; its player is filled by the session handlers with a signed URL (page_files).
        if form.style_audio and Path(form.style_audio).is_absolute():
            out[self.style.audio_path] = f"uploads/{Path(form.style_audio).name}"
        out[self.style.audio] = None
        out[self.gen.seed] = seedbox.shown(form.random_seed, form.seed)
        return out

    def session_outputs(self) -> list[Any]:
        """Everything a reopened (or shared) session redraws."""
        t, h = self.takes, self.history
        return [
            *self.form_fields().values(), self.style.text_group, self.style.audio_group, self.style.saved_group,
            self.style.audio, t.listing, h.sessions, h.link, self.session, self.gen.message,
            self.gen.progress, self.shared.group, self.shared.banner, *self.editable, self.compose.report,
            *self.take_outputs(),
        ]

    def follow_outputs(self) -> list[Any]:
        """What a follow of takes (Generate, the watch after a reload, Retry, Re-sing) streams to."""
        g = self.gen
        return [self.session, g.message, g.progress, g.preview, self.takes.listing, g.edit_take,
                self.history.sessions, g.seed, self.takes.followed, self.takes.picked_before]

    def take_outputs(self) -> list[Any]:
        t = self.takes
        return [t.audio, t.lyric_lines, t.waveform, t.lyrics_view, t.files, t.record, t.name, t.star, t.undo, t.retry, t.note,
                t.actions, t.undo_id, t.delete, t.cancel_take, t.shown]
