"""An idle `studio serve` (no page open, model loaded) costs next to no CPU (issue 26: ~6% of a core,
from Gradio's queue polling every millisecond). A real serve process on the test model, measured from
/proc over 10 s; the bound is generous for a shared CI machine."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from studio_helpers import ServeProcess, cpu_seconds


def test_idle_serve_stays_under_three_percent_of_a_core(tmp_path: Path) -> None:
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs Linux /proc to read a process's CPU time")
    server = ServeProcess(tmp_path / "data", tmp_path)
    try:
        server.wait_ready()
        time.sleep(3)  # the start's own work settles
        t0, c0 = time.monotonic(), cpu_seconds(server.proc.pid)
        time.sleep(10)
        share = (cpu_seconds(server.proc.pid) - c0) / (time.monotonic() - t0)
        assert share < 0.03, f"idle studio serve used {share:.1%} of a core"
    finally:
        server.stop()
