"""Starting and retrying songs: the one path the page's Generate/Retry and the HTTP API both take.

form -> request (paths checked) -> validated once, as the engine will run it -> a session for the owner
(only now: a refused request leaves nothing behind) -> one take per variation, queued. Problems come
back as `SongRefused` with every reason, worded for the musician.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from studio.access import Who
from studio.admission import AdmissionRefused
from studio.config import PathRefused
from studio.forms import ComposeForm, FormError
from studio.store import SessionInfo, StoreError, TakeInfo

if TYPE_CHECKING:
    from studio.services import Services

# How long Generate waits for the model files to be found (or the test model written) before it is refused;
# once they are, takes queue until a worker is ready, however long that takes.
WAIT_FOR_MODEL_FILES_S = 90.0


class SongRefused(ValueError):
    """The request cannot run; `.problems` lists each reason once."""

    def __init__(self, problems: list[str], headline: str = "Please fix these first") -> None:
        self.problems, self.headline = list(problems), headline
        super().__init__(problems[0] if len(problems) == 1 else f"{headline}: " + "; ".join(problems))


@dataclass
class Started:
    session: SessionInfo
    takes: list[TakeInfo]


def validate(svc: Services, request: Any) -> Any:
    """As the engine will run it (its tokenizer, its models), so the report matches the take."""
    return svc.engine.validate(request) if svc.engine is not None else request.validate()


def start(svc: Services, owner: str, session: SessionInfo | None, form: ComposeForm) -> Started:
    """Queue `form` for `owner`, into `session` (verified as the owner's by the caller) or a new one."""
    if svc.wait_for_runner(WAIT_FOR_MODEL_FILES_S) is None or svc.model_status.problem:
        raise SongRefused([svc.model_status.banner_markdown()], "Songs cannot be made yet")
    try:
        request = form.to_request(svc.store, svc.config, Who(owner))
    except (FormError, PathRefused, StoreError) as exc:
        raise SongRefused([str(exc)]) from None
    validation = validate(svc, request)
    if not validation.ok:
        raise SongRefused([str(p) for p in validation.problems])
    store = svc.store
    # Admitted before anything is stored: a refused submit leaves no session and no failed takes.
    with svc.admission.submitting:
        try:
            svc.admission.check_takes(store, svc.engine, owner, int(request.variations))
        except AdmissionRefused as exc:
            raise SongRefused([str(exc)], "The studio cannot take it now") from None
        if session is None:
            session = store.create_session(form.title, owner=owner, inputs=form.session_inputs())
        else:
            session = store.update_session(session.id, title=form.title or None, inputs=form.session_inputs())
        parent = form.edit_take if form.edit_mode != "none" else None
        try:
            takes = svc.runner.submit(session.id, request, parent_id=parent, validation=validation)
        except Exception as exc:  # noqa: BLE001 - the engine's busy/validation errors, worded by the engine
            raise SongRefused([str(exc)], "The studio cannot take it now") from None
    return Started(session, takes)


def retry(svc: Services, take: TakeInfo) -> TakeInfo:
    """Render a take again with its request and recorded seed; the new take is named after the old."""
    if svc.wait_for_runner(WAIT_FOR_MODEL_FILES_S) is None or svc.model_status.problem:
        raise SongRefused([svc.model_status.banner_markdown()], "Songs cannot be made yet")
    from engine.request import SongRequest

    request = replace(SongRequest.from_dict(take.request), seed=take.seed, variations=1)
    session = svc.store.get_session(take.session_id)
    with svc.admission.submitting:
        try:
            if session is not None and session.owner:
                svc.admission.check_takes(svc.store, svc.engine, session.owner, 1)
            new = svc.runner.submit(take.session_id, request, parent_id=take.parent_id)[0]
        except Exception as exc:  # noqa: BLE001
            raise SongRefused([str(exc)], "The studio cannot take it now") from None
    svc.store.rename_take(new.id, take.name or f"retry of {take.label}")
    return svc.store.get_take(new.id) or new
