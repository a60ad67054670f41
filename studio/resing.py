"""Re-sing lines of a take: an edit take that regenerates exactly those lines' frames and keeps the rest.

The lines come from the take's `lyrics_check` (engine.hearing): by default the missed ones, or the
lines the musician ticked (report indices). `engine.lyrics.heard.resing_segments` turns them into
frame ranges (each line from its frame to the next line's, adjacent ones merged); each range goes to
the engine's edit path as seconds at frame centres, so the engine's `int(t * 44100 / 2048)` gives
back exactly those frames. The new take is a child of the source, with a fresh seed, and is checked
by ear in turn when it is written.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from device_worker.shapes import FRAME_RATE
from studio import access
from studio.admission import AdmissionRefused
from studio.songs import WAIT_FOR_MODEL_FILES_S, SongRefused, validate
from studio.store import TakeInfo

if TYPE_CHECKING:
    from studio.services import Services


def parse_lines(value: Any) -> list[int] | None:
    """Line indices as a client sends them: a list of numbers, "2, 5", or empty (None: the missed lines)."""
    if value is None or value == "" or value == []:
        return None
    items = value.replace(",", " ").split() if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise SongRefused(["lines: give line numbers as a list, e.g. [2, 5], or leave it empty for the missed lines"])
    out = []
    for item in items:
        try:
            number = int(item)
        except (TypeError, ValueError):
            raise SongRefused([f"lines: {item!r} is not a line index"]) from None
        if isinstance(item, bool) or number != float(item) or number < 0:
            raise SongRefused([f"lines: {item!r} is not a line index"])
        out.append(number)
    return out


def frame_ranges(take: TakeInfo, lines: list[int] | None) -> list[list[int]]:
    """The frame ranges a re-sing of `lines` regenerates (SongRefused, worded for the musician)."""
    from engine.lyrics.heard import resing_segments

    check = (take.record or {}).get("lyrics_check") or {}
    if not check.get("lines"):
        why = check.get("error") or check.get("skipped") or "it has not been heard yet"
        raise SongRefused([f"This take has no lyrics check to re-sing from ({why})."], "Nothing to re-sing")
    try:
        segments = resing_segments(check, lines)
    except ValueError as exc:
        raise SongRefused([f"lines: {exc}"], "Nothing to re-sing") from None
    if not segments:
        raise SongRefused(["No line was missed: tick the lines to sing again."], "Nothing to re-sing")
    return segments


def seconds_of(segments: list[list[int]]) -> list[tuple[float, float]]:
    """Frame ranges -> seconds at frame centres (the engine floors seconds to frames)."""
    return [(round((a + 0.5) / FRAME_RATE, 4), round((b + 0.5) / FRAME_RATE, 4)) for a, b in segments]


def resing(svc: Services, owner: str, take_id: Any, lines: Any = None) -> tuple[TakeInfo, list[list[int]]]:
    """Start the re-sing edit take of `owner`'s take; returns (the new take, its frame ranges)."""
    from engine.request import Reference, SongRequest

    try:
        source = access.edit_source(svc.store, take_id, access.Who(owner))
    except access.AccessDenied as exc:
        raise SongRefused([str(exc)], "Nothing to re-sing") from None
    segments = frame_ranges(source, parse_lines(lines))
    if svc.wait_for_runner(WAIT_FOR_MODEL_FILES_S) is None or svc.model_status.problem:
        raise SongRefused([svc.model_status.banner_markdown()], "Songs cannot be made yet")
    base = SongRequest.from_dict(source.request)
    request = replace(base, edit=Reference.edit(source.files["wav"], seconds_of(segments), splice=True), seed=None, variations=1)
    validation = validate(svc, request)
    if not validation.ok:
        raise SongRefused([str(p) for p in validation.problems])
    with svc.admission.submitting:
        try:
            svc.admission.check_takes(svc.store, svc.engine, owner, 1)
            new = svc.runner.submit(source.session_id, request, parent_id=source.id, validation=validation)[0]
        except AdmissionRefused as exc:
            raise SongRefused([str(exc)], "The studio cannot take it now") from None
        except Exception as exc:  # noqa: BLE001 - the engine's busy/validation errors, worded by the engine
            raise SongRefused([str(exc)], "The studio cannot take it now") from None
    numbers = ", ".join(str(ln["number"]) for ln in source.record["lyrics_check"]["lines"]
                        if any(a <= ln["frames"][0] < b for a, b in segments))
    svc.store.rename_take(new.id, f"re-sing of {source.label}: line {numbers}")
    return svc.store.get_take(new.id) or new, segments
