"""Every limit a musician can hit, refused once, clearly, before anything is queued; one table of limits
(device_worker.controls) read by the page, the form, the CLI, the request and the worker."""

from __future__ import annotations

import pytest
from lyrics_fixtures import needs_espeak

from device_worker import controls
from engine.request import SongRequest
from studio.forms import ComposeForm, FormError


@pytest.mark.parametrize("field,value,words", [
    ("steps", 1, "from 2 to 200"),  # one point never moves: the worker would refuse it after queueing
    ("steps", 201, "from 2 to 200"),
    ("steps", 2.5, "whole number"),
    ("cfg", -0.5, "from 0 to 20"),
    ("cfg", 20.5, "from 0 to 20"),
    ("cfg", float("nan"), "must be a number"),
    ("variations", 0, "from 1 to 16"),
    ("seed", 2**32, "from 0 to 4294967295"),
])
def test_each_limit_is_one_clear_problem(field: str, value: float, words: str) -> None:
    problems = SongRequest(lyrics="", style="pop", **{field: value}).validate(layout=False).problems
    assert [p.field for p in problems] == [field] and words in problems[0].message, problems


def test_the_edges_are_accepted() -> None:
    for c in (controls.STEPS, controls.CFG, controls.VARIATIONS):
        for v in (c.lo, c.hi):
            v = int(v) if c.whole else v
            assert SongRequest(lyrics="", style="pop", **{c.name: v}).validate(layout=False).ok, (c.name, v)


def test_one_default_everywhere() -> None:
    form, req = ComposeForm(), SongRequest()
    for c in (controls.STEPS, controls.CFG, controls.VARIATIONS):
        assert getattr(form, c.name) == getattr(req, c.name) == c.default
    from device_worker import protocol as P

    song = P.SongParams()  # what the wire and the sampler take: the same names and defaults
    for c in (controls.STEPS, controls.CFG, controls.SEED):
        assert c.name in P.SongParams.__struct_fields__, f"{c.name} has another name on the wire"
    assert song.cfg == controls.CFG.default and song.steps == controls.STEPS.default


def test_unknown_form_keys_are_named() -> None:
    with pytest.raises(FormError, match="'tempo'"):
        ComposeForm.from_dict({"lyrics": "", "tempo": 120}, strict=True)
    assert ComposeForm.from_dict({"tempo": 120}).lyrics == ""  # stored sessions of an older studio still open


def test_a_bad_duration_is_named_once(tmp_path) -> None:
    from engine.config import EngineConfig
    from engine.engine import Engine
    from studio.testmodel import ensure_test_models

    engine = Engine(EngineConfig(tmp_path, ensure_test_models()), start=False)
    try:
        problems = engine.validate(SongRequest(lyrics="", style="pop", duration=9999)).problems
    finally:
        engine.close()
    assert [p.field for p in problems] == ["duration"], problems


@needs_espeak
def test_a_file_ending_with_a_sung_line_gets_its_end_marker() -> None:
    """Three sung lines on the 95 s model: all three are sung, the added marker is reported; a file
    with its own empty last line is left as written; the full model needs no marker. On the test model's
    vocabulary, which a fresh clone has without any download or ../shared."""
    from engine.request import layout_request_lyrics
    from studio.testmodel import lyric_tokenizer

    tok = lyric_tokenizer()
    three = "[00:01.00]hello neon night\n[00:04.00]goodbye moon\n[00:08.00]and the stars fade\n"
    lay = layout_request_lyrics(SongRequest(lyrics=three, duration=95), tokenizer=tok)
    assert lay.can_sing and [r.status for r in lay.lines] == ["sung", "sung", "sung", "end"]
    assert any("end marker added at 00:" in n for n in lay.notes)
    own = layout_request_lyrics(SongRequest(lyrics=three + "[00:20.00]\n", duration=95), tokenizer=tok)
    assert own.lines[-1].raw.strip() == "[00:20.00]" and not any("end marker added" in n for n in own.notes)
    full = layout_request_lyrics(SongRequest(lyrics=three, duration=120), tokenizer=tok)
    assert [r.status for r in full.lines] == ["sung", "sung", "sung"] and not full.notes
    assert SongRequest(lyrics=three, style="pop", duration=95).validate(tokenizer=tok).ok  # no longer refused
