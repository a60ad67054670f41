"""The studio's tools for agents: seven endpoints an MCP client sees (`studio serve --mcp`).

    make_song  check_lyrics  time_lyrics  list_takes  get_take  edit_take  cancel

Gradio turns public endpoints into MCP tools (`launch(mcp_server=True)`, Streamable HTTP at
`/gradio_api/mcp/`); `expose_tools` then narrows its tool table to exactly these seven, so neither the
rest of the public API (`studio.api`, for `gradio_client` scripts) nor anything of the page is reachable
through MCP. `time_lyrics` is the API's own endpoint; the other six are defined here (`cancel` as
/cancel_take, beside the API's /cancel), on the same paths as the page: `songs.start` with a `ComposeForm` (the one table of limits, the page's
messages), `access` for every ownership question, signed owner-bound file URLs. The owner is the one the
request's token proves (`Authorization: Bearer`, from `studio token`); without one every tool that
touches takes is refused with `api.NEED_TOKEN`.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import gradio as gr

from device_worker import controls, shapes
from studio import access, api, songs
from studio.admission import AdmissionRefused
from studio.forms import ComposeForm
from studio.mcp_views import base_url, record_of, summary
from studio.store import DONE, TakeInfo

if TYPE_CHECKING:
    from studio.services import Services

# tool name -> the endpoint it calls (api_name)
TOOLS = {"make_song": "/make_song", "check_lyrics": "/check_lyrics", "time_lyrics": "/time_lyrics",
         "list_takes": "/list_takes", "get_take": "/get_take", "edit_take": "/edit_take", "cancel": "/cancel_take"}
API_NAMES = {"cancel": "cancel_take"}  # the API's /cancel answers a dict; tools answer JSON text
MAX_LIST = 100
NOT_YOURS = "No such take among yours."
_S, _V, _D = controls.STEPS, controls.VARIATIONS, shapes


def register(svc: Services) -> None:
    """Define the six endpoints inside the current `gr.Blocks` (after `api.register`)."""
    store = svc.store

    def own(take_id: Any, owner: str) -> TakeInfo:
        t = access.own_take(store, take_id, access.Who(owner))
        if t is None:
            raise gr.Error(NOT_YOURS)
        return t

    def make_song(lyrics: str = "", style: str = "", saved_style: str = "", duration: float = 95,
                  seed: int = -1, variations: int = 1, steps: int = int(_S.default), title: str = "",
                  wait: bool = True, request: gr.Request = None) -> str:
        owner = api.owner_or_refuse(svc, request)
        form = ComposeForm(title=title, lyrics=lyrics, instrumental=isinstance(lyrics, str) and not lyrics.strip(),
                           duration=duration, steps=steps, variations=variations, formats=["wav", "mp3"])
        _style(form, style, saved_style)
        _seed(form, seed)
        return _run(svc, owner, None, form, wait, request)

    def edit_take(take_id: str, ranges: str = "", extend_from: float = -1, duration: float = 0, lyrics: str = "",
                  style: str = "", saved_style: str = "", seed: int = -1, wait: bool = True,
                  request: gr.Request = None) -> str:
        owner = api.owner_or_refuse(svc, request)
        source = own(take_id, owner)
        form = ComposeForm.of_take(source, store.get_session(source.session_id))
        if bool(ranges) == (extend_from != -1):
            raise gr.Error("Give either `ranges` (parts to repaint, e.g. \"10-20, 1:05-1:20\") or `extend_from` "
                           "(seconds to keep before new music), not both and not neither.")
        form.edit_take = source.id
        if ranges:
            form.edit_mode, form.edit_ranges = "edit", ranges
        else:
            form.edit_mode, form.continue_from = "continue", extend_from
        if duration:
            form.duration = duration
        if lyrics:
            form.lyrics, form.instrumental = lyrics, False
        if style or saved_style:
            _style(form, style, saved_style)
        _seed(form, seed)
        session = access.own_session(store, source.session_id, access.Who(owner))
        return _run(svc, owner, session, form, wait, request)

    def list_takes(session_id: str = "", limit: int = 20, request: gr.Request = None) -> str:
        owner = api.owner_or_refuse(svc, request)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST:
            raise gr.Error(f"limit must be a whole number from 1 to {MAX_LIST}, got {limit!r}")
        who = access.Who(owner)
        if session_id:
            s = access.own_session(store, session_id, who)
            if s is None:
                raise gr.Error("No such session among yours.")
            sessions = [s]
        else:
            sessions = store.list_sessions(owner)
        base, found = base_url(request), []
        for s in sessions:  # newest session first, newest take first
            for t in reversed(store.list_takes(s.id)):
                found.append(summary(t, svc, owner, base))
                if len(found) >= limit:
                    return _json({"takes": found, "more": True})
        return _json({"takes": found, "more": False})

    def get_take(take_id: str, request: gr.Request = None) -> str:
        owner = api.owner_or_refuse(svc, request)
        return _json(summary(own(take_id, owner), svc, owner, base_url(request)))

    def check_lyrics(take_id: str, request: gr.Request = None) -> str:
        owner = api.owner_or_refuse(svc, request)
        take = own(take_id, owner)
        check = record_of(take).get("lyrics_check") if take.status == DONE else None
        if isinstance(check, dict) and "lines" in check and not check.get("skipped") and not check.get("error"):
            return _json(access.public({"take_id": take.id, "checked": True, "lyrics_check": check}))
        return _json({"take_id": take.id, "checked": False, "reason": _no_check(svc, take, check)})

    def cancel(take_id: str, whole_job: bool = False, request: gr.Request = None) -> str:
        owner = api.owner_or_refuse(svc, request)
        own(take_id, owner)
        return _json({"take_id": take_id, "cancelling": api.stop_take(svc, take_id, whole_job is True)})

    make_song.__doc__ = MAKE_SONG_DOC
    edit_take.__doc__ = EDIT_TAKE_DOC
    list_takes.__doc__ = LIST_TAKES_DOC
    get_take.__doc__ = GET_TAKE_DOC
    check_lyrics.__doc__ = CHECK_LYRICS_DOC
    cancel.__doc__ = CANCEL_DOC
    for fn in (make_song, edit_take, list_takes, get_take, check_lyrics, cancel):
        waits = fn in (make_song, edit_take)
        # Waiting for a song holds a follow slot, like the API's /follow and the page's watch.
        gr.api(fn, api_name=API_NAMES.get(fn.__name__, fn.__name__),
               concurrency_limit=svc.config.follow_concurrency if waits else 8,
               concurrency_id="follow" if waits else None)


def expose_tools(demo: gr.Blocks) -> None:
    """After `launch(mcp_server=True)`: the MCP server lists and calls exactly `TOOLS`, nothing else."""
    server = getattr(demo, "mcp_server_obj", None)
    if server is None:
        raise RuntimeError(getattr(demo, "mcp_error", None) or "the MCP server did not start")
    missing = [e for e in TOOLS.values() if e not in server.api_info["named_endpoints"]]
    if missing:
        raise RuntimeError(f"MCP tools without an endpoint: {missing}")
    # Gradio builds its table from every public endpoint at launch; ours replaces it a moment after the
    # server starts. (Anything reachable in that moment is the public API, on the same owner rules.)
    server.tool_to_endpoint = dict(TOOLS)


# ---------------------------------------------------------------------- helpers

def _json(value: Any) -> str:
    # Tools answer JSON text: MCP hands a tool's answer to the model as text, and a dict would arrive
    # as Python's repr of it.
    return json.dumps(value, ensure_ascii=False)


def _style(form: ComposeForm, style: Any, saved_style: Any) -> None:
    if style and saved_style:
        raise gr.Error("Give either `style` (a description) or `saved_style` (a saved style's name), not both.")
    if saved_style:
        form.style_source, form.style_saved = "saved", saved_style
    else:
        form.style_source, form.style_text = "text", style


def _seed(form: ComposeForm, seed: Any) -> None:
    # -1 draws a fresh seed (recorded with the take); anything else is checked against the seed's range.
    form.random_seed = seed == -1
    form.seed = form.seed if form.random_seed else seed


def _run(svc: Services, owner: str, session: Any, form: ComposeForm, wait: bool, request: Any) -> str:
    """Start the song (the page's path and messages) and, with `wait`, follow it to the end with progress."""
    try:
        started = songs.start(svc, owner, session, form)
    except songs.SongRefused as exc:
        raise gr.Error(str(exc)) from None
    ids = [t.id for t in started.takes]
    note = None
    if wait is True:
        try:
            with svc.admission.hold(owner, "follow"):
                # Not a parameter: gr.api would publish it as one. It reports to this call's event all the same.
                _follow(svc, ids, gr.Progress())
        except AdmissionRefused as exc:  # the takes run anyway; the agent polls get_take instead
            note = f"Not waiting: {exc} Poll get_take for each take."
    base = base_url(request)
    out: dict[str, Any] = {"session_id": started.session.id,
                           "takes": [summary(svc.store.get_take(i), svc, owner, base) for i in ids]}
    if note:
        out["note"] = note
    return _json(out)


def _follow(svc: Services, ids: list[str], progress: Any) -> None:
    """One progress notification per sampling step and per VAE window, per take, in order."""
    deadline = time.monotonic() + svc.admission.limits.follow_max_s
    seen: dict[str, Any] = {}
    for snap in svc.runner.follow(ids):
        for i, tid in enumerate(ids):
            lv = snap.get(tid)
            if lv is None or lv.unit is None or seen.get(tid) == lv.unit:
                continue
            seen[tid] = lv.unit
            kind, k, total = lv.unit
            what = "sampling" if kind == "step" else "decoding VAE window"
            progress((k, total), desc=what + (f" (take {i + 1} of {len(ids)})" if len(ids) > 1 else ""))
        if time.monotonic() > deadline:
            return


def _no_check(svc: Services, take: TakeInfo, check: Any) -> str:
    """Why a take has no lyrics check, in words an agent can pass on."""
    if not str((take.request or {}).get("lyrics") or "").strip():
        return "This take is instrumental: there are no lyrics to check."
    if take.status in ("queued", "running"):
        return "The take is still being made; its lyrics are checked once its audio is written."
    if take.status != DONE:
        return f"The take did not finish ({take.status}), so there is no audio to check."
    if isinstance(check, dict) and check.get("error"):
        return f"The check failed: {check['error']}"
    if isinstance(check, dict) and check.get("skipped"):
        return f"The take was not checked: {check['skipped']}"
    config = getattr(getattr(svc, "engine", None), "config", None)
    if getattr(config, "lyrics_check", True) is False:
        return "The lyrics check is switched off on this studio."
    if not getattr(getattr(config, "models", None), "lyrics", None):
        return ("This studio has no transcriber (lyrics model) to hear takes with; `studio models list` shows "
                "whether it is installed.")
    return "Still checking: the check runs after the take's audio is written. Ask again in a few seconds."


MAKE_SONG_DOC = f"""Make a song from lyrics and a style, and (by default) wait until it is finished.
Progress notifications come per sampling step and per VAE window ("Progress sampling: Step k of N",
"Progress decoding VAE window: Step j of M"). Returns `session_id` and `takes`: per take its `take_id`,
`seed`, `status`, `audio_url` (a signed WAV link valid for hours, for you only; `urls` has every file,
mp3 and the JSON record too) and `record` (what was asked and what was made).

Args:
    lyrics: the words to sing: LRC lines like "[00:12.00]first line", or plain lines (timed for you; use time_lyrics to see how). Empty: an instrumental.
    style: a description of the music, e.g. "dreamy synthwave, female vocal, 90 bpm". Give this or saved_style.
    saved_style: the name of a style saved in the studio, instead of `style`.
    duration: song length in seconds: {_D.BASE_SECONDS} (base model) or {_D.FULL_MIN_SECONDS}-{_D.FULL_MAX_SECONDS} (full model).
    seed: the noise seed ({controls.SEED.range_text}); -1 draws a random one. The same seed and settings remake the same song.
    variations: how many takes of this request ({_V.range_text}); take i uses seed + i.
    steps: sampling steps ({_S.range_text}; {int(_S.default)} is DiffRhythm's default; fewer is faster and rougher).
    title: a title for the session.
    wait: true (default): return when the takes are finished; false: return at once with queued takes (poll get_take).
"""

EDIT_TAKE_DOC = f"""Make a new take from one of your finished takes: repaint time ranges, or extend it. The source's
lyrics, style and length are kept unless you give new ones; the source take is not changed. Waits and
reports progress like make_song and returns the same shape.

Args:
    take_id: the source take (one of yours, finished).
    ranges: parts to regenerate, e.g. "10-20, 1:05-1:20, 80-end" (seconds or m:ss; start/end allowed). Give this or extend_from.
    extend_from: seconds: keep the song up to here and generate new music after it, up to `duration` (-1: not extending).
    duration: the new take's length in seconds ({_D.BASE_SECONDS} or {_D.FULL_MIN_SECONDS}-{_D.FULL_MAX_SECONDS}); 0 keeps the source's.
    lyrics: new lyrics for the new take; empty keeps the source's.
    style: a new style description; empty keeps the source's.
    saved_style: a saved style's name instead of `style`.
    seed: the noise seed; -1 draws a random one.
    wait: true (default): return when the take is finished; false: return at once.
"""

LIST_TAKES_DOC = """Your takes, newest first (sessions newest first), each with its id, status, seed and audio URL.

Args:
    session_id: only this session's takes; empty: all your sessions.
    limit: at most this many takes (1-100).
"""

GET_TAKE_DOC = """One of your takes: status and progress, seed, signed audio URLs and the record summary.

Args:
    take_id: the take's id (from make_song, edit_take or list_takes).
"""

CHECK_LYRICS_DOC = """Whether the take sings its lyrics: the studio's check by ear, per line (index, time, expected
words, heard words, score, status sung/partly/missed) and the take's phoneme error rate `per`. When
there is none, `checked` is false and `reason` says why (instrumental, still being made or checked,
the check switched off, no transcriber installed). Repaint missed lines with edit_take.

Args:
    take_id: one of your takes.
"""

CANCEL_DOC = """Stop one of your takes while it is queued or being made; its sibling variations go on.
Returns `cancelling`: true when it was still running and is now being stopped.

Args:
    take_id: the take to stop (one of yours).
    whole_job: true: stop every variation of the request that made it.
"""
