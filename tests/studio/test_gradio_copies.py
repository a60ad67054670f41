"""Gradio's copies of the takes a page shows are cleaned while the studio runs (issue 26: 297 MB of copies
after one walk, beside 329 MB of takes, never removed while serving).

A launched studio page; a take file is handed to the take player the way a page event's answer is
(Gradio copies it into GRADIO_TEMP_DIR and remembers it), then the copy must go once older than
`browser_copies_max_age_s`, while the studio keeps serving."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from studio_helpers import free_port


def test_copies_of_shown_takes_go_after_their_age(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from studio.app import build_page, launch
    from studio.config import StudioConfig
    from studio.services import Services
    from studio.store import Store

    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    data = tmp_path / "data"
    svc = Services(Store(data), StudioConfig(data, browser_copies_max_age_s=2, browser_copies_every_s=1))
    demo, page = build_page(svc)
    launch(demo, svc, port=free_port(), block=False)
    try:
        take = data / "takes" / "song.wav"
        take.parent.mkdir(parents=True)
        sf.write(take, np.zeros((44100, 2), dtype=np.float32), 44100)
        copy = Path(page.takes.audio.move_resource_to_block_cache(str(take)))
        assert copy.is_file() and (tmp_path / "gradio") in copy.parents
        deadline = time.monotonic() + 20
        while copy.exists():
            assert time.monotonic() < deadline, "Gradio's copy of the shown take was never cleaned"
            time.sleep(0.2)
        assert take.is_file()  # the take itself stays
    finally:
        demo.close()
        svc.close()


def test_the_default_keeps_copies_for_half_an_hour() -> None:
    from studio.config import StudioConfig

    cfg = StudioConfig(Path("/nonexistent"))
    assert (cfg.browser_copies_every_s, cfg.browser_copies_max_age_s) == (300, 1800)
