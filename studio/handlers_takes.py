"""Handlers for takes, sessions and share links (a mixin of `studio.handlers.Handlers`).

Who the browser is comes from its signed owner token (`studio.identity`), verified on every event: a
session id the page sends is used only when that owner holds the session, and a take is shown only
from the owner's sessions or from the session the page's share token opens (finished takes). A
shared view has only the share token, so a viewer can listen and download but never change anything.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from studio import access, present, seedbox, songs
from studio.forms import ComposeForm
from studio.page_files import audio_update, session_reference, take_files
from studio.store import ACTIVE_STATUSES, DONE, INTERRUPTED, SessionInfo, StoreError, TakeInfo
from studio.ui.takes import SORTS
from studio.waveform import regions_html

NO_SESSION = "new"  # the browser's session value for a blank page (never a session id: those are 22 chars)


class TakeHandlers:
    svc: Any
    page: Any

    # ------------------------------------------------------------------ lists
    def _listing(self, session_id: str | None, select: str | None = None, order: str | None = None,
                 clear: bool = False, done_only: bool = False) -> dict:
        """The take list: `select` picks a take, `clear` drops the selection and the take picked to edit (a
        deleted take, or one of the session left, must not stay a value: the next event would send an id
        that is no longer a choice, and be refused); neither leaves the browser's selection as it is. `done_only`: a shared view lists what it can open."""
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

    def resort(self, order: str | None, take_id: str | None, session_id: str | None, owner: str | None) -> dict:
        """The list in the order picked, the shown take still selected."""
        own = self._own_id(session_id, owner)
        keep = take_id if isinstance(take_id, str) and take_id and own else None
        return self._listing(own, select=keep, order=order if order in SORTS else None)

    # ------------------------------------------------------------------ identity
    def _owner(self, owner_token: Any) -> str | None:
        return self.svc.identity.owner_of(owner_token)

    def _own_session(self, session_id: Any, owner_token: Any) -> SessionInfo | None:
        """The session, if the verified owner holds it; None for a foreign, unknown or malformed id."""
        return access.own_session(self.svc.store, session_id, access.Who.of(self.svc.identity, token=owner_token))

    def _own_id(self, session_id: Any, owner_token: Any) -> str | None:
        s = self._own_session(session_id, owner_token)
        return s.id if s else None

    def _readable_take(self, take_id: Any, owner_token: Any, share_token: Any) -> TakeInfo | None:
        who = access.Who.of(self.svc.identity, token=owner_token, share=share_token)
        return access.readable_take(self.svc.store, take_id, who)

    def _sessions(self, owner_token: Any, query: str = "") -> dict:
        store, owner = self.svc.store, self._owner(owner_token)
        query = query if isinstance(query, str) else ""
        found = [] if owner is None else (store.search(query, owner=owner) if query.strip()
                                          else store.list_sessions(owner=owner))
        choices = [(_session_label(s), s.id) for s in found]
        return {self.page.history.sessions: gr.Radio(choices=choices)}

    def search(self, query: str, owner: str | None) -> dict:
        return self._sessions(owner, query)

    # ------------------------------------------------------------------ page load / sessions
    def on_load(self, owner: str | None, session_id: str | None, draft: Any, request: gr.Request) -> dict:
        """First paint: the browser's owner token (a new one for a new browser, or the one `?key=` hands
        over), the open session or a shared one from `?s=`, and an unsent draft restored."""
        p = self.page
        params = dict(request.query_params) if request is not None else {}
        handed = params.get("key")
        owner = self.svc.identity.refresh(owner) or owner  # signed with a key being retired: re-signed
        if handed and self._owner(handed) is not None and self._owner(owner) is None:
            owner = handed  # `studio token`'s link in a browser with no key yet: nothing to lose
        elif self._owner(owner) is None:  # (a browser with its own key is asked first: studio/keylink.py)
            owner = self.svc.identity.new_token()
        token = params.get("s")
        out: dict[Any, Any] = {p.owner: owner, p.banner: self.svc.model_status.banner_markdown()}
        if token:
            shared = self.svc.store.resolve_share(token)
            out[p.token] = token
            if shared is None:
                out.update(self._render(None, owner, read_only=True))
                out[p.shared.group] = gr.Group(visible=True)
                out[p.shared.banner] = "**This share link was revoked or never existed.** Ask the owner for a new one."
                out[p.shared.copy] = gr.Button(visible=False)
                return out
            out.update(self._render(shared, owner, read_only=True, share=token))
            return out
        out[p.token] = ""
        session = self._own_session(session_id, owner)
        rendered = self._render(session, owner, read_only=False)
        if (isinstance(draft, dict) and isinstance(draft.get("form"), dict) and draft["form"]
                and (draft.get("session") or NO_SESSION) == (session.id if session else NO_SESSION)):
            # What was typed and not yet generated comes back (the session's saved inputs are older).
            form = ComposeForm.from_dict({**(session.inputs if session else {}), **draft.get("form", {})})
            form.edit_mode, form.edit_take = "none", None  # as session_inputs: a reload starts a new song
            source_takes = rendered.get(p.gen.edit_take)  # the source-take choices _render filled
            reference = rendered.get(p.style.audio)
            rendered.update(p.form_updates(form))
            if session and form.style_audio == session.inputs.get("style_audio"):
                rendered[p.style.audio] = reference  # the draft keeps the session's reference: it plays
            if source_takes is not None:
                rendered[p.gen.edit_take] = source_takes
        elif session is None:
            # A fresh page already shows a blank form: leave it alone, so what the musician types
            # while the page is still loading is not overwritten by the defaults.
            for comp in [*p.form_fields().values(), p.style.audio, p.compose.report]:
                rendered.pop(comp, None)
        out.update(rendered)
        return out

    def open_session(self, session_id: str | None, owner: str | None, token: str | None) -> dict:
        """A session picked in the list: one of the browser's own (also from a shared view, which it
        then leaves); anything else changes nothing."""
        session = self._own_session(session_id, owner)
        if session is None:
            return {self.page.gen.message: "That session is not one of yours." if session_id else gr.skip()}
        out = self._render(session, owner, read_only=False)
        out[self.page.token] = ""
        return out

    def new_session(self, owner: str | None) -> dict:
        return self._render(None, owner, read_only=False)

    def _render(self, session: SessionInfo | None, owner: str | None, *, read_only: bool,
                share: str | None = None) -> dict:
        """Redraw everything that belongs to a session (its inputs, takes, link) or a blank page."""
        p = self.page
        form = ComposeForm.from_dict(session.inputs if session else None)
        if session and not form.title:
            form.title = session.title
        out: dict[Any, Any] = p.form_updates(form)
        for comp in p.form_fields().values():
            out[comp] = gr.update(value=out[comp], interactive=not read_only)
        out[p.gen.seed] = seedbox.shown(form.random_seed, form.seed, editable=not read_only)
        if not read_only:  # the session's uploaded reference plays again, through a URL signed for its owner
            out[p.style.audio] = session_reference(self.svc, session, access.Who.of(self.svc.identity, token=owner))
        out[p.style.saved] = gr.update(value=form.style_saved, interactive=not read_only,
                                       choices=[x.name for x in self.svc.store.list_styles(self._owner(owner))])
        takes = self.svc.store.list_takes(session.id) if session else []
        first = next((t for t in reversed(takes) if t.status == DONE), None)
        # clear: another session's (or owner's) take must not stay selected once its choices are gone
        out.update(self._listing(session.id if session else None, select=first.id if first else None,
                                 clear=True, done_only=read_only))
        out.update(self._sessions(owner))
        out.update(self.take_detail(first.id if first else None, None if read_only else (session.id if session else None),
                                    share))
        links = [x for x in (self.svc.store.share_links(session.id) if session and not read_only else []) if not x.revoked]
        out[p.history.link] = links[0].url_path if links else ""
        out[p.gen.message] = ""
        out[p.gen.progress] = ""
        out[p.compose.report] = ""
        if not read_only:
            # Not "": the browser keeps an empty BrowserState value as "unchanged", so a reload after
            # "New session" would reopen the old one. Any id that is not a session of the owner's opens none.
            out[p.session] = session.id if session else NO_SESSION
        out[p.shared.group] = gr.Group(visible=read_only)
        if read_only and session is not None:
            out[p.shared.banner] = (f"↗ **Shared session “{session.title}”** — read-only: listen, download, read "
                                    "the records. *Copy into my sessions* to make your own takes from it.")
        for comp in p.editable:
            out[comp] = gr.update(visible=not read_only)
        return out

    # ------------------------------------------------------------------ one take
    def show_take(self, take_id: str | None, session_id: str | None, owner: str | None, token: str | None) -> dict:
        """A take picked in the list: the owner's own, or a finished one of the shared session.

        A cleared selection changes nothing: whoever cleared it (delete, a new session) already redrew the
        detail, and a delete's note and Undo button must stay."""
        if not take_id:
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
                    t.cancel_take: gr.Button(visible=False)}
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
        out = {**self._listing(session_id, clear=True), **self.take_detail(None, session_id)}
        out.update({t.note: f"Deleted **{take.label}**.", t.undo: gr.Button(visible=True), t.undo_id: take.id})
        return out

    def undo_delete(self, undo_id: str, session_id: str, owner: str | None) -> dict:
        t = self.page.takes
        take = self.svc.store.get_take(undo_id) if isinstance(undo_id, str) and undo_id else None
        if take is None or take.session_id != session_id or self._own_session(session_id, owner) is None:
            return {t.note: "Nothing to undo."}
        self.svc.store.undelete_take(take.id)
        return {**self._listing(session_id, select=take.id), **self.take_detail(take.id, session_id),
                t.note: f"Restored **{take.label}**."}

    def retry(self, take_id: str, session_id: str, owner: str | None) -> dict:
        """Render an interrupted/failed/cancelled take again: same request, same recorded seed."""
        t = self.page.takes
        try:
            take = self._owned_take(take_id, session_id, owner)
        except StoreError as exc:
            return {t.note: f"⚠ {exc}"}
        try:
            new = songs.retry(self.svc, take)
        except songs.SongRefused as exc:
            return {t.note: f"⚠ {exc}"}
        return {**self._listing(session_id, select=new.id), t.note: "Retrying: the new take renders now."}

    def _act(self, take_id: str, session_id: str, owner: str | None, fn: Any, note: str) -> dict:
        t = self.page.takes
        try:
            take = fn(self._owned_take(take_id, session_id, owner))
        except StoreError as exc:
            return {t.note: f"⚠ {exc}"}
        out = {**self._listing(session_id, select=take.id), **self.take_detail(take.id, session_id)}
        out[t.note] = note
        return out

    # ------------------------------------------------------------------ take -> form
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
        out = self.style_source("audio")
        out.update(self.style_audio(take.files["wav"], from_client=False))  # a take of the owner's: trusted
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
               **self._listing(self._own_id(session_id, owner), select=take.id)}
        # A random seed again: the edit needs none fixed, and a fixed one would silently carry over into
        # the next new song.
        out.update({g.edit_mode: "edit", g.edit_take: take.id, g.duration: int(take.request.get("duration", 95)),
                    g.random_seed: True, g.seed: seedbox.shown(True, None)})
        out[self.page.takes.note] = (f"Editing **{take.label}**: mark ranges to regenerate (e.g. `10-20`) or "
                                     "choose *Continue*, then Generate. The new take links to this one.")
        return out

    # ------------------------------------------------------------------ A/B
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

    # ------------------------------------------------------------------ sharing
    def share(self, session_id: str | None, owner: str | None, request: gr.Request) -> dict:
        h = self.page.history
        if self._own_session(session_id, owner) is None:
            return {h.share_note: "Make a take (or save the session) first."}
        link = self.svc.store.share(session_id)
        return {h.link: _absolute(link.url_path, request), h.share_note: "Anyone with this link can listen, read "
                "and copy this session, not change it. Revoke it any time."}

    def revoke(self, session_id: str | None, owner: str | None) -> dict:
        h = self.page.history
        own = self._own_id(session_id, owner)
        links = [x for x in self.svc.store.share_links(own) if not x.revoked] if own else []
        for link in links:
            self.svc.store.revoke(link.token)
        return {h.link: "", h.share_note: "Link revoked: it no longer opens this session." if links else "No live link."}

    def copy_shared(self, token: str | None, owner: str | None) -> dict:
        shared = self.svc.store.resolve_share(token) if isinstance(token, str) and token else None
        if shared is None:
            return {self.page.shared.banner: "This link was revoked; nothing to copy."}
        if self._owner(owner) is None:
            return {self.page.shared.banner: "Reload the page first: this browser has no key yet."}
        copy = self.svc.store.copy_session(shared.id, owner=self._owner(owner))
        out = self._render(copy, owner, read_only=False)
        out[self.page.token] = ""
        out[self.page.gen.message] = f"Copied into your sessions as **{copy.title}**."
        return out


def _session_label(s: SessionInfo) -> str:
    when = s.updated_at.strftime("%Y-%m-%d %H:%M")
    return f"{s.title} · {s.take_count} take(s) · {when}"


def _absolute(path: str, request: gr.Request | None) -> str:
    """The link as the browser reached us (host header), so it works when pasted elsewhere."""
    try:
        headers = dict(request.headers) if request is not None else {}
        host = headers.get("x-forwarded-host") or headers.get("host")
        proto = headers.get("x-forwarded-proto") or "http"
        root = getattr(request, "root_path", "") or "" if request is not None else ""
        return f"{proto}://{host}{root.rstrip('/')}{path}" if host else path
    except Exception:
        return path
