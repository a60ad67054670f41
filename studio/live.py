"""Hear a take while it is made: its decoded windows as one raw PCM stream the page plays gap-free.

`GET /studio/live/<take id>?k=<expiry>.<mac>` answers with the take's audio as it is decoded, from its
first sample, as 16-bit little-endian stereo at 44.1 kHz (`FORMAT`), ending when the take does. No
encoder, no file, no re-decode: each window's new samples go out once, as soon as the engine has them
(`TakeRunner.read_stream`). The page (assets/ui/live.js) schedules them back to back on one Web Audio
clock, so playback never restarts. The level is the decoder's (clipped to full scale); the file gets
upstream's song-level peak normalisation once the whole song is known.

The URL is a capability the server signs for the take's owner when it shows that owner the take
rendering (`live_url`); the signature names the take, the owner and an expiry, so a URL is worth
nothing for another take, after its owner changed, or later. A bad URL of any kind gets the same 404.
"""

from __future__ import annotations

import asyncio
import html
import re
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from fastapi import Request  # at module level: FastAPI resolves the handler's annotations from here
from fastapi.responses import PlainTextResponse, StreamingResponse

from device_worker.shapes import CHANNELS, SAMPLE_RATE
from studio.admission import AdmissionRefused
from studio.takes import StreamCursor

if TYPE_CHECKING:
    from studio.services import Services

PATH = "/studio/live/{take_id}"
FORMAT = f"s16le;rate={SAMPLE_RATE};channels={CHANNELS}"
TTL_S = 6 * 3600  # a 285 s take waiting behind a long queue is still heard
POLL_S = 0.05  # how often a stream looks for new audio: well under one window's worth
MAX_STREAMS = 32  # listeners at once; past it a clear 503 (each holds a take's audio until it ends)
SEND_TIMEOUT_S = 30.0  # a write the listener does not take in this long ends its stream
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_KEY = re.compile(r"^(\d{1,12})\.([0-9a-f]{32})$")


def live_url(svc: Services, take_id: str, owner: str, now: float | None = None) -> str:
    expiry = str(int((now or time.time()) + TTL_S))
    return f"/studio/live/{take_id}?k={expiry}.{svc.identity.sign('live', take_id, owner, expiry)}"


def live_html(url: str, label: str) -> str:
    """The marker the page's live player picks up (it keeps its own state; this may be re-rendered)."""
    return (f"<div class='live-src' data-live-src='{html.escape(url)}' data-live-label='{html.escape(label)}' "
            f"data-live-format='{FORMAT}'></div>")


def pcm(chunk: np.ndarray) -> bytes:
    """float32 [n, 2] decoder audio -> interleaved int16 little-endian bytes."""
    return (np.clip(chunk, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()


class _Stream(StreamingResponse):
    """A stream whose place is given back however it ends (also when its body never starts), and whose
    writes time out: a listener that stops reading no longer holds a slot and a take's audio for ever."""

    def __init__(self, body: Any, release: Any, **kwargs: Any) -> None:
        super().__init__(body, **kwargs)
        self._release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def timed(message: Any) -> None:
            await asyncio.wait_for(send(message), SEND_TIMEOUT_S)

        try:
            await super().__call__(scope, receive, timed)
        except (TimeoutError, asyncio.TimeoutError):
            pass  # the reader stopped reading: the connection is dropped, the take goes on
        finally:
            self._release()


def mount(app: Any, svc: Services) -> None:
    """Add the stream route to the studio's FastAPI app (Gradio's, after launch)."""
    streams = {"open": 0}
    nothing = PlainTextResponse("No such live take.", status_code=404)

    def listenable(take_id: str, key: str) -> str | None:
        """The owner the URL was signed for, while the take is still being made and not deleted."""
        m = _KEY.match(key)
        if not _ID.match(take_id) or m is None or int(m.group(1)) < time.time():
            return None
        take = svc.store.get_take(take_id)
        session = svc.store.get_session(take.session_id) if take is not None else None
        if session is None or not svc.identity.verify(m.group(2), "live", take_id, session.owner, m.group(1)):
            return None
        # A finished take is a file now (404 as documented); a deleted one is nobody's to hear.
        if take.deleted or take.status not in ("queued", "running") or svc.runner.live(take_id) is None:
            return None
        return session.owner or ""

    async def live(take_id: str, request: Request) -> Any:
        key = request.query_params.get("k", "")
        owner = listenable(take_id, key[:64]) if svc.runner is not None else None
        if owner is None:
            return nothing
        # Check and count in one step (no await between): concurrent requests cannot all pass the cap.
        if streams["open"] >= MAX_STREAMS:
            return PlainTextResponse("Too many live listeners right now; the take plays once it is done.",
                                     status_code=503, headers={"Retry-After": "5"})
        try:
            svc.admission.acquire(owner, "stream")
        except AdmissionRefused as exc:
            return PlainTextResponse(str(exc), status_code=429, headers={"Retry-After": "5"})
        streams["open"] += 1
        cursor = StreamCursor(take_id)

        def release() -> None:
            streams["open"] -= 1
            svc.admission.release(owner, "stream")
            cursor.held = None  # the chunk list goes with the listener

        async def body():
            checked = time.monotonic()
            while True:
                if time.monotonic() - checked > 1.0:  # once a second, not per poll: a store read each
                    checked = time.monotonic()
                    take = svc.store.get_take(take_id)
                    if take is None or take.deleted:
                        return  # deleted while heard: the stream stops
                chunks, over = svc.runner.read_stream(cursor)
                for c in chunks:
                    yield pcm(c)
                if over:
                    return
                if not chunks:
                    await asyncio.sleep(POLL_S)

        return _Stream(body(), release, media_type="application/octet-stream",
                       headers={"X-Audio-Format": FORMAT, "Cache-Control": "no-store",
                                "X-Content-Type-Options": "nosniff"})

    app.add_api_route(PATH, live, methods=["GET"], include_in_schema=False)
