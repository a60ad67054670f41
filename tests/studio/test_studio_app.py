"""The running studio through gradio_client, with the test model and a real CPU worker process.

Covers: generate with progress events, cancel, variations, edit and continuation, history search,
share link read-only round trip and revoke, uploads over the limits, paths outside the data directory,
and a studio without weights that still opens and says what to fetch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from gradio_client import Client, handle_file
from studio_helpers import api_client, form, in_process_studio, studio_on_test_model


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("studio")
    with studio_on_test_model(tmp, max_upload_mb=2, max_upload_s=60) as (url, svc):
        yield url, svc, api_client(url, tmp / "data")


def run_take(client: Client, take_id: str) -> tuple[list[dict], dict]:
    outs = list(client.submit(take_id, api_name="/follow"))
    return outs[:-1], outs[-1]


@contextmanager
def card_held(c: Client, svc) -> Iterator[None]:
    """A long job, with more variations than are admitted past the queue, holds the card; cancelled (every
    variation) on leaving, so what was submitted meanwhile runs then."""
    busy = c.predict(form(steps=200, variations=min(svc.engine.pipeline.max_ready + 1, 16)), "", api_name="/submit")
    try:
        yield
    finally:
        c.predict(busy["takes"][0], True, api_name="/cancel")


def follow_from_the_queue(c: Client, svc, fields: dict) -> tuple[dict, list[dict], dict]:
    """Submit a take while the card is held, follow it, then free the card: the stream is live snapshots,
    and on a loaded machine the test model's few steps were over before a `/follow` made after `/submit`
    arrived (only the decode was seen). Returns (the submit's answer, snapshots, take)."""
    with card_held(c, svc):
        r = c.predict(form(**fields), "", api_name="/submit")
        stream = iter(c.submit(r["takes"][0], api_name="/follow"))
        outs = [next(stream)]
        assert outs[0]["status"] == "queued", outs[0]  # the follower is there before the take runs
    outs += list(stream)
    return r, outs[:-1], outs[-1]


def test_generate_streams_progress_and_records_everything(studio) -> None:
    url, svc, c = studio
    r, snaps, take = follow_from_the_queue(c, svc, dict(title="First light", formats=["wav", "flac", "mp3"]))
    assert len(r["takes"]) == 1 and isinstance(r["seeds"][0], int)
    phases = [s["phase"] for s in snaps]
    steps = [p for p in phases if p.startswith("step ")]
    assert steps and steps[-1] == "step 4 of 4", phases  # as asked: 4 points in time (3 updates)
    progress = [s["progress"] for s in snaps]
    assert progress == sorted(progress) and progress[-1] < 1.0
    assert any(s.get("eta_s") is not None for s in snaps)
    assert take["status"] == "done" and take["seed"] == r["seeds"][0] and take["progress"] == 1.0
    assert {"wav", "flac", "mp3", "json"} <= set(take["files"])
    audio, rate = sf.read(svc.store.get_take(take["id"]).files["wav"])  # clients get file names, not paths
    assert rate == 44100 and audio.shape[1] == 2 and np.abs(audio).max() > 0
    assert {"diffusion", "decode", "write"} <= set(take["timings"])
    assert take["record"]["seed"] == take["seed"] and "TEST" in str(take["record"]).upper()
    # Files come back over HTTP from the data directory only.
    got = httpx.get(url.rstrip("/") + take["urls"]["wav"], timeout=10)
    assert got.status_code == 200 and got.content[:4] == b"RIFF"
    # The store has the same take (the batch renderer reads it through the same API).
    assert svc.store.get_take(take["id"]).status == "done"


def test_variations_get_their_own_seeds(studio) -> None:
    _, svc, c = studio
    r = c.predict(form(variations=3, random_seed=False, seed=1000), "", api_name="/submit")
    assert r["seeds"] == [1000, 1001, 1002]
    finals = [run_take(c, t)[1] for t in r["takes"]]
    assert [t["status"] for t in finals] == ["done"] * 3
    assert [t["variation"] for t in finals] == [0, 1, 2]
    wavs = [sf.read(svc.store.get_take(t["id"]).files["wav"])[0] for t in finals]
    assert not np.array_equal(wavs[0], wavs[1])  # different seeds, different noise


def test_cancel_stops_a_running_take(studio) -> None:
    _, _, c = studio
    r = c.predict(form(steps=200), "", api_name="/submit")
    job = c.submit(r["takes"][0], api_name="/follow")
    for snap in job:
        if str(snap.get("phase", "")).startswith("step"):
            assert c.predict(r["takes"][0], api_name="/cancel")["cancelling"]
            break
    final = c.predict(r["takes"][0], api_name="/take")
    deadline = 60
    while final["status"] in ("queued", "running") and deadline:
        import time

        time.sleep(1)
        deadline -= 1
        final = c.predict(r["takes"][0], api_name="/take")
    assert final["status"] == "cancelled"
    assert not final["files"]  # nothing half-written is recorded as a result


def test_edit_and_continue_link_to_their_source(studio) -> None:
    _, _, c = studio
    r = c.predict(form(random_seed=False, seed=5), "", api_name="/submit")
    _, source = run_take(c, r["takes"][0])
    sid = r["session_id"]
    e = c.predict(form(edit_mode="edit", edit_take=source["id"], edit_ranges="0.5-1.5"), sid,
                  api_name="/submit")
    _, edited = run_take(c, e["takes"][0])
    assert edited["status"] == "done" and edited["parent_id"] == source["id"]
    assert edited["request"]["edit"]["segments"] == [[0.5, 1.5]]
    k = c.predict(form(edit_mode="continue", edit_take=source["id"], continue_from=1.0), sid,
                  api_name="/submit")
    _, cont = run_take(c, k["takes"][0])
    assert cont["status"] == "done" and cont["parent_id"] == source["id"]
    assert cont["request"]["edit"]["mode"] == "continue"
    with pytest.raises(Exception, match="range"):
        c.predict(form(edit_mode="edit", edit_take=source["id"], edit_ranges="soon"), sid, api_name="/submit")


def test_history_lists_and_searches_sessions(studio) -> None:
    _, _, c = studio
    r = c.predict(form(title="Harbour at dawn", style_text="mandopop ballad, piano"), "",
                  api_name="/submit")
    run_take(c, r["takes"][0])
    mine = c.predict("", api_name="/sessions")
    assert r["session_id"] in [s["id"] for s in mine]
    assert [s["id"] for s in c.predict("MANDOPOP", api_name="/sessions")] == [r["session_id"]]
    assert [s["id"] for s in c.predict("harbour", api_name="/sessions")] == [r["session_id"]]
    assert c.predict("no such words anywhere", api_name="/sessions") == []
    takes = c.predict(r["session_id"], api_name="/takes")
    t = c.predict(r["session_id"], takes[0]["id"], "Keeper", "true", "", api_name="/set_take")
    assert t["name"] == "Keeper" and t["starred"]
    c.predict(r["session_id"], takes[0]["id"], "", "", "true", api_name="/set_take")
    assert c.predict(r["session_id"], api_name="/takes") == []
    c.predict(r["session_id"], takes[0]["id"], "", "", "false", api_name="/set_take")  # undo
    assert len(c.predict(r["session_id"], api_name="/takes")) == 1


def test_share_link_read_only_round_trip_and_revoke(studio) -> None:
    url, svc, c = studio
    r = c.predict(form(title="Shared song"), "", api_name="/submit")
    run_take(c, r["takes"][0])
    link = c.predict(r["session_id"], api_name="/share")
    assert len(link["token"]) >= 22 and link["link"] == f"/?s={link['token']}"
    assert httpx.get(url.rstrip("/") + link["link"], timeout=10).status_code == 200
    shared = c.predict(link["token"], api_name="/shared")
    assert shared["read_only"] and shared["title"] == "Shared song" and len(shared["takes"]) == 1
    assert r["session_id"] not in str(shared)  # the viewer never learns the session's key
    take_id = shared["takes"][0]["id"]
    # Another owner (a second browser or script) holding the link: it reads, copies, and changes nothing.
    other = api_client(url, token=svc.identity.new_token())
    assert other.predict(take_id, link["token"], api_name="/take")["status"] == "done"
    with pytest.raises(Exception, match="yours"):
        other.predict(r["session_id"], take_id, "hacked", "", "", api_name="/set_take")
    with pytest.raises(Exception, match="yours"):
        other.predict(r["session_id"], api_name="/takes")  # knowing the session id is not owning it
    with pytest.raises(Exception, match="can read"):
        other.predict(take_id, api_name="/take")  # without the link: not readable
    copy = other.predict(link["token"], api_name="/copy_shared")
    assert copy["session_id"] != r["session_id"] and copy["takes"] == 1
    assert copy["session_id"] in [s["id"] for s in other.predict("", api_name="/sessions")]
    assert copy["session_id"] not in [s["id"] for s in c.predict("", api_name="/sessions")]
    assert r["session_id"] not in [s["id"] for s in other.predict("", api_name="/sessions")]
    with pytest.raises(Exception, match="belong"):
        other.predict(copy["session_id"], link["token"], api_name="/revoke")  # not this session's link
    assert c.predict(r["session_id"], link["token"], api_name="/revoke")["revoked"]
    with pytest.raises(Exception, match="revoked"):
        c.predict(link["token"], api_name="/shared")
    with pytest.raises(Exception, match="can read"):
        other.predict(take_id, link["token"], api_name="/take")
    assert c.predict(r["session_id"], api_name="/share")["token"] != link["token"]


def test_uploads_over_the_limits_are_refused_with_a_reason(studio, tmp_path: Path) -> None:
    url, svc, c = studio
    long = tmp_path / "long.flac"  # 61 s of near-silence: tiny as FLAC, over the 60 s test limit
    sf.write(long, np.zeros((61 * 8000, 1), dtype=np.float32), 8000)
    with pytest.raises(Exception, match="61 s long; the limit is 60 s"):
        c.predict(handle_file(str(long)), api_name="/upload_reference")
    big = tmp_path / "big.wav"  # 3 MB of noise: over the 2 MB test limit
    sf.write(big, np.random.default_rng(0).uniform(-1, 1, (700_000, 2)).astype(np.float32), 44100,
             subtype="PCM_16")
    with pytest.raises(ValueError, match="exceeds the maximum file size"):  # the client checks first
        c.predict(handle_file(str(big)), api_name="/upload_reference")
    with open(big, "rb") as f:  # and the server refuses it too, for clients that do not
        resp = httpx.post(f"{url}gradio_api/upload", files={"files": ("big.wav", f, "audio/wav")}, timeout=30)
    assert resp.status_code == 413
    not_audio = tmp_path / "notes.wav"
    not_audio.write_text("these are not samples")
    with pytest.raises(Exception, match="not an audio file"):
        c.predict(handle_file(str(not_audio)), api_name="/upload_reference")
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    truncated = tmp_path / "cut.wav"
    sf.write(truncated, np.zeros((22050 * 12, 1), dtype=np.float32), 22050, subtype="PCM_16")
    truncated.write_bytes(truncated.read_bytes()[: 44 + 22050 * 2 * 3])  # header says 12 s, 3 s remain
    for path, words in ((empty, "empty"), (truncated, "truncated"), (not_audio, "format was not recognised")):
        with pytest.raises(Exception) as err:
            c.predict(handle_file(str(path)), api_name="/upload_reference")
        assert words in str(err.value) and "/" not in str(err.value).replace(path.name, ""), str(err.value)
    # A path on the server dressed up as an upload is refused, not copied into the served uploads.
    secret = svc.config.data_dir / "takes" / "someone-else" / "private.wav"  # a served folder: gradio lets it by
    secret.parent.mkdir(parents=True, exist_ok=True)
    sf.write(secret, np.zeros((22050 * 12, 1), dtype=np.float32), 22050)
    before = set(svc.config.uploads_dir.iterdir())
    # (Raw HTTP: gradio_client would upload a local path itself, which is what a real client does.)
    auth = {"Authorization": f"Bearer {svc.identity.cli_token()}"}
    call = httpx.post(f"{url}gradio_api/call/upload_reference", headers=auth, timeout=30,
                      json={"data": [{"path": str(secret), "meta": {"_type": "gradio.FileData"}}]})
    stream = httpx.get(f"{url}gradio_api/call/upload_reference/{call.json()['event_id']}", headers=auth,
                       timeout=30).text
    assert "event: error" in stream, stream
    assert "not uploaded by a user" in stream or "not paths on the server" in stream, stream
    assert set(svc.config.uploads_dir.iterdir()) == before
    from studio.services import UploadRefused  # the studio's own check, behind Gradio's

    with pytest.raises(UploadRefused, match="not paths on the server"):
        svc.keep_upload(secret)
    assert set(svc.config.uploads_dir.iterdir()) == before
    with pytest.raises(Exception, match="access token"):  # and no token: no upload at all
        Client(url, verbose=False).predict(handle_file(str(not_audio)), api_name="/upload_reference")
    ok = tmp_path / "ref.wav"
    sf.write(ok, np.random.default_rng(1).uniform(-0.5, 0.5, (22050 * 12, 1)).astype(np.float32), 22050)
    kept = c.predict(handle_file(str(ok)), api_name="/upload_reference")
    # Relative to the data folder (forms take that): the answer names no server path.
    assert (svc.config.data_dir / kept["file"]).parent == svc.config.uploads_dir
    assert "MuQ-MuLan hears" in kept["style_window"] and not Path(kept["file"]).is_absolute()
    r = c.predict(form(style_source="audio", style_audio=kept["file"]), "", api_name="/submit")
    assert run_take(c, r["takes"][0])[1]["status"] == "done"


def test_paths_outside_the_data_dir_are_refused(studio, tmp_path: Path) -> None:
    url, svc, c = studio
    outside = tmp_path / "elsewhere.wav"
    sf.write(outside, np.zeros((44100 * 12, 2), dtype=np.float32), 44100)
    for path in (str(outside), "/etc/hostname", "../../etc/passwd"):
        with pytest.raises(Exception, match="outside the studio's data directory"):
            c.predict(form(style_source="audio", style_audio=path), "", api_name="/submit")
    for path in ("/etc/passwd", str(outside)):
        assert httpx.get(f"{url}gradio_api/file={path}", timeout=10).status_code in (403, 404)
    # Not even the data directory's own database (it holds every session's key), nor saved styles.
    for name in ("studio.db", "studio.db-wal", "styles", ".secrets/owner.key", ".secrets/cli.token"):
        assert httpx.get(f"{url}gradio_api/file={svc.store.data_dir / name}", timeout=10).status_code in (403, 404)


def test_takes_rendered_elsewhere_are_served_through_the_cache(studio, tmp_path: Path) -> None:
    """`studio render -o DIR --session` records files outside the data dir; the studio still plays them,
    without serving DIR itself."""
    url, svc, c = studio
    song = tmp_path / "album" / "a.wav"
    song.parent.mkdir()
    sf.write(song, np.zeros((4410, 2), dtype=np.float32), 44100)
    s = svc.store.create_session("Rendered overnight", owner=svc.identity.cli_owner())  # as `render --session`
    t = svc.store.add_take(s.id, {"lyrics": "", "style": {"text": "x"}}, status="done")
    svc.store.update_take(t.id, files={"wav": song})
    take = c.predict(t.id, api_name="/take")
    assert take["files"]["wav"] == "a.wav" and str(tmp_path) not in take["urls"]["wav"]  # no server path
    assert httpx.get(url.rstrip("/") + take["urls"]["wav"], timeout=10).content == song.read_bytes()
    assert httpx.get(f"{url}gradio_api/file={song}", timeout=10).status_code in (403, 404)


def test_without_weights_the_page_opens_and_names_the_fetch_command(tmp_path: Path) -> None:
    os.environ["GRADIO_TEMP_DIR"] = str(tmp_path / "gradio")
    with in_process_studio(tmp_path / "data", None) as (url, _svc):
        page = httpx.get(url, timeout=10)
        assert page.status_code == 200
        c = api_client(url, _svc.config.data_dir)
        with pytest.raises(Exception, match="studio models fetch"):
            c.predict(form(), "", api_name="/submit")
        assert c.predict("", api_name="/sessions") == []  # the rest of the studio works


def test_saved_style_is_an_embedding_that_generates(studio) -> None:
    _, svc, c = studio
    saved = c.predict("Night drive", "dark synthwave, male vocals", "", api_name="/save_style")
    assert saved["embedding"] is True  # kept, but its server path is not the client's business
    stored = svc.store.get_style("Night drive", svc.identity.owner_of(svc.identity.cli_token())).embedding_path
    emb = np.load(svc.config.inside_data(stored))  # the owner's own folder of styles/ (names are per owner)
    assert emb.shape in ((512,), (1, 512)) and svc.config.inside_data(stored).parent.parent == svc.config.styles_dir.resolve()
    assert "Night drive" in [s["name"] for s in c.predict(api_name="/styles")]
    with pytest.raises(Exception, match="not allowed"):
        c.predict("../escape", "x", "", api_name="/save_style")
    r = c.predict(form(style_source="saved", style_saved="Night drive", style_text=""), "", api_name="/submit")
    take = run_take(c, r["takes"][0])[1]
    assert take["status"] == "done" and take["request"]["style"]["embedding"] == Path(stored).name
    with pytest.raises(Exception, match="No saved style"):
        c.predict(form(style_source="saved", style_saved="Nope"), "", api_name="/submit")


def test_queue_position_is_reported_while_waiting(studio) -> None:
    _, svc, c = studio
    with card_held(c, svc):
        waiting = c.predict(form(steps=4), "", api_name="/submit")
        first = next(iter(c.submit(waiting["takes"][0], api_name="/follow")))
        assert first["status"] == "queued" and first["queue_position"] >= 1
        assert first["phase"].startswith("waiting: ")
    assert run_take(c, waiting["takes"][0])[1]["status"] == "done"  # it runs once the card is free


def test_hostile_forms_get_clear_refusals_and_nothing_is_clamped(studio) -> None:
    url, svc, c = studio
    before = len(svc.store.list_sessions())
    cases = [
        ({"duration": 9999}, "96-285"),  # refused with the range, never silently made 285
        ({"duration": "NaN"}, "finite number"),
        ({"steps": "many"}, "must be a number"),
        ({"steps": 2.5}, "whole number"),
        ({"cfg": "inf"}, "finite number"),
        ({"variations": [1, 2]}, "finite number"),
        ({"formats": [{"x": 1}]}, "formats"),
        ({"lyrics": ["a"]}, "lyrics must be text"),
        ({"style_text": ""}, "Describe the style"),
    ]
    for bad, words in cases:
        with pytest.raises(Exception) as err:
            c.predict(form(**bad), "", api_name="/submit")
        msg = str(err.value)
        assert words in msg and "Traceback" not in msg and str(svc.config.data_dir) not in msg, (bad, msg)
    with pytest.raises(Exception, match="JSON object"):
        c.predict("not a form", "", api_name="/submit")
    with pytest.raises(Exception, match="access token"):
        Client(url, verbose=False).predict(form(), "", api_name="/submit")
    with pytest.raises(Exception, match="access token"):
        Client(url, verbose=False, headers={"Authorization": "Bearer forged.0123456789abcdef0123456789abcdef"}
               ).predict("", api_name="/sessions")
    assert len(svc.store.list_sessions()) == before  # refused requests leave no empty sessions behind
    with pytest.raises(Exception, match="limit is 200,000"):
        c.predict("x" * 200_001, 95, api_name="/lyrics_report")
    with pytest.raises(Exception, match="96-285"):
        c.predict("[00:01.00]hi", 9999, api_name="/lyrics_report")
