"""Issue 31: the studio as an MCP server (`studio serve --mcp`), on the same rules as the page.

A real `studio serve --mcp --model test` process (one CPU worker, songs cropped to 300 frames: three VAE
windows) driven by the real `mcp` Python client over Streamable HTTP, as an assistant would drive it,
with two owners' tokens and none.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import soundfile as sf
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from studio_helpers import LRC, ServeProcess, api_client, form

TOOLS = {"make_song", "check_lyrics", "time_lyrics", "list_takes", "get_take", "edit_take", "cancel"}
# Every endpoint /gradio_api/info may list: the API for gradio_client scripts (studio.api) and the tools'
# own endpoints (studio.mcp_tools). Nothing of the page.
PUBLIC = {"/submit", "/take", "/follow", "/cancel", "/retry", "/set_take", "/takes", "/sessions", "/share",
          "/revoke", "/shared", "/copy_shared", "/save_style", "/styles", "/lyrics_report", "/time_lyrics",
          "/status", "/upload_reference", "/resing",
          "/make_song", "/check_lyrics", "/list_takes", "/get_take", "/edit_take", "/cancel_take"}
NOT_YOURS = "No such take among yours."


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory):
    from studio.identity import Identity

    tmp = tmp_path_factory.mktemp("mcp")
    server = ServeProcess(tmp / "data", tmp, "--mcp", "--test-crop-frames", "300")
    try:
        server.wait_ready()
        identity = Identity(tmp / "data")
        yield server, identity.cli_token(), identity.new_token()
    finally:
        server.stop()


class Answer:
    def __init__(self, result: Any, progress: list[tuple[float, str | None]]) -> None:
        self.error = bool(result.isError)
        self.text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
        self.progress = progress

    def json(self) -> Any:
        assert not self.error, self.text
        return json.loads(self.text)


def call(server: ServeProcess, tool: str, args: dict[str, Any], token: str | None, *,
         progress: bool = False) -> Answer:
    """One tool call in its own MCP session, with the token in the header (or none)."""
    seen: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, message))

    async def run() -> Answer:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with streamablehttp_client(server.url + "gradio_api/mcp/", headers=headers) as (r, w, _):
            async with ClientSession(r, w) as session:
                await session.initialize()
                result = await session.call_tool(tool, args, progress_callback=on_progress if progress else None)
                return Answer(result, seen)

    return asyncio.run(run())


def list_tools(server: ServeProcess, token: str) -> list[Any]:
    async def run() -> list[Any]:
        headers = {"Authorization": f"Bearer {token}"}
        async with streamablehttp_client(server.url + "gradio_api/mcp/", headers=headers) as (r, w, _):
            async with ClientSession(r, w) as session:
                await session.initialize()
                return list((await session.list_tools()).tools)

    return asyncio.run(run())


def song(server: ServeProcess, token: str, **args: Any) -> dict[str, Any]:
    base = {"lyrics": LRC, "style": "dreamy synthwave", "duration": 95, "steps": 4}
    answer = call(server, "make_song", {**base, **args}, token).json()
    assert all(t["status"] == "done" for t in answer["takes"]), answer
    return answer["takes"][0]


def test_exactly_the_seven_tools_with_typed_documented_parameters(studio) -> None:
    from device_worker import controls

    server, owner, _ = studio
    tools = {t.name: t for t in list_tools(server, owner)}
    assert set(tools) == TOOLS
    make = tools["make_song"].inputSchema["properties"]
    assert {k: make[k]["type"] for k in ("lyrics", "style", "duration", "seed", "variations", "steps", "wait")} == {
        "lyrics": "string", "style": "string", "duration": "number", "seed": "integer", "variations": "integer",
        "steps": "integer", "wait": "boolean"}
    # The limits an agent reads are the page's table, not a copy of it.
    assert controls.VARIATIONS.range_text in make["variations"]["description"]
    assert controls.STEPS.range_text in make["steps"]["description"]
    assert "96-285" in make["duration"]["description"]
    for tool in tools.values():
        assert len(tool.description) > 60, tool.name
        assert all(p.get("description") for p in tool.inputSchema["properties"].values()), tool.name
    # The rest of the public API and the page's handlers are not tools, listed or not.
    for name in ("submit", "follow", "take", "status", "share", "cancel_take", "lyrics_report"):
        answer = call(server, name, {}, owner)
        assert answer.error and "Unknown tool" in answer.text, (name, answer.text)


def test_make_song_streams_progress_and_returns_a_downloadable_take_matching_the_request(studio) -> None:
    server, owner, _ = studio
    # Forty steps: Gradio samples progress every 100 ms and the test model's steps take milliseconds here.
    args = {"lyrics": LRC, "style": "dreamy synthwave", "duration": 95, "seed": 1234, "steps": 40,
            "title": "neon test"}
    answer = call(server, "make_song", args, owner, progress=True)
    (take,) = answer.json()["takes"]
    assert take["status"] == "done" and take["seed"] == 1234

    # Progress: notifications in order, per sampling step and then per VAE window.
    values = [v for v, _ in answer.progress]
    assert values == sorted(values) and len(set(values)) == len(values)
    units = [(m.group(1), int(m.group(2)), int(m.group(3))) for _, msg in answer.progress
             if msg and (m := re.match(r"Progress (sampling|decoding VAE window): Step (\d+) of (\d+)$", msg))]
    steps = [k for kind, k, n in units if kind == "sampling"]
    windows = [j for kind, j, n in units if kind == "decoding VAE window"]
    # Gradio samples progress (every 100 ms: studio/idle.py), so fast tiny steps may coalesce; at least two
    # distinct steps arrive, in order, ending at the last one.
    assert len(steps) >= 2 and steps == sorted(set(steps)) and steps[-1] == 40, units
    assert windows and windows == sorted(set(windows)) and max(windows) <= 3, units
    assert units.index(("decoding VAE window", windows[0], 3)) > units.index(("sampling", steps[-1], 40))

    # The audio downloads through its signed URL and is the song the record describes.
    audio = httpx.get(take["audio_url"], timeout=30)
    assert audio.status_code == 200
    data, rate = sf.read(io.BytesIO(audio.content))
    assert rate == 44100 and data.shape[1] == 2
    assert abs(len(data) / rate - take["record"]["audio_seconds"]) < 0.05
    record = httpx.get(take["urls"]["json"], timeout=30).json()
    req = record["request"]
    assert (req["lyrics"], req["style"]["text"], req["duration"], req["steps"], record["seed"]) == (
        LRC, "dreamy synthwave", 95.0, 40, 1234)
    assert take["record"]["title"] == "neon test" and take["record"]["style"] == "dreamy synthwave"

    # It landed in the owner's sessions (the page's and the API's too): list_takes and get_take see it,
    # with fresh signed URLs.
    sessions = api_client(server.url, token=owner).predict("", api_name="/sessions")
    assert answer.json()["session_id"] in [s["id"] for s in sessions]
    listed = call(server, "list_takes", {"limit": 5}, owner).json()["takes"]
    assert take["take_id"] in [t["take_id"] for t in listed]
    got = call(server, "get_take", {"take_id": take["take_id"]}, owner).json()
    assert got["seed"] == 1234 and httpx.get(got["audio_url"], timeout=30).status_code == 200


def test_a_second_owner_cannot_get_edit_check_or_cancel_the_first_owners_take(studio) -> None:
    server, owner, other = studio
    done = song(server, owner)
    # Sixteen variations of 200 steps (the maxima), one after another: still running after the other owner's
    # dozen refused calls (four were not, once the test model's step took milliseconds).
    started = call(server, "make_song", {"lyrics": LRC, "style": "slow", "duration": 95, "steps": 200,
                                         "variations": 16, "wait": False}, owner).json()["takes"]
    running = started[0]
    for take in (done, running):
        tid = take["take_id"]
        for tool, args in (("get_take", {}), ("check_lyrics", {}), ("cancel", {}), ("cancel", {"whole_job": True}),
                           ("edit_take", {"ranges": "1-2"}), ("edit_take", {"extend_from": 1, "duration": 120})):
            answer = call(server, tool, {"take_id": tid, **args}, other)
            assert answer.error and NOT_YOURS in answer.text, (tool, answer.text)
    theirs = call(server, "list_takes", {"limit": 100}, other).json()["takes"]
    assert not {done["take_id"], running["take_id"]} & {t["take_id"] for t in theirs}
    # The other's cancels did nothing: no take of the job is cancelled and its last eight are still queued or
    # running (the first may have finished meanwhile: on a loaded machine the dozen refused calls outlasted it).
    statuses = [call(server, "get_take", {"take_id": t["take_id"]}, owner).json()["status"] for t in started]
    assert "cancelled" not in statuses and set(statuses[-8:]) <= {"queued", "running"}, statuses
    # The owner's stops it.
    live = next(t for t, status in zip(started, statuses, strict=True) if status in ("queued", "running"))
    assert call(server, "cancel", {"take_id": live["take_id"], "whole_job": True}, owner).json()["cancelling"]
    # Whatever had not finished when it landed is cancelled; the takes behind the running one had not.
    for _ in range(60):
        statuses = [call(server, "get_take", {"take_id": t["take_id"]}, owner).json()["status"] for t in started]
        if set(statuses) <= {"cancelled", "done"}:
            break
    assert set(statuses) <= {"cancelled", "done"} and statuses[-8:] == ["cancelled"] * 8, statuses


def test_no_token_or_a_forged_one_is_refused_with_how_to_get_one(studio) -> None:
    server, owner, _ = studio
    take = song(server, owner)
    forged = owner.split(".")[0] + "." + "0" * 32
    for token in (None, forged, "nonsense"):
        for tool, args in (("make_song", {"style": "x"}), ("list_takes", {}), ("get_take", {"take_id": take["take_id"]}),
                           ("check_lyrics", {"take_id": take["take_id"]}), ("cancel", {"take_id": take["take_id"]}),
                           ("edit_take", {"take_id": take["take_id"], "ranges": "1-2"})):
            answer = call(server, tool, args, token)
            assert answer.error and "studio token" in answer.text and "Authorization: Bearer" in answer.text, (
                tool, answer.text)


def test_out_of_range_values_get_the_pages_messages(studio) -> None:
    from engine.request import SongRequest, Style

    server, owner, _ = studio
    before = len(call(server, "list_takes", {"limit": 100}, owner).json()["takes"])
    bad = {"duration": 300.0, "steps": 1, "variations": 17, "seed": 2**33}
    answer = call(server, "make_song", {"lyrics": LRC, "style": "synth", **bad}, owner)
    # The page lists exactly these problems (songs.start validates one request, the page shows each line).
    expected = SongRequest(lyrics=LRC, style=Style(text="synth"), **bad).validate(layout=False).problems
    assert answer.error and len(expected) == 4
    for problem in expected:
        assert str(problem) in answer.text, (str(problem), answer.text)
    # Word for word what the API's /submit (the page's path for scripts) says for the same form.
    api = api_client(server.url, token=owner)
    with pytest.raises(Exception) as refused:
        api.predict(form(lyrics=LRC, style_text="synth", duration=300.0, steps=1, variations=17, seed=2**33,
                         random_seed=False, formats=["wav", "mp3"]), "", api_name="/submit")
    assert str(refused.value) in answer.text or answer.text.endswith(str(refused.value)), (
        str(refused.value), answer.text)
    assert len(call(server, "list_takes", {"limit": 100}, owner).json()["takes"]) == before  # nothing stored
    take = song(server, owner)
    ranges = call(server, "edit_take", {"take_id": take["take_id"], "ranges": "the chorus"}, owner)
    assert ranges.error and "Cannot read the range 'the chorus'" in ranges.text
    timing = call(server, "time_lyrics", {"plain": "hello\nworld", "duration": 20}, owner)
    assert timing.error and "duration 20 s is not supported: use 95 (base model) or 96-285 (full model)" in timing.text


def test_edit_take_repaints_or_extends_one_of_your_takes(studio) -> None:
    server, owner, _ = studio
    source = song(server, owner)
    repaint = call(server, "edit_take", {"take_id": source["take_id"], "ranges": "1-3"}, owner).json()["takes"][0]
    assert repaint["status"] == "done" and repaint["parent_id"] == source["take_id"]
    assert repaint["record"]["edit"] == {"mode": "edit", "segments": [[1.0, 3.0]]}
    assert repaint["record"]["lyrics"] == source["record"]["lyrics"]  # the source's lyrics and style kept
    assert repaint["record"]["style"] == source["record"]["style"]
    longer = call(server, "edit_take", {"take_id": source["take_id"], "extend_from": 2, "duration": 120},
                  owner).json()["takes"][0]
    assert longer["record"]["edit"] == {"mode": "continue", "segments": [[2.0, -1.0]]}
    assert longer["record"]["duration_s"] == 120 and longer["record"]["model"] == "full"
    assert httpx.get(longer["audio_url"], timeout=30).status_code == 200


def test_check_lyrics_returns_the_records_check_or_says_why_there_is_none(studio) -> None:
    from studio.store import Store

    server, owner, _ = studio
    instrumental = song(server, owner, lyrics="")
    answer = call(server, "check_lyrics", {"take_id": instrumental["take_id"]}, owner).json()
    assert answer["checked"] is False and "instrumental" in answer["reason"]
    sung = song(server, owner)
    # The check arrives after the take is playable: until then the tool says so, then returns the record's
    # check (the test model's tiny random Whisper hears nothing useful, but every line is reported).
    deadline = time.monotonic() + 120
    while True:
        answer = call(server, "check_lyrics", {"take_id": sung["take_id"]}, owner).json()
        if answer["checked"] or "Still checking" not in answer.get("reason", "") or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert answer["checked"] is True, answer
    assert answer["lyrics_check"]["model"] and len(answer["lyrics_check"]["lines"]) >= 1, answer
    # A check stored in the take's record (issue 30's `lyrics_check`) comes back as it is stored.
    check = {"model": "whisper-tiny", "per": 0.25, "lines": [
        {"index": 0, "time": 0.5, "expected": "hello neon night", "heard": "hello neon", "score": 0.7,
         "status": "partly"}]}
    record_path = Path(Store(server.data_dir).get_take(sung["take_id"]).files["json"])
    record = json.loads(record_path.read_text())
    record_path.write_text(json.dumps({**record, "lyrics_check": check}))
    answer = call(server, "check_lyrics", {"take_id": sung["take_id"]}, owner).json()
    assert answer == {"take_id": sung["take_id"], "checked": True, "lyrics_check": check}
    record_path.write_text(json.dumps({**record, "lyrics_check": {"model": "", "per": None, "lines": [],
                                                                   "error": "the transcriber crashed"}}))
    answer = call(server, "check_lyrics", {"take_id": sung["take_id"]}, owner).json()
    assert answer["checked"] is False and "the transcriber crashed" in answer["reason"]


def test_time_lyrics_turns_plain_lyrics_into_lrc(studio) -> None:
    from engine.lyrics import time_lyrics
    from studio.testmodel import lyric_tokenizer

    server, owner, _ = studio
    plain = "[Verse]\nhello neon night\ncity lights"
    lrc = call(server, "time_lyrics", {"plain": plain, "duration": 95}, owner)
    assert not lrc.error, lrc.text
    sung = [ln for ln in lrc.text.splitlines() if ln.strip() and ln != "[Verse]"]
    assert [re.sub(r"^\[\d+:\d{2}\.\d{2}\]", "", ln) for ln in sung] == ["hello neon night", "city lights", ""]
    # The studio's timing helper with the g2p its takes use (the test model's), as `studio lyrics time` has it.
    assert lrc.text == time_lyrics(plain, 95, tokenizer=lyric_tokenizer())


def test_the_api_listing_holds_only_the_public_endpoints(studio) -> None:
    server, _, _ = studio
    info = httpx.get(server.url + "gradio_api/info", timeout=30).json()
    assert set(info["named_endpoints"]) == PUBLIC
    assert not info["unnamed_endpoints"]


def test_serve_mcp_without_the_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import sys

    from click.testing import CliRunner

    from studio.cli import main

    monkeypatch.setitem(sys.modules, "mcp", None)  # as if `pip install -e .` without the extra
    result = CliRunner().invoke(main, ["serve", "--mcp", "--model", "test", "--data-dir", str(tmp_path)])
    assert result.exit_code != 0 and 'pip install -e ".[mcp]"' in result.output, result.output
    assert not (tmp_path / "studio.db").exists()  # refused before anything started
