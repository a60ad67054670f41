"""Device workers as Ray actors: one per accelerator of a Ray cluster, found, placed and restarted by Ray.

`RayWorkers` is the pool's view of the cluster (`EngineConfig.ray`): `seats()` lists one seat per
accelerator on every live node (a node's count of the worker resource: `GPU` for CUDA, `p100a` for a
Tenstorrent card, one CPU worker per node, or any custom resource named by `EngineConfig.ray_resource`),
and `start(seat, options)` asks that seat's actor to (re)start `python -m device_worker` on its node,
returning the tcp address it listens on. The pool then talks to it with `Worker(connect=..., secret=...)`,
the same wire protocol as a local worker; nothing else moves off the studio's host.

Each actor is pinned to its seat's node (hard node affinity, one actor per resource unit: placement is
spread by construction) and holds that unit of the resource for its life. Ray restarts an actor whose
process died (`max_restarts`); an actor whose node is gone is dead, and the pool drops the seat.
The HMAC secret travels as bytes in the actor's constructor and is written to a 0600 file in a 0700
folder on the node; it is never on a command line or in a log.

Ray is an optional dependency (`pip install -e ".[cluster]"`), imported here only when a pool uses it.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from device_worker.config import WorkerConfig

logger = logging.getLogger(__name__)

NAMESPACE = "diffrhythm-studio"
LISTEN_TIMEOUT_S = 60.0  # from the process start to its "listening" log line
CALL_TIMEOUT_S = 120.0  # an actor call (start includes Ray placing and starting the actor)


def default_resource(backend: str, device: str) -> str:
    """The Ray resource that stands for one device of this kind."""
    if backend == "ttnn":
        return "p100a"
    return "GPU" if str(device).startswith("cuda") else "CPU"


@dataclass(frozen=True)
class Seat:
    """One accelerator of the cluster: unit `k` of `resource` on node `node_id`."""

    node_id: str
    node_ip: str
    resource: str
    k: int

    @property
    def name(self) -> str:
        return f"ray:{self.node_ip}/{self.node_id[:6]}/{self.resource}{self.k}"


_PREFIX = "drs-ray-"


def _remove_stale_dirs() -> None:
    """An actor killed with its node or by Ray leaves its folder (the secret in it); the next actor on
    that node removes those whose actor process is gone."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        if not name.startswith(_PREFIX):
            continue
        pid = name[len(_PREFIX):].split("-", 1)[0]
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
        except (ValueError, PermissionError):
            pass


class DeviceWorkerActor:
    """Runs on a node (as a Ray actor): one `python -m device_worker` process, bound to tcp on the node."""

    def __init__(self, secret: bytes) -> None:
        _remove_stale_dirs()
        self._dir = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")  # 0700
        self._secret_file = os.path.join(self._dir, "secret")
        fd = os.open(self._secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secret)
        self._log = os.path.join(self._dir, "worker.log")
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, options: dict[str, Any], env: dict[str, str] | None = None) -> str:
        """Stop the running worker process, if any, start a fresh one; its tcp address once it listens."""
        import ray

        self.stop()
        ip = ray.util.get_node_ip_address()
        with socket.socket() as s:  # a free port; a race lost here is a failed start, retried by the pool
            s.bind((ip, 0))
            port = s.getsockname()[1]
        config = WorkerConfig(**options, bind=f"tcp://{ip}:{port}", secret_file=self._secret_file,
                           parent_pid=os.getpid())  # the worker exits when this actor is gone
        with open(self._log, "wb") as log:
            self._proc = subprocess.Popen([sys.executable, "-m", "device_worker", *config.to_argv()], stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True,
                                          env={**os.environ, **(env or {})})
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the worker process on {ip} exited with code {self._proc.returncode}: "
                                   f"{self.said()}")
            with open(self._log, errors="replace") as fh:
                if "[worker] listening" in fh.read():
                    return config.bind
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"the worker process on {ip} did not listen within {LISTEN_TIMEOUT_S} s: {self.said()}")

    def said(self, lines: int = 3) -> str:
        """The last lines of the worker's log (its own reason when it stopped)."""
        try:
            with open(self._log, errors="replace") as fh:
                return " | ".join(line.strip() for line in fh.readlines()[-lines:])
        except OSError:
            return ""

    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def stop(self, timeout_s: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()  # the worker's SIGTERM path: the unit in flight ends, sockets close
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def shutdown(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)


class RayWorkers:
    """The engine's side: connect to the cluster, list its seats, start and stop their actors."""

    def __init__(self, address: str, resource: str, *, threads: int | None = None, max_restarts: int = 3,
                 env: dict[str, str] | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise RuntimeError('--ray needs Ray: pip install -e ".[cluster]"') from None
        self.ray = ray
        self.resource, self.threads, self.max_restarts, self.env = resource, threads, max_restarts, env
        self._owns = not ray.is_initialized()
        if self._owns:
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING)
        # Hex: a secret file is read with surrounding whitespace stripped, raw bytes could lose some.
        self.secret = secrets.token_hex(32).encode()
        self._actors: dict[Seat, Any] = {}
        self._gone: set[Seat] = set()
        self._lock = threading.Lock()

    def seats(self) -> list[Seat]:
        """One seat per unit of the worker resource on every live node (CPU: one per node)."""
        out = []
        for node in self.ray.nodes():
            if not node.get("Alive"):
                continue
            have = float(node.get("Resources", {}).get(self.resource, 0))
            count = (1 if have >= (self.threads or 1) else 0) if self.resource == "CPU" else int(have)
            out += [Seat(node["NodeID"], node.get("NodeManagerAddress", "?"), self.resource, k) for k in range(count)]
        return out

    def _actor(self, seat: Seat) -> Any:
        with self._lock:
            actor = self._actors.get(seat)
            return actor if actor is not None else self._new_actor(seat)

    def _new_actor(self, seat: Seat) -> Any:
        if seat in self._gone:
            raise RuntimeError(f"{seat.name} left the cluster")
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        r = seat.resource
        options: dict[str, Any] = {
            "num_cpus": (self.threads or 1) if r == "CPU" else 0,
            "num_gpus": 1 if r == "GPU" else 0,
            "resources": {} if r in ("CPU", "GPU") else {r: 1},
            "scheduling_strategy": NodeAffinitySchedulingStrategy(seat.node_id, soft=False),
            "max_restarts": self.max_restarts,
            "max_concurrency": 2,  # `pid` and `stop` are answered while `start` waits for the process
        }
        actor = self.ray.remote(DeviceWorkerActor).options(**options).remote(self.secret)
        self._actors[seat] = actor
        return actor

    def start(self, seat: Seat, options: dict[str, Any]) -> str:
        """(Re)start `seat`'s worker process; the tcp address it listens on. A dead actor is replaced."""
        if seat.resource == "p100a":
            options = {**options, "device": str(seat.k)}
        elif seat.resource == "GPU":
            options = {**options, "device": "cuda:0"}  # Ray's CUDA_VISIBLE_DEVICES holds the actor's GPU
        try:
            return self.ray.get(self._actor(seat).start.remote(options, self.env), timeout=CALL_TIMEOUT_S)
        except self.ray.exceptions.RayActorError:
            with self._lock:  # gone for good (out of restarts, or its node died): a new one next time
                self._actors.pop(seat, None)
            raise

    def release(self, *seats: Seat) -> None:
        """Stop these seats' workers and drop their actors (their node left, or the pool closes), all at
        once. A seat released is never started again. The actor ends when its last handle is gone (Ray
        collects it); `ray.kill` is not used, as on an actor Ray already buried it aborts this process."""
        with self._lock:
            self._gone.update(seats)
            actors = [a for a in (self._actors.pop(s, None) for s in seats) if a is not None]
        refs = []
        for actor in actors:
            try:
                refs.append(actor.shutdown.remote())
            except Exception:  # noqa: BLE001 - dead already
                pass
        if refs:
            self.ray.wait(refs, num_returns=len(refs), timeout=15)

    def close(self) -> None:
        with self._lock:
            seats = list(self._actors)
        self.release(*seats)
        if self._owns and self.ray.is_initialized():
            self.ray.shutdown()
