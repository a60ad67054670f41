"""Engine settings: where takes go, which workers run which model files, queue limits, policy."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from device_worker.scheduler import POLICIES


@dataclass(frozen=True)
class WorkerSpec:
    """One device worker: a local subprocess on `device`, or a running remote worker at `address`."""

    device: str = "cpu"  # cpu, cuda:N, or a ttnn device id
    backend: str = "torch"
    address: str | None = None  # tcp://host:port of a worker started elsewhere (never restarted by us)
    secret_file: str | None = None  # shared secret (HMAC) for a tcp worker
    python: str | None = None  # interpreter or command prefix for a local worker (another venv, a container)
    threads: int | None = None  # torch intra-op threads in the worker
    precision: str = "auto"  # device_worker.config.resolve_precision: bfloat16 on CUDA and AMX CPUs, else float32
    compile: str = "auto"  # device_worker.model.compiled.should_compile: the DiT step compiled at load (auto: CUDA)
    in_process: bool = False  # served by a thread of the engine's process (engine.worker_process.WorkerThread)

    @property
    def name(self) -> str:
        return self.address or f"{self.backend}:{self.device}"


@dataclass(frozen=True)
class Models:
    """The model files. 95 s songs need `base`, 96-285 s songs `full`; a worker holds one DiT at a time."""

    vae: str
    base: str | None = None  # DiT checkpoint (folder with cfm_model.pt + config.json) for 95 s songs
    full: str | None = None  # DiT for 96-285 s songs
    style: str | None = None  # MuQ-MuLan folder for the worker's style op; None: embeddings only
    negative_style: str | None = None  # vocal.npy
    vocab: str | None = None  # g2p vocab.json (None: the lyric helper's default lookup)
    lyrics: str | None = None  # Whisper folder (hub layout) for the lyrics check; None: no check
    test: bool = False  # tiny random weights: noise, not music (say so everywhere)

    def dit(self, variant: str) -> str:
        path = self.base if variant == "base" else self.full
        if path is None:
            other = "96-285 s (full model)" if variant == "base" else "95 s (base model)"
            raise ValueError(f"no {variant} DiT is configured; this engine makes {other} songs only")
        return path

    @classmethod
    def release(cls, models_dir: str | Path | None = None, *, style: bool = True) -> Models:
        """The released files, resolved by `engine.modelfiles` (a missing file names its fetch command)."""
        from engine import modelfiles as mf

        def folder(name: str) -> str:
            return str(mf.resolve_file(name, "cfm_model.pt", models_dir=models_dir).parent)

        mulan = None
        if style:
            mulan = str(mf.resolve_file("mulan", "pytorch_model.bin", models_dir=models_dir).parent)
        return cls(vae=str(mf.resolve_file("vae", "vae_model.pt", models_dir=models_dir)),
                   base=folder("diffrhythm-1.2"), full=folder("diffrhythm-1.2-full"), style=mulan,
                   negative_style=str(mf.resolve_file("negative-style", "vocal.npy", models_dir=models_dir)),
                   vocab=str(mf.resolve_file("vocab", "vocab.json", models_dir=models_dir)))

    def ids(self) -> dict[str, str]:
        """Short, stable identities for records: file name + size + a hash of the first MiB."""
        out = {"kind": "TEST MODEL (tiny random weights: noise, not music)" if self.test else "release"}
        for role in ("base", "full", "vae", "style", "negative_style", "vocab", "lyrics"):
            path = getattr(self, role)
            if path:
                out[role] = file_id(path)
        return out


def file_id(path: str | Path) -> str:
    p = Path(path)
    if p.is_dir():
        target = p / "cfm_model.pt" if (p / "cfm_model.pt").exists() else next(iter(sorted(p.iterdir())), p)
    else:
        target = p
    try:
        size = target.stat().st_size
        with open(target, "rb") as f:
            digest = hashlib.sha256(f.read(1 << 20)).hexdigest()[:12]
    except OSError:
        return f"{p.name} (unreadable)"
    return f"{p.name}:{size}:{digest}"


@dataclass
class EngineConfig:
    data_dir: Path
    models: Models
    workers: list[WorkerSpec] = field(default_factory=lambda: [WorkerSpec()])
    policy: Literal["fifo", "fair", "share"] = "fair"  # studio: fair; batch renderer: fifo
    queue_limit: int = 64  # takes waiting beyond admission; more is BusyError at once
    max_ready: int | None = None  # takes past the queue; default 2 x workers + 2 (with Ray: 2 x 8 + 2)
    worker_max_jobs: int = 8  # song jobs a worker holds at once
    start_variant: Literal["base", "full"] = "base"  # which DiT workers load first
    crop_frames: int | None = None  # TEST MODE only: songs cropped to this many frames
    lyrics_check: bool = True  # hear each sung take with `models.lyrics` (engine.hearing); off: no check
    heartbeat_s: float = 1.0
    dead_after_s: float = 6.0  # no heartbeat answer for this long: the worker is dead or hung
    restart_backoff_s: tuple[float, ...] = (0.5, 2.0, 5.0, 15.0, 60.0)
    ready_timeout_s: float = 300.0
    input_threads: int = 1
    output_threads: int = 1
    lock_dir: str | None = None  # the workers' one-per-device lock folder (tests use their own)
    worker_env: dict[str, str] = field(default_factory=dict)
    # Ray (engine.ray_workers): "auto" or the cluster's address. The workers are then one per accelerator
    # of the cluster, made like `workers[0]` (its backend, device kind, precision, threads).
    ray: str | None = None
    ray_resource: str | None = None  # the resource that is one card [default: GPU, p100a, or a CPU per node]
    ray_poll_s: float = 2.0  # how often the pool looks for nodes that joined or left

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; choose one of {POLICIES}")
        if not self.workers:
            raise ValueError("the engine needs at least one worker")
        if self.crop_frames is not None and not self.models.test:
            raise ValueError("crop_frames is a test-model setting; real songs are never cropped")
        if self.ray and (len(self.workers) != 1 or self.workers[0].address is not None):
            raise ValueError("with ray, give one worker spec (the kind of worker to start on each accelerator), "
                             "no tcp addresses: Ray places the workers")

    @property
    def ready_limit(self) -> int:
        if self.max_ready is not None:
            return self.max_ready
        return 2 * (8 if self.ray else len(self.workers)) + 2  # a cluster's size is not known up front

    @property
    def takes_dir(self) -> Path:
        return self.data_dir / "takes"

    @property
    def cache_dir(self) -> Path:
        return Path(os.environ.get("STUDIO_CACHE_DIR", self.data_dir / "cache"))
