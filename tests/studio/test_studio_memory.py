"""The studio gives freed take audio back to the system (studio/memory.py, issue 27 finding 7).

A real child process plays the studio's pattern: threads that each gather ~1 MB audio windows with small
long-lived objects between them, join them into a take, then drop everything. Without the allocator
settings glibc keeps those windows in its arenas and the process stays hundreds of MB up; with
`memory.tune()` and a `memory.trim()` after the takes, it is back near where it started.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from shared_paths import ROOT

CHILD = textwrap.dedent("""
    import sys, threading
    import numpy as np
    from studio import memory

    def rss_mb():
        return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20

    tuned = sys.argv[1] == "tuned"
    if tuned and not memory.tune():
        print("not-glibc"); sys.exit(0)
    keep = []
    base = rss_mb()

    def take():
        windows = []
        for _ in range(120):
            windows.append(np.ones(44_100 * 3 * 2, dtype=np.float32))  # one ~1 MB decoded window
            keep.append(bytearray(2000))  # a small long-lived object between windows
        song = np.concatenate(windows)
        del windows, song

    for _wave in range(3):
        threads = [threading.Thread(target=take) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if tuned:
        memory.trim()
    print(round(rss_mb() - base))
""")


def _growth(mode: str) -> str:
    done = subprocess.run([sys.executable, "-c", CHILD, mode], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
    return done.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator is what is tuned")
def test_freed_take_audio_goes_back_to_the_system() -> None:
    tuned = _growth("tuned")
    if tuned == "not-glibc":
        pytest.skip("this libc has no mallopt: nothing to tune")
    plain = _growth("plain")
    # 18 takes of 120 MB went through; the tuned process keeps almost none of it
    assert int(tuned) < 64, f"tuned studio kept {tuned} MB after its takes (untuned: {plain} MB)"
