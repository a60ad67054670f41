"""Faults against a real worker: bad peers, bad messages, a killed worker, SIGTERM, the device lock.

What these tests pin: an unauthenticated tcp peer, a malformed message, an oversized declared tensor and
a wrong protocol version are each answered with an ERROR while another job finishes with the right bytes;
a SIGKILLed worker is reported within a few seconds both by the client that started it (process exit) and
by one that only connected (heartbeats); SIGTERM ends held jobs with "WorkerShutdown: ..." and exits 0;
a stale ipc file is cleaned; a second worker on a locked device refuses to start; close() leaves no process.
"""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import time

import numpy as np
import pytest
import zmq
from _worker_util import EXACT, RawPeer, Song, reference, signed_tcp_worker

from device_worker import protocol as P
from device_worker import wire
from engine.worker_client import Worker, WorkerDeadError, collect

SONG = Song(frames=64, steps=6)
LONG = Song(frames=64, steps=32, seed=5)
SECRET = b"9f2c1e7a5b3d4c6e8f0a1b2c3d4e5f60"


def _submit(w: Worker, song: Song):
    text, style, neg = song.inputs()
    return w.submit(text, style, neg, **song.options())


@pytest.fixture(scope="module")
def tcp_worker(paths, tmp_path_factory):
    with signed_tcp_worker(paths, tmp_path_factory.mktemp("tcp"), SECRET) as w:
        yield w


def _signed(frames: list[bytes]) -> list[bytes]:
    return [*frames, wire._mac(SECRET, frames)]


def test_unauthenticated_peers_are_refused_while_a_job_continues(tcp_worker, paths):
    job = _submit(tcp_worker, SONG)
    for key in (None, b"not-the-secret-at-all-0123"):
        peer = RawPeer(tcp_worker.endpoint, key=key)
        try:
            peer.send(P.Submit(), 11, {"text": np.zeros(8, np.int64)})
            reply = wire.decode(peer.recv_raw(20), key=SECRET)  # the worker signs its refusal
            assert reply.op is P.Op.ERROR and reply.body.error.startswith("AuthError: "), reply.body
        finally:
            peer.close()
    res = collect(job, timeout_s=60)
    assert np.array_equal(res.audio, reference(SONG, *paths)[1])


def test_bad_messages_are_refused_while_a_job_continues(tcp_worker, paths):
    job = _submit(tcp_worker, SONG)
    peer = RawPeer(tcp_worker.endpoint, key=SECRET)
    enc = wire._ENCODER.encode
    huge = P.Envelope(P.PROTOCOL_VERSION, 13, [P.TensorMeta("text", "int64", [10**9])])
    cases = {
        "ProtocolError: malformed envelope": _signed([P.Op.SUBMIT.value, b"\x93junk", b"\x90"]),
        "ProtocolError: unknown op": _signed([b"\xee", enc(P.Envelope(P.PROTOCOL_VERSION, 12)), b"\x90"]),
        "LimitError: tensor 'text'": _signed([P.Op.SUBMIT.value, enc(huge), enc(P.Submit()), b"\0" * 8]),
    }
    try:
        for expect, frames in cases.items():
            peer.send_raw(frames)
            reply = peer.recv(20)
            assert reply.op is P.Op.ERROR and reply.body.error.startswith(expect), f"{expect=} {reply.body=}"
        peer.send(P.Hello("old client"), 14, version=P.PROTOCOL_VERSION + 1)
        reply = peer.recv(20)
        assert reply.rid == 14 and reply.body.error.startswith(f"VersionError: peer speaks protocol {P.PROTOCOL_VERSION + 1}")
        peer.send(P.Submit(), 15, {"text": np.zeros(8, np.float32)})  # well-formed, wrong dtype
        assert peer.recv(20).body.error.startswith("ProtocolError: SUBMIT tensor 'text' is float32")
        text, style, neg = SONG.inputs()
        tensors = {"text": text, "style": style, "negative_style": neg}
        for bad, expect in ((P.SongParams(steps=201), "steps must be 2..200, got 201"),
                            (P.SongParams(steps=1), "steps must be 2..200, got 1"),
                            (P.SongParams(cfg=float("nan")), "cfg must be a number, got nan"),
                            (P.SongParams(cfg=20.5), "cfg must be a number from 0 to 20, got 20.5"),
                            (P.SongParams(seed=2**32), "seed must be a whole number from 0 to 4294967295"),
                            (P.SongParams(seed=[1, 2]), "seed must be a number, got [1, 2]")):
            peer.send(P.Submit(song=bad), 17, tensors)  # the musician's ranges (device_worker.controls), from any client
            error = peer.recv(20).body.error
            assert error.startswith("ProtocolError: ") and expect in error, error
        peer.send(P.Ping(), 16)  # the same peer is still served
        assert peer.recv(20).op is P.Op.PONG
    finally:
        peer.close()
    res = collect(job, timeout_s=60)
    assert np.array_equal(res.latent, reference(SONG, *paths)[0]) and np.array_equal(res.audio, reference(SONG, *paths)[1])


def test_sigkill_mid_job_is_detected_within_seconds(paths, tmp_path):
    with signed_tcp_worker(paths, tmp_path, SECRET) as doomed:  # its own: the test kills it
        _sigkill_mid_job(doomed)


def _sigkill_mid_job(tcp_worker: Worker) -> None:
    watcher = Worker(connect=tcp_worker.endpoint, secret=SECRET, dead_after_s=2.0, heartbeat_s=0.25)
    try:
        watcher.start()
        watcher.wait_ready(30)
        job = _submit(tcp_worker, LONG)
        for ev in job.events(timeout_s=60, event_timeout_s=30):
            if ev.op is P.Op.STEP:
                break
        os.kill(tcp_worker.proc.pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(WorkerDeadError, match="killed by SIGKILL"):
            for _ in job.events(timeout_s=30):
                pass
        assert time.monotonic() - t0 < 3.0, "the process exit is noticed within a heartbeat or two"
        with pytest.raises(WorkerDeadError):
            tcp_worker.stats()
        deadline = t0 + 10
        while time.monotonic() < deadline:  # the watcher has no process handle: heartbeats only
            try:
                watcher.ensure_alive()
            except WorkerDeadError as exc:
                assert "no heartbeat" in str(exc)
                break
            time.sleep(0.05)
        else:
            pytest.fail("a connected client did not notice the dead worker within 10 s")
        assert time.monotonic() - t0 < 2.0 + 2.0
    finally:
        watcher.close()


def test_lock_stale_socket_sigterm_and_close(paths, tmp_path):
    sockdir = tempfile.mkdtemp(prefix="drs-t")
    path = os.path.join(sockdir, "w.sock")
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)  # what a SIGKILLed worker leaves behind: a socket file nobody listens on
    stale.close()
    w = Worker(dit=paths[0], vae=paths[1], bind=f"ipc://{path}", threads=1, lock_dir=str(tmp_path), precision=EXACT)
    other = Worker(dit=paths[0], vae=paths[1], bind=f"ipc://{sockdir}/w2.sock", threads=1, lock_dir=str(tmp_path),
                   precision=EXACT)
    try:
        w.start()
        w.wait_ready(60)
        other.start()  # the CPU is shared: a second studio's (or the test suite's) CPU worker starts too
        other.wait_ready(60)
        assert not list(tmp_path.glob("worker-*.lock")), "CPU workers take no device lock"
        other.close()

        job = _submit(w, LONG)
        for ev in job.events(timeout_s=60, event_timeout_s=30):
            if ev.op is P.Op.STEP:
                break
        os.kill(w.proc.pid, signal.SIGTERM)
        last = list(job.events(timeout_s=30))[-1]
        assert last.op is P.Op.ERROR and last.body.error.startswith("WorkerShutdown: "), last.body
        assert w.proc.wait(15) == 0, "SIGTERM finishes the unit in flight and exits cleanly"
        assert not os.path.exists(path), "the worker removes its ipc socket file"
    finally:
        for x in (w, other):
            x.close()
            if x.proc is not None:
                assert x.proc.poll() is not None
                with pytest.raises(ProcessLookupError):
                    os.kill(x.proc.pid, 0)
        os.rmdir(sockdir) if os.path.isdir(sockdir) and not os.listdir(sockdir) else None


def test_worker_exits_when_its_engine_is_killed(paths, tmp_path):
    """A local worker must not outlive a SIGKILLed engine: it would hold the card and its device lock, and the
    next `studio serve`/`render` would refuse to start ("another worker holds ...")."""
    import subprocess
    import sys

    script = tmp_path / "fake_studio.py"
    script.write_text(
        "import sys, time\n"
        "from engine.worker_client import Worker\n"
        f"w = Worker(dit={paths[0]!r}, vae={paths[1]!r}, threads=1, lock_dir={str(tmp_path)!r})\n"
        "w.start(); w.wait_ready(60)\n"
        "print(w.proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    try:
        worker_pid = int(parent.stdout.readline())
        os.kill(worker_pid, 0)  # alive while the engine is
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(worker_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            os.kill(worker_pid, signal.SIGKILL)
            pytest.fail("the worker outlived its SIGKILLed engine by 10 s")
    finally:
        if parent.poll() is None:
            parent.kill()


@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
def test_a_slow_unit_is_not_a_hang_on_a_cpu_and_stretches_the_bound_on_a_card(device: str) -> None:
    """Release-size CPU steps take minutes: no "hung" for them. On a card a unit past the bound is hung,
    but the bound grows to 10x the slowest unit seen to finish, so a slow healthy model never trips it."""
    w = Worker(connect="tcp://127.0.0.1:1", device=device, secret=SECRET, unit_timeout_s=60.0)
    limits = P.Limits(max_jobs=8)

    def pong(busy: float) -> None:
        w._on_frames([zmq.Frame(bytes(f)) for f in wire.encode(P.Pong(busy_s=busy), 0, key=SECRET)], limits)

    for busy in (10.0, 50.0, 0.0):  # one 50 s unit finishes
        pong(busy)
    pong(400.0)  # within 10 x 50 s
    assert w._dead is None
    pong(0.0)
    pong(3900.0)  # the 400 s unit finished: the bound is now 4000 s
    assert w._dead is None
    pong(4100.0)
    if device == "cpu":
        assert w._dead is None and w.unit_limit_s() is None
    else:
        assert w._dead is not None and "hung" in str(w._dead)
