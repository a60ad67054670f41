"""Helpers for the device-worker tests: song inputs, the in-process reference, raw peers with deadlines.

Bit-for-bit comparisons need the same torch thread count on both sides (the VAE's conv reductions round
differently with 1 and 2 threads, see the reference README), so workers run `--threads 1` and the
in-process reference runs with 1 thread too.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from device_worker import protocol as P
from device_worker import wire

# Workers whose songs are compared bit for bit with the in-process float32 model core say so: `auto` is
# bfloat16 on CPUs with AMX (device_worker.config.resolve_precision), as on many CI machines.
EXACT = "float32"


def free_port() -> int:
    """A loopback port nothing listens on now (the worker and studio tests bind their servers to it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

# Same place as conftest.py's `reference_dir` (tests that use it skip through that fixture when absent).
REFERENCE = Path(os.environ.get("STUDIO_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared")) / "reference" / "diffrhythm"


@dataclass(frozen=True)
class Song:
    """A small song: N frames, a few steps, short decode windows so there are several of them."""

    frames: int = 96
    steps: int = 8
    seed: int = 1
    window: int = 32
    overlap: int = 8
    cfg: float = 4.0

    def inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        text = np.zeros(self.frames, np.int64)
        text[4 : self.frames // 2] = rng.integers(3, 300, self.frames // 2 - 4)
        style = rng.standard_normal(512).astype(np.float32)
        style /= np.linalg.norm(style)
        neg = np.load(REFERENCE / "vocal.npy")[0].astype(np.float32)
        return text, style, neg

    def options(self) -> dict:
        """`Worker.submit`'s keywords for this song."""
        return dict(song=self.params(), decode_window=self.window, decode_overlap=self.overlap)

    def params(self) -> P.SongParams:
        return P.SongParams(steps=self.steps, seed=self.seed, cfg=self.cfg)

    def submit(self) -> P.Submit:
        """The SUBMIT message for this song (for tests that speak the wire themselves)."""
        return P.Submit(song=self.params(), decode_window=self.window, decode_overlap=self.overlap)


@functools.lru_cache(maxsize=1)
def _models(dit: str, vae: str):
    from device_worker.model.load import load_dit
    from device_worker.model.vae import load_vae

    return load_dit(dit), load_vae(vae)


@functools.lru_cache(maxsize=16)
def reference(song: Song, dit: str, vae: str) -> tuple[np.ndarray, np.ndarray]:
    """(latent [N, 64], audio [2, n]) computed in this process with the model core, 1 torch thread."""
    import torch

    from device_worker.model.sampling import sample

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        d, v = _models(dit, vae)
        text, style, neg = song.inputs()
        lat = sample(d, text=torch.from_numpy(text)[None], style=torch.from_numpy(style)[None],
                     negative_style=torch.from_numpy(neg)[None], duration=song.frames,
                     params=song.params())
        blocks = list(v.decode_windows(lat.transpose(1, 2), song.window, song.overlap))
        audio = torch.cat(blocks, dim=2)[0].numpy()
    finally:
        torch.set_num_threads(prev)
    return lat[0].numpy(), audio


class RawPeer:
    """A bare DEALER socket that speaks (or garbles) the protocol; every recv has a deadline."""

    def __init__(self, endpoint: str, key: bytes | None = None) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self.key = key

    def send(self, body, rid: int, tensors=None, *, version: int = P.PROTOCOL_VERSION) -> None:
        self.sock.send_multipart(wire.encode(body, rid, tensors, key=self.key, version=version), copy=False)

    def send_raw(self, frames: list[bytes]) -> None:
        self.sock.send_multipart(frames)

    def recv(self, timeout_s: float = 10.0) -> wire.Message:
        assert self.sock.poll(int(timeout_s * 1000)), f"Should have received a message within {timeout_s} s"
        return wire.decode(self.sock.recv_multipart(copy=False), key=self.key)

    def recv_raw(self, timeout_s: float = 10.0) -> list[bytes]:
        assert self.sock.poll(int(timeout_s * 1000)), f"Should have received a message within {timeout_s} s"
        return self.sock.recv_multipart()

    def close(self) -> None:
        self.sock.close(0)
        self.ctx.term()


def tiny_paths(reference_dir: Path) -> tuple[str, str]:
    """The tiny base DiT and VAE of the reference set."""
    return str(reference_dir / "dit-tiny-base"), str(reference_dir / "vae-tiny" / "vae_model.pt")


@contextmanager
def signed_tcp_worker(paths: tuple[str, str], folder: Path, secret: bytes) -> Iterator[Any]:
    """A real worker process on tcp://127.0.0.1 with an HMAC secret (and its lock folder in `folder`);
    after the block it has exited."""
    from engine.worker_client import Worker

    (folder / "secret").write_bytes(secret)
    w = Worker(dit=paths[0], vae=paths[1], bind=f"tcp://127.0.0.1:{free_port()}", threads=1,
               secret_file=str(folder / "secret"), lock_dir=str(folder), precision=EXACT)
    try:
        w.start()
        w.wait_ready(60)
        yield w
    finally:
        w.close()
        assert w.proc.poll() is not None
