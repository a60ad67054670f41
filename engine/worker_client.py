"""The engine's client of the device worker: requests out, replies and events back, death noticed.

`Worker(dit=..., vae=...)` starts `python -m device_worker` (through `engine.worker_process`, which owns
the child: command line, log, reap) or attaches to a running one with `connect=`; `wait_ready()` returns
once the weights are on the device, `close()` returns only after the process exited, so the card is free
afterwards. One IO thread owns the DEALER socket: it sends heartbeats, routes every reply or event to the
queue of the request (`RemoteJob`) it belongs to, and declares the worker dead (`WorkerDeadError` on every
waiter and every later call) when the process exits or nothing has been heard for longer than its budget
(`engine.heartbeat`: at least `dead_after_s`, more where latency measured on a loaded host calls for it).
Callers on any thread submit jobs and iterate their events with deadlines. No torch here; the torch-style
drop-ins for upstream scripts (`RemoteDiT`, `RemoteVae`) are in `engine.remote_dit`.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import zmq

from device_worker import protocol as P
from device_worker import wire
from device_worker.config import WorkerConfig
from engine.heartbeat import SilenceBudget
from engine.worker_process import WorkerProcess, WorkerThread
from engine.worker_requests import (
    TERMINAL,
    Dead,
    RemoteJob,
    SongResult,
    WorkerDeadError,
    WorkerError,
    WorkerEvent,
    collect,
)

__all__ = ["TERMINAL", "RemoteJob", "SongResult", "Worker", "WorkerDeadError", "WorkerError", "WorkerEvent",
           "collect"]

logger = logging.getLogger(__name__)

READY_TIMEOUT_ENV = "DRS_WORKER_READY_TIMEOUT_S"
UNIT_TIMEOUT_S = 600.0  # a card unit (one DiT step, one VAE window) running longer is hung

class Worker:
    """A device worker process (or a connection to one) with heartbeats and per-request event queues."""

    def __init__(self, dit: str | None = None, vae: str | None = None, *, connect: str | None = None,
                 python: str | None = None, command: Sequence[str] | None = None, extra_args: Sequence[str] = (),
                 heartbeat_s: float = 0.5, dead_after_s: float = 3.0, unit_timeout_s: float | None = UNIT_TIMEOUT_S,
                 env: Mapping[str, str] | None = None, in_process: bool = False, **options: Any) -> None:
        """`options` are the worker's own configuration, `device_worker.config.WorkerConfig`'s fields
        (backend, device, precision, policy, max_jobs, threads, lock_dir, style, bind, secret_file,
        secret, ...): declared there once, passed on as its flags. The rest is how this side starts
        (`python` or a `command` prefix such as a container, or `in_process`: a thread of this process,
        `engine.worker_process.WorkerThread`) and watches it."""
        self.config = WorkerConfig(dit=dit, vae=vae, **options)  # TypeError names an unknown option
        self.secret = self.config.secret if self.config.secret is not None else wire.read_secret(self.config.secret_file)
        self.heartbeat_s, self.dead_after_s, self.unit_timeout_s = heartbeat_s, dead_after_s, unit_timeout_s
        self._slowest_unit = 0.0  # longest unit seen to finish (from PONG busy times), seconds
        self._last_busy = 0.0
        self._tmpdir: str | None = None
        if connect is None and not self.config.bind:
            self._tmpdir = tempfile.mkdtemp(prefix="drs-")  # short path: unix sockets cap at ~107 chars
            self.config.bind = f"ipc://{self._tmpdir}/worker.sock"
        self.endpoint = connect or self.config.bind
        self.spawn = connect is None
        # The child process (or thread), when this side starts it (None with connect=: someone else owns that one).
        self.process: WorkerProcess | WorkerThread | None = None
        if self.spawn:
            self.process = (WorkerThread(self.config) if in_process else
                            WorkerProcess(self.config, python=python, command=command, extra_args=extra_args, env=env,
                                          log_dir=self._tmpdir))
        self.welcome: P.Welcome | None = None
        self.ready: P.Ready | None = None
        self._rids = itertools.count(1)
        self._waiters: dict[int, queue.Queue[Any]] = {}
        self._ready_q: queue.Queue[WorkerEvent | Dead] = queue.Queue()
        self._lock = threading.Lock()
        self._ctx = zmq.Context()
        self._push: zmq.Socket | None = None
        self._io: threading.Thread | None = None
        self._stop = threading.Event()
        self._dead: WorkerDeadError | None = None
        self._silence = SilenceBudget(dead_after_s)  # dead after a silence longer than measured latency allows
        self._closed = False

    # ---- lifecycle ----------------------------------------------------------------------------------
    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return self.process.proc if self.process is not None else None

    @property
    def log_path(self) -> str | None:
        return self.process.log_path if self.process is not None else None

    def argv(self) -> list[str]:
        """The worker's command line (see `WorkerProcess.argv`)."""
        if not isinstance(self.process, WorkerProcess):
            raise ValueError("a Worker made with connect= or in_process=True starts no process")
        return self.process.argv()

    def start(self) -> Worker:
        if self.spawn:
            if self.config.dit is None or self.config.vae is None:
                raise ValueError("Worker needs dit= and vae= checkpoint paths to start a worker (or connect=)")
            if self.secret is not None and self.config.secret_file is None:
                raise ValueError("pass secret_file= so the worker process gets the same secret")
            assert self.process is not None
            self.process.start(self.endpoint)
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, 100_000)
        sock.connect(self.endpoint)
        pull = self._ctx.socket(zmq.PULL)
        pull.bind(f"inproc://out-{id(self)}")
        self._push = self._ctx.socket(zmq.PUSH)
        self._push.connect(f"inproc://out-{id(self)}")
        self._io = threading.Thread(target=self._io_main, args=(sock, pull), name="worker-client-io", daemon=True)
        self._io.start()
        self._send(P.Hello(f"engine pid {os.getpid()}"), next(self._rids), waiter=self._ready_q)
        return self

    def wait_ready(self, timeout_s: float | None = None) -> P.Ready:
        """Block until READY (weights on the device). Raises WorkerDeadError if the worker exits or fails
        to load, TimeoutError after `timeout_s` (default $DRS_WORKER_READY_TIMEOUT_S or 300)."""
        if self.ready is not None:
            return self.ready
        timeout_s = timeout_s if timeout_s is not None else float(os.environ.get(READY_TIMEOUT_ENV, "300"))
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"worker not ready within {timeout_s} s (configured by timeout_s or "
                                   f"{READY_TIMEOUT_ENV}){self._log_tail()}")
            try:
                item = self._ready_q.get(timeout=min(left, 0.25))
            except queue.Empty:
                self.ensure_alive()
                continue
            if isinstance(item, Dead):
                raise item.error
            if item.op is P.Op.WELCOME:
                self.welcome = item.body
            elif item.op is P.Op.READY:
                self.ready = item.body
                return item.body
            elif item.op is P.Op.ERROR:
                raise WorkerError(f"{item.body.error}{self._log_tail()}")

    def close(self, timeout_s: float = 10.0) -> int | None:
        """Ask the worker to exit, then terminate -> wait -> kill; returns only when the process is gone."""
        if self._closed:
            return self.proc.returncode if self.proc else None
        self._closed = True
        rc = None
        if self.process is not None and self.process.started:
            if not self.process.exited() and self._dead is None:
                try:
                    self._send(P.Shutdown(), next(self._rids))
                except WorkerError:
                    pass
            rc = self.process.reap(timeout_s)
        self._stop.set()
        if self._io is not None:
            if self._push is not None:
                with self._lock:
                    self._push.send(b"")  # wake the IO thread from its poll: it sees the stop at once
            self._io.join(5)
        if self._push is not None:
            self._push.close(0)
        self._ctx.term()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
        return rc

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ensure_alive(self) -> None:
        if self._dead is not None:
            raise self._dead

    def exit_reason(self) -> str:
        """Why the worker process ended, in one line (see `WorkerProcess.exit_reason`)."""
        if self.process is None:
            return "the worker process exited with code None"
        return self.process.exit_reason()

    def _log_tail(self, lines: int = 15) -> str:
        return self.process.log_tail(lines) if self.process is not None else ""

    # ---- requests -----------------------------------------------------------------------------------
    def submit(self, text: np.ndarray, style: Any, negative_style: Any, *, cond: Any = None,
               song: P.SongParams | None = None, **options: Any) -> RemoteJob:
        """A song job: text int64 [N] (lyric id per frame), style/negative_style [512], cond [N, 64] or None.
        `song`: how it is sampled (`protocol.SongParams`), or its fields as keywords (steps, cfg, seed, ...);
        the other options are `protocol.Submit` fields (decode_window, decode_overlap, precision, label)."""
        settings = {k: options.pop(k) for k in list(options) if k in P.SongParams.__struct_fields__}
        if song is not None and settings:
            raise TypeError(f"give the song's settings in `song` or as keywords, not both: {sorted(settings)}")
        tensors = {"text": np.asarray(text, dtype=np.int64), "style": wire.to_numpy(style),
                   "negative_style": wire.to_numpy(negative_style)}
        if cond is not None:
            tensors["cond"] = wire.to_numpy(cond)
        return self._request(P.Submit(song=song or P.SongParams(**settings), **options), tensors)

    def decode(self, latent_cn: Any, window: int = 128, overlap: int = 32) -> RemoteJob:
        """A decode-only job: latent float32 [64, T] -> WINDOW events, then DONE."""
        return self._request(P.Decode(window, overlap), {"latent": np.asarray(wire.to_numpy(latent_cn), np.float32)})

    def encode(self, audio: Any, seed: int | None = None, timeout_s: float = 120.0) -> tuple[np.ndarray, int]:
        """Stereo 44.1 kHz audio float32 [2, n] -> (drawn latent [n/2048, 64], the seed it was drawn with)."""
        ev = self._request(P.Encode(seed), {"audio": np.asarray(wire.to_numpy(audio), np.float32)}).reply(timeout_s)
        return ev.tensors["latent"], ev.body.seed

    def style_text(self, texts: Sequence[str], timeout_s: float = 120.0) -> np.ndarray:
        return self._request(P.Style(list(texts)), {}).reply(timeout_s).tensors["embedding"]

    def style_audio(self, wav_24k: Any, timeout_s: float = 120.0) -> np.ndarray:
        audio = np.asarray(wire.to_numpy(wav_24k), np.float32)
        return self._request(P.Style(None), {"audio": audio[None] if audio.ndim == 1 else audio}).reply(
            timeout_s).tensors["embedding"]

    def transcribe(self, audio_16k: Any, windows: Sequence[Sequence[float]] | None = None, language: str = "",
                   timeout_s: float = 600.0) -> P.Transcript:
        """16 kHz mono float32 [n] -> the words the worker's Whisper heard, with times (s)."""
        body = P.Transcribe([[float(a), float(b)] for a, b in windows or []], language)
        return self._request(body, {"audio": np.ascontiguousarray(wire.to_numpy(audio_16k), np.float32)}).reply(
            timeout_s).body

    def forward(self, tensors: Mapping[str, Any], *, drop_audio_cond: bool = False, drop_text: bool = False,
                drop_prompt: bool = False, timeout_s: float = 120.0) -> Any:
        """One DiT forward (the RemoteDiT path): numpy tensors in, velocity [B, N, 64] out."""
        job = self._request(P.Forward(drop_audio_cond, drop_text, drop_prompt), dict(tensors))
        return job.reply(timeout_s).tensors["v"]

    def stats(self, timeout_s: float = 10.0) -> P.StatsReply:
        return self._request(P.Stats(), {}).reply(timeout_s).body

    def _request(self, body: Any, tensors: Mapping[str, Any]) -> RemoteJob:
        self.ensure_alive()
        rid = next(self._rids)
        job = RemoteJob(self, rid)
        self._send(body, rid, tensors, waiter=job.inbox)
        return job

    def _send(self, body: Any, rid: int, tensors: Mapping[str, Any] | None = None, waiter: Any = None) -> None:
        frames = wire.encode(body, rid, tensors, key=self.secret)
        with self._lock:  # the lock is the memory barrier that makes one PUSH socket usable from any thread
            self.ensure_alive()
            if self._push is None:
                raise WorkerError("Worker.start() was not called")
            if waiter is not None:
                self._waiters[rid] = waiter
            self._push.send_multipart(frames, copy=False)

    def forget(self, rid: int) -> None:
        """Request `rid` is over: later messages for it are dropped."""
        with self._lock:
            self._waiters.pop(rid, None)

    def cancel(self, rid: int) -> None:
        """Ask the worker to stop request `rid` (its CANCELLED or DONE still arrives)."""
        self._send(P.Cancel(rid), next(self._rids))

    # ---- IO thread ----------------------------------------------------------------------------------
    def _io_main(self, sock: zmq.Socket, pull: zmq.Socket) -> None:
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(pull, zmq.POLLIN)
        next_ping = time.monotonic() + self.heartbeat_s
        limits = P.Limits(max_jobs=1 << 30)
        try:
            while not self._stop.is_set():
                for s, _ in poller.poll(int(self.heartbeat_s * 1000 / 2)):
                    if s is pull:
                        frames = pull.recv_multipart(copy=False)
                        if len(frames) > 1:  # (one empty frame: close() waking this loop, nothing to send)
                            sock.send_multipart(frames, copy=False)
                    else:
                        self._on_frames(sock.recv_multipart(copy=False), limits)
                now = time.monotonic()
                if now >= next_ping and self._dead is None:
                    sock.send_multipart(wire.encode(P.Ping(), 0, key=self.secret))
                    next_ping = now + self.heartbeat_s
                self._check_health(now, sock, limits)
        finally:
            sock.close(0)
            pull.close(0)

    def _on_frames(self, frames: list[zmq.Frame], limits: P.Limits) -> None:
        try:
            msg = wire.decode(frames, limits=limits, key=self.secret)
        except wire.WireError as exc:
            logger.warning("[remote] dropped a message from the worker: %s", P.exc_text(exc))
            return
        self._silence.heard(time.monotonic())
        if msg.op is P.Op.PONG:
            busy = msg.body.busy_s
            if busy < self._last_busy:  # the previous unit ended (at least this long)
                self._slowest_unit = max(self._slowest_unit, self._last_busy)
            self._last_busy = busy
            limit = self.unit_limit_s()
            if limit is not None and busy > limit:
                self._declare_dead(f"the worker is alive but one unit has run {busy:.0f} s "
                                   f"(> {limit:.0f} s); the card may be hung")
            return
        ev = WorkerEvent(msg.op, msg.body, msg.tensors)
        with self._lock:
            waiter = self._waiters.get(msg.rid)
        if msg.rid == 0 and msg.op in (P.Op.LOADING, P.Op.READY, P.Op.ERROR):
            waiter = self._ready_q
        if waiter is None:
            logger.debug("[remote] no waiter for rid=%d op=%s", msg.rid, msg.op.name)
            return
        waiter.put(ev)

    def unit_limit_s(self) -> float | None:
        """How long one unit may run before the card counts as hung. None on a CPU: a CPU does not wedge
        the way a card does, and a release-size CPU step legitimately takes minutes. On a card: the
        configured bound, stretched to 10x the slowest unit seen, so a slow but healthy model never trips it."""
        device = (self.welcome.device if self.welcome else self.config.device) or ""
        if self.unit_timeout_s is None or device.startswith("cpu"):
            return None
        return max(self.unit_timeout_s, 10.0 * self._slowest_unit)

    def _check_health(self, now: float, sock: zmq.Socket, limits: P.Limits) -> None:
        if self._dead is not None or self._closed:
            return
        if self.process is not None and self.process.exited():
            # Deliver what the worker sent before it exited (its last errors) ahead of the dead sentinel.
            while sock.poll(100):
                self._on_frames(sock.recv_multipart(copy=False), limits)
            self._declare_dead(f"{self.exit_reason()}{self._log_tail()}")
        elif (silent := self._silence.overdue(now)) is not None:
            self._declare_dead(f"no heartbeat from the worker for {silent:.1f} s (budget "
                               f"{self._silence.budget_s():.1f} s from dead_after_s={self.dead_after_s} and "
                               "the latency measured); it is hung or gone")

    def _declare_dead(self, reason: str) -> None:
        logger.error("[remote] worker dead: %s", reason.splitlines()[0])
        err = WorkerDeadError(f"{reason}. Start a new Worker; see the worker log above for the root cause")
        with self._lock:
            self._dead = err
            waiters = list(self._waiters.values())
        for q in [*waiters, self._ready_q]:
            q.put(Dead(err))
