"""The page's handlers: one object per page section, each returning (or yielding) `{component: value}`.

| module        | section  | what it does |
|---------------|----------|--------------|
| `section`     | (all)    | the services, the page, who the browser is (owner checks through `studio.access`) |
| `compose`     | compose  | live lyric report, timing helper, examples |
| `style`       | style    | one style source at a time, a reference song kept, a style saved for its owner |
| `generate`    | generate | Generate and its follow (progress, live audio), Cancel, the watch after a reload |
| `takes`       | takes    | the take list and order, one take shown, its actions, take -> form, A/B |
| `sessions`    | sessions | first paint, session list and search, open/new, share links, copying a shared one |
| `heard`       | takes    | the lyrics check's marks and the re-sing panel |

`studio.events` wires each page event to one of these; the handlers hold no state of their own.
"""

from __future__ import annotations

from studio.handlers.compose import ComposeHandlers
from studio.handlers.generate import GenerateHandlers
from studio.handlers.heard import HeardHandlers
from studio.handlers.sessions import NO_SESSION, SessionHandlers
from studio.handlers.style import StyleHandlers
from studio.handlers.takes import TakeHandlers
from studio.page import Page
from studio.services import Services

__all__ = ["NO_SESSION", "Handlers"]


class Handlers:
    """Every section's handlers, built together: a section that redraws another's components asks it."""

    def __init__(self, svc: Services, page: Page) -> None:
        self.svc, self.page = svc, page
        self.compose = ComposeHandlers(svc, page)
        self.style = StyleHandlers(svc, page)
        self.takes = TakeHandlers(svc, page, self.style)
        self.sessions = SessionHandlers(svc, page, self.takes)
        self.generate = GenerateHandlers(svc, page, self.takes, self.sessions)
        self.heard = HeardHandlers(svc, page)
