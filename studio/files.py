"""`GET /studio/file/<take id>/<kind>?k=...`: a take's files, only through URLs `studio.access` signs.

The take folders are not among Gradio's served paths for API clients: every file URL an API answer
carries is one of these, re-checked at each request (`access.verify_file_url`), so it dies with a
delete, a revoked link or its expiry. Every refusal is the same 404, whatever the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import Request  # at module level: FastAPI resolves the handler's annotations from here
from fastapi.responses import FileResponse, PlainTextResponse

from studio import access
from studio.download_names import download_name

if TYPE_CHECKING:
    from studio.services import Services

MEDIA = {"wav": "audio/wav", "flac": "audio/flac", "mp3": "audio/mpeg", "json": "application/json"}


def mount(app: Any, svc: Services) -> None:
    async def file(take_id: str, kind: str, request: Request) -> Any:
        key = request.query_params.get("k", "")[:128]
        path = access.verify_file_url(svc.store, svc.identity, take_id, kind, key)
        if path is None:
            return PlainTextResponse("No such file, or this link has expired or was revoked.", status_code=404)
        # Named for the musician (title or the take's name, its number, edit/extension of which take),
        # never by the server's file name (which says how the data folder is laid out).
        take = svc.store.get_take(take_id)
        name = download_name(svc.store, take, kind) if take is not None else f"{take_id}.{kind}"
        return FileResponse(path, media_type=MEDIA.get(kind, "application/octet-stream"), filename=name,
                            headers={"Cache-Control": "private, no-store", "X-Content-Type-Options": "nosniff"})

    async def reference(session_id: str, request: Request) -> Any:
        key = request.query_params.get("k", "")[:128]
        path = access.verify_reference_url(svc.store, svc.identity, svc.config.inside_data, session_id, key)
        if path is None:
            return PlainTextResponse("No such file, or this link has expired or was revoked.", status_code=404)
        return FileResponse(path, filename=f"reference{path.suffix}",
                            headers={"Cache-Control": "private, no-store", "X-Content-Type-Options": "nosniff"})

    app.add_api_route(access.FILE_PATH, file, methods=["GET"], include_in_schema=False)
    # A reopened session's style reference, for its player (`access.signed_reference_url`).
    app.add_api_route(access.REFERENCE_PATH, reference, methods=["GET"], include_in_schema=False)
