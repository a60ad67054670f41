"""ZMQ wrapper running `WorkerCore` in the worker process: the serve loop.

Two threads. The IO thread owns the ROUTER socket: it decodes and checks every message, answers HELLO,
PING, STATS, CANCEL and SHUTDOWN at once (so heartbeats and cancels are answered while a unit runs),
admits jobs and queues calls; and it forwards the compute thread's events, which arrive over an inproc
PUSH/PULL pair without copies. The main thread loads the backend, then runs units until asked to stop.
SIGTERM/SIGINT only set a flag: the unit in flight finishes, held jobs end with
"WorkerShutdown: ...", sockets close, the ipc file and the device lock are released, exit code 0.
The protocol is documented in `device_worker/protocol.py`.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import replace

import msgspec
import zmq

from device_worker import protocol as P
from device_worker import wire
from device_worker.backends import make_backend
from device_worker.backends.torch_backend import cpu_has_native_bf16
from device_worker.config import WorkerConfig, resolve_precision
from device_worker.core import WorkerCore, check_call
from device_worker.devices import resolve_device
from device_worker.lifecycle import DeviceLock, check_bind, clean_stale_ipc, ipc_path, rss_bytes
from device_worker.scheduler import Call, Scheduler

logger = logging.getLogger(__name__)

_INPROC = "inproc://events"
_CALLS = (P.Op.ENCODE, P.Op.STYLE, P.Op.FORWARD, P.Op.TRANSCRIBE)
_BACKGROUND_CALLS = (P.Op.TRANSCRIBE,)  # a finished take's lyrics check: after the songs being made (scheduler)


class WorkerServer:
    """The worker process: ROUTER socket + IO thread around a WorkerCore on the main thread."""

    def __init__(self, config: WorkerConfig) -> None:
        config = replace(config, device=resolve_device(config.backend, config.device))  # before the lock and precision
        self.config = config
        self.secret = config.secret if config.secret is not None else wire.read_secret(config.secret_file)
        self.limits = P.Limits(max_jobs=config.max_jobs)
        options: dict[str, object] = {"threads": config.threads, "half_mode": config.half_mode, "style_path": config.style,
                                      "compile": config.compile, "lyrics_model": config.lyrics_model}
        self.precision = resolve_precision(config.backend, config.device, config.precision,
                                           cpu_bf16=config.backend == "torch" and cpu_has_native_bf16())
        self.backend = make_backend(config.backend, config.device, self.precision,
                                    **(options if config.backend == "torch" else {}))
        self.scheduler = Scheduler(config.policy, config.max_jobs)
        self.ctx = zmq.Context()
        self._push: zmq.Socket | None = None
        self.core = WorkerCore(self.backend, self.scheduler, self._emit, self.limits)
        self._stop = threading.Event()
        self._io_stop = threading.Event()
        self._bound = threading.Event()
        self._bind_error: BaseException | None = None
        self._hello: set[bytes] = set()
        self._device_calls: dict[str, int] = {}  # by op, for STATS (how many round trips a take costs)
        self._ready: P.Ready | None = None
        self.load_error: str | None = None  # why the load failed, for a host that has no log to read (a thread)
        self._models: dict[str, str] = {}
        self._lock = DeviceLock(config.backend, config.device, config.lock_dir)

    # ---- lifecycle ----------------------------------------------------------------------------------
    def serve(self) -> int:
        """Bind, load, serve until SHUTDOWN or SIGTERM; returns the exit code."""
        check_bind(self.config.bind, self.secret is not None)
        self._lock.acquire()
        io = threading.Thread(target=self._io_main, name="worker-io", daemon=True)
        try:
            clean_stale_ipc(self.config.bind)
            io.start()
            self._bound.wait(10)
            if self._bind_error is not None:
                raise self._bind_error
            self._push = self.ctx.socket(zmq.PUSH)
            self._push.connect(_INPROC)
            if threading.current_thread() is threading.main_thread():  # (a worker hosted in a thread has none)
                self._install_signals()
            if self.config.parent_pid is not None:
                threading.Thread(target=self._watch_parent, name="worker-parent", daemon=True).start()
            if not self._load():
                return 1
            while not self._stop.is_set():
                self.core.run_once(0.2)
            logger.info("[shutdown] worker: stopping jobs=%d", len(self.scheduler))
            self.core.abort_all("the worker is shutting down")
            return 0
        finally:
            self._io_stop.set()
            if io.is_alive():
                io.join(10)
            if self._push is not None:
                self._push.close(linger=0)
            self.ctx.term()
            path = ipc_path(self.config.bind)
            if path and os.path.exists(path):
                os.unlink(path)
            self.backend.close()
            self._lock.release()
            logger.info("[shutdown] worker: exited")

    def _install_signals(self) -> None:
        def on_signal(signum: int, frame: object) -> None:
            if self._ready is None:  # still loading: nothing to finish, leave through `finally`
                raise SystemExit(128 + signum)
            self._stop.set()  # only a flag: the unit in flight finishes first

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def _watch_parent(self) -> None:
        """A local worker whose engine died (kill -9, a crash) would hold the card and its lock forever;
        reparenting changes getppid(), so poll it and leave through the SIGTERM path (unit in flight first)."""
        pid = self.config.parent_pid
        while not self._stop.wait(1.0):
            if os.getppid() != pid:
                logger.warning("[shutdown] worker: parent pid=%s is gone, exiting", pid)
                os.kill(os.getpid(), signal.SIGTERM)
                return

    def _load(self) -> bool:
        t0 = time.perf_counter()

        def progress(stage: str, fraction: float) -> None:
            logger.info("[load] stage=%s fraction=%.2f", stage, fraction)
            self._emit(b"", 0, P.Loading(stage, fraction), None)

        try:
            self._models = self.backend.load(self.config.dit, self.config.vae, progress)
        except Exception as exc:  # noqa: BLE001 - reported to every waiting client, then exit 1
            logger.exception("[load] failed")
            self.load_error = f"LoadError: {P.exc_text(exc)}"
            self._emit(b"", 0, P.Error(self.load_error), None)
            return False
        info = {**self.backend.info(), "policy": self.config.policy, "precision": self.precision}
        self._ready = P.Ready(time.perf_counter() - t0, self._models, info)
        logger.info("[worker] ready load_s=%.2f backend=%s device=%s precision=%s step=%s", self._ready.load_s,
                    self.config.backend, self.config.device, self.precision, info.get("compile", "n/a"))
        self._emit(b"", 0, self._ready, None)
        return True

    def _emit(self, peer: bytes, rid: int, body: msgspec.Struct, tensors: Mapping[str, wire.Tensor] | None) -> None:
        """Compute thread -> IO thread -> peer (b"" = every peer that said HELLO). Buffers are not copied."""
        assert self._push is not None
        frames = wire.encode(body, rid, tensors, key=self.secret)
        self._push.send_multipart([peer, *frames], copy=False)

    # ---- IO thread ----------------------------------------------------------------------------------
    def _io_main(self) -> None:
        router = self.ctx.socket(zmq.ROUTER)
        pull = self.ctx.socket(zmq.PULL)
        try:
            # libzmq drops a peer whose frame exceeds this before allocating it in full.
            router.setsockopt(zmq.MAXMSGSIZE, self.limits.max_tensor_bytes + self.limits.max_header_bytes)
            router.setsockopt(zmq.SNDHWM, 100_000)  # a slow client must not lose audio windows
            router.bind(self.config.bind)
            pull.bind(_INPROC)
        except zmq.ZMQError as exc:
            self._bind_error = exc
            self._bound.set()
            router.close(0)
            pull.close(0)
            return
        self._bound.set()
        logger.info("[worker] listening bind=%s pid=%d policy=%s", self.config.bind, os.getpid(), self.config.policy)
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        poller.register(pull, zmq.POLLIN)
        crashed = False
        try:
            while True:
                stopping = self._io_stop.is_set()
                for sock, _ in poller.poll(0 if stopping else 100):
                    if sock is pull:
                        frames = pull.recv_multipart(copy=False)
                        try:
                            self._forward(router, frames)
                        except Exception:  # noqa: BLE001 - one event that cannot go out ends nothing else
                            logger.exception("[io] could not forward an event")
                    else:
                        frames = router.recv_multipart(copy=False)
                        self._handle(router, frames)
                if stopping and not pull.poll(0):
                    break
        except BaseException:
            crashed = True
            logger.critical("[io] the IO thread failed; the worker exits", exc_info=True)
        finally:
            router.close(linger=2000)  # let the last events (WorkerShutdown errors, BYE) out
            pull.close(linger=0)
        if crashed and not self._io_stop.is_set():
            # A worker that can no longer hear must not look alive: the compute thread would block on
            # its next event forever and SIGTERM would never get through. The kernel drops the flock.
            os._exit(70)

    def _forward(self, router: zmq.Socket, frames: list[zmq.Frame]) -> None:
        peer = frames[0].bytes
        if peer:
            router.send_multipart([peer, *frames[1:]], copy=False)
            return
        body = [f.bytes for f in frames[1:]]  # a broadcast is small: copy it once per peer
        for p in list(self._hello):
            router.send_multipart([p, *body])

    def _reply(self, router: zmq.Socket, peer: bytes, rid: int, body: msgspec.Struct) -> None:
        router.send_multipart([peer, *wire.encode(body, rid, key=self.secret)], copy=False)

    def _handle(self, router: zmq.Socket, frames: list[zmq.Frame]) -> None:
        """One message from a peer. Nothing it holds may stop the IO thread: whatever escapes the
        per-request handling is logged and answered with an ERROR (rid 0 when even that fails)."""
        if len(frames) < 1:
            return
        peer = frames[0].bytes
        try:
            self._on_message(router, peer, frames[1:])
        except Exception as exc:  # noqa: BLE001 - the IO thread serves every other peer on
            logger.exception("[io] message from peer=%s could not be handled", peer.hex())
            try:
                self._reply(router, peer, 0, P.Error(P.exc_text(exc)))
            except Exception:  # noqa: BLE001 - nothing more can be said to this peer
                logger.exception("[io] could not answer peer=%s", peer.hex())

    def _welcome(self) -> P.Welcome:
        return P.Welcome(P.PROTOCOL_VERSION, self.config.backend, self.config.device, self.precision,
                         self.config.policy, self._ready is not None, self.limits, self._models, os.getpid())

    def _on_message(self, router: zmq.Socket, peer: bytes, frames: list[zmq.Frame]) -> None:
        try:
            msg = wire.decode(frames, limits=self.limits, key=self.secret)
        except wire.WireError as exc:
            logger.warning("[io] refused peer=%s error=%s", peer.hex(), P.exc_text(exc))
            self._reply(router, peer, wire.peek_rid(frames), P.Error(P.exc_text(exc)))
            return
        op, rid = msg.op, msg.rid
        if op in (P.Op.SUBMIT, P.Op.DECODE) or op in _CALLS:
            self._device_calls[op.name] = self._device_calls.get(op.name, 0) + 1
        try:
            if op is P.Op.HELLO:
                self._hello.add(peer)
                self._reply(router, peer, rid, self._welcome())
                if self._ready is not None:
                    self._reply(router, peer, 0, self._ready)
            elif op is P.Op.PING:
                busy = self.core.busy_since
                self._reply(router, peer, rid, P.Pong(time.monotonic() - busy if busy else 0.0, len(self.scheduler)))
            elif op is P.Op.STATS:
                cur, peak = rss_bytes()
                self._reply(router, peer, rid, P.StatsReply(cur, peak, self.backend.device_bytes(),
                                                            len(self.scheduler), self.backend.live_jobs(),
                                                            self.scheduler.jobs_done, self.config.policy,
                                                            dict(self._device_calls)))
            elif isinstance(cancel := msg.body, P.Cancel):
                if not self.scheduler.cancel(peer, cancel.job):
                    raise KeyError(f"no job {cancel.job} is held for this client (finished already?)")
            elif op in (P.Op.SUBMIT, P.Op.DECODE):
                self._reply(router, peer, rid, self.core.admit(peer, msg))
            elif op in _CALLS:
                check_call(msg, self.limits)
                self.scheduler.add_call(Call(peer, rid, msg, background=op in _BACKGROUND_CALLS))
            elif op is P.Op.SHUTDOWN:
                logger.info("[shutdown] worker: requested by peer=%s", peer.hex())
                self._reply(router, peer, rid, P.Bye())
                self._stop.set()
                self.scheduler.stop()
            else:
                raise wire.ProtocolError(f"{op.name} is not a request")
        except Exception as exc:  # noqa: BLE001 - a bad request ends that request only
            logger.warning("[io] request failed op=%s rid=%d error=%s", op.name, rid, P.exc_text(exc))
            self._reply(router, peer, rid, P.Error(P.exc_text(exc)))
