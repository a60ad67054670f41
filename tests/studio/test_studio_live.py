"""Hearing a take while it is made (issue 18 item 2): the take runner hands each decoded sample to a
listener once and in order, and `GET /studio/live/<take>` streams it as raw PCM while the take renders.

Against a real in-process studio (one real CPU worker, the test model): the bytes streamed during the
render are the take's whole song, sample for sample the file's audio before its peak normalisation;
a URL for another take, another owner, a tampered or expired key gets the same 404.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from studio_helpers import api_client, form, in_process_studio

from studio import live
from studio.store import DONE, RUNNING, Store
from studio.takes import StreamCursor, TakeRunner


def chunk(n: int, value: float) -> np.ndarray:
    return np.full((n, 2), value, dtype=np.float32)


@pytest.fixture()
def runner(tmp_path: Path) -> TakeRunner:
    r = TakeRunner(engine=object(), store=Store(tmp_path / "data"))
    r._set_live("t", status=RUNNING)
    return r


def test_each_sample_goes_out_once_in_order_and_the_end_is_drained(runner: TakeRunner) -> None:
    cur = StreamCursor("t")
    assert runner.read_stream(cur) == ([], False)  # nothing decoded yet
    runner._add_chunk("t", chunk(3, 0.1), 0)
    runner._add_chunk("t", chunk(2, 0.2), 3)
    got, over = runner.read_stream(cur)
    assert [c.shape[0] for c in got] == [3, 2] and not over
    assert runner.read_stream(cur) == ([], False)
    runner._add_chunk("t", chunk(4, 0.3), 5)
    runner._set_live("t", status=DONE)  # the take ends: its preview list is let go...
    got, over = runner.read_stream(cur)
    assert [c.shape[0] for c in got] == [4] and over  # ...but this listener still gets its last window
    late = StreamCursor("t")
    assert runner.read_stream(late) == ([], True)  # a listener after the end: the file is the reference


def test_a_retry_resumes_where_the_listener_is(runner: TakeRunner) -> None:
    cur = StreamCursor("t")
    runner._add_chunk("t", chunk(3, 0.1), 0)
    runner._add_chunk("t", chunk(3, 0.2), 3)
    assert sum(len(c) for c in runner.read_stream(cur)[0]) == 6
    # The worker died; the retry decodes the song again from its first sample (same seed, same audio).
    runner._add_chunk("t", chunk(4, 0.1), 0)
    assert runner.read_stream(cur) == ([], False)  # the first 4 samples were heard already
    runner._add_chunk("t", chunk(4, 0.2), 4)
    got, _ = runner.read_stream(cur)
    assert [c.shape[0] for c in got] == [2] and float(got[0][0, 0]) == pytest.approx(0.2)  # samples 6..8


def test_a_take_whose_preview_went_to_the_budget_ends_its_stream(runner: TakeRunner) -> None:
    cur = StreamCursor("t")
    runner._add_chunk("t", chunk(3, 0.1), 0)
    runner.live("t").preview_dropped = True
    assert runner.read_stream(cur) == ([], True)
    assert runner.read_stream(StreamCursor("nope")) == ([], True)


def test_pcm_is_interleaved_int16_little_endian_clipped() -> None:
    raw = live.pcm(np.array([[0.5, -0.5], [2.0, -2.0]], dtype=np.float32))
    assert np.frombuffer(raw, "<i2").tolist() == [16383, -16383, 32767, -32767]


# ---------------------------------------------------------------- the route, on a real studio
def test_the_stream_is_the_song_while_it_renders_and_refuses_any_other_key(tmp_path: Path, test_models) -> None:
    # 512 frames: about 24 s of audio, several decode windows on a CPU worker.
    with in_process_studio(tmp_path / "data", test_models, crop_frames=512) as (url, svc):
        c = api_client(url, tmp_path / "data")
        r = c.predict(form(title="Live", steps=8, formats=["wav"]), "", api_name="/submit")
        take_id = r["takes"][0]
        snaps = c.submit(take_id, api_name="/follow")
        first = next(iter(snaps))
        assert first["live_format"] == live.FORMAT == "s16le;rate=44100;channels=2"
        streamed = bytearray()
        arrived: list[float] = []

        def listen() -> None:
            with httpx.stream("GET", url.rstrip("/") + first["live_url"], timeout=120) as resp:
                assert resp.status_code == 200 and resp.headers["x-audio-format"] == live.FORMAT
                for part in resp.iter_raw():
                    streamed.extend(part)
                    arrived.append(time.monotonic())

        listener = threading.Thread(target=listen)
        listener.start()
        final = list(snaps)[-1]
        done_at = time.monotonic()
        listener.join(120)
        assert not listener.is_alive()
        assert final["status"] == DONE, final
        take = svc.store.get_take(take_id)
        wav, rate = sf.read(str(take.file("wav")), dtype="int16")

        # Hostile keys: all the same 404, nothing about why.
        owner = svc.identity.cli_owner()
        other = svc.store.add_take(take.session_id, {}, seed=1)
        base = url.rstrip("/")
        bad = [
            f"/studio/live/{take_id}",  # no key
            first["live_url"][:-1] + ("0" if first["live_url"][-1] != "0" else "1"),  # tampered
            live.live_url(svc, take_id, "someone-else"),  # signed for another owner
            live.live_url(svc, other.id, owner).split("?")[0] + "?" + first["live_url"].split("?")[1],  # other take
            live.live_url(svc, take_id, owner, now=1.0),  # expired
            "/studio/live/..%2F..%2Fetc?k=1.2",
        ]
        answers = [httpx.get(base + b, timeout=10) for b in bad]
    assert [a.status_code for a in answers] == [404] * len(bad), [(b, a.status_code) for b, a in zip(bad, answers, strict=True)]
    assert len({a.text for a in answers[:-1]}) == 1

    got = np.frombuffer(bytes(streamed), "<i2").reshape(-1, 2)
    assert rate == 44100 and got.shape == wav.shape  # the whole song, every sample once
    assert arrived and arrived[0] < done_at  # heard while it rendered, not after the file was written
    # The file is the same audio, peak-normalised over the whole song: one gain apart.
    a, b = got.astype(np.float64).ravel(), wav.astype(np.float64).ravel()
    assert np.corrcoef(a, b)[0, 1] > 0.999
