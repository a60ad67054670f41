"""Issue 26, "Downloads collide": the names a take's files download under, on a real SQLite store.

The walk found an edit and an extension of one take all downloading as `<title>-t0-s<seed>.wav`, and a
rename not changing the name; then the page named every download by the take's id. Each name now says
title (or the take's own name), the take's number in its session, and what it was made from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from studio.download_names import download_name, download_stem
from studio.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "data")
    yield s
    s.close()


def _take(store: Store, sid: str, title: str = "Night Drive", edit: str | None = None, parent: str | None = None,
          variation: int = 0):
    request = {"title": title, "lyrics": ""}
    if edit:
        request["edit"] = {"mode": edit, "song": "x.wav", "segments": [[1.0, 2.0]] if edit == "edit" else []}
    return store.add_take(sid, request, parent_id=parent, variation=variation, seed=7)


def test_variations_edits_and_extensions_get_distinct_meaningful_names(store: Store) -> None:
    sid = store.create_session("Night Drive").id
    first = _take(store, sid)
    second = _take(store, sid, variation=1)
    edit = _take(store, sid, edit="edit", parent=first.id)
    ext = _take(store, sid, edit="continue", parent=first.id)
    names = [download_name(store, t, "wav") for t in (first, second, edit, ext)]
    assert names == ["Night-Drive-take1.wav", "Night-Drive-take2.wav", "Night-Drive-take3-edit-of-take1.wav",
                     "Night-Drive-take4-extension-of-take1.wav"]
    # An edit of an edit names its own source.
    again = _take(store, sid, edit="edit", parent=edit.id)
    assert download_stem(store, again) == "Night-Drive-take5-edit-of-take3"


def test_a_rename_renames_the_download_and_numbers_never_move(store: Store) -> None:
    sid = store.create_session("Night Drive").id
    first, second, third = (_take(store, sid) for _ in range(3))
    store.delete_take(second.id)  # a deleted take keeps its number: the third is still take 3
    assert download_name(store, store.get_take(third.id), "flac") == "Night-Drive-take3.flac"
    renamed = store.rename_take(third.id, "Chorus fix / final?")
    assert download_name(store, renamed, "flac") == "Chorus-fix-final-take3.flac"
    assert download_name(store, store.rename_take(third.id, " "), "flac") == "Night-Drive-take3.flac"
    assert download_name(store, first, "json") == "Night-Drive-take1.json"


def test_titles_in_any_script_stay_readable_and_no_title_falls_back(store: Store) -> None:
    sid = store.create_session("").id
    zh = _take(store, sid, title="夜行 列车")
    assert download_name(store, zh, "mp3") == "夜行-列车-take1.mp3"
    bare = _take(store, sid, title="../../etc/passwd")  # nothing of a path survives
    assert download_name(store, bare, "wav") == "etc-passwd-take2.wav"
    blank = _take(store, sid, title="")
    assert download_name(store, blank, "wav") == "song-take3.wav"
    named = store.create_session("Harbour at dawn").id
    assert download_name(store, _take(store, named, title=""), "wav") == "Harbour-at-dawn-take1.wav"
