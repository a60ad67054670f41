"""`TtnnBackend`: the worker's Backend interface on one Tenstorrent p100a.

Songs run the shared sampler (`device_worker.model.sampling`, through `SamplerBackend`) with the card's DiT as
its backbone (`tt_dit.TtBackbone`): a guided step is one batch-2 DiT call on the card (conditional row,
unconditional row), then the guidance and the Euler update on the host in float32, so one seed is the
same song on every backend (up to the card's bf16 arithmetic). Before a job's VAE windows, its DiT
tensors are freed (`finish_song` releases them), so the decoder always runs in the device state it was
compiled in.

Deployment knobs (environment; the worker passes no backend options): DRS_TTNN_CACHE (cache root:
kernels, converted weights, scratch cwd), DRS_TTNN_TRACE / DRS_TTNN_HIFI2 / DRS_TTNN_BFP8 /
DRS_TTNN_BATCH_BRANCHES (`DRPrecision.from_env`), DRS_TTNN_VAE_WINDOWS (comma list of window lengths
compiled at start-up, default 128), DRS_TTNN_WARM ("all": compile every 96-285 s bucket at start-up).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from device_worker.backends.base import Progress, SamplerBackend, to_torch
from device_worker.backends.ttnn.runtime import require_ttnn, ttnn_version
from device_worker.wire import Tensor

require_ttnn()  # fail at import, in a sentence naming the environment to use (see runtime.INSTALL_HINT)

from device_worker.backends.ttnn.device import Card, DeviceSettings, parse_device  # noqa: E402
from device_worker.backends.ttnn.plan import WarmShape, base_buckets, song_buckets  # noqa: E402
from device_worker.backends.ttnn.precision import DRPrecision  # noqa: E402
from device_worker.shapes import DECODE_WINDOW  # noqa: E402

logger = logging.getLogger(__name__)


class TtnnBackend(SamplerBackend):
    name = "ttnn"

    def __init__(self, device: str = "0", precision: str = "float32", *, prec: DRPrecision | None = None,
                 root: str | os.PathLike | None = None, vae_windows: Sequence[int] | None = None,
                 warm: str | None = None) -> None:
        super().__init__(device, precision)
        self.prec = prec or DRPrecision.from_env()
        settings = DeviceSettings(device_id=parse_device(device), trace=self.prec.trace)
        if root is not None or os.environ.get("DRS_TTNN_CACHE"):
            settings.root = Path(root or os.environ["DRS_TTNN_CACHE"])
        self.settings = settings
        env_windows = os.environ.get("DRS_TTNN_VAE_WINDOWS", str(DECODE_WINDOW))
        self.vae_windows = tuple(vae_windows if vae_windows is not None
                                 else (int(w) for w in env_windows.split(",") if w.strip()))
        self.warm_mode = warm if warm is not None else os.environ.get("DRS_TTNN_WARM", "none")
        self.card = Card(settings)
        self.dit: Any = None  # tt_dit.TtDiT (self.backbone: the sampler's view of it, tt_dit.TtBackbone)
        self.vae: Any = None  # tt_vae.TtOobleck
        self.core: Any = None  # the model core's DiT with only its host modules kept
        self.warm_times: dict[str, float] = {}  # WarmShape.key -> compile seconds
        self.model_ids: dict[str, str] = {}

    # ---- loading and warming ------------------------------------------------------------------------
    def load(self, dit: str, vae: str, progress: Progress) -> dict[str, str]:
        import torch

        from device_worker.backends.torch_backend import model_id
        from device_worker.backends.ttnn.convert import WeightCache, cache_key, convert_dit, convert_vae
        from device_worker.model.load import load_dit
        from device_worker.model.vae import load_vae

        self.model_ids = {"dit": model_id(dit), "vae": model_id(vae)}
        dev = self.card.open()
        from device_worker.backends.ttnn.tt_dit import HOST_KEYS, TtBackbone, TtDiT
        from device_worker.backends.ttnn.tt_vae import TtOobleck

        progress("dit", 0.05)
        core = load_dit(dit, dtype=torch.float32)  # host modules stay exact fp32 (lyrics, time MLPs, rows)
        cache = WeightCache(self.settings.root / "weights")
        weights, hit = cache.load_or_convert("dit", model_id(dit), ttnn_version(), self.prec.weight_dtype,
                                             lambda: convert_dit(core.state_dict(), core.config), keep_fp32=HOST_KEYS)
        logger.info("[ttnn] dit weights cache=%s", "hit" if hit else "miss")
        for name in ("transformer_blocks", "text_fusion_linears"):  # now on the card: drop the host copies
            setattr(core, name, torch.nn.ModuleList())
        self.core = core
        progress("dit", 0.3)
        key = cache_key("dit", model_id(dit), ttnn_version(), self.prec.weight_dtype)  # per checkpoint
        tensorbin = self.settings.root / "tensorbin" / key
        self.dit = TtDiT(dev, core, weights, self.prec, cache=tensorbin)
        self.backbone = TtBackbone(self.dit)
        del weights
        progress("vae", 0.6)
        self.vae = TtOobleck(dev, convert_vae(load_vae(vae).state_dict()), self.prec)
        for w in self.vae_windows:  # VAE programs first, in a fixed device state (no song allocated yet)
            self.warm(WarmShape("vae", w))
        if self.prec.trace:
            progress("trace", 0.8)
            keys = [(s, 2 if self.prec.batch_branches else 1) for s in self._buckets()]
            for key, seconds in self.dit.tracer.capture(keys).items():
                self.warm_times[f"dit:{key[0]}x{key[1]}"] = seconds
        elif self.warm_mode == "all":
            for s in self._buckets():
                self.warm(WarmShape("dit", s, 2 if self.prec.batch_branches else 1))
        progress("loaded", 1.0)
        return self.model_ids

    def _buckets(self) -> list[int]:
        return song_buckets() if self.core.config.max_frames > 2048 else base_buckets()

    def warm(self, shape: WarmShape) -> float:
        """Compile one shape (a DiT bucket with its guidance rows, or a VAE window); returns seconds."""
        started = time.perf_counter()
        if shape.kind == "vae":
            self.vae.warm(shape.length)
        else:
            self.dit.warm(shape.length, shape.batch)
        seconds = time.perf_counter() - started
        self.warm_times[shape.key] = seconds
        logger.info("[ttnn] warm %s s=%.2f", shape.key, seconds)
        return seconds

    def warm_shapes(self) -> list[str]:
        """Shapes compiled in this process (their programs are in the program cache)."""
        return sorted(self.warm_times)

    def _warm_record_path(self) -> Path:
        from device_worker.backends.ttnn.convert import cache_key

        key = cache_key("warm", self.model_ids.get("dit", "?"), ttnn_version(), self.prec.weight_dtype)
        return self.settings.root / "warm" / f"{key}.json"

    def write_warm_record(self) -> Path:
        """Remember which shapes `studio warm-cache` compiled for this checkpoint, ttnn version and dtype."""
        import json

        path = self._warm_record_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"model": self.model_ids, "ttnn": ttnn_version(), "precision": self.prec.label(),
                  "kernel_cache": str(self.settings.kernel_cache), "seconds": self.warm_times}
        path.write_text(json.dumps(record, indent=1, sort_keys=True))
        return path

    def kernel_cached_shapes(self) -> list[str]:
        """Shapes a `warm-cache` run compiled into the kernel cache (first call then loads, not compiles)."""
        import json

        path = self._warm_record_path()
        if not path.is_file():
            return []
        try:
            return sorted(json.loads(path.read_text()).get("seconds", {}))
        except (OSError, ValueError):
            return []

    # ---- jobs (the song calls are SamplerBackend's) ---------------------------------------------------
    def _decode(self, latent: Any, window: int, overlap: int) -> Iterator[Any]:
        return self.vae.decode_windows(latent[0].float().contiguous(), window, overlap)  # [64, T] -> [2, n] each

    # ---- services ----------------------------------------------------------------------------------------
    def forward(self, tensors: Mapping[str, Tensor], drop_audio_cond: bool, drop_text: bool,
                drop_prompt: bool) -> Tensor:
        """Upstream's DiT.forward arguments (the RemoteDiT path) -> velocity [B, N, 64] float32."""
        import torch

        from device_worker.model.dit import drop_inputs

        t = {k: to_torch(v) for k, v in tensors.items()}
        t = {k: v.float() if v.dtype == torch.bfloat16 else v for k, v in t.items()}
        x, cond, text = t["x"].float(), t["cond"].float(), t["text"].long()
        style = t["style_prompt"].float()
        cond, text, style = drop_inputs(cond, text, style, drop_audio_cond, drop_text, drop_prompt)
        song = self.dit.prepare(cond, text, style, t.get("start_time"), t.get("duration"))
        try:
            time_ = t["time"].float()
            return np.ascontiguousarray(self.dit.forward(x, time_.reshape(-1)[0] if time_.numel() == 1 else time_,
                                                         song).numpy())
        finally:
            self.dit.release(song)

    def device_bytes(self) -> int:
        from device_worker.backends.ttnn.tt_common import dram_stats

        return dram_stats(self.card.dev)["allocated"] if self.card.dev is not None else 0

    def info(self) -> dict[str, str]:
        out = {"ttnn": ttnn_version(), "ttnn.precision": self.prec.label(), "pid": str(os.getpid()),
               "kernel_cache": str(self.settings.kernel_cache), "warm_shapes": ",".join(self.warm_shapes()),
               "kernel_cached_shapes": ",".join(self.kernel_cached_shapes())}
        if self.card.dev is not None:
            g = self.card.dev.compute_with_storage_grid_size()
            out["grid"] = f"{g.x}x{g.y}"
        if self.core is not None:
            config = self.core.config
            out.update({"dit.mel_dim": str(config.mel_dim), "dit.max_frames": str(config.max_frames),
                        "dit.duration_embed": str(int(bool(config.duration_embed))), "dit.dtype": "float32",
                        "dit.state_dtype": "float32"})
        return out

    def close(self) -> None:
        if self.dit is not None and self.dit._tracer is not None:
            self.dit.tracer.release()
        self.card.close()
