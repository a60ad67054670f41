"""Named, stable API endpoints for `gradio_client` scripts (the browser UI uses private events).

    from gradio_client import Client, handle_file
    c = Client("http://127.0.0.1:7860/", headers={"Authorization": "Bearer <token>"})  # `studio token`
    s = c.predict({"lyrics": "[00:10.00]Hello", "style_text": "synth pop", "duration": 95}, "",
                  api_name="/submit")                      # -> {"session_id", "takes": [take ids]}
    for snap in c.submit(s["takes"][0], api_name="/follow"): ...   # progress snapshots, then the take
    take = c.predict(s["takes"][0], api_name="/take")        # status, seed, files, urls, record

Who calls is decided here, from the signed token in the request's headers (`studio.identity`), never
from anything in the arguments: every session is listed to, read and changed by its owner only. A share
token (`?s=` of a link) reads exactly its session's finished takes. Paths a client names must lie inside
the studio's data directory (upload reference songs with /upload_reference first).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import gradio as gr

from studio import access, live, songs
from studio.admission import AdmissionRefused
from studio.forms import ComposeForm, FormError
from studio.services import Services, UploadRefused
from studio.store import StoreError, TakeInfo

logger = logging.getLogger(__name__)


def _take(t: TakeInfo, svc: Services, who: access.Who) -> dict[str, Any]:
    """A take as a client sees it: file names (no server paths) and URLs signed for `who`."""
    d = t.as_dict()
    # A take id is visible to share-link viewers; the session id is the key that changes things, so it
    # never travels with a take.
    d.pop("session_id", None)
    d["urls"] = access.file_urls(svc.store, svc.identity, t, who)
    d["lyrics_check"] = (t.record or {}).get("lyrics_check")  # did it sing the words (None: not heard yet)
    return access.public(d)


NEED_TOKEN = ("This endpoint needs your access token: run `studio token` on the studio's machine and send it "
              "as the header `Authorization: Bearer <token>`.")


def owner_or_refuse(svc: Services, request: gr.Request | None) -> str:
    """The owner the request's token proves; refused with how to get a token (API and MCP tools alike)."""
    owner = access.Who.of(svc.identity, request=request).owner
    if owner is None:
        raise gr.Error(NEED_TOKEN)
    return owner


def stop_take(svc: Services, take_id: str, whole_job: bool) -> bool:
    """Cancel a take (the caller's own: checked before), or every variation of its request; True when
    it was still queued or running and is now being stopped."""
    runner = svc.runner
    return bool(runner and (runner.cancel_job(take_id) if whole_job else runner.cancel(take_id)))


def register(svc: Services) -> None:
    """Define the endpoints inside the current `gr.Blocks` context."""
    store = svc.store

    def caller(request: gr.Request | None) -> str:
        return owner_or_refuse(svc, request)

    def own_session(session_id: Any, owner: str) -> Any:
        """The caller's session; the same answer for a foreign id as for none (no probing)."""
        s = access.own_session(store, session_id, access.Who(owner))
        if s is None:
            raise gr.Error("No such session among yours.")
        return s

    def own_take(take_id: Any, owner: str) -> TakeInfo:
        t = access.own_take(store, take_id, access.Who(owner))
        if t is None:
            raise gr.Error("No such take among yours.")
        return t

    def who(request: gr.Request | None, share: Any = None) -> access.Who:
        return access.Who.of(svc.identity, request=request, share=share)

    def readable_take(take_id: Any, share: Any, request: gr.Request | None) -> TakeInfo:
        """A take of the caller's, or a finished take of the session `share` opens."""
        t = access.readable_take(store, take_id, who(request, share))
        if t is None:
            raise gr.Error("No such take that you can read (your own, or a finished one of a link you hold).")
        return t

    def submit(form: dict, session_id: str = "", request: gr.Request = None) -> dict:
        """Start a song from a compose form (ComposeForm fields); returns the session and new take ids."""
        owner = caller(request)
        if not isinstance(form, dict):
            raise gr.Error("The form must be a JSON object of compose fields.")
        try:
            f = ComposeForm.from_dict(form, strict=True)
        except FormError as exc:
            raise gr.Error(str(exc)) from None
        session = own_session(session_id, owner) if session_id else None
        try:
            started = songs.start(svc, owner, session, f)
        except songs.SongRefused as exc:
            raise gr.Error(str(exc)) from None
        session, takes = started.session, started.takes
        return {"session_id": session.id, "takes": [t.id for t in takes], "seeds": [t.seed for t in takes]}

    def take(take_id: str, share: str = "", request: gr.Request = None) -> dict:
        """One take: status, progress, seed, files (paths and URLs), timings and the full record.
        `share`: the token of a link, to read a finished take of a session shared with you."""
        return _take(readable_take(take_id, share, request), svc, who(request, share))

    def follow(take_id: str, request: gr.Request = None) -> Iterator[dict]:
        """Progress snapshots (queued position, step k/N, decoding window j/M, ETA) until the take ends;
        the last value is the finished take. `live_url` (relative to the studio) streams the take's
        audio as it is decoded: raw PCM in `live_format`, from its first sample (studio/live.py)."""
        owner = caller(request)
        own_take(take_id, owner)
        try:
            svc.admission.acquire(owner, "follow")
        except AdmissionRefused as exc:  # refused at once: waiting would hold a place in everyone's queue
            raise gr.Error(str(exc)) from None
        try:
            # Bounded: a reader that never reads cannot keep a follow slot past the longest song.
            deadline = time.monotonic() + svc.admission.limits.follow_max_s
            if svc.runner is not None and svc.runner.live(take_id) is not None:
                url = live.live_url(svc, take_id, owner)
                for snap in svc.runner.follow([take_id]):
                    lv = snap[take_id]
                    if lv.status not in ("queued", "running") or time.monotonic() > deadline:
                        break  # the finished take follows, with its files and record
                    yield {"take_id": take_id, "status": lv.status, "progress": round(lv.progress, 4),
                           "phase": lv.phase, "eta_s": lv.eta_s, "queue_position": lv.queue_position,
                           "seed": lv.seed, "live_url": url, "live_format": live.FORMAT}
            yield _take(store.get_take(take_id), svc, access.Who(owner))
        finally:
            svc.admission.release(owner, "follow")

    def resing(take_id: str, lines: Any = "", request: gr.Request = None) -> dict:
        """Sing lines of one of your takes again: an edit take regenerating exactly those lines' frames
        (`lines`: report indices of its `lyrics_check`, a list or "2, 5"; empty: the missed lines)."""
        from studio.resing import resing as start_resing

        owner = caller(request)
        try:
            new, frames = start_resing(svc, owner, take_id, lines)
        except songs.SongRefused as exc:
            raise gr.Error(str(exc)) from None
        return {"take_id": new.id, "seed": new.seed, "resing_of": take_id, "segments_frames": frames}

    def cancel(take_id: str, whole_job: bool = False, request: gr.Request = None) -> dict:
        """Cancel this take; its sibling variations go on. `whole_job`: cancel every variation of the
        request that made it (the page's Cancel button)."""
        own_take(take_id, caller(request))
        return {"take_id": take_id, "cancelling": stop_take(svc, take_id, whole_job is True)}

    def retry(session_id: str, take_id: str, request: gr.Request = None) -> dict:
        """Render an interrupted (or failed/cancelled) take again with its request and recorded seed."""
        t = own_take(take_id, caller(request))
        if t.session_id != session_id:
            raise gr.Error("That take does not belong to this session.")
        try:
            new = songs.retry(svc, t)
        except songs.SongRefused as exc:
            raise gr.Error(str(exc)) from None
        return {"take_id": new.id, "seed": new.seed, "retry_of": t.id}

    def set_take(session_id: str, take_id: str, name: str = "", starred: str = "", deleted: str = "",
                 request: gr.Request = None) -> dict:
        """Rename ("name"), star ("true"/"false") or delete/undelete ("true"/"false") one of your takes."""
        owner = caller(request)
        t = own_take(take_id, owner)
        if t.session_id != session_id:
            raise gr.Error("That take does not belong to this session.")
        if name:
            store.rename_take(take_id, name)
        if starred:
            store.star_take(take_id, starred.lower() == "true")
        if deleted:
            (store.delete_take if deleted.lower() == "true" else store.undelete_take)(take_id)
        return _take(store.get_take(take_id), svc, access.Who(owner))

    def takes(session_id: str, request: gr.Request = None) -> list:
        """The session's takes, oldest first (deleted ones left out)."""
        owner = caller(request)
        own_session(session_id, owner)
        return [_take(t, svc, access.Who(owner)) for t in store.list_takes(session_id)]

    def sessions(query: str = "", request: gr.Request = None) -> list:
        """Your sessions, newest first; with a query: title, lyrics or style contain it."""
        owner = caller(request)
        query = query if isinstance(query, str) else ""
        found = store.search(query, owner=owner) if query.strip() else store.list_sessions(owner)
        return [{"id": s.id, "title": s.title, "takes": s.take_count, "updated": s.updated_at.isoformat() + "Z",
                 "style": s.style} for s in found]

    def share(session_id: str, request: gr.Request = None) -> dict:
        """The session's read-only link (`/?s=<token>`), created on first use."""
        own_session(session_id, caller(request))
        try:
            link = store.share(session_id)
        except StoreError as exc:
            raise gr.Error(str(exc)) from None
        return {"token": link.token, "link": link.url_path}  # not "path": clients treat {"path"} as a file

    def revoke(session_id: str, token: str, request: gr.Request = None) -> dict:
        """Revoke a link of one of your sessions."""
        own_session(session_id, caller(request))
        if token not in {x.token for x in store.share_links(session_id)}:
            raise gr.Error("That link does not belong to this session.")
        return {"token": token, "revoked": store.revoke(token).revoked}

    def shared(token: str) -> dict:
        """Read a shared session: title, inputs and finished takes (no session id: read-only)."""
        s = store.resolve_share(token) if isinstance(token, str) and token else None
        if s is None:
            raise gr.Error("This share link was revoked or never existed.")
        viewer = access.Who(share=token)
        return {"title": s.title, "inputs": access.public(s.inputs), "read_only": True,
                "takes": [_take(t, svc, viewer) for t in store.list_takes(s.id) if t.status == "done"]}

    def copy_shared(token: str, request: gr.Request = None) -> dict:
        """Copy a shared session into your sessions; returns the new session id."""
        owner = caller(request)
        s = store.resolve_share(token) if isinstance(token, str) and token else None
        if s is None:
            raise gr.Error("This share link was revoked or never existed.")
        copy = store.copy_session(s.id, owner=owner)
        return {"session_id": copy.id, "title": copy.title, "takes": copy.take_count}

    def save_style(name: str, style_text: str = "", style_audio: str = "", request: gr.Request = None) -> dict:
        """Save a named style from a prompt or an uploaded recording (its embedding is kept)."""
        owner = caller(request)
        try:
            st = svc.save_style(name, owner=owner, text=style_text, audio=style_audio or None)
        except Exception as exc:
            raise gr.Error(str(exc)) from None
        return {"name": st.name, "embedding": bool(st.embedding_path), "prompt": st.prompt}

    def styles(request: gr.Request = None) -> list:
        """Your saved styles and the studio's shared ones (use one with style_source="saved", style_saved=NAME)."""
        return [{"name": x.name, "prompt": x.prompt, "source": x.source, "shared": x.owner is None}
                for x in store.list_styles(caller(request))]

    def lyrics_report(lyrics: str, duration: float = 95) -> dict:
        """The per-line report for lyrics at a song length (what will be sung, dropped, rushed)."""
        from engine.request import SongRequest, layout_request_lyrics, lyrics_problem

        problem = lyrics_problem(lyrics, duration)
        if problem:
            raise gr.Error(problem)
        try:
            return layout_request_lyrics(SongRequest(lyrics=lyrics, duration=float(duration)),
                                           tokenizer=svc.lyric_tokenizer()).to_dict()
        except Exception as exc:  # noqa: BLE001 - worded for the musician, never a traceback
            logger.exception("lyrics report failed")
            raise gr.Error(f"These lyrics cannot be laid out: {exc}") from None

    def time_lyrics(plain: str, duration: float = 95) -> str:
        """Time plain lyrics for a song length: returns LRC text ("[mm:ss.xx]line" per sung line), ready
        to pass to make_song as its lyrics (edit the times if you like).

        Args:
            plain: the lyrics, one sung line per line; [Verse]/[Chorus]/[Bridge] tags shape the timing.
            duration: the song's length in seconds (95, or 96-285).
        """
        from engine.lyrics import time_lyrics as _time
        from engine.request import lyrics_problem

        problem = lyrics_problem(plain, duration)
        if problem:
            raise gr.Error(problem)
        try:
            return _time(plain, float(duration), tokenizer=svc.lyric_tokenizer())
        except Exception as exc:
            raise gr.Error(str(exc)) from None

    def status() -> dict:
        """Whether songs can be made now: `ready`; `loading` (what the workers are doing: submit anyway,
        the take waits for them); `problem` (why they did not start); `workers` (device, precision, step);
        `message`, the page's status line."""
        st = svc.model_status
        return {"ready": st.ready, "loading": st.loading, "problem": st.problem, "missing": list(st.missing),
                "label": st.label, "workers": st.workers, "message": st.banner_markdown()}

    for fn in (submit, take, follow, resing, cancel, retry, set_take, takes, sessions, share, revoke, shared, copy_shared,
               save_style, styles, lyrics_report, time_lyrics, status):
        gr.api(fn, api_name=fn.__name__, concurrency_limit=svc.config.follow_concurrency if fn is follow else 8,
               concurrency_id="follow" if fn is follow else None)

    # Uploads need a File component on the wire; hidden from the page, visible in the API.
    upload_in = gr.File(visible=False, file_types=["audio"])
    upload_out = gr.JSON(visible=False)
    upload_btn = gr.Button(visible=False)

    def upload_reference(path: str | None, request: gr.Request = None) -> dict:
        """Keep an audio file in the data directory (size and length limits); returns {"file": its path for forms}."""
        caller(request)
        if not path:
            raise gr.Error("No file received.")
        try:
            kept, info = svc.keep_upload(path)
        except UploadRefused as exc:
            raise gr.Error(str(exc)) from None
        # The form takes paths relative to the data folder: the answer names no server path.
        relative = kept.resolve().relative_to(svc.config.data_dir.resolve()).as_posix()
        return access.public({"file": relative, **info, "style_window": svc.style_window_note(kept, info["seconds"])})

    upload_btn.click(upload_reference, upload_in, upload_out, api_name="upload_reference")
