"""The page's players and downloads, fed only with signed file URLs (`studio.access`), never a path.

Gradio serves a file component's value from a server path it is allowed to read (`allowed_paths`) or
from its own cache copy; either answers anyone who has the path, for ever. So no take folder is among
Gradio's served paths: the take player, the latest-take preview and the downloads get a `SignedFile`
instead, the same owner- or share-bound, expiring URL the API hands out (`GET /studio/file/...`).
Each request re-checks it, so deleting the take or revoking the link kills every URL the page showed,
and the response names no server path. The page's gr.Audio and gr.File components are `signed`: they
pass such a value through as its URL. Gradio keeps an absolute http URL as it is (no cache copy), so
the URL is made absolute with the root of the request being answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import gradio as gr
from gradio.data_classes import FileData, ListFiles

from studio import access
from studio.download_names import download_name, take_numbers
from studio.store import TakeInfo

if TYPE_CHECKING:
    from studio.services import Services


@dataclass(frozen=True)
class SignedFile:
    """A file the page may show: its signed URL (absolute: made while the request is answered) and the
    name the browser sees."""

    url: str
    name: str


def _root() -> str:
    """The public root of the page's request being answered ("" outside one)."""
    from gradio import route_utils
    from gradio.context import LocalContext

    request = LocalContext.request.get(None)
    raw = getattr(request, "request", None)
    if raw is None:
        return ""
    return route_utils.get_root_url(raw, f"{route_utils.API_PREFIX}/queue/join", raw.scope.get("root_path") or None)


def _data(f: SignedFile) -> FileData:
    return FileData(path=f.url, url=f.url, orig_name=f.name)


def take_files(svc: Services, take: TakeInfo, who: access.Who) -> dict[str, SignedFile]:
    """Every file of `take` that `who` may read now, by kind (wav, flac, ..., json). Called from a page
    handler: Gradio postprocesses the value later, outside the request."""
    root = _root()
    urls = access.file_urls(svc.store, svc.identity, take, who)
    numbers = take_numbers(svc.store, take.session_id) if urls else {}
    # The name the page shows and the link's `download` attribute: the same as the route's
    # Content-Disposition (studio.files), so the browser saves it under that name either way.
    return {kind: SignedFile(root + url, download_name(svc.store, take, kind, numbers)) for kind, url in urls.items()}


def session_reference(svc: Services, session: Any, who: access.Who) -> SignedFile | None:
    """The uploaded reference song of `who`'s own session, for the style player of the reopened session."""
    reference = access.session_reference(session, svc.config.inside_data) if session is not None else None
    url = access.signed_reference_url(svc.identity, session, reference, who) if reference is not None else None
    return SignedFile(_root() + url, f"reference{reference.suffix}") if url and reference is not None else None


C = TypeVar("C", bound=gr.components.Component)


def _accepting_signed(cls: type) -> None:
    """Let `cls.postprocess` take `SignedFile` values (one, or a list): they go to the browser as their
    URLs, never copied into Gradio's cache; any other value is handled as before. On the class, because
    Gradio rebuilds a component from its class for every update (an instance's own method would be
    lost), and not as a subclass, because Gradio writes a `.pyi` stub beside the module of each
    component class defined."""
    plain = cls.postprocess
    if getattr(plain, "_signed", False):
        return

    def postprocess(self: Any, value: Any) -> Any:
        if isinstance(value, SignedFile):
            return _data(value)
        if isinstance(value, list) and value and all(isinstance(v, SignedFile) for v in value):
            return ListFiles(root=[_data(v) for v in value])
        return plain(self, value)

    postprocess._signed = True  # type: ignore[attr-defined]
    cls.postprocess = postprocess


_accepting_signed(gr.Audio)
_accepting_signed(gr.File)


def signed(component: C) -> C:
    """Marks a page component that shows take files: it is fed `SignedFile`s (see `_accepting_signed`)."""
    return component


def audio_update(audio: SignedFile, subtitles: list[dict[str, Any]] | None, label: str) -> dict[str, Any]:
    """A take player's new value (a `signed` gr.Audio): the file, its timed lyrics, its label."""
    return gr.update(value=audio, subtitles=subtitles, label=label)  # Gradio processes the cues
