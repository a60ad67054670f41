"""A real worker process over ipc:// and tcp://127.0.0.1 with the tiny reference model.

What these tests pin: a song through the worker equals the in-process model core bit for bit (latent and
audio, window by window; `RemoteDiT` and `RemoteVae` are pinned in test_remote_dit.py);
the three policies give identical bytes and the documented order (a short job submitted while a long one
is early finishes first under `fair`, last under `fifo`); cancel mid-steps and mid-decode frees the job.
Every wait has a deadline; the `workers` fixture closes every worker it started.
"""

from __future__ import annotations

import numpy as np
import pytest
from _worker_util import EXACT, Song, _models, reference

from device_worker import protocol as P
from engine.worker_client import Worker, WorkerError, collect

SONG = Song(frames=64, steps=6)  # 5 guided steps, 3 VAE windows
LONG = Song(frames=64, steps=16, seed=3)
SHORT = Song(frames=64, steps=3, seed=4, window=64, overlap=16)


@pytest.fixture(scope="module")
def workers(paths, tmp_path_factory):
    """Start workers on demand; all of them are closed (terminate -> wait -> kill) at the end."""
    started: list[Worker] = []

    def start(**kw) -> Worker:
        kw.setdefault("lock_dir", str(tmp_path_factory.mktemp("lock")))
        kw.setdefault("precision", EXACT)  # compared bit for bit with the in-process float32 model core
        w = Worker(dit=paths[0], vae=paths[1], threads=1, **kw)
        started.append(w)
        w.start()
        w.wait_ready(60)
        return w

    yield start
    for w in started:
        w.close()
        assert w.proc is not None and w.proc.poll() is not None, "close() must leave no process"


@pytest.fixture(scope="module")
def worker(workers):
    return workers(policy="fair")


@pytest.fixture(scope="module")
def by_policy(workers, worker):
    """One worker per policy, started once (the fifo one also carries the job-cap test: max_jobs=2)."""
    cache = {"fair": worker}

    def get(policy: str) -> Worker:
        if policy not in cache:
            cache[policy] = workers(policy=policy, max_jobs=2 if policy == "fifo" else 8)
        return cache[policy]

    return get


def _submit(w: Worker, song: Song):
    text, style, neg = song.inputs()
    return w.submit(text, style, neg, **song.options())


def test_handshake_reports_the_worker(worker):
    wel = worker.welcome
    assert wel is not None and wel.version == P.PROTOCOL_VERSION
    assert (wel.backend, wel.device, wel.precision, wel.policy) == ("torch", "cpu", "float32", "fair")
    assert wel.limits.max_jobs == 8 and wel.pid == worker.proc.pid
    assert set(worker.ready.models) == {"dit", "vae"} and worker.ready.info["threads"] == "1"


def test_song_end_to_end_equals_in_process_bit_for_bit(worker, paths):
    res = collect(_submit(worker, SONG), timeout_s=60)
    latent, audio = reference(SONG, *paths)
    assert res.latent.dtype == np.float32 and np.array_equal(res.latent, latent)
    assert np.array_equal(res.audio, audio), f"max diff {np.abs(res.audio - audio).max()}"
    kinds = [e.kind for e in res.events]
    steps = [e.body for e in res.events if e.op is P.Op.STEP]
    windows = [e.body for e in res.events if e.op is P.Op.WINDOW]
    assert kinds[0] == "accepted" and kinds[-1] == "done"
    assert [s.k for s in steps] == list(range(1, SONG.steps)) and all(s.seconds > 0 for s in steps)
    assert kinds.index("latent") == len(steps) + 1, "the latent comes right after the last step"
    assert len(windows) == res.events[0].body.windows > 1 and windows[-1].j == windows[-1].total
    assert [w.start_sample for w in windows] == sorted(w.start_sample for w in windows)
    assert {"queue", "prepare", "steps", "decode", "total"} <= set(res.timings)


@pytest.mark.parametrize("stage", ["steps", "decode"])
def test_cancel_frees_the_job(worker, stage):
    job = _submit(worker, Song(frames=64, steps=16, seed=9, window=16, overlap=4))
    trigger = P.Op.STEP if stage == "steps" else P.Op.WINDOW
    seen = []
    for ev in job.events(timeout_s=60):
        seen.append(ev.op)
        if ev.op is trigger and not getattr(job, "_sent", False):
            job.cancel()
            job._sent = True
    assert seen[-1] is P.Op.CANCELLED and ev.body.stage == stage, f"{seen=}"
    assert P.Op.DONE not in seen
    stats = worker.stats()
    assert stats.jobs == 0 and stats.backend_jobs == 0, f"{stats=}: the cancelled job still holds state"


def test_job_cap_is_enforced_and_told(by_policy):
    w = by_policy("fifo")
    assert w.welcome.limits.max_jobs == 2
    held = [_submit(w, LONG), _submit(w, LONG)]
    third = _submit(w, SHORT)
    ev = third.next_event(30)
    assert ev.op is P.Op.ERROR and ev.body.error.startswith("JobLimitError: ") and "cap 2" in ev.body.error
    for job in held:
        job.cancel()
    for job in held:
        assert [e.op for e in job.events(timeout_s=60)][-1] in (P.Op.CANCELLED, P.Op.DONE)
    assert w.stats().jobs == 0


@pytest.mark.parametrize("policy", ["fifo", "fair", "share"])
def test_policies_change_the_order_never_the_bytes(by_policy, paths, policy):
    w = by_policy(policy)
    long_job = _submit(w, LONG)
    events = []
    for ev in long_job.events(timeout_s=60):  # submit the short job while the long one is early
        events.append(ev)
        if ev.op is P.Op.STEP:
            break
    short = collect(_submit(w, SHORT), timeout_s=60)
    rest = list(long_job.events(timeout_s=60))
    long_done_at = rest[-1]
    assert long_done_at.op is P.Op.DONE
    long_latent = next(e.tensors["latent"] for e in rest if e.op is P.Op.LATENT)
    long_audio = np.concatenate([e.tensors["audio"] for e in events + rest if e.op is P.Op.WINDOW], axis=1)
    assert np.array_equal(long_latent, reference(LONG, *paths)[0]) and np.array_equal(long_audio, reference(LONG, *paths)[1])
    assert np.array_equal(short.latent, reference(SHORT, *paths)[0]) and np.array_equal(short.audio, reference(SHORT, *paths)[1])
    short_done_at = short.events[-1].received
    if policy == "fifo":
        assert short_done_at > long_done_at.received, "fifo runs the earliest job to the end first"
    else:
        assert short_done_at < long_done_at.received, f"{policy}: the short job submitted early finishes first"
        assert short.timings["queue"] < 0.5, f"{short.timings=}: {policy} starts a new job within a round"


def test_encode_returns_the_drawn_latent_and_its_seed(worker, paths):
    import torch

    from device_worker.model.vae import draw_latent

    _, audio = reference(SONG, *paths)
    latent, seed = worker.encode(audio[:, : 20 * 2048], seed=123)
    _, vae = _models(*paths)
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        want = draw_latent(vae.encode(torch.from_numpy(audio[:, : 20 * 2048].copy())[None]), 123)[0].T.numpy()
    finally:
        torch.set_num_threads(prev)
    assert seed == 123 and latent.shape == (20, 64) and np.array_equal(latent, want)
    _, drawn = worker.encode(audio[:, :2048])
    assert isinstance(drawn, int), "without a seed the worker draws one and says which"


def test_style_without_a_style_model_is_a_clear_error(worker):
    with pytest.raises(WorkerError, match="^NotSupported: style model not loaded"):
        worker.style_text(["dreamy synth pop"])
    assert worker.stats().jobs == 0, "the worker keeps serving"
