"""The worker's inner loop: validate jobs, run one unit at a time on the backend, emit events. No sockets.

`WorkerCore.admit` runs on the IO thread (so a refused job is answered at once, even while a unit runs);
`WorkerCore.run_once` runs on the compute thread. Events go out through `emit(peer, rid, body, tensors)`,
which the socket layer (`worker.py`) provides; tests can drive the core in-process with a list instead.
Error scopes: a failing unit ends only its job or call ("ExceptionName: message"); the loop goes on.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import numpy as np

from device_worker import controls
from device_worker import protocol as P
from device_worker.audio import StyleWindowTap
from device_worker.backends.base import Backend, JobSpec
from device_worker.scheduler import Call, Scheduler, WorkerJob
from device_worker.shapes import DECODE_WINDOW, HOP, plan_windows
from device_worker.wire import BF16, Message, ProtocolError, Tensor, check_tensors

logger = logging.getLogger(__name__)

Emit = Callable[[bytes, int, msgspec.Struct, Mapping[str, Tensor] | None], None]
STYLE_DIM = 512


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple((t.bits if isinstance(t, BF16) else t).shape)


def _array(t: Tensor) -> np.ndarray:
    """A tensor whose table (protocol.TENSORS) admits no bfloat16, as the array it then is."""
    if isinstance(t, BF16):
        raise ProtocolError("a bfloat16 tensor where float32 or int64 is required")
    return t


def job_spec(msg: Message, limits: P.Limits, precision: str, window: int = DECODE_WINDOW) -> JobSpec:
    """A SUBMIT or DECODE message -> JobSpec, refusing anything the sampler would choke on, in a sentence.
    `window`: the backend's decode window, for a SUBMIT that leaves it to the worker (decode_window 0)."""
    check_tensors(msg, P.TENSORS[msg.op])
    t = msg.tensors
    match msg.body:
        case P.Decode() as decode:
            lat = _array(t["latent"])
            if lat.shape[0] != 64 or not 0 < lat.shape[1] <= limits.max_frames:
                raise ProtocolError(f"DECODE latent must be [64, T] with 0 < T <= {limits.max_frames}, "
                                    f"got {lat.shape}")
            plan_windows(lat.shape[1], decode.window, decode.overlap)  # ValueError names a bad window
            return JobSpec(latent=lat, decode_window=decode.window, decode_overlap=decode.overlap)
        case P.Submit() as submit:
            return _song_spec(submit, t, limits, precision, window)
        case body:
            raise ProtocolError(f"{type(body).__name__} is not a job (SUBMIT or DECODE)")


def _song_spec(body: P.Submit, t: Mapping[str, Tensor], limits: P.Limits, precision: str, window: int) -> JobSpec:
    text = _array(t["text"])
    n = text.shape[0]
    if not 0 < n <= limits.max_frames:
        raise ProtocolError(f"text holds {n} frames; a song has 1 to {limits.max_frames}")
    for name in ("style", "negative_style"):
        if _shape(t[name]) != (STYLE_DIM,):
            raise ProtocolError(f"{name} must be [{STYLE_DIM}], got {list(_shape(t[name]))}")
    if "cond" in t and (_shape(t["cond"])[1] != 64 or _shape(t["cond"])[0] > limits.max_frames):
        raise ProtocolError(f"cond must be [frames, 64] with frames <= {limits.max_frames}, got {list(_shape(t['cond']))}")
    # The musician's ranges (device_worker.controls), checked again here: a client other than the engine
    # may send anything. Limits may lower the step bound, never raise it past the table's.
    song = body.song
    if not controls.STEPS.lo <= song.steps <= min(limits.max_steps, controls.STEPS.hi):
        raise ProtocolError(f"steps must be {int(controls.STEPS.lo)}..{min(limits.max_steps, int(controls.STEPS.hi))}, "
                            f"got {song.steps}")
    for control, value in ((controls.CFG, song.cfg), (controls.SEED, song.seed)):
        problem = control.problem(value)
        if problem:
            raise ProtocolError(f"{control.name} {problem}")
    for seg in song.edit_segments or []:
        if len(seg) != 2 or not 0 <= seg[0] < seg[1]:
            raise ProtocolError(f"edit segment {seg!r} is not [start, end) in frames with start < end")
    if body.precision and body.precision != precision:
        raise ProtocolError(f"the job asks for {body.precision} but this worker runs {precision}; "
                            "start another worker with --precision or leave precision empty")
    decode_window = body.decode_window or window
    plan_windows(n, decode_window, body.decode_overlap)
    return JobSpec(
        text=text, style=t["style"], negative_style=t["negative_style"], cond=t.get("cond"),
        song=song, style_match=body.style_match, decode_window=decode_window, decode_overlap=body.decode_overlap,
    )


def check_call(msg: Message, limits: P.Limits) -> None:
    """A FORWARD, ENCODE or STYLE call is checked on the IO thread before it is queued: tensor names,
    dtypes and ranks, and for FORWARD consistent shapes and a bounded batch and batch x frames work."""
    check_tensors(msg, P.TENSORS.get(msg.op, {}))
    if msg.op is not P.Op.FORWARD:
        return
    t = msg.tensors
    x = _shape(t["x"])
    b, n, mel = x
    if mel != 64 or b < 1 or n < 1:
        raise ProtocolError(f"FORWARD x must be [B, N, 64] with B, N >= 1, got {list(x)}")
    if b > limits.max_forward_batch:
        raise ProtocolError(f"FORWARD batch {b} is over the limit of {limits.max_forward_batch}; "
                            "send fewer items per call")
    if n > limits.max_frames:
        raise ProtocolError(f"FORWARD has {n} frames; a song has at most {limits.max_frames}")
    if b * n > limits.max_forward_work:
        raise ProtocolError(f"FORWARD batch {b} x {n} frames = {b * n} is over the limit of "
                            f"{limits.max_forward_work} (batch x frames); send fewer items per call")
    want = {"cond": (b, n, 64), "text": (b, n), "style_prompt": (b, STYLE_DIM)}
    for name, shape in want.items():
        if _shape(t[name]) != shape:
            raise ProtocolError(f"FORWARD {name} must be {list(shape)} to match x {list(x)}, "
                                f"got {list(_shape(t[name]))}")
    for name in ("time", "start_time", "duration"):
        if name in t and _shape(t[name]) not in ((), (1,), (b,)):
            raise ProtocolError(f"FORWARD {name} must be [], [1] or [{b}], got {list(_shape(t[name]))}")


class WorkerCore:
    """Inner loop: units from the scheduler run on the backend; events go to `emit`."""

    def __init__(self, backend: Backend, scheduler: Scheduler, emit: Emit, limits: P.Limits) -> None:
        self.backend = backend
        self.scheduler = scheduler
        self.emit = emit
        self.limits = limits
        self.busy_since = 0.0  # monotonic start of the unit in flight; 0 when idle (read by the IO thread)

    # ---- IO thread -----------------------------------------------------------------------------------
    def admit(self, peer: bytes, msg: Message) -> P.Accepted:
        """Validate a SUBMIT/DECODE and hand it to the scheduler; raises (the IO thread replies ERROR)."""
        spec = job_spec(msg, self.limits, self.backend.precision, self.backend.decode_window_frames)
        label = getattr(msg.body, "label", "") or msg.op.name.lower()
        job = WorkerJob(peer, msg.rid, spec, label=label)
        if spec.style_match:
            job.heard = StyleWindowTap(spec.frames * HOP)
        queued = self.scheduler.add_job(job)
        windows = len(plan_windows(spec.frames, spec.decode_window, spec.decode_overlap))
        steps = 0 if spec.latent is not None else spec.song.steps
        logger.info("[job] admit rid=%d label=%s frames=%d steps=%d windows=%d queued=%d",
                    msg.rid, label, spec.frames, steps, windows, queued)
        return P.Accepted(frames=spec.frames, steps=steps, windows=windows, queued=queued)

    # ---- compute thread ------------------------------------------------------------------------------
    def run_once(self, timeout: float = 0.2) -> bool:
        """Run the next unit (or reap a cancelled job); False when there was nothing to do."""
        item = self.scheduler.next(timeout)
        if item is None:
            return False
        kind, obj = item
        self.busy_since = time.monotonic()
        try:
            if kind == "reap":
                self._reap(obj)
            elif kind == "call":
                self._run_call(obj)
            else:
                self._run_unit(obj)
        finally:
            self.busy_since = 0.0
        return True

    def abort_all(self, reason: str) -> None:
        """Shutdown: every job still held ends with an ERROR naming the reason."""
        for job in self.scheduler.drain():
            self._free(job)
            self.emit(job.peer, job.rid, P.Error(f"WorkerShutdown: {reason}"), None)

    def _free(self, job: WorkerJob) -> None:
        if job.handle is not None:
            self.backend.free(job.handle)
            job.handle = None

    def _reap(self, job: WorkerJob) -> None:
        h = job.handle
        stage = "queued" if h is None else ("steps" if not h.steps_finished else "decode")
        self._free(job)
        self.scheduler.remove(job)
        logger.info("[job] cancelled rid=%d stage=%s", job.rid, stage)
        self.emit(job.peer, job.rid, P.JobCancelled(stage), None)

    def _run_call(self, call: Call) -> None:
        msg: Message = call.msg
        try:
            match msg.body:
                case P.Forward() as f:
                    t0 = time.perf_counter()
                    v = self.backend.forward(msg.tensors, f.drop_audio_cond, f.drop_text, f.drop_prompt)
                    self.emit(call.peer, call.rid, P.Velocity(time.perf_counter() - t0), {"v": v})
                case P.Encode() as e:
                    seed = e.seed if e.seed is not None else secrets.randbits(63)
                    latent = self.backend.encode(_array(msg.tensors["audio"]), seed)
                    self.emit(call.peer, call.rid, P.Encoded(seed), {"latent": latent})
                case P.Style() as s:
                    audio = msg.tensors.get("audio")
                    emb = self.backend.style(s.texts, None if s.texts is not None or audio is None else _array(audio))
                    self.emit(call.peer, call.rid, P.StyleEmb(), {"embedding": emb})
                case P.Transcribe() as tr:
                    t0 = time.perf_counter()
                    model, words = self.backend.transcribe(_array(msg.tensors["audio"]), tr.windows or None,
                                                           tr.language or None)
                    heard = [P.HeardWord(w.text, w.start, w.end) for w in words]
                    self.emit(call.peer, call.rid, P.Transcript(model, heard, time.perf_counter() - t0), None)
                case _:
                    raise ProtocolError(f"op {msg.op.name} is not a call")
        except Exception as exc:  # noqa: BLE001 - a failed call ends that call only
            logger.warning("[call] failed rid=%d op=%s error=%s", call.rid, msg.op.name, P.exc_text(exc))
            self.emit(call.peer, call.rid, P.Error(P.exc_text(exc)), None)
        finally:
            self.backend.take_peak_bytes()  # a call's peak is not the next song unit's

    def _run_unit(self, job: WorkerJob) -> None:
        try:
            self._unit(job)
        except Exception as exc:  # noqa: BLE001 - a failed unit ends that job only
            logger.exception("[job] failed rid=%d", job.rid)
            self._free(job)
            self.scheduler.remove(job)
            self.emit(job.peer, job.rid, P.Error(P.exc_text(exc)), None)
        else:
            self.scheduler.unit_done(job)

    def _unit(self, job: WorkerJob) -> None:
        tm = job.timings
        t0 = time.perf_counter()
        h = job.handle
        if h is None:
            tm["queue"] = time.monotonic() - job.arrived
            job.handle = self.backend.prepare(job.spec)
            self.backend.synchronize()
            tm["prepare"] = time.perf_counter() - t0
            # Every unit reads (and restarts) the peak window, so each window holds one unit: this job's.
            job.peak_bytes = max(job.peak_bytes, self.backend.take_peak_bytes())
            return
        if not h.steps_finished:
            self.backend.step([h])
            self.backend.synchronize()
            dt = time.perf_counter() - t0
            job.peak_bytes = max(job.peak_bytes, self.backend.take_peak_bytes())
            tm["steps"] = tm.get("steps", 0.0) + dt
            self.emit(job.peer, job.rid, P.StepDone(h.steps_done, h.steps_total, dt), None)
            if h.steps_finished:
                t1 = time.perf_counter()
                latent = self.backend.latent(h)
                tm["latent"] = time.perf_counter() - t1
                self.emit(job.peer, job.rid, P.Latent(job.spec.frames), {"latent": latent})
            return
        j = h.windows_done
        audio = self.backend.decode_window(h)
        self.backend.synchronize()
        dt = time.perf_counter() - t0
        job.peak_bytes = max(job.peak_bytes, self.backend.take_peak_bytes())
        tm["decode"] = tm.get("decode", 0.0) + dt
        start = plan_windows(job.spec.frames, job.spec.decode_window, job.spec.decode_overlap)[j].keep_start * HOP
        self.emit(job.peer, job.rid, P.WindowDone(j + 1, h.windows_total, dt, start), {"audio": audio})
        if job.heard is not None:
            job.heard.add(start, audio)
        if h.windows_done >= h.windows_total:
            done = P.Done({}, {})
            tensors = self._style_of(job, done) if job.heard is not None else None
            tm["total"] = time.monotonic() - job.arrived
            self._free(job)
            self.scheduler.remove(job, finished=True)
            logger.info("[job] done rid=%d label=%s total_s=%.3f steps_s=%.3f decode_s=%.3f", job.rid,
                        job.label, tm["total"], tm.get("steps", 0.0), tm.get("decode", 0.0))
            done.timings = dict(tm)
            done.memory = {"device_peak_mb": round(job.peak_bytes / 2**20, 1)} if job.peak_bytes else {}
            self.emit(job.peer, job.rid, done, tensors)

    def _style_of(self, job: WorkerJob, done: P.Done) -> dict[str, Any] | None:
        """The style model's embedding of the take's style window (`audio.style_window`); a failure costs
        the figure, never the take (`done.style_error` says why)."""
        t0 = time.perf_counter()
        try:
            clip, start_s, length_s = job.heard.clip()
            emb = self.backend.style(None, clip[None])
        except Exception as exc:  # noqa: BLE001 - a figure, not the song
            done.style_error = P.exc_text(exc)
            return None
        finally:
            job.heard.release()
            job.timings["style_match"] = time.perf_counter() - t0
        done.style_window = [start_s, length_s]
        return {"style_embedding": np.asarray(emb, np.float32).reshape(-1)}
