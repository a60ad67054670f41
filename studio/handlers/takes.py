"""The takes section: the take list and its order, one take shown, its actions (rename, star, delete
with undo, retry, cancel-cancelled), a take back into the form, and the A/B pickers.

A shared view has only the share token, so a viewer can listen and download but never change anything.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from studio import access, present, seedbox, songs
from studio.forms import ComposeForm
from studio.handlers.section import Section
from studio.handlers.style import StyleHandlers
from studio.page import Page
from studio.page_files import audio_update, take_files
from studio.services import Services
from studio.store import ACTIVE_STATUSES, CANCELLED, DONE, INTERRUPTED, StoreError, TakeInfo
from studio.ui.takes import SORTS
from studio.waveform import regions_html


class TakeHandlers(Section):
    def __init__(self, svc: Services, page: Page, style: StyleHandlers) -> None:
        super().__init__(svc, page)
        self.style = style  # "use as style reference" fills the style section

    def listing(self, session_id: str | None, select: str | None = None, order: str | None = None,
                 clear: bool = False, done_only: bool = False) -> dict:
        """The take list: `select` picks a take, `clear` drops the selection and the take picked to edit (a
        deleted take, or one of the session left, must not stay a value: the next event would send an id
        that is no longer a choice, and be refused); neither leaves the browser's selection as it is.
        `done_only`: a shared view lists what it can open."""
        t, g = self.page.takes, self.page.gen
        takes = list(reversed(self.svc.store.list_takes(session_id))) if session_id else []
        takes = [x for x in takes if x.status == DONE] if done_only else takes
        if order == SORTS[1]:
            # Best style match first; takes without a figure (running, failed, no style model) go last,
            # newest first among equals (sorted() is stable).
            takes = sorted(takes, key=lambda x: (present.style_match_of(x) is None, -(present.style_match_of(x) or 0.0)))
        elif order == SORTS[2]:  # most words sung first (the lyrics check); unchecked takes last
            from studio.heard_view import sung_share_of

            takes = sorted(takes, key=lambda x: (sung_share_of(x) is None, -(sung_share_of(x) or 0.0)))
        choices = [(present.take_label(x), x.id) for x in takes]
        done = [(present.take_label(x), x.id) for x in takes if x.status == DONE]
        listing = gr.Radio(choices=choices, value=select or None) if select or clear else gr.Radio(choices=choices)
        edit = gr.Dropdown(choices=done, value=None) if clear else gr.Dropdown(choices=done)
        return {t.listing: listing, g.edit_take: edit}

    def resort(self, order: str | None, session_id: str | None, owner: str | None) -> dict:
        """The list in the order picked. The selection is left to the browser: it runs after Generate
        and the take actions, and sending back the take selected when it was triggered overrode a take
        the musician picked meanwhile (the list jumped back and showed the other take)."""
        return self.listing(self._own_id(session_id, owner), order=order if order in SORTS else None)

    def show_finished(self, picked: str | None, followed: str | None, picked_before: str | None,
                      order: str | None, session_id: str | None, owner: str | None) -> dict:
        """After a follow ends: the list in the order picked, and the first of the followed takes that
        finished shown (else a followed take still picked, as it ended), unless the musician picked
        another take while it ran: that pick stays.

        The follow's own last word used to select that take, and it landed after a click made as the
        takes settled: the take the musician had opened was swapped under their Delete (the refresh
        browser test deleted a finished take instead of the cancelled one it clicked)."""
        ids = followed.split() if isinstance(followed, str) else []
        if not ids:
            # Nothing was followed (the first load's watch of a blank page, a refused Generate): nothing
            # ended, so nothing is redrawn. Its inputs were read as the follow began; redrawn from them,
            # late on a loaded machine, the list of a session opened meanwhile was emptied (CI's downloads test).
            return {self.page.takes.note: gr.skip()}
        own = self._own_id(session_id, owner)
        order = order if order in SORTS else None
        if picked and picked != picked_before:
            return self.listing(own, order=order)
        # (a follow of a session the page has left lists none of its takes here)
        takes = [x for x in map(self.svc.store.get_take, ids) if x is not None and x.session_id == own]
        show = next((x.id for x in takes if x.status == DONE), picked if picked in {x.id for x in takes} else None)
        if show is None:
            return self.listing(own, order=order)
        if show == picked:  # its detail was drawn while it rendered: draw it finished
            return {**self.listing(own, order=order), **self.take_detail(show, own)}
        return self.listing(own, select=show, order=order)  # the list's change event shows it

    def show_take(self, take_id: str | None, session_id: str | None, owner: str | None, token: str | None,
                  shown: str | None = None) -> dict:
        """A take picked in the list: the owner's own, or a finished one of the shared session.

        A cleared selection changes nothing: whoever cleared it (delete, a new session) already redrew the
        detail, and a delete's note and Undo button must stay. Nor does a selection made by a handler that
        drew the take itself (`shown`: undo, star, rename, a reopened session): drawn again, late on a
        loaded machine, it wiped a name being typed and the handler's note (the refresh browser test's
        rename read no "keeper" after Undo and Star)."""
        if not take_id or take_id == shown:
            return {self.page.takes.note: gr.skip()}  # (an empty dict would read as one output value)
        take = self._readable_take(take_id, owner, token)
        return self.take_detail(take.id if take else None, self._own_id(session_id, owner),
                                token if isinstance(token, str) else None)

    def take_detail(self, take_id: str | None, session_id: str | None, share: str | None = None) -> dict:
        """Callers pass a take id they have checked and the verified own session (or None); a shared
        view passes its share token, which its file URLs are signed for."""
        t = self.page.takes
        take = self.svc.store.get_take(take_id) if take_id else None
        if take is None:
            return {t.audio: gr.Audio(value=None, label="Take"), t.lyric_lines: "", t.waveform: "", t.lyrics_view: "", t.files: None, t.record: "",
                    t.name: "", t.star: "☆ Star", t.undo: gr.Button(visible=False),
                    t.retry: gr.Button(visible=False), t.note: "", t.actions: gr.Row(visible=bool(session_id)),
                    t.undo_id: "", t.delete: gr.Button(visible=bool(session_id)),
                    t.cancel_take: gr.Button(visible=False), t.shown: ""}
        owned = session_id is not None and take.session_id == session_id
        session = self.svc.store.get_session(take.session_id) if owned else None
        signed = take_files(self.svc, take, access.Who(session.owner if session else None, share))
        wav = signed.get("wav")
        files = [f for kind, f in signed.items() if kind != "json"] + ([signed["json"]] if "json" in signed else [])
        peaks_cache = self.svc.config.cache_dir / "waveforms" / f"{take.id}.json"
        return {
            # A take without audio names itself too: the previous take's name over an empty player read as
            # that take still being shown (the walk's "stale pane").
            t.audio: audio_update(wav, present.subtitles(take), take.label) if wav
            else gr.update(value=None, label=present.no_audio_label(take)),
            t.lyric_lines: present.lyric_lines_html(take) if wav else "",
            t.waveform: regions_html(take.id, take.files["wav"], peaks_cache, present.style_match_caption(take),
                                     editable=owned) if wav else "",
            t.lyrics_view: take.request.get("lyrics") or "(instrumental)",
            t.files: files or None,
            t.record: present.record_markdown(take),
            t.name: take.name,
            t.star: "★ Starred" if take.starred else "☆ Star",
            t.undo: gr.Button(visible=False),
            t.retry: gr.Button(visible=owned and take.status in (INTERRUPTED, "failed", "cancelled")),
            t.note: "",
            t.actions: gr.Row(visible=owned),
            t.undo_id: "",
            t.delete: gr.Button(visible=owned),
            # Only a take still queued or rendering can be cancelled; a finished one offers nothing to stop.
            t.cancel_take: gr.Button(visible=owned and take.status in ACTIVE_STATUSES),
            t.shown: take.id,
        }

    def _owned_take(self, take_id: str | None, session_id: str | None, owner: str | None) -> TakeInfo:
        take = self.svc.store.get_take(take_id) if isinstance(take_id, str) and take_id else None
        if take is None or take.session_id != session_id or self._own_session(session_id, owner) is None:
            raise StoreError("Pick one of your own takes first.")
        return take

    def rename(self, take_id: str, session_id: str, name: str, owner: str | None) -> dict:
        name = name if isinstance(name, str) else ""
        return self._act(take_id, session_id, owner, lambda t: self.svc.store.rename_take(t.id, name[:200]),
                         "Renamed.")

    def star(self, take_id: str, session_id: str, owner: str | None) -> dict:
        return self._act(take_id, session_id, owner, lambda t: self.svc.store.star_take(t.id, not t.starred), "")

    def delete(self, take_id: str, session_id: str, owner: str | None) -> dict:
        t = self.page.takes
        try:
            take = self._owned_take(take_id, session_id, owner)
        except StoreError as exc:
            return {t.note: f"⚠ {exc}"}
        self.svc.store.delete_take(take.id)
        out = {**self.listing(session_id, clear=True), **self.take_detail(None, session_id)}
        out.update({t.note: f"Deleted **{take.label}**.", t.undo: gr.Button(visible=True), t.undo_id: take.id})
        return out

    def undo_delete(self, undo_id: str, session_id: str, owner: str | None) -> dict:
        t = self.page.takes
        take = self.svc.store.get_take(undo_id) if isinstance(undo_id, str) and undo_id else None
        if take is None or take.session_id != session_id or self._own_session(session_id, owner) is None:
            return {t.note: "Nothing to undo."}
        self.svc.store.undelete_take(take.id)
        return {**self.listing(session_id, select=take.id), **self.take_detail(take.id, session_id),
                t.note: f"Restored **{take.label}**."}

    def retry(self, take_id: str, session_id: str, owner: str | None) -> dict:
        """Render an interrupted/failed/cancelled take again: same request, same recorded seed."""
        t = self.page.takes
        try:
            take = self._owned_take(take_id, session_id, owner)
        except StoreError as exc:
            return {t.note: f"⚠ {exc}", t.started: ""}
        try:
            new = songs.retry(self.svc, take)
        except songs.SongRefused as exc:
            return {t.note: f"⚠ {exc}", t.started: ""}
        return {**self.listing(session_id, select=new.id), t.note: "Retrying: the new take renders now.",
                t.started: new.id}

    def _act(self, take_id: str, session_id: str, owner: str | None, fn: Any, note: str) -> dict:
        t = self.page.takes
        try:
            take = fn(self._owned_take(take_id, session_id, owner))
        except StoreError as exc:
            return {t.note: f"⚠ {exc}"}
        out = {**self.listing(session_id, select=take.id), **self.take_detail(take.id, session_id)}
        out[t.note] = note
        return out

    def delete_cancelled(self, take_id: str | None, session_id: str | None, owner: str | None) -> dict:
        """Every cancelled take of the session at once (the walk saw ten cancelled rows after one Cancel of
        ten variations, each to be deleted by hand); the selected one, if it goes, is unselected."""
        t = self.page.takes
        own = self._own_id(session_id, owner)
        if own is None:
            return {t.note: "Open one of your sessions first."}
        gone = [x for x in self.svc.store.list_takes(own) if x.status == CANCELLED]
        if not gone:
            return {t.note: "No cancelled takes in this session."}
        for take in gone:
            self.svc.store.delete_take(take.id)
        note = f"Deleted {len(gone)} cancelled take{'s' if len(gone) != 1 else ''}."
        if take_id in {x.id for x in gone}:
            return {**self.listing(own, clear=True), **self.take_detail(None, own), t.note: note}
        return {**self.listing(own, select=take_id if isinstance(take_id, str) and take_id else None), t.note: note}

    def use_settings(self, take_id: str | None, session_id: str | None, owner: str | None) -> dict:
        """Fill the form with a take's request and its actual seed (so Generate remakes it)."""
        take = self._readable_take(take_id, owner, None)
        if take is None:
            return {self.page.takes.note: "Pick a take first."}
        form = ComposeForm.of_take(take, self.svc.store.get_session(take.session_id))
        out = self.page.form_updates(form)
        out[self.page.takes.note] = f"Settings of **{take.label}** loaded (seed {take.seed})."
        return out

    def use_reference(self, take_id: str | None, owner: str | None) -> dict:
        take = self._readable_take(take_id, owner, None)
        s = self.page.style
        if take is None or not take.files.get("wav"):
            return {self.page.takes.note: "Pick a finished take first."}
        out = self.style.style_source("audio")
        out.update(self.style.style_audio(take.files["wav"], from_client=False))  # a take of the owner's: trusted
        out[s.source] = "audio"
        out[s.audio] = take.files["wav"]
        out[self.page.takes.note] = f"**{take.label}** is now the style reference."
        return out

    def use_edit(self, take_id: str | None, session_id: str | None, owner: str | None) -> dict:
        take = self._readable_take(take_id, owner, None)
        g = self.page.gen
        if take is None or take.status != DONE:
            return {self.page.takes.note: "Pick a finished take first."}
        out = {**self.use_settings(take_id, session_id, owner),
               **self.listing(self._own_id(session_id, owner), select=take.id)}
        # A random seed again: the edit needs none fixed, and a fixed one would silently carry over into
        # the next new song.
        out.update({g.edit_mode: "edit", g.edit_take: take.id, g.duration: int(take.request.get("duration", 95)),
                    g.random_seed: True, g.seed: seedbox.shown(True, None)})
        out[self.page.takes.note] = (f"Editing **{take.label}**: mark ranges to regenerate (e.g. `10-20`) or "
                                     "choose *Continue*, then Generate. The new take links to this one.")
        return out

    def ab_choices(self, session_id: str | None, owner: str | None, token: str | None) -> dict:
        """The finished takes of the open session (own, or shared) for the A/B pickers."""
        t = self.page.takes
        own = self._own_id(session_id, owner)
        shared = self.svc.store.resolve_share(token) if isinstance(token, str) and token else None
        sid = shared.id if shared is not None else own
        done = [(present.take_label(x), x.id) for x in reversed(self.svc.store.list_takes(sid))
                if x.status == DONE] if sid else []
        pick = [v for _, v in done]
        return {t.ab_a: gr.Dropdown(choices=done, value=pick[0] if pick else None),
                t.ab_b: gr.Dropdown(choices=done, value=pick[1] if len(pick) > 1 else None)}

    def ab_players(self, a: str | None, b: str | None, owner: str | None, token: str | None) -> str:
        who = access.Who.of(self.svc.identity, token=owner, share=token)
        takes = [access.readable_take(self.svc.store, x, who) for x in (a, b)]
        urls = [access.signed_file_url(self.svc.store, self.svc.identity, x, "wav", who) if x else None for x in takes]
        if not all(urls):
            return "<p class='ab-note'>Pick two finished takes.</p>"
        return present.ab_html([(x.label, u) for x, u in zip(takes, urls, strict=True)])
