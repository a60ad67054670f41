"""Debian's Chromium for the browser tests (Playwright drives it; no browser download): where it is,
how it is started, and the check every page must pass."""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"


def needs_browser() -> None:
    """Skip, saying what is missing, without Debian's Chromium or Playwright's Python package."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium); Playwright drives Debian's build")
    pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")


ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Gradio shows handler failures as "Error" toasts and status badges; none may appear.
NO_ERRORS = "document.body.innerText.includes('Error')"
