"""Issue 27, access findings: one decision (`studio.access`) for the API, the page and every file URL.

A real studio (test model, one CPU worker process) on 127.0.0.1, called as two owners and a share-link
viewer would call it. Each test is named after the finding it holds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from gradio_client import handle_file
from studio_helpers import api_client, form, fresh_studio


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory):
    with fresh_studio(tmp_path_factory) as (url, svc):
        owner = api_client(url, svc.config.data_dir)
        other = api_client(url, token=svc.identity.new_token())
        yield url, svc, owner, other


def finished(client, **overrides) -> tuple[str, dict]:
    r = client.predict(form(formats=["wav", "flac"], **overrides), "", api_name="/submit")
    take = list(client.submit(r["takes"][0], api_name="/follow"))[-1]
    assert take["status"] == "done", take
    return r["session_id"], take


def test_foreign_edit_source_is_refused(studio) -> None:
    """Finding 1: an edit/continue naming another owner's take id carried that owner's audio."""
    url, svc, owner, other = studio
    sid, source = finished(owner, title="Mine")
    sessions_before = len(svc.store.list_sessions(owner=svc.identity.owner_of(other.headers["Authorization"][7:])))
    link = owner.predict(sid, api_name="/share")
    attempts = [dict(edit_mode="edit", edit_take=source["id"], edit_ranges="0.5-1.5"),
                dict(edit_mode="continue", edit_take=source["id"], continue_from=1.0)]
    for attempt in attempts:  # shared (not enough: an edit would outlive the link), then revoked
        with pytest.raises(Exception, match="not a finished take of yours"):
            other.predict(form(**attempt), "", api_name="/submit")
    owner.predict(sid, link["token"], api_name="/revoke")
    owner.predict(sid, source["id"], "", "", "true", api_name="/set_take")  # deleted
    for attempt in attempts:
        with pytest.raises(Exception, match="not a finished take of yours"):
            other.predict(form(**attempt), "", api_name="/submit")
        with pytest.raises(Exception, match="not a finished take of yours"):
            owner.predict(form(**attempt), sid, api_name="/submit")  # a deleted source: not even the owner's
    other_owner = svc.identity.owner_of(other.headers["Authorization"][7:])
    assert len(svc.store.list_sessions(owner=other_owner)) == sessions_before  # refused: nothing stored
    owner.predict(sid, source["id"], "", "", "false", api_name="/set_take")
    ok = owner.predict(form(**attempts[0]), sid, api_name="/submit")  # the owner's own: still allowed
    assert list(owner.submit(ok["takes"][0], api_name="/follow"))[-1]["parent_id"] == source["id"]


def test_file_urls_die_after_revoke_and_delete(studio) -> None:
    """Finding 2: revoking a link left all of its file URLs answering 200; any holder of a path read it."""
    url, svc, owner, other = studio
    sid, take = finished(owner)
    link = owner.predict(sid, api_name="/share")
    viewer = other.predict(take["id"], link["token"], api_name="/take")
    assert set(take["urls"]) >= {"wav", "flac"} and set(viewer["urls"]) == set(take["urls"])
    wav = Path(svc.store.get_take(take["id"]).files["wav"]).read_bytes()
    for urls in (take["urls"], viewer["urls"]):
        assert httpx.get(url + urls["wav"], timeout=10).content == wav
        for u in urls.values():
            assert httpx.get(url + u, timeout=10).status_code == 200
    assert link["token"] not in json.dumps(viewer["urls"])  # a file URL handed on does not open the session
    # Tampered, moved to another kind or take, or missing key: the same 404.
    wav_url = take["urls"]["wav"]
    for bad in (wav_url[:-1] + ("0" if wav_url[-1] != "0" else "1"), wav_url.replace("/wav?", "/flac?"),
                wav_url.split("?")[0], wav_url.replace(take["id"], "x" * len(take["id"]))):
        assert httpx.get(url + bad, timeout=10).status_code == 404, bad
    owner.predict(sid, link["token"], api_name="/revoke")
    for u in viewer["urls"].values():
        assert httpx.get(url + u, timeout=10).status_code == 404  # the link's URLs died with it
    assert httpx.get(url + take["urls"]["wav"], timeout=10).status_code == 200  # the owner's did not
    owner.predict(sid, take["id"], "", "", "true", api_name="/set_take")
    for u in take["urls"].values():
        assert httpx.get(url + u, timeout=10).status_code == 404  # deleted: nobody's URL answers
    back = owner.predict(sid, take["id"], "", "", "false", api_name="/set_take")
    assert httpx.get(url + back["urls"]["wav"], timeout=10).content == wav  # Undo: fresh URLs work


def test_expired_file_url_is_refused(studio) -> None:
    """Finding 2: file URLs are signed with an expiry, checked at every request."""
    from studio import access

    url, svc, owner, _ = studio
    _, take = finished(owner)
    info = svc.store.get_take(take["id"])
    who = access.Who(svc.identity.cli_owner())
    old = access.signed_file_url(svc.store, svc.identity, info, "wav", who, now=0)
    assert old and httpx.get(url + old, timeout=10).status_code == 404
    fresh = access.signed_file_url(svc.store, svc.identity, info, "wav", who)
    assert httpx.get(url + fresh, timeout=10).status_code == 200
    assert access.signed_file_url(svc.store, svc.identity, info, "wav", access.Who("someone-else")) is None


def test_api_answers_carry_no_absolute_server_path(studio, tmp_path: Path) -> None:
    """Finding 2: API responses carried absolute server paths (files, records, uploads, styles)."""
    url, svc, owner, _ = studio
    ref = tmp_path / "ref.wav"
    sf.write(ref, np.random.default_rng(0).uniform(-0.3, 0.3, (44100 * 11, 2)).astype(np.float32), 44100)
    up = owner.predict(handle_file(str(ref)), api_name="/upload_reference")
    assert not Path(up["file"]).is_absolute()
    sid, take = finished(owner, style_source="audio", style_audio=up["file"])
    _, edited = finished(owner, edit_mode="continue", edit_take=take["id"], continue_from=1.0)
    answers = [up, take, edited, owner.predict(take["id"], api_name="/take"),
               owner.predict(sid, api_name="/takes"),
               owner.predict(owner.predict(sid, api_name="/share")["token"], api_name="/shared")]
    text = json.dumps(answers)
    roots = {str(svc.store.data_dir.resolve()), str(svc.store.data_dir), str(tmp_path), os.path.expanduser("~")}
    for root in roots:
        assert root not in text, root
    assert take["files"]["wav"].endswith(".wav") and "/" not in take["files"]["wav"]



def test_api_calls_do_not_keep_studio_memory(studio) -> None:
    """Finding 7: each API call from a fresh client left a ~270 KB Gradio session for ever (600 calls:
    +160 MB, never returned). Idle sessions holding no state are dropped; RSS: bench/api_rss.py."""
    import datetime

    from studio import gradio_state

    url, svc, _, _ = studio
    holder = svc.state_holder
    with httpx.Client(timeout=30) as http:
        for _ in range(30):  # fresh clients, as a script's calls are
            ev = http.post(f"{url}/gradio_api/call/styles", json={"data": []}).json()["event_id"]
            http.get(f"{url}/gradio_api/call/styles/{ev}").raise_for_status()
    assert len(holder.session_data) >= 30
    later = datetime.datetime.now() + datetime.timedelta(seconds=gradio_state.IDLE_S + 1)
    assert gradio_state.prune(holder, later) >= 30
    assert not any(not st.state_data for st in holder.session_data.values())  # what stays holds page state


def test_saved_styles_belong_to_their_owner(studio) -> None:
    """Finding 4: saved styles were global (any token overwrote any style; `/styles` listed every owner's
    prompts). A style is now its owner's; shared styles (saved before owners, or by the operator) are
    usable by all and overwritten by none."""
    from gradio_client.exceptions import AppError

    url, svc, owner, other = studio
    svc.store.save_style("House band", prompt="shared house band")  # a shared style (no owner)
    owner.predict("Night drive A", "dark synthwave, male vocals", "", api_name="/save_style")
    other.predict("Night drive A", "bright ukulele pop", "", api_name="/save_style")  # its own, same name
    mine = {s["name"]: s for s in owner.predict(api_name="/styles")}
    theirs = {s["name"]: s for s in other.predict(api_name="/styles")}
    assert mine["Night drive A"]["prompt"] == "dark synthwave, male vocals"  # not overwritten
    assert theirs["Night drive A"]["prompt"] == "bright ukulele pop"
    assert mine["House band"]["shared"] and theirs["House band"]["shared"]
    other.predict("House band", "my own house band", "", api_name="/save_style")
    assert {s["name"]: s for s in owner.predict(api_name="/styles")}["House band"]["prompt"] == "shared house band"
    assert svc.store.get_style("House band").prompt == "shared house band"
    other.predict("Only theirs", "sea shanty", "", api_name="/save_style")
    assert "Only theirs" not in {s["name"] for s in owner.predict(api_name="/styles")}
    with pytest.raises(AppError, match="No saved style named 'Only theirs'"):
        owner.predict(form(style_source="saved", style_saved="Only theirs", style_text=""), "", api_name="/submit")
    # Each owner's song uses its own style of a shared name (its own embedding file).
    used = []
    for client, prompt in ((owner, "dark synthwave, male vocals"), (other, "bright ukulele pop")):
        sid, take = finished(client, style_source="saved", style_saved="Night drive A", style_text="")
        style = svc.store.get_style("Night drive A", svc.store.get_session(sid).owner)
        assert style.prompt == prompt and style.embedding_path, style
        request = json.dumps(svc.store.get_take(take["id"]).request)
        assert Path(style.embedding_path).parent.name in request, request
        used.append(style.embedding_path)
    assert used[0] != used[1] and all(Path(x).is_file() for x in used)
    with httpx.Client(timeout=30) as http:  # no token: refused, nothing listed
        ev = http.post(f"{url}/gradio_api/call/styles", json={"data": []}).json()["event_id"]
        answer = http.get(f"{url}/gradio_api/call/styles/{ev}").text
    assert "event: error" in answer and "dark synthwave" not in answer, answer


def test_unused_uploads_expire_and_used_ones_stay(studio, tmp_path: Path) -> None:
    """Finding 4: anonymous uploads were kept for ever in DIR/uploads. One that no session or take names
    goes once older than a day; one a session uses stays; uploading it again makes it new; a form that
    still names a removed upload is told to upload it again (no server path)."""
    import threading
    import time
    from types import SimpleNamespace

    from gradio_client.exceptions import AppError

    from studio import uploads

    url, svc, owner, _ = studio
    songs = []
    for i, hz in enumerate((220.0, 247.0)):
        t = np.arange(11 * 44100) / 44100
        path = tmp_path / f"ref{i}.wav"
        sf.write(path, np.sin(2 * np.pi * hz * t)[:, None].repeat(2, 1) * 0.3, 44100)
        songs.append(path)
    used, unused = (owner.predict(handle_file(str(p)), api_name="/upload_reference")["file"] for p in songs)
    owner.predict(form(style_source="audio", style_audio=used, title="Uses its reference"), "", api_name="/submit")
    kept_used, kept_unused = (svc.config.data_dir / x for x in (used, unused))
    day = svc.config.upload_max_age_s
    for path in (kept_used, kept_unused):
        os.utime(path, (time.time() - day - 60,) * 2)  # uploaded a day and a minute ago

    assert uploads.sweep(svc.store, svc.config.uploads_dir, day) == [kept_unused.name]
    assert kept_used.is_file() and not kept_unused.exists()
    with pytest.raises(AppError, match="no longer kept") as refused:
        owner.predict(form(style_source="audio", style_audio=unused), "", api_name="/submit")
    assert str(svc.config.data_dir) not in str(refused.value)

    again = owner.predict(handle_file(str(songs[1])), api_name="/upload_reference")["file"]
    assert again == unused and kept_unused.is_file()
    os.utime(kept_unused, (time.time() - day + 60,) * 2)  # within the day: stays
    assert uploads.sweep(svc.store, svc.config.uploads_dir, day) == []

    # The studio's own sweeper thread does the same on its schedule.
    os.utime(kept_unused, (time.time() - day - 60,) * 2)
    cfg = SimpleNamespace(uploads_dir=svc.config.uploads_dir, upload_max_age_s=day, upload_sweep_every_s=0.1)
    stop = uploads.start_sweeping(SimpleNamespace(store=svc.store, config=cfg), threading.Event())
    try:
        deadline = time.monotonic() + 10
        while kept_unused.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
    assert not kept_unused.exists() and kept_used.is_file()
