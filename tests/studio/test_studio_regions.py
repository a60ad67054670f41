"""Waveform peaks for the region editor and the style-match order of the takes list (issue 18 items 3,
6), on the real page layout (`build_page`, not launched) and a real store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from studio import present
from studio.app import build_page
from studio.config import StudioConfig
from studio.handlers import Handlers
from studio.services import Services
from studio.store import Store
from studio.ui.takes import SORTS
from studio.waveform import peaks, regions_html


@pytest.fixture
def h(tmp_path: Path) -> Handlers:
    svc = Services(Store(tmp_path / "data"), StudioConfig(tmp_path / "data"))
    return Handlers(svc, build_page(svc)[1])


def test_peaks_follow_the_audio_and_its_duration(tmp_path: Path) -> None:
    rate = 44100
    quiet_then_loud = np.concatenate([np.full(rate, 0.1), np.sin(np.linspace(0, 400, rate)) * 0.8])
    sf.write(tmp_path / "a.wav", np.stack([quiet_then_loud, quiet_then_loud], axis=1), rate)
    pk, duration = peaks(tmp_path / "a.wav", pairs=100)
    assert duration == pytest.approx(2.0) and len(pk) == 100
    assert all(lo == pytest.approx(0.125, abs=0.01) == hi for lo, hi in pk[:50])  # 0.1 of a 0.8 peak
    assert min(lo for lo, _ in pk[50:]) == pytest.approx(-1.0, abs=0.01) and max(hi for _, hi in pk[50:]) == 1.0
    assert peaks(tmp_path / "missing.wav") is None
    (tmp_path / "junk.wav").write_bytes(b"not audio")
    assert regions_html("t", tmp_path / "junk.wav", tmp_path / "c.json") == ""
    block = regions_html("t<x>", tmp_path / "a.wav", tmp_path / "c.json", caption="Style match 0.31")
    assert "data-duration='2.000'" in block and "t&lt;x&gt;" in block and "Style match 0.31" in block
    assert "wr-repaint" in block and "wr-extend" in block
    listen_only = regions_html("t", tmp_path / "a.wav", tmp_path / "c.json", editable=False)
    assert "wr-canvas" in listen_only and "wr-repaint" not in listen_only and "wr-extend" not in listen_only
    assert (tmp_path / "c.json").is_file()  # cached: the second read does not open the audio
    (tmp_path / "a.wav").unlink()
    assert regions_html("t", tmp_path / "a.wav", tmp_path / "c.json") != ""


def test_takes_sort_by_style_match_and_ones_without_go_last(h: Handlers) -> None:
    store, token = h.svc.store, h.svc.identity.new_token()
    s = store.create_session("s", owner=h.svc.identity.owner_of(token))
    figures = [0.12, None, 0.31, -0.05]
    takes = []
    for i, f in enumerate(figures):
        t = store.add_take(s.id, {"duration": 10, "variations": 4}, variation=i, seed=i, status="done")
        rec = {"style_match": {"cosine": f, "window_s": [0, 10]} if f is not None
               else {"cosine": None, "why": "no style model is loaded"}}
        takes.append(store.update_take(t.id, record=rec))
    newest = h.takes.resort(SORTS[0], s.id, token)[h.page.takes.listing]
    best = h.takes.resort(SORTS[1], s.id, token)[h.page.takes.listing]
    assert [v for _, v in newest.choices] == [t.id for t in reversed(takes)]
    assert [v for _, v in best.choices] == [takes[2].id, takes[0].id, takes[3].id, takes[1].id]
    # The browser keeps the shown take selected: a re-sort sends no value (one sent back from when it was
    # triggered overrode a take picked meanwhile).
    assert "value" not in best.constructor_args
    assert "match 0.31" in best.choices[0][0] and "match" not in best.choices[-1][0]
    assert present.style_match_text(takes[1]).startswith("Style match: none (no style model")
    assert "Style match 0.12" in present.record_markdown(takes[0])
    # Another browser's key sees nothing of this session, whatever it asks for.
    assert h.takes.resort(SORTS[1], s.id, h.svc.identity.new_token())[h.page.takes.listing].choices == []
