"""Attacks from issue 14 against a real worker process, each of which used to work.

What these tests pin: a frame whose request id is not an integer msgpack can carry back (1e300, 2**70 as a
float, NaN, a string, a nested array, ...), sent before authentication or signed, is answered with an ERROR
and the worker stays up: a song running beside the attack finishes bit for bit, a PING is answered, and
SIGTERM still stops the worker with exit code 0 (a float rid used to raise OverflowError in the error
reply, killing the IO thread: the worker then answered nothing and ignored SIGTERM). Whatever escapes the
handling of one message is answered and the IO thread carries on. FORWARD has a batch and a batch x frames
bound, refused in a sentence before anything runs.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time

import msgspec
import numpy as np
import pytest
from _worker_util import EXACT, RawPeer, Song, reference, signed_tcp_worker

from device_worker import protocol as P
from device_worker import wire
from engine.worker_client import Worker, WorkerError, collect

SECRET = b"1b3d5f7a9c0e2f4a6b8d0c1e3f5a7b9d"
SONG = Song(frames=64, steps=12, seed=9)
V = P.PROTOCOL_VERSION


@pytest.fixture(scope="module")
def worker(paths, tmp_path_factory):
    with signed_tcp_worker(paths, tmp_path_factory.mktemp("attacks"), SECRET) as w:
        yield w


def _env(rid_packed: bytes) -> bytes:
    """An envelope [version, <rid>, []] with the rid already msgpack-encoded (any value at all)."""
    return b"\x93" + msgspec.msgpack.encode(V) + rid_packed + b"\x90"


NASTY_RIDS = {
    "1e300": msgspec.msgpack.encode(1e300),
    "2**70 as a float": msgspec.msgpack.encode(float(2**70)),
    "-1e300": msgspec.msgpack.encode(-1e300),
    "NaN": msgspec.msgpack.encode(float("nan")),
    "inf": msgspec.msgpack.encode(float("inf")),
    "1.5": msgspec.msgpack.encode(1.5),
    "'x'": msgspec.msgpack.encode("x"),
    "True": msgspec.msgpack.encode(True),
    "None": msgspec.msgpack.encode(None),
    "bytes": msgspec.msgpack.encode(b"\x00" * 9),
    "a map": msgspec.msgpack.encode({"rid": 1}),
    "nested": msgspec.msgpack.encode([[[[[1]]]]]),
    "nested 30000 deep": b"\x91" * 30000 + b"\x01",
    "truncated": b"\xcf\x00\x00",  # a uint64 cut short
}


def _attack_frames() -> dict[str, list[bytes]]:
    body = msgspec.msgpack.encode([])
    cases: dict[str, list[bytes]] = {}
    for name, packed in NASTY_RIDS.items():
        frames = [P.Op.PING.value, _env(packed), body]
        cases[f"unsigned, rid {name}"] = frames  # refused by the HMAC check: before authentication
        cases[f"bad mac, rid {name}"] = [*frames, b"\x00" * wire.MAC_BYTES]
        cases[f"signed, rid {name}"] = [*frames, wire._mac(SECRET, frames)]  # refused by the envelope check
    cases["envelope is an int"] = [P.Op.PING.value, msgspec.msgpack.encode(1e300), body]
    cases["envelope is a float map"] = [P.Op.PING.value, msgspec.msgpack.encode({1e300: 1e300}), body]
    cases["one frame"] = [P.Op.PING.value]
    cases["one empty frame"] = [b""]
    return cases


def _expected_error(frames: list[bytes]) -> str:
    try:
        wire.decode(frames, key=SECRET)
    except wire.WireError as exc:
        return P.exc_text(exc)
    raise AssertionError("the attack frames decode")


def test_nasty_request_ids_get_an_error_and_the_worker_stays_up(worker, paths):
    text, style, neg = SONG.inputs()
    job = worker.submit(text, style, neg, **SONG.options())
    peer = RawPeer(worker.endpoint, key=SECRET)  # reads (and checks) the worker's signed replies
    try:
        for name, frames in _attack_frames().items():
            peer.send_raw(frames)
            reply = peer.recv(20)
            assert reply.op is P.Op.ERROR, f"{name}: {reply.op}"
            assert reply.rid == 0, f"{name}: the error goes to rid 0, got {reply.rid}"
            assert reply.body.error == _expected_error(frames), f"{name}: {reply.body.error}"
        # -1 is an integer an envelope can carry: the refusal goes back to it.
        frames = [P.Op.PING.value, _env(msgspec.msgpack.encode(-1)), msgspec.msgpack.encode([])]
        peer.send_raw(frames)
        reply = peer.recv(20)
        assert reply.op is P.Op.ERROR and reply.rid == -1 and reply.body.error.startswith("AuthError: ")
        peer.send(P.Ping(), 77)  # the same peer is still heard
        reply = peer.recv(20)
        assert reply.op is P.Op.PONG and reply.rid == 77
    finally:
        peer.close()
    res = collect(job, timeout_s=120)
    lat, audio = reference(SONG, *paths)
    assert np.array_equal(res.latent, lat) and np.array_equal(res.audio, audio)
    assert worker.stats().jobs == 0


def test_forward_batch_is_bounded(worker):
    limits = worker.welcome.limits
    assert (limits.max_forward_batch, limits.max_forward_work) == (8, 2 * 6144)

    def call(b: int, n: int, **changes) -> np.ndarray:
        rng = np.random.default_rng(b * 1000 + n)
        tensors = {"x": rng.standard_normal((b, n, 64)).astype(np.float32),
                   "cond": np.zeros((b, n, 64), np.float32), "text": np.zeros((b, n), np.int64),
                   "time": np.array(0.5, np.float32), "style_prompt": np.zeros((b, 512), np.float32)}
        tensors.update(changes)
        return worker.forward(tensors)

    t0 = time.monotonic()
    with pytest.raises(WorkerError, match=r"FORWARD batch 16 is over the limit of 8"):
        call(16, 2048)  # the attack: 59 s of worker time on a release-size model
    with pytest.raises(WorkerError, match=r"FORWARD batch 9 is over the limit of 8"):
        call(9, 16)
    with pytest.raises(WorkerError, match=r"FORWARD batch 8 x 2048 frames = 16384 is over the limit of 12288"):
        call(8, 2048)
    with pytest.raises(WorkerError, match=r"FORWARD batch 4 x 4096 frames = 16384 is over the limit"):
        call(4, 4096)
    with pytest.raises(WorkerError, match=r"FORWARD cond must be \[2, 32, 64\] to match x"):
        call(2, 32, cond=np.zeros((2, 31, 64), np.float32))
    with pytest.raises(WorkerError, match=r"FORWARD time must be \[\], \[1\] or \[2\]"):
        call(2, 32, time=np.zeros(3, np.float32))
    assert time.monotonic() - t0 < 10, "refusals are answered at once, before anything runs"
    assert call(2, 64).shape == (2, 64, 64)  # one guided step of a short song is fine
    assert call(8, 16, time=np.full(8, 0.25, np.float32)).shape == (8, 16, 64)  # the largest batch too


def test_sigterm_still_stops_a_worker_that_was_attacked(paths, tmp_path):
    """Runs on its own worker: SIGTERM after the attack frames ends the process with exit code 0."""
    w = Worker(dit=paths[0], vae=paths[1], threads=1, lock_dir=str(tmp_path), precision=EXACT)
    try:
        w.start()
        w.wait_ready(60)
        peer = RawPeer(w.endpoint)
        try:
            for name, packed in NASTY_RIDS.items():
                peer.send_raw([P.Op.PING.value, _env(packed), msgspec.msgpack.encode([])])
                reply = peer.recv(20)
                assert reply.op is P.Op.ERROR and reply.rid == 0, name
                assert reply.body.error.startswith("ProtocolError: malformed envelope for PING"), reply.body
            peer.send(P.Ping(), 5)
            assert peer.recv(20).op is P.Op.PONG
        finally:
            peer.close()
        os.kill(w.proc.pid, signal.SIGTERM)
        assert w.proc.wait(15) == 0
    finally:
        w.close()


def test_the_io_thread_survives_any_exception_in_one_message(monkeypatch):
    """In process: whatever escapes the handling of one message is logged and answered with an ERROR,
    and the next message is served (the IO thread used to die on it, leaving a deaf worker)."""
    from device_worker.worker import WorkerConfig, WorkerServer

    sockdir = tempfile.mkdtemp(prefix="drs-io")
    srv = WorkerServer(WorkerConfig(bind=f"ipc://{sockdir}/w.sock", dit="-", vae="-", threads=1))
    real = srv._on_message
    calls = []

    def flaky(router, peer, frames):
        calls.append(1)
        if len(calls) <= 2:
            raise OverflowError("can't serialize ints < -2**63 or > 2**64 - 1")
        return real(router, peer, frames)

    monkeypatch.setattr(srv, "_on_message", flaky)
    io = threading.Thread(target=srv._io_main, daemon=True)
    io.start()
    assert srv._bound.wait(10) and srv._bind_error is None
    peer = RawPeer(srv.config.bind)
    try:
        for _ in range(2):
            peer.send(P.Ping(), 3)
            reply = peer.recv(10)
            assert reply.op is P.Op.ERROR and reply.body.error.startswith("OverflowError: can't serialize")
        peer.send(P.Ping(), 4)
        reply = peer.recv(10)
        assert reply.op is P.Op.PONG and reply.rid == 4
        assert io.is_alive()
    finally:
        peer.close()
        srv._io_stop.set()
        io.join(10)
        srv.ctx.term()
        srv.backend.close()
    assert not io.is_alive()
