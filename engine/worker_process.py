"""The device worker as a child process: its command line, its log, why it ended, and a reap that waits.
(`WorkerThread`: the same worker hosted by a thread of this process, for tests and one-process runs.)

`WorkerProcess(config)` builds `python -m device_worker <flags>` (or a `command` prefix such as a
container) from `device_worker.config.WorkerConfig`, starts it in its own session with its output in a
log file, and `reap()` returns only once it is gone (wait -> terminate -> kill), so the card is free
afterwards. `exit_reason()` turns the exit into one line (the worker's own words from its log, or the
signal that killed it). Talking to the worker is `engine.worker_client`'s job; this file never opens a
socket.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from device_worker.config import WorkerConfig

logger = logging.getLogger(__name__)

_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Refused|Exit)\b.*:")  # "FileNotFoundError: ..."


class WorkerProcess:
    """One `python -m device_worker` child of this process (not started until `start()`)."""

    def __init__(self, config: WorkerConfig, *, python: str | None = None, command: Sequence[str] | None = None,
                 extra_args: Sequence[str] = (), env: Mapping[str, str] | None = None,
                 log_dir: str | None = None) -> None:
        self.config = config
        self.python, self.command, self.extra_args = python, command, list(extra_args)
        self.env = dict(env) if env is not None else None
        self.log_path = os.path.join(log_dir or tempfile.gettempdir(), "worker.log")
        self.proc: subprocess.Popen[bytes] | None = None

    def argv(self) -> list[str]:
        """The worker's command line: `command` prefix (a container, another venv) or `python -m`."""
        prefix = list(self.command) if self.command else [self.python or sys.executable]
        config = self.config
        if not self.command:  # under a container/launcher prefix the worker's parent is not this process
            config = dataclasses.replace(config, parent_pid=os.getpid())
        return [*prefix, "-m", "device_worker", *config.to_argv(), *self.extra_args]

    def start(self, endpoint: str) -> subprocess.Popen[bytes]:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                         start_new_session=True)  # a Ctrl-C in the engine is not the worker's
        logger.info("[remote] started pid=%d bind=%s", self.proc.pid, endpoint)
        return self.proc

    @property
    def started(self) -> bool:
        return self.proc is not None

    def exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def reap(self, timeout_s: float) -> int:
        """Wait half the time for a clean exit, then SIGTERM, then SIGKILL: returns once the process is gone."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout_s / 2)
        except subprocess.TimeoutExpired:
            pass
        logger.warning("[remote] worker did not exit; terminating pid=%d", self.proc.pid)
        self.proc.terminate()
        try:
            return self.proc.wait(timeout_s / 2)
        except subprocess.TimeoutExpired:
            logger.warning("[remote] worker ignored SIGTERM; killing pid=%d", self.proc.pid)
            self.proc.kill()
            return self.proc.wait()

    def exit_reason(self) -> str:
        """Why the worker process ended, in one line: its own words when it logged them (lock held by
        pid N, a file missing, a checkpoint refused), or how it died (a signal: the OOM killer's SIGKILL)."""
        rc = self.proc.returncode if self.proc is not None else None
        if rc is not None and rc < 0:
            name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else f"signal {-rc}"
            hint = " (out of memory? the kernel's OOM killer sends SIGKILL)" if -rc == signal.SIGKILL else ""
            return f"the worker process was killed by {name}{hint}"
        said = ""
        if os.path.exists(self.log_path):
            with open(self.log_path, errors="replace") as fh:
                for line in fh.readlines()[-200:]:
                    line = line.strip()
                    if "cannot start:" in line:
                        said = line.split("cannot start:", 1)[1].strip()
                    elif _EXC_LINE.match(line):
                        said = line
        return f"the worker process exited with code {rc}" + (f": {said}" if said else "")

    def log_tail(self, lines: int = 15) -> str:
        if not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as fh:
            tail = fh.readlines()[-lines:]
        return "\n--- worker log (last lines) ---\n" + "".join(tail) if tail else ""


class WorkerThread:
    """The device worker served by a thread of this process, over the same socket, messages and HMAC as a
    child process (vLLM's in-process engine client, for the same reason): no interpreter start and no
    torch import per worker, so a test's engine is up in a fraction of a second. No crash isolation: a
    fault in the model is this process's, and torch's thread count is this process's (restored at exit).
    `WorkerProcess`'s interface, so `engine.worker_client.Worker` hosts either."""

    proc = None  # no child process

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.log_path = None
        self.code: int | None = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None
        self.server: Any = None  # device_worker.worker.WorkerServer, once started

    def start(self, endpoint: str) -> None:
        import torch  # (only where a worker is hosted here: the engine itself imports no torch)

        from device_worker.worker import WorkerServer

        threads = torch.get_num_threads()
        self.server = server = WorkerServer(self.config)  # a bad option or device raises here, to the caller

        def serve() -> None:
            try:
                self.code = server.serve()
            except BaseException as exc:  # a failed load or bind: what a process would have printed and exited on
                self.error, self.code = exc, 1
                logger.error("[remote] in-process worker ended: %s: %s", type(exc).__name__, exc)
            finally:
                torch.set_num_threads(threads)

        self.thread = threading.Thread(target=serve, name="device-worker", daemon=True)
        self.thread.start()
        logger.info("[remote] started in-process worker bind=%s", endpoint)

    @property
    def started(self) -> bool:
        return self.thread is not None

    def exited(self) -> bool:
        return self.thread is not None and not self.thread.is_alive()

    def reap(self, timeout_s: float) -> int | None:
        """Wait for the worker's thread to leave its serve loop (a SHUTDOWN was sent); None if it did not."""
        assert self.thread is not None
        self.thread.join(timeout_s)
        return self.code if not self.thread.is_alive() else None

    def exit_reason(self) -> str:
        said = (f": {type(self.error).__name__}: {self.error}" if self.error is not None else
                f": {self.server.load_error}" if self.server is not None and self.server.load_error else "")
        return f"the in-process worker exited with code {self.code}{said}"

    def log_tail(self, lines: int = 15) -> str:
        return ""  # its log lines are this process's
