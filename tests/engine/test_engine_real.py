"""The engine end to end with real worker processes and the tiny reference model (CPU, songs cropped to a
few frames in TEST MODE): events in order, files on disk read back, variations, edit, continuation,
cancel, failure isolation, busy rejection, a killed worker, two workers, identical bytes under load."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import mutagen
import numpy as np
import pytest
import soundfile as sf
from _worker_util import EXACT

from engine.config import EngineConfig, Models, WorkerSpec
from engine.engine import Engine
from engine.events import (
    AudioChunk,
    Cancelled,
    Decoding,
    Done,
    Failed,
    Held,
    Preparing,
    Queued,
    Retrying,
    Running,
    Step,
    TakeDone,
)
from engine.request import Reference, SongRequest, Style, ValidationError
from engine.units import BusyError

CROP = 160  # frames per test song: 2 decode windows of 128 with overlap 32
STEPS = 4
LRC = "[00:01.00]hello world\n[00:04.00]goodbye moon\n[00:07.00]"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, reference_dir: Path) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("inputs")
    v = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    np.save(d / "style.npy", v / np.linalg.norm(v))
    t = np.arange(int(44100 * 3.0)) / 44100  # a 3 s stereo reference song
    song = np.stack([np.sin(2 * np.pi * 220 * t), np.sin(2 * np.pi * 330 * t)], axis=1) * 0.3
    sf.write(d / "ref.wav", song.astype(np.float32), 44100)
    t = np.arange(int(44100 * 12.5)) / 44100  # a style reference: MuQ-MuLan needs >= 10 s (upstream asserts it)
    sf.write(d / "style_ref.wav", (0.3 * np.sin(2 * np.pi * 275 * t)).astype(np.float32), 44100)
    return {"style": d / "style.npy", "ref": d / "ref.wav", "style_ref": d / "style_ref.wav", "dir": d}


def config(tmp: Path, reference_dir: Path, style: str | None = None, **kw) -> EngineConfig:
    r = reference_dir
    models = Models(vae=str(r / "vae-tiny" / "vae_model.pt"), base=str(r / "dit-tiny-base"),
                    full=str(r / "dit-tiny-full"), negative_style=str(r / "vocal.npy"), style=style, test=True)
    kw.setdefault("workers", [WorkerSpec(threads=1, precision=EXACT)])
    return EngineConfig(data_dir=tmp / "data", models=models, crop_frames=CROP, lock_dir=str(tmp / "locks"),
                        heartbeat_s=0.25, dead_after_s=3.0, **kw)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, reference_dir: Path):
    from studio.testmodel import ensure_test_models  # a tiny random MuQ-MuLan (cached per user)

    tmp = tmp_path_factory.mktemp("engine")
    with Engine(config(tmp, reference_dir, style=ensure_test_models().style, queue_limit=3)) as e:
        yield e


def song(files: dict[str, Path], **kw) -> SongRequest:
    kw.setdefault("lyrics", LRC)
    kw.setdefault("style", Style(embedding=str(files["style"])))
    return SongRequest(steps=STEPS, **kw)


def check_in_order(job_events: list, takes: int = 1) -> None:
    kinds = [type(e) for e in job_events]
    assert kinds[0] is Queued and kinds[-1] is Done
    prep = [e.what for e in job_events if isinstance(e, Preparing)]
    assert prep[:2] == ["lyrics", "style"]
    for take in range(takes):
        mine = [e for e in job_events
                if getattr(e, "take", None) == take or (isinstance(e, TakeDone) and e.result.take == take)]
        # A variation may first be held back for its sibling's first sound (Held names the take ahead).
        held = [e for e in mine if isinstance(e, Held)]
        assert all(h.behind < take for h in held)
        assert isinstance(mine[len(held)], Running) and all(isinstance(e, Held) for e in mine[:len(held)])
        steps = [e.k for e in mine if isinstance(e, Step)]
        assert steps == list(range(2, STEPS + 1))  # STEPS points: the STEPS - 1 updates reach points 2..STEPS
        windows = [e.j for e in mine if isinstance(e, Decoding)]
        assert windows == [1, 2]
        # Steps come before windows, each window is followed by its audio chunk, TakeDone last.
        order = [type(e) for e in mine]
        assert order.index(Decoding) > max(i for i, k in enumerate(order) if k is Step)
        assert order[-1] is TakeDone
    done = job_events[-1]
    assert set(done.timings) >= {"queued", "worker_wait", "prepare", "diffusion", "decode", "write", "total"}


def read_take(files: dict[str, str]) -> tuple[np.ndarray, dict]:
    audio, rate = sf.read(files["wav"], dtype="int16")
    assert rate == 44100 and audio.shape == (CROP * 2048, 2)
    return audio, json.loads(Path(files["json"]).read_text())


def test_plain_song_every_event_in_order(engine: Engine, files) -> None:
    job = engine.submit(song(files, seed=11, title="First Light", formats=("flac", "mp3", "ogg")))
    events = list(job)
    check_in_order(events)
    assert any(isinstance(e, AudioChunk) for e in events)  # early playback, live subscribers only
    result = events[-1].takes[0]
    audio, record = read_take(result.files)
    assert np.abs(audio).max() == 32767  # upstream's peak normalisation
    assert record["seed"] == 11 and record["request"]["lyrics"] == LRC
    assert record["models"]["kind"].startswith("TEST MODEL") and any("TEST MODE" in n for n in record["notes"])
    assert record["lyrics_report"][0]["status"] == "sung"
    assert set(record["timings_s"]) >= {"queued", "worker_wait", "prepare", "diffusion", "decode", "write"}
    t = record["timings_s"]
    # Time to first sound: Generate -> the first decoded window; after the diffusion, before the decode ends.
    assert t["diffusion"] < t["first_sound"] <= t["queued"] + t["worker_wait"] + t["prepare"] + t["diffusion"] + t["decode"] + 1.0
    match = record["style_match"]  # MuQ-MuLan (the test model's tiny one) of the take against its style
    assert -1.0 <= match["cosine"] <= 1.0 and match["window_s"][1] == pytest.approx(CROP * 2048 / 44100, abs=0.01)
    for fmt in ("flac", "mp3", "ogg"):
        data, rate = sf.read(result.files[fmt])
        assert rate == 44100 and data.shape[1] == 2 and len(data) > 0
    tags = mutagen.File(result.files["flac"]).tags
    assert tags["TITLE"] == ["First Light"] and tags["SEED"] == ["11"] and "hello world" in tags["LYRICS"][0]
    id3 = mutagen.File(result.files["wav"]).tags
    assert id3.getall("TIT2")[0].text == ["First Light"]


def test_a_take_costs_two_device_calls(engine: Engine, files) -> None:
    """A text-style take: STYLE (its prompt) and SUBMIT; the style-match figure rides on the SUBMIT (the
    worker embeds the finished take), not a third call queued behind other jobs' units."""
    worker = engine.pool.slots[0].worker
    before = dict(worker.stats().device_calls)
    events = list(engine.submit(song(files, style="a style no other test asks for", seed=21)))
    after = dict(worker.stats().device_calls)
    calls = {op: after.get(op, 0) - before.get(op, 0) for op in after}
    assert {op: n for op, n in calls.items() if n} == {"STYLE": 1, "SUBMIT": 1}, calls
    match = json.loads(Path(events[-1].takes[0].files["json"]).read_text())["style_match"]
    assert -1.0 <= match["cosine"] <= 1.0 and match["window_s"][0] == 0.0, match


def test_instrumental_and_plain_lyrics(engine: Engine, files) -> None:
    inst = engine.submit(song(files, lyrics="", seed=5))
    plain = engine.submit(song(files, lyrics="[Verse]\nsing a song of rain\nand the light comes in", seed=6))
    inst_events, plain_events = list(inst), list(plain)
    check_in_order(inst_events)
    check_in_order(plain_events)
    _, rec = read_take(inst_events[-1].takes[0].files)
    assert rec["request"]["lyrics"] == "" and rec["effective"]["frames"] == CROP
    _, rec = read_take(plain_events[-1].takes[0].files)
    assert rec["effective"]["lyrics_timed"] is False  # the timing helper placed the lines
    assert any(line["status"] == "sung" for line in rec["lyrics_report"])


def test_variations_have_distinct_recorded_seeds(engine: Engine, files) -> None:
    job = engine.submit(song(files, variations=2))  # random seed, drawn at submit
    events = list(job)
    check_in_order(events, takes=2)
    takes = events[-1].takes
    seeds = [t.seed for t in takes]
    assert len(set(seeds)) == 2 and seeds[1] == seeds[0] + 1
    a, rec_a = read_take(takes[0].files)
    b, rec_b = read_take(takes[1].files)
    assert [rec_a["seed"], rec_b["seed"]] == seeds and rec_a["request"]["seed"] == seeds[0]
    assert not np.array_equal(a, b)


def test_edit_and_continuation(engine: Engine, files) -> None:
    edit = engine.submit(song(files, seed=21, edit=Reference.edit(files["ref"], [[1.0, 2.5]])))
    cont = engine.submit(song(files, seed=22, edit=Reference.continuation(files["ref"])))
    for job, mode in ((edit, "edit"), (cont, "continue")):
        events = list(job)
        check_in_order(events)
        assert [e.detail for e in events if isinstance(e, Preparing) and e.what == "reference"] == [mode]
        _, rec = read_take(events[-1].takes[0].files)
        assert rec["request"]["edit"]["mode"] == mode
        assert rec["effective"]["reference_seconds"] == pytest.approx(3.0, abs=0.01)
    _, rec = read_take(list(edit)[-1].takes[0].files)
    assert rec["effective"]["edit_segments_frames"] == [[21, 53]]
    _, rec = read_take(list(cont)[-1].takes[0].files)
    assert rec["effective"]["edit_segments_frames"] == [[64, CROP]]  # after the 3 s reference


def test_validation_names_every_problem_before_queueing(engine: Engine, files) -> None:
    bad = SongRequest(lyrics="[00:01.00]la la\n[03:00.00]too late", style=Style(audio=str(files["dir"] / "nope.wav")),
                      duration=50, steps=0, formats=("aac",))
    with pytest.raises(ValidationError) as err:
        engine.submit(bad)
    fields = {p.field for p in err.value.problems}
    assert {"duration", "steps", "formats", "style.audio"} <= fields
    bad_lines = SongRequest(lyrics="[00:01.00]la la\n[03:00.00]too late", style="x", duration=120)
    problems = engine.validate(bad_lines).problems
    assert [(p.field, p.line) for p in problems] == [("lyrics", 2)]
    assert engine.stats()["waiting"] == 0


def test_failing_request_next_to_good_one(engine: Engine, files, tmp_path: Path) -> None:
    broken = tmp_path / "broken.npy"
    np.save(broken, np.zeros(7, np.float32))  # exists (passes validation) but is not a 512-d style
    bad = engine.submit(song(files, seed=1, style=Style(embedding=str(broken))))
    good = engine.submit(song(files, seed=2))
    assert isinstance(bad.wait(60), Failed)
    assert bad.final.error.startswith("StyleError: ") and "512" in bad.final.error
    assert isinstance(good.wait(60), Done)


def wait_for(job, kind, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for e in job.events:
            if isinstance(e, kind):
                return e
        if job.finished:
            break
        time.sleep(0.01)
    raise AssertionError(f"no {kind.__name__} in {job.events}")


@pytest.mark.parametrize("phase", [Step, Decoding])
def test_cancel_mid_steps_and_mid_decode(engine: Engine, files, phase) -> None:
    job = engine.submit(song(files, seed=3) if phase is Decoding else
                        SongRequest(lyrics=LRC, style=Style(embedding=str(files["style"])), steps=40, seed=3))
    wait_for(job, phase)
    job.cancel()
    assert isinstance(job.wait(60), Cancelled)
    assert not any(isinstance(e, TakeDone) for e in job.events)
    if phase is Step:
        assert max(e.k for e in job.events if isinstance(e, Step)) < 39
    time.sleep(0.2)
    assert engine.pool.worker_info()[0]["jobs"] == 0  # the worker freed it
    assert engine.pipeline.in_flight() == 0


def test_busy_at_queue_limit_and_cancel_while_queued(engine: Engine, files) -> None:
    long = dict(lyrics="", style=Style(embedding=str(files["style"])), steps=60)
    jobs = [engine.submit(SongRequest(seed=i, **long)) for i in range(4 + 3)]  # max_ready 4 + queue 3
    with pytest.raises(BusyError, match="queue is full"):
        engine.submit(SongRequest(seed=99, **long))
    queued = jobs[-1]
    assert queued.events[0].position == 3
    for job in reversed(jobs):
        job.cancel()
    for job in jobs:
        assert isinstance(job.wait(60), Cancelled)
    assert [type(e) for e in queued.events] == [Queued, Cancelled]  # never started


@pytest.fixture(scope="module")
def engine2(tmp_path_factory: pytest.TempPathFactory, reference_dir: Path):
    tmp = tmp_path_factory.mktemp("engine2")
    workers = [WorkerSpec(device="cpu:0", threads=1, precision=EXACT), WorkerSpec(device="cpu:1", threads=1, precision=EXACT)]
    with Engine(config(tmp, reference_dir, workers=workers, policy="fifo",
                       restart_backoff_s=(0.2, 0.5, 1.0, 2.0))) as e:
        yield e


def test_two_workers_share_the_load_with_identical_bytes(engine: Engine, engine2: Engine, files) -> None:
    alone = engine.submit(song(files, seed=77, formats=("flac",))).result(60).takes[0]
    jobs = [engine2.submit(song(files, seed=77 if i == 2 else 100 + i, formats=("flac",))) for i in range(5)]
    results = [job.result(120).takes[0] for job in jobs]
    assert {r.worker for r in results} == {"w0:torch:cpu:0", "w1:torch:cpu:1"}
    under_load = results[2]
    for fmt in ("wav", "flac"):
        assert Path(alone.files[fmt]).read_bytes() == Path(under_load.files[fmt]).read_bytes()


def test_an_in_process_worker_makes_the_same_bytes_and_leaves_nothing_behind(engine: Engine, files, tmp_path: Path,
                                                                            reference_dir: Path) -> None:
    """The worker hosted by a thread of the engine's process (what the studio tests use, to skip a
    process start) speaks the same wire and makes the same song, byte for byte; closed, it leaves no
    thread, no socket file and this process's torch thread count as it was."""
    import torch

    threads = torch.get_num_threads()
    alone = engine.submit(song(files, seed=78, formats=("flac",))).result(60).takes[0]
    workers = [WorkerSpec(threads=1, precision=EXACT, in_process=True)]
    with Engine(config(tmp_path, reference_dir, workers=workers)) as inproc:
        (info,) = inproc.pool.worker_info()
        assert info["pid"] == os.getpid()  # its WELCOME names this process
        sock = Path(inproc.pool.slots[0].worker.endpoint.removeprefix("ipc://"))
        assert sock.exists()
        take = inproc.submit(song(files, seed=78, formats=("flac",))).result(60).takes[0]
        assert any(t.name == "device-worker" for t in threading.enumerate())
    for fmt in ("wav", "flac"):
        assert Path(alone.files[fmt]).read_bytes() == Path(take.files[fmt]).read_bytes()
    assert not any(t.name.startswith("device-worker") or t.name == "worker-io" for t in threading.enumerate())
    assert not sock.exists() and torch.get_num_threads() == threads


def test_an_in_process_worker_that_cannot_load_says_why(tmp_path: Path, reference_dir: Path) -> None:
    from dataclasses import replace

    from engine.slots import NoWorkerError

    cfg = config(tmp_path, reference_dir, workers=[WorkerSpec(threads=1, in_process=True)], restart_backoff_s=(0.1,))
    cfg = replace(cfg, models=replace(cfg.models, base=str(tmp_path / "nowhere" / "dit-base")))
    with pytest.raises(NoWorkerError, match="nowhere|No such file|not found"):
        Engine(cfg)
    assert not any(t.name == "device-worker" for t in threading.enumerate())


def kill_worker_of(engine: Engine, job, attempt: int, sig: int = signal.SIGKILL) -> None:
    """Signal the worker running `job`'s given attempt once that attempt has made a step
    (SIGKILL: it dies; SIGSTOP: it hangs, and only the missing heartbeats give it away)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        events = job.events
        starts = [i for i, e in enumerate(events) if isinstance(e, Running) and e.attempt == attempt]
        if starts and any(isinstance(e, Step) for e in events[starts[0]:]):
            name = events[starts[0]].worker
            pid = next(w["pid"] for w in engine.pool.worker_info() if w["name"] == name)
            os.kill(pid, sig)
            return
        time.sleep(0.01)
    raise AssertionError(f"attempt {attempt} never stepped: {job.events}")


def test_dead_or_hung_worker_retry_then_success_then_clear_failure(engine2: Engine, files) -> None:
    slow = dict(lyrics="", style=Style(embedding=str(files["style"])), steps=30)
    job = engine2.submit(SongRequest(seed=5, **slow))
    kill_worker_of(engine2, job, attempt=1)
    assert isinstance(job.wait(120), Done), job.events
    assert len([e for e in job.events if isinstance(e, Retrying)]) == 1
    assert [e.attempt for e in job.events if isinstance(e, Running)] == [1, 2]

    job = engine2.submit(SongRequest(seed=6, **slow))
    kill_worker_of(engine2, job, attempt=1)
    kill_worker_of(engine2, job, attempt=2, sig=signal.SIGSTOP)  # a hung card this time
    final = job.wait(120)
    assert isinstance(final, Failed) and final.error.startswith("WorkerDeadError: worker w")
    assert "no heartbeat" in final.error and "retried once" in final.error
    # The pool brings the killed workers back; the engine still serves.
    other = engine2.submit(song(files, seed=8))
    assert isinstance(other.wait(120), Done)


def test_async_and_two_subscribers(engine: Engine, files) -> None:
    import asyncio

    job = engine.submit(song(files, seed=31))
    seen: list[list[str]] = []
    t = threading.Thread(target=lambda: seen.append([e.kind for e in job]))
    t.start()

    async def follow() -> list[str]:
        return [e.kind async for e in job]

    kinds = asyncio.run(follow())
    t.join(60)
    assert kinds[-1] == "done" and kinds == seen[0]


def test_style_from_text_and_reference_audio_through_the_worker(engine: Engine, files) -> None:
    first = engine.submit(song(files, lyrics="", style="warm jazz, piano", seed=41))
    again = engine.submit(song(files, lyrics="", style="warm jazz, piano", seed=41))
    audio = engine.submit(song(files, lyrics="", style=Style(audio=str(files["style_ref"])), seed=41))
    with pytest.raises(ValidationError, match="at least 10 s"):  # refused before anything is queued
        engine.submit(song(files, lyrics="", style=Style(audio=str(files["ref"])), seed=41))
    records = []
    for job, kind in ((first, "text"), (again, "text"), (audio, "audio")):
        events = list(job)
        assert isinstance(events[-1], Done), events[-1]
        assert [e.detail for e in events if isinstance(e, Preparing) and e.what == "style"] == [kind]
        records.append(read_take(events[-1].takes[0].files))
    assert not any("cache" in n for n in records[0][1]["notes"])
    assert any("from the cache" in n for n in records[1][1]["notes"])
    assert np.array_equal(records[0][0], records[1][0])  # same embedding, same seed: same song
    assert not np.array_equal(records[0][0], records[2][0])
