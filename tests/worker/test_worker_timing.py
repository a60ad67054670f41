"""Unit times measure the device's work, not its kernel launches; DONE carries the song's peak memory.

A GPU runs kernels asynchronously: a step "returns" long before it is done. The worker waits for the
device (`Backend.synchronize`) before it reads the clock. Here the torch backend on the CPU stands in
for a GPU whose work finishes only when synchronised (a sleep), and reports device peaks that the worker
must fold into one figure per song: the largest window while that song's units ran.
"""

from __future__ import annotations

import time

import pytest
from _worker_util import Song, tiny_paths

from device_worker import protocol as P
from device_worker import wire
from device_worker.backends.torch_backend import TorchBackend, vae_dtype
from device_worker.core import WorkerCore
from device_worker.scheduler import Scheduler

PENDING_S = 0.05  # "device work" each step and window leaves queued when it returns


class AsyncLikeGpu(TorchBackend):
    def __init__(self) -> None:
        super().__init__("cpu", threads=1)
        self.queued = 0.0
        self.peaks = iter([10, 70, 30] + [20] * 1000)  # MiB: the second unit of the song is its peak

    def step(self, handles):
        super().step(handles)
        self.queued = PENDING_S

    def decode_window(self, handle):
        out = super().decode_window(handle)
        self.queued = PENDING_S
        return out

    def synchronize(self) -> None:
        time.sleep(self.queued)
        self.queued = 0.0

    def take_peak_bytes(self) -> int:
        return next(self.peaks) * 2**20


@pytest.fixture(scope="module")
def backend(reference_dir):
    b = AsyncLikeGpu()
    b.load(*tiny_paths(reference_dir), progress=lambda *_: None)
    return b


def test_unit_times_include_the_queued_device_work_and_done_has_the_songs_peak(backend):
    events: list[tuple[object, dict]] = []
    core = WorkerCore(backend, Scheduler("fifo", 2), lambda peer, rid, body, tensors: events.append((body, tensors)),
                      P.Limits())
    song = Song(frames=64, steps=4)
    text, style, neg = song.inputs()
    frames = wire.encode(song.submit(), 5,
                         {"text": text, "style": style, "negative_style": neg})
    core.admit(b"peer", wire.decode([bytes(memoryview(f)) for f in frames]))
    while not any(isinstance(body, (P.Done, P.Error)) for body, _ in events):
        assert core.run_once(1.0)
    steps = [body for body, _ in events if isinstance(body, P.StepDone)]
    windows = [body for body, _ in events if isinstance(body, P.WindowDone)]
    done = events[-1][0]
    assert isinstance(done, P.Done), done
    assert steps and windows
    assert all(s.seconds >= PENDING_S for s in steps), [s.seconds for s in steps]  # the wait is counted
    assert all(w.seconds >= PENDING_S for w in windows)
    assert done.timings["steps"] >= PENDING_S * len(steps)
    assert done.memory == {"device_peak_mb": 70.0}


def test_the_vae_runs_in_half_on_a_gpu_only_when_the_dit_does():
    import torch

    assert vae_dtype("cuda:0", "bfloat16") is torch.float16
    assert vae_dtype("cuda:0", "float16") is torch.float16
    assert vae_dtype("cuda:0", "float32") is torch.float32  # the exact path stays exact
    assert vae_dtype("cpu", "bfloat16") is torch.float32  # half convolutions are slow on the CPU


def test_the_cpu_reports_no_device_memory():
    b = TorchBackend("cpu", threads=1)
    assert b.take_peak_bytes() == 0 and b.device_bytes() == 0


def test_the_worker_picks_the_decode_window_when_the_job_leaves_it(reference_dir):
    from device_worker.core import job_spec

    song = Song(frames=600, steps=4)
    text, style, neg = song.inputs()
    msg = wire.decode([bytes(memoryview(f)) for f in wire.encode(
        P.Submit(song=P.SongParams(steps=4)), 1, {"text": text, "style": style, "negative_style": neg})])
    assert P.Submit().decode_window == 0  # the engine leaves it to the worker
    assert job_spec(msg, P.Limits(), "float32").decode_window == 128  # the CPU's
    assert TorchBackend("cuda:0").decode_window_frames == 512 and TorchBackend("cpu").decode_window_frames == 128
    assert job_spec(msg, P.Limits(), "float32", window=512).decode_window == 512
