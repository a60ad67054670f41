"""Runner leases, and the restart recovery that reads them.

Several processes, one database (PostgreSQL): each process that drives takes holds a lease, a `runners`
row it beats every `heartbeat_s` by the database's clock (hosts' clocks may differ; one clock judges).
Recovery turns "interrupted" only the queued/running takes whose process is gone:

- a runner of this host (same pid namespace): by its pid and start time, at once;
- a runner of another host (or another pid namespace): only once its lease has run out (a pid check
  would ask the wrong machine);
- a runner of another host that never held a lease (an older studio, a store opened with leases off):
  left alone, as before leases.

Recovery judges again under the leases' row locks (a beat that lands meanwhile wins) and claims the takes
with `FOR UPDATE SKIP LOCKED`: two recoveries never both change a take, and a recovery never interleaves
with the runner's own write of it. A lease is deleted only when no active take names it any more, so a
take is never left with a runner nobody can judge. On SQLite (one host) leases are off by default and the
same code reduces to the pid check.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from .db import Database, now_expr
from .runner_id import pid_namespace, process_alive, runner_host, this_host, this_runner
from .tables import ACTIVE_STATUSES, INTERRUPTED, RunnerRow, TakeRow, utcnow

logger = logging.getLogger(__name__)

LEASE_S = 30.0  # a process that has not beaten for this long is gone (other hosts' runners)
HEARTBEAT_S = 5.0  # how often a process beats (and runs recovery) while it drives takes
_UPSERT = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}


def expired(lease: RunnerRow, now: datetime) -> bool:
    return lease.heartbeat_at + timedelta(seconds=lease.lease_s) < now


def gone(runner: str | None, lease: RunnerRow | None, now: datetime) -> bool:
    """Whether the process `runner` names has stopped (see the module's docstring)."""
    host = runner_host(runner)
    if host is None:
        return True  # no runner, or not a runner id: nothing can still drive it
    same_ns = lease is None or not lease.pid_namespace or lease.pid_namespace == pid_namespace()
    if host == this_host() and same_ns:
        return not process_alive(runner)
    if lease is None:
        return False  # another host's process that never held a lease: we cannot tell, leave it
    return expired(lease, now)


class Leases:
    """This process's lease on one database, and that database's recovery.

    `on_beat`: called after each background beat (the store's `recover_interrupted`, so that a runner
    that stopped on another host is noticed while this one runs)."""

    def __init__(self, db: Database, *, enabled: bool, lease_s: float = LEASE_S,
                 heartbeat_s: float = HEARTBEAT_S, on_beat: Callable[[], Any] | None = None) -> None:
        self.db = db
        self.on_beat = on_beat
        self.enabled = enabled
        self.lease_s, self.heartbeat_s = float(lease_s), float(heartbeat_s)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def hold(self) -> None:
        """Beat now and keep beating (a daemon thread) while the store is open; idempotent."""
        if not self.enabled or self._stop.is_set():
            return
        with self._lock:
            if self._thread is not None:
                return
            self.heartbeat()
            self._thread = threading.Thread(target=self._loop, name="store-lease", daemon=True)
            self._thread.start()

    def heartbeat(self) -> None:
        """Renew this process's lease: create its row, or re-create it after another process's recovery
        judged this one gone (the takes it interrupted then stay interrupted)."""
        me, engine = this_runner(), self.db.engine
        now = now_expr(engine)
        with self.db.tx() as s:
            renewed = s.execute(
                update(RunnerRow).where(RunnerRow.id == me).values(heartbeat_at=now, lease_s=self.lease_s)
            ).rowcount
            if renewed:
                return
            if self._thread is not None:
                logger.warning("[store] the lease of runner=%s had run out and was taken back; renewed (takes "
                            "interrupted meanwhile stay interrupted)", me)
            values = {"id": me, "host": this_host(), "pid_namespace": pid_namespace(), "started_at": utcnow(),
                      "heartbeat_at": now, "lease_s": self.lease_s}
            upsert = _UPSERT.get(engine.dialect.name)
            if upsert is None:  # another server database: untested, a plain insert
                s.execute(insert(RunnerRow).values(**values))
                return
            # Two Store objects of one process share its runner id: the second insert renews instead.
            s.execute(upsert(RunnerRow).values(**values).on_conflict_do_update(
                index_elements=[RunnerRow.id], set_={"heartbeat_at": now, "lease_s": self.lease_s}))

    def close(self) -> None:
        """Stop beating. The row stays: it runs out by itself, and until then (or until recovery finds no
        active take of this process) nobody judges this process's takes gone by mistake."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                self.heartbeat()
                if self.on_beat is not None:
                    self.on_beat()
            except Exception as exc:  # a database restart: keep trying; the lease says the rest
                logger.warning("[store] heartbeat failed: %s", exc)

    # ---------------------------------------------------------------- recovery
    def recover(self) -> list[TakeRow]:
        """Mark the takes of gone processes interrupted; returns the changed rows."""
        me = this_runner()
        with self.db.read() as s:
            now = self.db.now(s)
            active = s.execute(select(TakeRow.id, TakeRow.runner).where(TakeRow.status.in_(ACTIVE_STATUSES))).all()
            leases = {r.id: r for r in s.scalars(select(RunnerRow))}
        suspects = {runner for _, runner in active if gone(runner, leases.get(runner or ""), now)}
        run_out = {rid for rid, lease in leases.items() if rid != me and expired(lease, now)}
        if not suspects and not run_out:
            return []
        dead: list[TakeRow] = []
        with self.db.tx() as s:
            # Judged again under the leases' locks (id order: two recoveries never deadlock): a beat that
            # landed since the read above keeps its takes.
            names = sorted(r for r in suspects | run_out if r)
            locked = {r.id: r for r in s.scalars(
                select(RunnerRow).where(RunnerRow.id.in_(names)).order_by(RunnerRow.id).with_for_update()
                .execution_options(populate_existing=True))} if names else {}
            now = self.db.now(s)
            dead_runners = {r for r in suspects if gone(r, locked.get(r or ""), now)}
            ids = [tid for tid, runner in active if runner in dead_runners]
            if ids:
                stmt = (select(TakeRow).where(TakeRow.id.in_(ids), TakeRow.status.in_(ACTIVE_STATUSES))
                        .with_for_update(skip_locked=True).execution_options(populate_existing=True))
                for row in s.scalars(stmt):
                    if row.runner not in dead_runners:  # re-assigned meanwhile
                        continue
                    who = "studio render" if (row.request or {}).get("render_id") else "the studio"
                    row.phase = f"interrupted while {row.phase or row.status}: {who} stopped"
                    row.status = INTERRUPTED
                    row.updated_at = utcnow()
                    dead.append(row)
            stale = [r for r in names if r != me and (r in dead_runners or (r in locked and expired(locked[r], now)))]
            if stale:
                s.flush()
                still_needed = select(TakeRow.id).where(TakeRow.runner == RunnerRow.id,
                                                        TakeRow.status.in_(ACTIVE_STATUSES)).exists()
                s.execute(delete(RunnerRow).where(RunnerRow.id.in_(stale), ~still_needed)
                          .execution_options(synchronize_session=False))
        return dead

    def orphaned(self, s: Session) -> list[str]:
        """Ids of takes queued/running for a process that is gone (what recovery would change)."""
        now = self.db.now(s)
        leases: dict[str, Any] = {r.id: r for r in s.scalars(select(RunnerRow))}
        rows = s.execute(select(TakeRow.id, TakeRow.runner).where(TakeRow.status.in_(ACTIVE_STATUSES)))
        return [tid for tid, runner in rows if gone(runner, leases.get(runner or ""), now)]
