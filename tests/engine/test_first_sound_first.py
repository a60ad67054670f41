"""Variations of one request: the first take sounds as soon as a single take would (issue 26).

With the studio's `fair` policy every variation used to step together on the one worker, so the first
decoded window of take 0 came after every variation's diffusion: ~5x later with 5 variations (70 s
against 13 s in the walk). The engine now holds a later variation back from a worker where an earlier
sibling has not sounded yet. Real worker process, the self-contained test model, no `../shared`.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from engine.config import EngineConfig, WorkerSpec
from engine.engine import Engine
from engine.events import AudioChunk, Decoding, Held, Step
from engine.request import SongRequest, Style

STEPS = 16
CROP = 160  # two decode windows


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    from studio.testmodel import ensure_test_models

    tmp = tmp_path_factory.mktemp("first-sound")
    models = ensure_test_models()
    v = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    np.save(tmp / "style.npy", v / np.linalg.norm(v))
    cfg = EngineConfig(tmp / "data", models, workers=[WorkerSpec(threads=1, in_process=True)], crop_frames=CROP,
                       lock_dir=str(tmp / "locks"))
    with Engine(cfg) as e:
        e.style_file = tmp / "style.npy"  # type: ignore[attr-defined]
        yield e


def first_sound(engine: Engine, variations: int) -> tuple[float, list]:
    """(seconds of this process's CPU until take 0's first audio, the events). CPU, not wall time: the
    worker is a thread of this process, so its CPU is the work done before the first sound, and another
    process loading the machine does not change it (wall time did: 3.5 s against 1.65 s single, with the
    suite in three processes on two cores)."""
    req = SongRequest(lyrics="", style=Style(embedding=str(engine.style_file)), steps=STEPS,  # type: ignore[attr-defined]
                      variations=variations, seed=5)
    t0 = time.process_time()
    job = engine.submit(req)
    events, heard = [], None
    for ev in job:
        events.append(ev)
        if heard is None and isinstance(ev, AudioChunk) and ev.take == 0:
            heard = time.process_time() - t0
    assert heard is not None
    return heard, events


def test_the_first_variation_sounds_before_its_siblings_step(engine: Engine) -> None:
    first_sound(engine, 1)  # warm: the worker's first song pays one-off costs
    single = min(first_sound(engine, 1)[0] for _ in range(2))
    heard, events = first_sound(engine, 4)
    # Order, the deterministic part: take 0's first window is decoded before any sibling takes a step.
    first_window = next(i for i, e in enumerate(events) if isinstance(e, Decoding) and e.take == 0)
    sibling_steps = [i for i, e in enumerate(events) if isinstance(e, Step) and e.take > 0]
    assert sibling_steps and min(sibling_steps) > first_window
    # Each later variation is told it waits, and for which one (the page said "preparing" meanwhile).
    assert {e.take: e.behind for e in events if isinstance(e, Held)} == {1: 0, 2: 1, 3: 2}
    # Work: no more than 1.5x a single take's until the first sound (with the siblings stepping beside it,
    # 0.98 CPU s against 0.37 single here; held, 0.35-0.38). In CPU time a tenth of a second of slack is
    # enough; in wall time it was half a second, which a loaded machine still exceeded.
    assert heard <= 1.5 * single + 0.1, (heard, single)
    # And every variation is still made.
    done = {e.result.take for e in events if type(e).__name__ == "TakeDone"}
    assert done == {0, 1, 2, 3}


def test_a_sibling_waits_only_for_a_worker_its_elder_holds() -> None:
    """The rule itself: a later take waits for an earlier one of the same job that has not sounded on the
    same worker; a sounded elder, another job, or an elder elsewhere holds nothing back."""
    from engine.units import Unit, sibling_sounds_first

    class Ctx:  # a JobContext stand-in: the rule compares identities only
        pass

    a, b = Ctx(), Ctx()
    elder, later, other = Unit(a, 0, 1), Unit(a, 1, 2), Unit(b, 0, 3)  # type: ignore[arg-type]
    assert sibling_sounds_first(later, [elder]) == 0  # the take it waits for (its number, so 0 is one)
    assert sibling_sounds_first(later, []) is None  # the elder is on another card
    assert sibling_sounds_first(elder, [later]) is None  # never the other way round
    assert sibling_sounds_first(other, [elder]) is None
    elder.first_sound_at = time.monotonic()
    assert sibling_sounds_first(later, [elder]) is None
