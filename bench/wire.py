"""Round-trip time of worker-protocol messages over ipc:// and tcp://127.0.0.1 (median of many).

A DEALER client sends one tensor in a typed message; an echo server in a separate process (ROUTER)
decodes it through `device_worker.wire` (all checks, zero-copy view) and sends it back re-encoded; the
client decodes the echo. Payloads: a [6144, 64] float32 latent (1.5 MiB, a full-length song) and a 5 s
stereo float32 audio window [2, 220500] (1.7 MiB). Prints one JSON line per case on stdout.

    .venv/bin/python bench/wire.py [--n 300] [--secret]
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import zmq

from device_worker import protocol as P
from device_worker import wire

KEY = b"bench-secret-0123456789abcdef"


def serve(endpoint: str, signed: bool) -> None:
    key = KEY if signed else None
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.bind(endpoint)
    while True:
        frames = sock.recv_multipart(copy=False)
        msg = wire.decode(frames[1:], key=key)
        if msg.op is P.Op.SHUTDOWN:
            break
        sock.send_multipart([frames[0], *wire.encode(P.Latent(0), msg.rid, msg.tensors, key=key)], copy=False)
    sock.close(0)
    ctx.term()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_case(endpoint: str, name: str, arr: np.ndarray, n: int, signed: bool) -> dict:
    key = KEY if signed else None
    server = subprocess.Popen([sys.executable, __file__, "--serve", endpoint] + (["--secret"] if signed else []))
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    try:
        times = []
        for i in range(n + 10):  # 10 warm-up round trips (connection set-up, page faults)
            t0 = time.perf_counter()
            sock.send_multipart(wire.encode(P.Latent(arr.shape[0]), i, {"x": arr}, key=key), copy=False)
            if not sock.poll(30_000):
                raise TimeoutError("echo server did not answer within 30 s")
            back = wire.decode(sock.recv_multipart(copy=False), key=key).tensors["x"]
            dt = time.perf_counter() - t0
            if i >= 10:
                times.append(dt)
        assert np.array_equal(back, arr)
        sock.send_multipart(wire.encode(P.Shutdown(), 0, key=key))
        server.wait(10)
    finally:
        if server.poll() is None:
            server.kill()
        sock.close(0)
        ctx.term()
    times.sort()
    mib = arr.nbytes / 2**20
    med = statistics.median(times)
    return {"case": name, "transport": endpoint.split(":")[0], "signed": signed, "mib": round(mib, 3), "n": n,
            "median_ms": round(med * 1e3, 3), "p90_ms": round(times[int(0.9 * len(times))] * 1e3, 3),
            "gib_per_s_both_ways": round(2 * mib / 1024 / med, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--secret", action="store_true", help="HMAC-sign every message (as a remote worker does)")
    ap.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.secret)
        return
    rng = np.random.default_rng(0)
    payloads = {"latent_6144x64_f32": rng.standard_normal((6144, 64), dtype=np.float32),
                "audio_5s_stereo_f32": rng.standard_normal((2, 5 * 44100), dtype=np.float32)}
    tmp = tempfile.mkdtemp(prefix="drs-bench-")
    for name, arr in payloads.items():
        for endpoint in (f"ipc://{tmp}/echo.sock", f"tcp://127.0.0.1:{_port()}"):
            for signed in sorted({False, args.secret}):
                print(json.dumps(run_case(endpoint, name, arr, args.n, signed)), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)  # libzmq leaves the ipc socket file behind


if __name__ == "__main__":
    main()
