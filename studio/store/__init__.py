"""The studio's store (SQLite, or PostgreSQL for several studios): sessions, takes, saved styles and
share links (see `store.Store`).

| module | role |
|---|---|
| `store.py` | `Store`: sessions, takes, styles; composes the parts below around one `Database` |
| `db.py` | `Database` (engine, short transactions), engine setup, Alembic migrations |
| `leases.py` | runner leases (heartbeats) and the recovery of takes whose process is gone |
| `sharing.py` | share links and "copy to my sessions" |
| `integrity.py` | `check`: what is wrong with a database |
| `tables.py` | the ORM rows (tables) and statuses |
| `rows.py`, `views.py` | row lookups; the read-only views handed to callers |
| `runner_id.py` | who drives a take: host, pid namespace, pid and start time |

The parts import `db` and `tables`, never `store` or each other's privates (tests/test_import_rules.py).
"""

from .store import DB_NAME, Store, StoreError
from .tables import (
    ACTIVE_STATUSES,
    CANCELLED,
    DONE,
    FAILED,
    FINAL_STATUSES,
    INTERRUPTED,
    QUEUED,
    RUNNING,
    UNTITLED,
)
from .views import SessionInfo, ShareInfo, StyleInfo, TakeInfo

__all__ = [
    "ACTIVE_STATUSES", "CANCELLED", "DONE", "FAILED", "FINAL_STATUSES", "INTERRUPTED", "QUEUED", "RUNNING", "UNTITLED",
    "DB_NAME", "Store", "StoreError", "SessionInfo", "ShareInfo", "StyleInfo", "TakeInfo",
]
