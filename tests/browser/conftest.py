"""The browser tests: each drives Debian's Chromium against a real studio (see tests/chromium.py);
`-m "not browser"` leaves them out."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.browser)
