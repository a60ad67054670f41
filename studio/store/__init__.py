"""The studio's store (SQLite, or PostgreSQL for several studios): sessions, takes, saved styles and
share links (see `store.Store`)."""

from .models import ACTIVE_STATUSES, CANCELLED, DONE, FAILED, FINAL_STATUSES, INTERRUPTED, QUEUED, RUNNING
from .store import DB_NAME, Store, StoreError
from .views import SessionInfo, ShareInfo, StyleInfo, TakeInfo

__all__ = [
    "ACTIVE_STATUSES", "CANCELLED", "DONE", "FAILED", "FINAL_STATUSES", "INTERRUPTED", "QUEUED", "RUNNING",
    "DB_NAME", "Store", "StoreError", "SessionInfo", "ShareInfo", "StyleInfo", "TakeInfo",
]
