"""A throwaway PostgreSQL server for tests: initdb + pg_ctl in a temp folder, listening on a unix socket
only (no TCP port at all), a fresh database per test, stopped afterwards.

PostgreSQL refuses to run as root: as root the server runs as the `postgres` system user (Debian's
package makes it) or else `nobody`. Without the binaries (PATH, $PG_BIN, /usr/lib/postgresql/*/bin) or
psycopg the tests that need it skip, saying which is missing.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _bin_dir() -> Path | None:
    candidates = [os.environ.get("PG_BIN", "")]
    found = shutil.which("pg_ctl")
    if found:
        candidates.append(str(Path(found).resolve().parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for c in candidates:
        if c and all((Path(c) / b).is_file() for b in ("initdb", "pg_ctl", "postgres")):
            return Path(c)
    return None


def why_not() -> str | None:
    """Why a PostgreSQL server cannot be started here, or None."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return 'psycopg is not installed (pip install -e ".[postgres]")'
    if _bin_dir() is None:
        return "PostgreSQL binaries (initdb, pg_ctl, postgres) not found on PATH, $PG_BIN or /usr/lib/postgresql/*/bin"
    if os.geteuid() == 0 and _server_user() is None:
        return "running as root and neither a 'postgres' nor a 'nobody' user exists to run the server as"
    return None


def _server_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    return None


class PgServer:
    """One running server; `database()` hands out a fresh database URL per caller."""

    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.user = _server_user()
        assert self.bin is not None and self.user is not None
        # Not under pytest's tmp_path: those folders are root-only (0700) and the server runs as another
        # user. Short path: a unix socket path must stay under ~100 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="drs-pg-"))
        self.socket_dir = self.root / "sock"
        self.data = self.root / "data"
        self.socket_dir.mkdir()
        self.root.chmod(0o755)
        self.socket_dir.chmod(0o755)
        if os.geteuid() == 0:
            for p in (self.root, self.socket_dir):
                os.chown(p, self.user.pw_uid, self.user.pw_gid)
        self.log = self.root / "server.log"
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-locale", "--no-sync")
        opts = (f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
                "-c shared_buffers=32MB -c timezone=Europe/Berlin")  # not UTC: the store must not care
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", opts, "start")
        self.admin_url = f"postgresql+psycopg://postgres@/postgres?host={self.socket_dir}"

    def _run(self, prog: str, *args: str) -> None:
        kwargs = {}
        if os.geteuid() == 0:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        env = {**os.environ, "LC_ALL": "C", "PGTZ": "UTC"}
        proc = subprocess.run([str(self.bin / prog), *args], cwd=self.root, env=env, capture_output=True,
                              text=True, timeout=120, **kwargs)
        if proc.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{prog} failed ({proc.returncode}): {proc.stderr[-2000:]}\n{log[-2000:]}")

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(host=str(self.socket_dir), user="postgres", dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(sql)

    def url(self, dbname: str) -> str:
        return f"postgresql+psycopg://postgres@/{dbname}?host={self.socket_dir}"

    @contextmanager
    def database(self) -> Iterator[str]:
        """A fresh, empty database for one test; dropped afterwards (connections still open: forced)."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self._admin(f'CREATE DATABASE "{name}"')
        try:
            yield self.url(name)
        finally:
            self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def running_server() -> Iterator[PgServer]:
    reason = why_not()
    if reason:
        pytest.skip(f"PostgreSQL tests skipped: {reason}")
    server = PgServer()
    try:
        yield server
    finally:
        server.stop()
