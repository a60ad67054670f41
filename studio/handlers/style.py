"""The style section: one source at a time, a reference song kept, a style saved for its owner."""

from __future__ import annotations

import gradio as gr

from studio.handlers.section import Section
from studio.services import UploadRefused


class StyleHandlers(Section):
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
