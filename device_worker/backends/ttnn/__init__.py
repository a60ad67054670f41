"""The ttnn backend: DiffRhythm's DiT steps and windowed Oobleck decode on one Tenstorrent Blackhole p100a.

Nothing in this package imports ttnn at import time except the device modules (`tt_*.py`, `device.py`,
`backend.py`), which go through `runtime.require_ttnn()` and fail with a sentence naming the environment
to use. The rest runs anywhere (and is what CI checks on CPU):

| module          | role                                                                        | imports   |
|-----------------|-----------------------------------------------------------------------------|-----------|
| `runtime.py`    | `require_ttnn()`, the ttnn version, `TtnnUnavailable`                        | -         |
| `plan.py`       | sequence buckets, VAE windows, the list of shapes to warm                   | shapes    |
| `precision.py`  | `DRPrecision` (names only; resolved to ttnn enums on the device side)       | -         |
| `convert.py`    | release DiT / VAE weights -> device layout, on-disk cache, inverse maps      | torch     |
| `reference.py`  | float32 torch DiT computed exactly as the device path (buckets, masks, ...) | torch     |
| `reference_vae.py` | Oobleck decoder computed as the device path (conv2d of height 1, ...)    | torch     |
| `tt_common.py`  | tensor upload/row helpers, compute-kernel configs                           | ttnn      |
| `tt_dit.py`     | the DiT on the card (prepare once per song, forward per step, trace)        | ttnn      |
| `tt_vae.py`     | the Oobleck decoder on the card                                             | ttnn      |
| `device.py`     | open/close the p100a (l1_small, worker dispatch, kernel cache, scratch cwd) | ttnn      |
| `backend.py`    | `TtnnBackend`, the worker's Backend interface                               | ttnn      |
| `tt_trace.py`   | trace capture for the DiT, one per bucket, replayed per step                | ttnn      |
| `warm.py`       | `studio warm-cache`'s child: compile every bucket and VAE window            | ttnn      |

See docs/ttnn.md for running it and for what was checked without a card.
"""

from device_worker.backends.ttnn.runtime import INSTALL_HINT, TtnnUnavailable, require_ttnn

__all__ = ["INSTALL_HINT", "TtnnUnavailable", "require_ttnn"]
