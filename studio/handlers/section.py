"""What every page section's handlers share: the services, the page, and who the page's browser is.

Who the browser is comes from its signed owner token (`studio.identity`), verified on every event through
`studio.access`, the one place that decides who may read or change what: a session id the page sends is
used only when that owner holds the session, and a take is shown only from the owner's sessions or from
the session the page's share token opens (finished takes).
"""

from __future__ import annotations

from typing import Any

from studio import access
from studio.page import Page
from studio.services import Services
from studio.store import SessionInfo, TakeInfo


class Section:
    def __init__(self, svc: Services, page: Page) -> None:
        self.svc = svc
        self.page = page

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
