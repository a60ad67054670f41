"""Process hygiene for the worker: one worker per device (a lock file), stale ipc sockets, safe binds, RSS."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import resource
import socket
import sys
import tempfile
from pathlib import Path
from typing import IO

logger = logging.getLogger(__name__)

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class BindError(RuntimeError):
    pass


def default_lock_dir() -> Path:
    """`$DRS_LOCK_DIR`, else a per-user folder under the temp dir."""
    env = os.environ.get("DRS_LOCK_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / f"diffrhythm-studio-{os.getuid()}"


def exclusive_device(backend: str, device: str) -> bool:
    """A GPU or a Tenstorrent card serves one worker; the CPU is shared by as many as the machine runs
    (two studios, a `studio render` and the test suite side by side)."""
    return not (backend == "torch" and str(device).split(":")[0] == "cpu")


class DeviceLock:
    """An exclusive flock on `<lock_dir>/worker-<backend>-<device>.lock`, held for the worker's life, for
    exclusive devices only (`exclusive_device`); on the CPU acquiring is a no-op.

    The kernel drops a flock when its process dies, so a killed worker never leaves the device locked."""

    def __init__(self, backend: str, device: str, lock_dir: str | Path | None = None) -> None:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{backend}-{device}")
        self.path = Path(lock_dir or default_lock_dir()) / f"worker-{safe}.lock"
        self.exclusive = exclusive_device(backend, device)
        self._fh: IO[str] | None = None

    def acquire(self) -> None:
        if not self.exclusive:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")  # noqa: SIM115 - kept open for the process's life
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            fh.seek(0)
            holder = fh.read().strip() or "?"
            fh.close()
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise BindError(f"another worker (pid {holder}) holds {self.path}; one worker per device. "
                                "Stop it, or use another --device / --lock-dir") from None
            raise
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def ipc_path(endpoint: str) -> str | None:
    return endpoint[len("ipc://"):] if endpoint.startswith("ipc://") else None


def clean_stale_ipc(endpoint: str) -> None:
    """Remove a socket file nobody listens on (a killed worker leaves one); refuse one that is alive."""
    path = ipc_path(endpoint)
    if not path or not os.path.exists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        logger.info("[worker] removing stale ipc socket path=%s", path)
        os.unlink(path)
        return
    except OSError as exc:
        raise BindError(f"{path} exists and is not a usable socket ({exc}); remove it or pick another --bind") from None
    finally:
        probe.close()
    raise BindError(f"{endpoint} is in use by a live process; pick another --bind")


def check_bind(endpoint: str, has_secret: bool) -> None:
    """tcp binds to loopback unless a shared secret authenticates every message."""
    if endpoint.startswith("tcp://"):
        host = endpoint[len("tcp://"):].rsplit(":", 1)[0]
        if host not in LOOPBACK and not has_secret:
            raise BindError(f"binding {endpoint} exposes the card beyond this machine; pass --secret-file "
                            "(the engine needs the same file) or bind tcp://127.0.0.1:PORT")
    elif endpoint.startswith("ipc://"):
        if len(ipc_path(endpoint) or "") > 100:
            raise BindError(f"ipc path {endpoint!r} is too long for a unix socket (keep it under 100 chars)")
    else:
        raise BindError(f"--bind must be ipc://PATH or tcp://HOST:PORT, got {endpoint!r}")


def rss_bytes() -> tuple[int, int]:
    """(current, peak) resident set size in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = peak if sys.platform == "darwin" else peak * 1024
    try:
        with open("/proc/self/statm") as fh:
            cur = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        cur = peak
    return cur, peak
