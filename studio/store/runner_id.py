"""Which process drives a take, and whether that process still runs (for restart recovery).

A runner id is "host:pid:start". `process_alive` can only judge a process of this host; on a database
shared by several hosts (PostgreSQL) the store judges other hosts' runners by their lease instead
(`Store`'s heartbeat rows), never by a pid check here.
"""

from __future__ import annotations

import os
import socket
from functools import cache


def _start_ticks(pid: int) -> str | None:
    """The process start time in clock ticks since boot (Linux), which tells a reused PID apart."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 22; the command name (field 2) may contain spaces, so split after its closing parenthesis.
    return stat.rsplit(")", 1)[-1].split()[19]


def this_host() -> str:
    return socket.gethostname()


@cache
def pid_namespace() -> str:
    """This process's pid namespace ("pid:[4026531836]"): two containers may share a host name (host
    networking) but not their pids, so a pid check is only meaningful inside the same namespace."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def runner_host(runner: str | None) -> str | None:
    """The host part of a runner id, or None when it is not one."""
    try:
        host, pid_s, _start = (runner or "").rsplit(":", 2)
        int(pid_s)
    except ValueError:
        return None
    return host


@cache
def this_runner() -> str:
    """"host:pid:start" for the current process."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_ticks(os.getpid()) or '?'}"


def process_alive(runner: str | None) -> bool:
    """True only when `runner` names a process on this host that still runs (same PID and start time)."""
    if not runner:
        return False
    try:
        host, pid_s, start = runner.rsplit(":", 2)
        pid = int(pid_s)
    except ValueError:
        return False
    if host != socket.gethostname():
        # Another machine's process (a shared data directory): we cannot tell, so leave it alone.
        return True
    if pid == os.getpid():
        # This very process cannot have been interrupted by its own restart; but a freshly started
        # studio never has takes under its own runner id yet, so this only guards tests.
        return runner == this_runner()
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    now = _start_ticks(pid)
    return now is None or start == "?" or now == start
