"""The lyrics check through the studio's API (gradio_client, the test model, a real worker process): a
take's check arrives after the take is done and shows on /take; /resing makes an edit take that
regenerates exactly the chosen lines' frames (the record's edit segments), keeps the source's samples
outside them, and is checked in turn; bad line choices get clear refusals. Also the splice itself."""

from __future__ import annotations

import time

import gradio as gr
import numpy as np
import pytest
import soundfile as sf
from studio_helpers import api_client, form, fresh_studio

from device_worker.shapes import HOP
from engine.splice import splice_pcm

LRC2 = "[00:00.50]hello neon night\n[00:01.60]goodbye moon\n[00:02.60]\n"


def test_splice_keeps_the_source_outside_and_fades_in_inside() -> None:
    rng = np.random.default_rng(0)
    source = rng.integers(-20000, 20000, (10 * HOP, 2)).astype(np.int16)
    new = rng.integers(-20000, 20000, (10 * HOP, 2)).astype(np.int16)
    out = splice_pcm(new, source, [[2, 4], [7, 10]], fade=256)
    keep = np.ones(len(out), bool)
    keep[2 * HOP:4 * HOP] = keep[7 * HOP:] = False
    assert np.array_equal(out[keep], source[keep])
    assert np.array_equal(out[2 * HOP + 256:4 * HOP - 256], new[2 * HOP + 256:4 * HOP - 256])
    assert np.array_equal(out[7 * HOP + 256:], new[7 * HOP + 256:])  # to the end: no fade out needed


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    with fresh_studio(tmp_path_factory) as (url, svc):
        yield svc, api_client(url, svc.config.data_dir)


def finished_and_checked(c, take_id: str, timeout_s: float = 120) -> dict:
    outs = list(c.submit(take_id, api_name="/follow"))
    assert outs[-1]["status"] == "done", outs[-1]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        take = c.predict(take_id, "", api_name="/take")
        if take["lyrics_check"] is not None:
            return take
        time.sleep(0.3)
    raise AssertionError("the lyrics check never arrived")


def test_check_on_the_take_and_resing_exactly_the_chosen_line(studio) -> None:
    svc, c = studio
    r = c.predict(form(lyrics=LRC2, random_seed=False, seed=3), "", api_name="/submit")
    source = finished_and_checked(c, r["takes"][0])
    check = source["lyrics_check"]
    assert check == source["record"]["lyrics_check"] and check["model"].startswith("whisper")
    assert [ln["expected"] for ln in check["lines"]] == ["hello neon night", "goodbye moon"]
    second = check["lines"][1]
    got = c.predict(source["id"], [second["index"]], api_name="/resing")
    assert got["segments_frames"] == [second["frames"]] and got["resing_of"] == source["id"]
    edited = finished_and_checked(c, got["take_id"])  # checked in turn
    assert edited["parent_id"] == source["id"] and edited["request"]["edit"]["splice"] is True
    assert edited["record"]["effective"]["edit_segments_frames"] == [second["frames"]]
    a, b = second["frames"]
    old = sf.read(svc.store.get_take(source["id"]).files["wav"], dtype="int16")[0]
    new = sf.read(svc.store.get_take(edited["id"]).files["wav"], dtype="int16")[0]
    assert old.shape == new.shape
    assert np.array_equal(new[:a * HOP], old[:a * HOP]) and np.array_equal(new[b * HOP:], old[b * HOP:])
    assert not np.array_equal(new[a * HOP:b * HOP], old[a * HOP:b * HOP])  # the line itself was sung again
    assert "re-sing of" in edited["name"] and "line 2" in edited["name"]

    with pytest.raises(Exception, match="no checked sung line has index"):
        c.predict(source["id"], [99], api_name="/resing")
    with pytest.raises(Exception, match="not a line index"):
        c.predict(source["id"], "two", api_name="/resing")
    with pytest.raises(Exception, match="not a finished take of yours"):
        c.predict("no-such-take", "", api_name="/resing")


def test_the_follow_after_resing_shows_the_take_it_started_even_if_it_has_ended(studio) -> None:
    """The page's Re-sing (and Retry) starts a take in one event and follows it in the next. That follow
    looked only for takes still rendering: where the new take had ended before it began (a cropped take, a
    loaded machine's queue) it followed nothing, and the page never listed the take (a whole-suite run: "3
    finished takes never showed" for 240 s). The click hands its take to the follow, which shows it however
    far it got; on the page both follows are given it."""
    from studio.app import build_page
    from studio.handlers import Handlers
    from studio.heard_view import resing_choices
    from studio.identity import Identity

    svc, c = studio
    demo, page = build_page(svc)
    h, token = Handlers(svc, page), Identity(svc.config.data_dir).cli_token()
    t = h.page.takes
    # The page's wiring: Retry's and Re-sing's follows get the take their click started (the reload's does not).
    watches = [f for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "watch"]
    assert sorted(t.started in f.inputs for f in watches) == [False, True, True], len(watches)
    r = c.predict(form(lyrics=LRC2, random_seed=False, seed=11), "", api_name="/submit")
    source = finished_and_checked(c, r["takes"][0])
    _, (_, second) = resing_choices(svc.store.get_take(source["id"]))[0]
    out = h.heard.resing_lines(source["id"], [second], r["session_id"], token)
    new = out[t.started]
    assert new and "Re-singing" in out[t.resing.note]
    assert finished_and_checked(c, new)["status"] == "done"  # ended before the follow begins

    *_, last = h.generate.watch(r["session_id"], token, source["id"], new)
    listed = last[t.listing]._constructor_args[0]["choices"]  # what the list update sends
    assert last[t.followed] == new and new in [v for _, v in listed]  # the list is redrawn with it
    assert svc.store.get_take(new).label in last[h.page.gen.message]
    # The watch after a reload follows only what is still rendering: nothing here, so nothing is redrawn.
    assert list(h.generate.watch(r["session_id"], token, source["id"])) == [
        {h.page.gen.progress: gr.skip(), t.followed: ""}]
    # A refused click starts nothing.
    assert h.heard.resing_lines(source["id"], [], r["session_id"], token)[t.started] == ""
