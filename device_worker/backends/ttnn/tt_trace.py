"""Trace capture for the DiT: one trace per (bucket, guidance rows, attention windows), replayed per step.

Rules followed (tt-metal tech_reports/AdvancedPerformanceOptimizationsForModels/TraceCorrectness.md, the
spec's section 3.5): every program is compiled eagerly before any capture (`TtDiT.warm`); every
persistent input and per-song slot of every bucket is allocated before the first capture; replay reads
and writes the same tensors, so x, the rows and (when the bucket's resident song changes) the song's
tensors are copied into them first, and the output is read back before the next replay. A shape with no
trace runs eagerly from the host copies with temporaries only (nothing outlives the call), so it cannot
be overwritten by a replay. Trace on/off equality is a hardware test (tests/tenstorrent/test_ttnn_hardware.py).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from device_worker.backends.ttnn.plan import Geometry
from device_worker.backends.ttnn.runtime import require_ttnn
from device_worker.backends.ttnn.tt_common import free, host_rows, upload

ttnn = require_ttnn()
logger = logging.getLogger(__name__)


def trace_key(geo: Geometry, batch: int) -> tuple[int, int, int]:
    return geo.seq, batch, len(geo.windows)


class DiTTracer:
    def __init__(self, tt: Any) -> None:
        self.tt = tt
        self.traces: dict[tuple[int, int, int], dict[str, Any]] = {}
        self.untraced: set[tuple[int, int, int]] = set()

    @torch.inference_mode()
    def capture(self, keys: list[tuple[int, int]]) -> dict[tuple[int, int, int], float]:
        """Warm, allocate, then capture every (seq, batch); returns capture seconds per trace key."""
        import time
        from dataclasses import replace

        tt, config = self.tt, self.tt.config
        if self.traces:
            raise RuntimeError("traces are captured once, at start-up (allocations after a capture are unsafe)")
        for seq, batch in keys:
            tt.warm(seq, batch)
        plans = []
        trace_flag, tt.prec = tt.prec.trace, replace(tt.prec, trace=False)
        try:
            for seq, batch in keys:  # everything persistent first
                n = seq - 1
                song = tt.prepare(torch.zeros(batch, n, config.mel_dim), torch.zeros(batch, n, dtype=torch.long),
                                  torch.zeros(batch, 512), seq=seq)
                slots = dict(song.dev)  # the warm-up song's tensors become this bucket's song slots
                fp = ttnn.float32 if tt.prec.rows_fp32 else ttnn.bfloat16
                ins = [upload(tt.dev, torch.zeros(batch, 1, seq, config.mel_dim),
                              ttnn.float32 if tt.prec.x_fp32 else ttnn.bfloat16)]
                ins += [upload(tt.dev, torch.zeros(batch, 1, 1, config.dim), fp) for _ in range(3)]
                plans.append((trace_key(Geometry(n, seq), batch), ins, slots))
        finally:
            tt.prec = replace(tt.prec, trace=trace_flag)
        times = {}
        for key, ins, slots in plans:
            started = time.perf_counter()
            tid = ttnn.begin_trace_capture(tt.dev, cq_id=0)
            out = tt.body(*ins, slots)
            ttnn.end_trace_capture(tt.dev, tid, cq_id=0)
            self.traces[key] = {"tid": tid, "ins": ins, "slots": slots, "out": out, "resident": None}
            times[key] = time.perf_counter() - started
            logger.info("[ttnn] trace captured seq=%d batch=%d windows=%d s=%.2f", *key, times[key])
        return times

    def step(self, song: Any, xs: torch.Tensor, in_row: torch.Tensor, gamma: torch.Tensor,
             shift: torch.Tensor) -> torch.Tensor:
        tt = self.tt
        key = trace_key(song.geo, song.batch)
        tr = self.traces.get(key)
        if tr is None:
            if key not in self.untraced:
                self.untraced.add(key)
                logger.warning("[ttnn] no trace for seq=%d batch=%d windows=%d: running eagerly (slower); "
                               "warm it at start-up (studio warm-cache)", *key)
            sd = {k: upload(tt.dev, v.float() if v.dtype == torch.bfloat16 else v, _dtype_of(v),
                            ttnn.ROW_MAJOR_LAYOUT if v.dtype == torch.int32 else ttnn.TILE_LAYOUT)
                  for k, v in song.host.items()}
            try:
                return tt.eager(sd, xs, in_row, gamma, shift)
            finally:
                free(*sd.values())
        fp = tt.prec.rows_fp32
        x_host = ttnn.from_torch(xs.contiguous(), dtype=tr["ins"][0].dtype, layout=ttnn.TILE_LAYOUT)
        for host, dev in zip([x_host, host_rows(in_row, fp), host_rows(gamma, fp), host_rows(shift, fp)], tr["ins"],
                             strict=True):
            ttnn.copy_host_to_device_tensor(host, dev)
        if tr["resident"] != song.token:  # another job used this bucket since: load this song's tensors
            for name, slot in tr["slots"].items():
                ttnn.copy_host_to_device_tensor(ttnn.from_torch(song.host[name], dtype=slot.dtype, layout=slot.layout),
                                                slot)
            tr["resident"] = song.token
        ttnn.execute_trace(tt.dev, tr["tid"], cq_id=0, blocking=True)
        return ttnn.to_torch(tr["out"])

    def release(self) -> None:
        for tr in self.traces.values():
            ttnn.release_trace(self.tt.dev, tr["tid"])
        self.traces.clear()


def _dtype_of(t: torch.Tensor) -> Any:
    return {torch.int32: ttnn.int32, torch.float32: ttnn.float32}.get(t.dtype, ttnn.bfloat16)
