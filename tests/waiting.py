"""Waiting in tests for something a real process does: poll a condition until it holds, or fail naming it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(what: str, cond: Callable[[], T], timeout_s: float = 60.0, every_s: float = 0.02) -> T:
    """`cond()`'s first truthy value; AssertionError naming `what` when none came within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(every_s)
    raise AssertionError(f"{what}: not within {timeout_s} s")
