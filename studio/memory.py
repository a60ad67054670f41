"""Give freed audio back to the system (issue 27 finding 7: 20 users x 2 songs peaked at 738 MB).

A take's decoded audio arrives as ~1 MB windows, is held until the take is written, then freed. glibc's
malloc raises its mmap threshold to the size of every large block freed (up to 32 MB), so after the
first take those windows come from the heap arenas instead of their own mappings; with one arena per
thread (the mirror threads, the pipeline's stages, Gradio's workers) the freed windows stay in the
arenas as holes, and the studio's RSS climbs by the audio of every take ever in flight at once. Here:
a fixed mmap threshold (large blocks always get their own mapping, unmapped when freed), few arenas,
and a `malloc_trim` after each take, which returns what the arenas still hold free.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading

logger = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD = 256 * 1024  # a fixed value also turns off glibc's dynamic raising of it
TRIM_THRESHOLD = 1024 * 1024
ARENA_MAX = 4

_libc: ctypes.CDLL | None = None
_trim_lock = threading.Lock()


def _glibc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            lib.mallopt  # noqa: B018 - glibc only (musl and macOS have no mallopt)
            lib.malloc_trim  # noqa: B018
        except (OSError, AttributeError):
            return None
        _libc = lib
    return _libc


def tune() -> bool:
    """Set the allocator so large freed blocks go back to the system; False where it is not glibc."""
    lib = _glibc()
    if lib is None:
        return False
    ok = all(lib.mallopt(opt, value) == 1 for opt, value in
             ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_ARENA_MAX, ARENA_MAX)))
    if not ok:
        logger.warning("mallopt refused a setting: the studio's memory may not shrink after takes")
    return ok


def trim() -> bool:
    """Return the free memory malloc still holds to the system (one caller at a time); False if not glibc."""
    lib = _glibc()
    if lib is None:
        return False
    with _trim_lock:
        lib.malloc_trim(0)
    return True
