"""The backend interface: what the worker needs from a card, small enough for a ttnn backend to implement.

Five calls make a song (`load`, `prepare`, `step`, `decode_window`, `free`, plus `latent` to read the
result of the steps); the rest are optional services a backend may refuse with `NotSupported`.
Arrays cross this boundary as numpy (bfloat16 as `wire.BF16` bits), so a backend that runs under another
torch build (ttnn pins its own) shares nothing with the host but numpy.

`SamplerBackend` is that interface for a backend with a DiT backbone and a windowed decoder: its songs run
the one sampler (`device_worker.model.sampling`) on `self.backbone`, so a backend adds only its network.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from device_worker.protocol import SongParams
from device_worker.shapes import DECODE_WINDOW, plan_windows
from device_worker.wire import Tensor, to_numpy, to_torch  # noqa: F401 - the backends import the two here

Progress = Callable[[str, float], None]  # (stage, fraction 0..1)


class NotSupported(RuntimeError):
    """This backend does not offer the operation (the message names the backend and what is missing)."""


@dataclass
class JobSpec:
    """One song as the sampler takes it. Shapes: text [N] int64, style/negative_style [512], cond [N, 64].
    A decode-only job (RemoteVae) has `latent` [64, T] instead and no text."""

    text: np.ndarray | None = None
    style: Tensor | None = None
    negative_style: Tensor | None = None
    cond: Tensor | None = None
    song: SongParams = field(default_factory=SongParams)
    style_match: bool = False  # embed the finished take's style window (see protocol.Submit)
    decode_window: int = 128
    decode_overlap: int = 32
    latent: np.ndarray | None = None

    @property
    def frames(self) -> int:
        if self.latent is not None:
            return int(self.latent.shape[-1])
        assert self.text is not None
        return int(self.text.shape[0])


@dataclass
class JobHandle:
    """A prepared job as the backend holds it. `state` is the backend's own (tensors on the device)."""

    spec: JobSpec
    state: Any
    steps_total: int  # guided Euler steps (one STEP event each)
    windows_total: int  # VAE windows (one WINDOW event each)
    steps_done: int = 0
    windows_done: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def steps_finished(self) -> bool:
        return self.steps_done >= self.steps_total


class Backend(abc.ABC):
    """A card (or the CPU) with the DiffRhythm DiT and Oobleck VAE resident."""

    name: str = "base"

    def __init__(self, device: str, precision: str = "float32") -> None:
        self.device = device
        self.precision = precision
        self._live: set[int] = set()  # ids of prepared handles not yet freed (a leak shows in `stats`)

    def _track(self, handle: JobHandle) -> JobHandle:
        """Count a freshly prepared job as live until `free`."""
        self._live.add(id(handle))
        return handle

    # ---- the core five ------------------------------------------------------------------------------
    @abc.abstractmethod
    def load(self, dit: str, vae: str, progress: Progress) -> dict[str, str]:
        """Put the weights on the device (and warm what needs warming); return model ids by role."""

    @abc.abstractmethod
    def prepare(self, spec: JobSpec) -> JobHandle:
        """Upload one song's inputs and compute its timestep-invariant parts once."""

    @abc.abstractmethod
    def step(self, jobs: Sequence[JobHandle]) -> None:
        """One guided Euler step (conditional + unconditional branch) for each job.

        A backend may batch several jobs into one call only where each job's bytes stay the same as when
        it runs alone (the worker's scheduler relies on it: the policy must never change a song)."""

    @abc.abstractmethod
    def latent(self, job: JobHandle) -> Tensor:
        """The finished latent [N, 64] (reference pasted outside the edit segments); call after the steps."""

    @abc.abstractmethod
    def decode_window(self, job: JobHandle) -> np.ndarray:
        """Decode the job's next VAE window; returns the kept audio block, float32 [2, n]."""

    def free(self, job: JobHandle) -> None:
        """Drop everything the job holds on the device. Safe to call twice.

        This default closes the job's VAE window generator (`extra["gen"]`) and drops its state; backends
        that hold more on the device release that first and then call it."""
        gen = job.extra.pop("gen", None)
        if gen is not None:
            gen.close()
        job.extra.clear()
        job.state = None
        self._live.discard(id(job))

    # ---- optional services --------------------------------------------------------------------------
    def encode(self, audio: np.ndarray, seed: int) -> np.ndarray:
        """Stereo 44.1 kHz audio float32 [2, n] -> drawn latent float32 [n // 2048, 64] (edit mode)."""
        raise NotSupported(f"the {self.name} backend cannot encode audio")

    def style(self, texts: Sequence[str] | None, audio: np.ndarray | None) -> np.ndarray:
        """Text prompts or 24 kHz mono audio [B, n] -> style embeddings float32 [B, 512]."""
        raise NotSupported(f"the {self.name} backend has no style model")

    def transcribe(self, audio: np.ndarray, windows: Sequence[Sequence[float]] | None,
                   language: str | None) -> tuple[str, list[Any]]:
        """16 kHz mono audio [n] -> (model id, words with times) by the lyrics model (Whisper)."""
        raise NotSupported(f"the {self.name} backend has no lyrics model")

    def forward(self, tensors: Mapping[str, Tensor], drop_audio_cond: bool, drop_text: bool,
                drop_prompt: bool) -> Tensor:
        """One DiT forward with upstream's arguments (the RemoteDiT path) -> velocity [B, N, 64]."""
        raise NotSupported(f"the {self.name} backend has no single-forward path")

    def device_bytes(self) -> int:
        """Device memory in use (0 where the backend cannot tell)."""
        return 0

    @property
    def decode_window_frames(self) -> int:
        """The VAE window (latent frames) for a job that leaves it to the worker: the host's usual size."""
        return DECODE_WINDOW

    def synchronize(self) -> None:
        """Wait until the device has finished the work queued so far. The worker calls it before it reads
        the clock after a unit, so unit times measure the work, not the kernel launches."""
        return None  # the CPU (and a backend whose calls return after the work) has nothing to wait for

    def take_peak_bytes(self) -> int:
        """Peak device memory since the last call (0 where the backend cannot tell); starts a new window."""
        return 0

    def live_jobs(self) -> int:
        """Prepared jobs not yet freed (the worker reports it so a leak shows in `stats`)."""
        return len(self._live)

    def info(self) -> dict[str, str]:
        """Versions and settings for the READY event."""
        return {}

    def close(self) -> None:
        """Release the device (called once, at exit)."""
        return None  # the torch backend frees with the process; ttnn closes its mesh device here


class SamplerBackend(Backend):
    """A backend whose songs are `sampling.start_song` / `step_song` / `finish_song` on `self.backbone` (a
    `sampling.Backbone`, set by `load`) and whose decoder yields one VAE window per `next()` (`_decode`).
    Jobs are stepped one after another, never batched together: a batch of 4 rows instead of 2 may round
    differently, and the scheduler promises a policy never changes a song."""

    backbone: Any = None

    @abc.abstractmethod
    def _decode(self, latent: Any, window: int, overlap: int) -> Iterator[Any]:
        """torch latent [1, 64, T] -> float32 audio blocks [2, n], one per VAE window."""

    def prepare(self, spec: JobSpec) -> JobHandle:
        from device_worker.model.sampling import start_song

        windows = len(plan_windows(spec.frames, spec.decode_window, spec.decode_overlap))
        if spec.latent is not None:  # decode-only job (RemoteVae): no steps
            handle = JobHandle(spec, None, 0, windows)
            handle.extra["gen"] = self._decode(to_torch(spec.latent)[None], spec.decode_window, spec.decode_overlap)
            return self._track(handle)
        cond = to_torch(spec.cond)
        state = start_song(
            self.backbone, text=to_torch(spec.text)[None], style=to_torch(spec.style)[None],
            negative_style=to_torch(spec.negative_style)[None], duration=spec.frames,
            cond=None if cond is None else cond[None], params=spec.song,
        )
        return self._track(JobHandle(spec, state, state.total, windows))

    def step(self, jobs: Sequence[JobHandle]) -> None:
        from device_worker.model.sampling import step_song

        for job in jobs:
            step_song(self.backbone, job.state)
            job.steps_done = job.state.k

    def latent(self, job: JobHandle) -> Tensor:
        from device_worker.model.sampling import finish_song

        lat = finish_song(self.backbone, job.state)  # [1, N, 64] float32; the song's DiT inputs are released
        job.state = None
        spec = job.spec
        # The same call as in-process decoding: a channels-first view of the latent.
        job.extra["gen"] = self._decode(lat.transpose(1, 2), spec.decode_window, spec.decode_overlap)
        return to_numpy(lat[0])

    def decode_window(self, job: JobHandle) -> np.ndarray:
        try:
            block = next(job.extra["gen"])  # [2, n]
        except StopIteration:
            raise RuntimeError(f"VAE decode ended after {job.windows_done} of {job.windows_total} windows") from None
        job.windows_done += 1
        return to_numpy(block.float())

    def free(self, job: JobHandle) -> None:
        if job.state is not None:  # dropped mid-song: the backbone's device inputs first
            from device_worker.model.sampling import release_song

            release_song(self.backbone, job.state)
        super().free(job)
