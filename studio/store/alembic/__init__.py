"""Alembic migrations of the studio database (run by `studio.store.db.migrate` at startup)."""
