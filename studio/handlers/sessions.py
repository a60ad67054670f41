"""The sessions section: the page's first paint (owner key, open or shared session, unsent draft), the
session list and search, opening, a new session, share links and copying a shared session."""

from __future__ import annotations

from typing import Any

import gradio as gr

from studio import access, seedbox
from studio.forms import ComposeForm
from studio.handlers.section import Section
from studio.handlers.takes import TakeHandlers
from studio.page import Page
from studio.page_files import session_reference
from studio.services import Services
from studio.store import DONE, SessionInfo

NO_SESSION = "new"  # the browser's session value for a blank page (never a session id: those are 22 chars)


class SessionHandlers(Section):
    def __init__(self, svc: Services, page: Page, takes: TakeHandlers) -> None:
        super().__init__(svc, page)
        self.takes = takes  # a session's redraw shows its takes

    def listed(self, owner_token: Any, query: str = "") -> dict:
        store, owner = self.svc.store, self._owner(owner_token)
        query = query if isinstance(query, str) else ""
        found = [] if owner is None else (store.search(query, owner=owner) if query.strip()
                                          else store.list_sessions(owner=owner))
        choices = [(_session_label(s), s.id) for s in found]
        return {self.page.history.sessions: gr.Radio(choices=choices)}

    def search(self, query: str, owner: str | None) -> dict:
        return self.listed(owner, query)

    def on_load(self, owner: str | None, session_id: str | None, draft: Any, request: gr.Request) -> dict:
        """First paint: the browser's owner token (a new one for a new browser, or the one `?key=` hands
        over), the open session or a shared one from `?s=`, and an unsent draft restored. Fields typed on
        this page before the load went out (the draft's `typed`) are left as the page shows them."""
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
                out.update(self.render(None, owner, read_only=True))
                out[p.shared.group] = gr.Group(visible=True)
                out[p.shared.banner] = "**This share link was revoked or never existed.** Ask the owner for a new one."
                out[p.shared.copy] = gr.Button(visible=False)
                return out
            out.update(self.render(shared, owner, read_only=True, share=token))
            return out
        out[p.token] = ""
        session = self._own_session(session_id, owner)
        rendered = self.render(session, owner, read_only=False)
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
        typed = draft.get("typed") if isinstance(draft, dict) else None
        if isinstance(typed, list):  # typed on this page before this load went out (assets/ui/drafts.js)
            fields = p.form_fields()
            for name in typed:
                rendered.pop(fields.get(name) if isinstance(name, str) else None, None)
        out.update(rendered)
        return out

    def open_session(self, session_id: str | None, owner: str | None, token: str | None) -> dict:
        """A session picked in the list: one of the browser's own (also from a shared view, which it
        then leaves); anything else changes nothing."""
        session = self._own_session(session_id, owner)
        if session is None:
            return {self.page.gen.message: "That session is not one of yours." if session_id else gr.skip()}
        out = self.render(session, owner, read_only=False)
        out[self.page.token] = ""
        return out

    def new_session(self, owner: str | None) -> dict:
        return self.render(None, owner, read_only=False)

    def render(self, session: SessionInfo | None, owner: str | None, *, read_only: bool,
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
        out.update(self.takes.listing(session.id if session else None, select=first.id if first else None,
                                 clear=True, done_only=read_only))
        out.update(self.listed(owner))
        out.update(self.takes.take_detail(first.id if first else None, None if read_only else (session.id if session else None),
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
        out[p.gen.generate] = gr.update(visible=not read_only, interactive=True)  # the browser holds its key now
        return out

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
        out = self.render(copy, owner, read_only=False)
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
