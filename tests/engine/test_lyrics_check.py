"""The lyrics check after the decode (engine.hearing), end to end with the test model's real worker
process and its tiny random Whisper: the take is announced first, the check arrives after it as an event
and in the record (model, PER, lines with index/time/expected/heard/score/status), before the job's Done;
instrumental takes and a check switched off give no check. Random weights hear nothing meaningful, so the
statuses are not asserted, only that every sung line is there, scored and marked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.config import EngineConfig, WorkerSpec
from engine.engine import Engine
from engine.events import Done, LyricsChecked, TakeDone
from engine.hearing import hear_windows, language_of
from engine.lyrics.heard import LineWindow
from engine.request import SongRequest

LRC = "[00:01.00]hello world\n[00:04.00]goodbye moon\n[00:07.00]"


def win(start: float, end: float) -> LineWindow:
    return LineWindow(0, 1, "x", start, end, (0, 1))


def test_hear_windows_group_whole_lines_up_to_30_s() -> None:
    lines = [win(5, 12), win(12, 20), win(20, 33), win(33, 40), win(40, 95)]
    out = hear_windows(lines, 100.0, slack_s=1.5)
    assert out[0][0] == 3.5 and out[-1][1] == 96.5
    assert all(b - a <= 30.0 + 1e-9 for a, b in out)
    assert all(out[k][1] == out[k + 1][0] for k in range(len(out) - 1))  # tiled, no overlap
    starts = {ln.start for ln in lines}
    assert all(a in starts or a == 3.5 or (a - 40) % 30 == 0 for a, _ in out)  # cut at line starts (or inside the 55 s one)
    assert hear_windows([], 10.0) == []
    assert language_of(["我爱你", "hello"]) == "zh" and language_of(["hello 你"]) == "en"


@pytest.fixture(scope="module")
def models(test_models):
    return test_models


def make_engine(tmp: Path, models, **kw) -> Engine:
    cfg = EngineConfig(data_dir=tmp / "data", models=models, crop_frames=180, lock_dir=str(tmp / "locks"),
                       workers=[WorkerSpec(threads=1, precision="float32", in_process=True)], **kw)
    return Engine(cfg)


def run(engine: Engine, **kw) -> list:
    kw.setdefault("lyrics", LRC)
    return list(engine.submit(SongRequest(style="test", duration=95, steps=3, seed=5, **kw)))


def test_check_arrives_after_the_take_and_lands_in_the_record(tmp_path, models) -> None:
    with make_engine(tmp_path, models) as engine:
        events = run(engine, variations=2)
        kinds = [type(e) for e in events]
        assert kinds[-1] is Done
        for take in (0, 1):
            done_at = next(i for i, e in enumerate(events) if isinstance(e, TakeDone) and e.result.take == take)
            checked_at = next(i for i, e in enumerate(events) if isinstance(e, LyricsChecked) and e.take == take)
            assert done_at < checked_at < len(events) - 1  # playable first; the job ends after its checks
        checked = next(e for e in events if isinstance(e, LyricsChecked))
        check = checked.check
        assert "error" not in check, check
        assert check["model"].startswith("whisper") and check["language"] == "en"
        assert [ln["expected"] for ln in check["lines"]] == ["hello world", "goodbye moon"]
        for ln in check["lines"]:
            assert set(ln) >= {"index", "time", "expected", "heard", "score", "status", "frames"}
            assert ln["status"] in ("sung", "partly", "missed") and 0.0 <= ln["score"] <= 1.0
        assert check["lines"][0]["time"] == pytest.approx(1.0, abs=0.05)
        assert 0.0 <= check["per"] <= 1.0
        record = json.loads(Path(checked.files["json"]).read_text())
        assert record["lyrics_check"] == check  # stored in the take's record, as the event says
        assert record["timings_s"]["first_sound"] <= record["timings_s"]["queued"] + 60  # recorded as before

        instrumental = run(engine, lyrics="")
        assert not any(isinstance(e, LyricsChecked) for e in instrumental)
        rec = json.loads(Path(instrumental[-1].takes[0].files["json"]).read_text())
        assert "lyrics_check" not in rec


def test_the_check_can_be_switched_off(tmp_path, models) -> None:
    with make_engine(tmp_path, models, lyrics_check=False) as engine:
        assert engine.checker is None
        events = run(engine)
        assert isinstance(events[-1], Done) and not any(isinstance(e, LyricsChecked) for e in events)
        assert "lyrics_check" not in json.loads(Path(events[-1].takes[0].files["json"]).read_text())


def test_lyrics_model_per_device_and_managed_files(tmp_path, monkeypatch) -> None:
    from engine.modelfiles import get
    from studio.lyrics_model import CPU_DEFAULT, GPU_DEFAULT, default_name, resolve_lyrics_model

    for name in (CPU_DEFAULT, GPU_DEFAULT):  # managed like the other model files: pinned, licensed
        spec = get(name)
        assert all(f.source.pinned for f in spec.files) and "Apache-2.0" in spec.licence
        assert {"model.safetensors", "generation_config.json"} <= {f.filename for f in spec.files}
    assert default_name(("cuda:0",)) == GPU_DEFAULT and default_name(("cpu",)) == CPU_DEFAULT
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hub"))
    monkeypatch.setenv("STUDIO_MODELS_DIR", str(tmp_path / "none"))
    path, line = resolve_lyrics_model("auto", ("cpu",), str(tmp_path / "models"))
    assert path is None and f"studio models fetch --only {CPU_DEFAULT}" in line
    assert resolve_lyrics_model("off", ("cpu",), None) == (None, "lyrics check: off")
    with pytest.raises(ValueError, match="not a folder and not a model name"):
        resolve_lyrics_model("whisper-huge", ("cpu",), None)
    folder = tmp_path / "models" / "openai" / "whisper-small"  # laid out by hand, as `--models-dir` reads
    folder.mkdir(parents=True)
    for f in get(CPU_DEFAULT).files:
        (folder / f.filename).write_text("{}")
    path, line = resolve_lyrics_model("auto", ("cuda:0",), str(tmp_path / "models"))  # turbo absent: small
    assert path == str(folder) and "whisper-small" in line and "not downloaded" in line
    assert resolve_lyrics_model(str(folder), ("cpu",), None)[0] == str(folder.resolve())


def test_lyrics_options_refuse_an_unknown_model_and_switch_off(models) -> None:
    import click

    from studio.cli.options import WorkerPlan

    with pytest.raises(click.UsageError, match="not a folder and not a model name"):
        WorkerPlan((), ("cpu",), "torch", "auto", None, None, lyrics_model="whisper-huge")
    plan = WorkerPlan((), ("cpu",), "torch", "auto", None, None)
    assert plan.with_lyrics(models, None).lyrics == models.lyrics  # --model test: its own tiny Whisper
    off = WorkerPlan((), ("cpu",), "torch", "auto", None, None, lyrics_check=False)
    assert off.with_lyrics(models, None).lyrics is None and off.engine_options()["lyrics_check"] is False
