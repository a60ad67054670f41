"""Opening and closing the p100a: kernel cache, scratch working directory, l1_small, worker dispatch.

Environment is set before ttnn is first imported (`configure_environment`): TT_METAL_CACHE on a
persistent path (a fresh container otherwise recompiles every kernel: tenstorrent/tt-metal#44258, ~40 s
per model compile) and TT_METAL_OPERATION_TIMEOUT_SECONDS (a hung op raises instead of hanging the
worker). The device is opened with
- l1_small_size 96 KiB: conv config tensors live in L1_SMALL (default 0 -> out of memory in conv1d; the
  port uses 98304);
- DispatchCoreConfig(WORKER): the p100a has no Ethernet cores, dispatch runs on one Tensix column, so
  the compute grid is 11 x 10 (read from the device, never assumed);
- trace_region_size only when tracing;
from a scratch directory (opening writes `generated/` into the cwd) and closed exactly once: on `close()`,
at interpreter exit, and on SIGTERM when nobody else (the worker) handles it.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DEFAULT_ROOT = Path(os.environ.get("DRS_TTNN_CACHE", Path.home() / ".cache" / "diffrhythm-studio" / "ttnn"))
L1_SMALL = 98_304  # bytes; port (tt-diffrhythm common.py) and within the 8-128 KiB of tt-metal demos
TRACE_REGION = 256 << 20  # bytes when tracing; per-bucket need unmeasured on one chip (spec section 9)


@dataclass
class DeviceSettings:
    device_id: int = 0
    root: Path = field(default_factory=lambda: DEFAULT_ROOT)  # kernel cache, weight cache, scratch
    l1_small_size: int = L1_SMALL
    trace: bool = False
    op_timeout_s: int = 600  # the port's serve manifest uses 600

    @property
    def kernel_cache(self) -> Path:
        return Path(os.environ.get("TT_METAL_CACHE", self.root / "tt-metal-cache"))

    @property
    def scratch(self) -> Path:
        return self.root / "scratch"


def parse_device(device: str) -> int:
    """"0", "tt:0", "ttnn:1" -> the card index; anything else is refused in a sentence."""
    text = str(device).strip().lower()
    for prefix in ("ttnn:", "tt:"):
        text = text.removeprefix(prefix)
    if text == "":
        return 0
    if not text.isdigit():
        raise ValueError(f"the ttnn backend runs on a Tenstorrent card: pass --device 0 (or tt:N), not {device!r}")
    return int(text)


def configure_environment(s: DeviceSettings) -> None:
    """Set the deployment variables ttnn reads; call before the first `import ttnn`."""
    s.kernel_cache.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TT_METAL_CACHE", str(s.kernel_cache))
    os.environ.setdefault("TT_METAL_OPERATION_TIMEOUT_SECONDS", str(s.op_timeout_s))
    if s.device_id:
        os.environ.setdefault("TT_METAL_VISIBLE_DEVICES", str(s.device_id))


class _InScratch:
    """chdir into the scratch directory for a block: ttnn writes `generated/` into the cwd when it first
    talks to the cluster (seen under the mock P100 cluster: `ttnn.get_num_devices()` already does)."""

    def __init__(self, scratch: Path) -> None:
        self.scratch, self.cwd = scratch, ""

    def __enter__(self) -> None:
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.cwd = os.getcwd()
        os.chdir(self.scratch)

    def __exit__(self, *exc: object) -> None:
        os.chdir(self.cwd)


def count_cards(settings: DeviceSettings | None = None) -> int:
    """Tenstorrent chips ttnn sees (0 when it says "No chips detected"), asked from the scratch cwd."""
    from device_worker.backends.ttnn.runtime import require_ttnn

    s = settings or DeviceSettings()
    configure_environment(s)
    ttnn = require_ttnn()
    with _InScratch(s.scratch):
        try:
            return int(ttnn.get_num_devices())
        except RuntimeError:
            return 0


class Card:
    """One opened p100a. `open()` once, `close()` any number of times (only the first acts)."""

    def __init__(self, settings: DeviceSettings) -> None:
        self.settings = settings
        self.dev: Any = None
        self._ttnn: Any = None
        self._closed = False

    def open(self) -> Any:
        from device_worker.backends.ttnn.runtime import require_ttnn

        s = self.settings
        configure_environment(s)
        ttnn = self._ttnn = require_ttnn()  # kept: close() at exit must not depend on import state
        try:
            with _InScratch(s.scratch):  # ttnn writes generated/ into the cwd
                self.dev = ttnn.open_mesh_device(
                    mesh_shape=ttnn.MeshShape(1, 1), l1_small_size=s.l1_small_size,
                    trace_region_size=TRACE_REGION if s.trace else 0,
                    dispatch_core_config=ttnn.DispatchCoreConfig(ttnn.DispatchCoreType.WORKER))
        except RuntimeError as exc:
            raise RuntimeError(f"cannot open Tenstorrent card {s.device_id}: {exc} (is /dev/tenstorrent present, "
                               "hugepages mounted, the SFPI compiler at /opt/tenstorrent/sfpi, and no other "
                               "process holding the card? try `tt-smi`)") from exc
        grid = self.dev.compute_with_storage_grid_size()
        logger.info("[ttnn] opened card=%d grid=%dx%d kernel_cache=%s", s.device_id, grid.x, grid.y,
                    s.kernel_cache)
        if (grid.x, grid.y) != (11, 10):
            logger.warning("[ttnn] compute grid %dx%d is not a p100a's 11x10; blockings were chosen for 11x10",
                           grid.x, grid.y)
        atexit.register(self.close)
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):  # the worker installs its own
            signal.signal(signal.SIGTERM, self._on_sigterm)
        return self.dev

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.close()
        sys.exit(143)

    def close(self) -> None:
        if self._closed or self.dev is None:
            return
        self._closed = True
        self._ttnn.close_mesh_device(self.dev)
        logger.info("[ttnn] closed card=%d", self.settings.device_id)
