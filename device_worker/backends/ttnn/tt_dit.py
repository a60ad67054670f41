"""The DiffRhythm DiT on one p100a (ttnn), op for op the computation of `reference.DeviceShapedDiT`.

Per song (`prepare`, once per job): the lyric features (host, unpadded) and cond go up once; on the card
base = cond @ Wcond + text @ Wtext and the 8 text-fusion terms SiLU(text @ Wf + bf) are computed for
every guidance branch (the rows of a batch-2 song are the conditional and unconditional branch).
Per step (`forward`): only x [b, s, 64] fp32 and three fp32 rows per branch go up (input row, 1 + scale,
shift); the velocity [b, n, 64] fp32 comes back. Both branches run as one batch-2 call: the weights are
read once per step and every matmul has twice the rows (DRPrecision.batch_branches).

`TtBackbone` is this DiT as the shared sampler's backbone (`device_worker.model.sampling.Backbone`).

Trace (DRPrecision.trace): after every bucket has run eagerly (compiled), `capture` allocates each
bucket's persistent inputs and per-song slots, then records one trace per bucket; a step copies x and
the rows into the inputs and, when the bucket's resident song changes, the song's tensors (kept on the
host in trace mode) into the slots. Nothing persistent is allocated after a capture (replay could
overwrite it), so an uncaptured bucket is refused in trace mode.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from device_worker.backends.ttnn.convert import CONV_GROUPS, CONV_KERNEL
from device_worker.backends.ttnn.plan import Geometry
from device_worker.backends.ttnn.precision import DRPrecision
from device_worker.backends.ttnn.reference import DeviceShapedDiT, pad_rows, pair_rope_tables, window_mask
from device_worker.backends.ttnn.runtime import require_ttnn
from device_worker.backends.ttnn.tt_common import (
    MEM,
    Configs,
    dtype,
    free,
    rope_trans_mat,
    rows,
    upload,
    upload_weight,
)
from device_worker.model.dit import DiT

ttnn = require_ttnn()

_TOKENS = itertools.count(1)
HOST_KEYS = ("in.wstyle", "in.wc", "in.b")  # the per-call row is computed on the host in fp32
# minimal_matmul blockings (M, K, N blocks, subblock h, w) per (K, N) on an 11x10 grid, from the public
# port's sweep for one branch (tt-diffrhythm experiments/mm_sweep.py: 5-15 % over tt-metal's 8x8x8 default);
# (largest M, blocks) pairs, first match wins. Not re-swept for batch-2 rows: needs a card.
MM_BLOCKS: dict[tuple[int, int], list[tuple[int | None, tuple[int, int, int, int, int]]]] = {
    (2048, 6144): [(None, (4, 8, 4, 4, 1))],
    (2048, 2048): [(None, (4, 4, 4, 4, 1))],
    (2048, 16384): [(3072, (8, 8, 8, 2, 2)), (None, (4, 8, 8, 4, 1))],
    (8192, 2048): [(None, (4, 8, 4, 4, 1))],
}


@dataclass
class TtSong:
    """One prepared job: device tensors (eager mode) or host copies (trace mode) plus host rows."""

    geo: Geometry
    start: torch.Tensor  # [b, c] host
    duration: torch.Tensor | None
    style: torch.Tensor  # [b, c] host
    dev: dict[str, Any] = field(default_factory=dict)  # base, fusion.i, cos, sin, row_mask, windows/mask
    host: dict[str, torch.Tensor] = field(default_factory=dict)  # trace mode: the same tensors on the host
    token: int = field(default_factory=lambda: next(_TOKENS))  # identity for "resident in a trace's slots"

    @property
    def batch(self) -> int:
        return self.style.shape[0]


class TtDiT:
    def __init__(self, dev: Any, dit: DiT, weights: dict[str, torch.Tensor], prec: DRPrecision,
                 cache: Path | None = None) -> None:
        config = dit.config
        if config.head_dim % 32:
            raise ValueError(f"the ttnn DiT needs a head width that is a multiple of 32 (tiles); "
                             f"dim {config.dim} / {config.n_head} heads = {config.head_dim}")
        self.dev, self.config, self.prec = dev, config, prec
        self.host = DeviceShapedDiT(dit, {k: weights[k] for k in HOST_KEYS})
        self.dit = dit
        self.cf = Configs(dev, prec)
        self.res = ttnn.float32 if prec.residual_fp32 else ttnn.bfloat16
        wd, bf = dtype(prec.weight_dtype), ttnn.bfloat16
        up = lambda name, dt=bf: upload_weight(dev, weights[name].float(), dt, cache, name)  # noqa: E731
        self.wx, self.wcond, self.wtext = up("in.wx"), up("in.wcond"), up("in.wtext")
        self.fusion = [(up(f"fusion.{i}.w"), rows(dev, weights[f"fusion.{i}.b"], False))
                       for i in range(config.depth // 2)]
        self.layers = []
        for i in range(config.depth):
            p = f"layers.{i}."
            self.layers.append({k: up(p + k, wd) for k in ("wqkv", "wo", "w_gateup", "w_down")}
                               | {k: rows(dev, weights[p + k], prec.rows_fp32) for k in ("ln1", "ln2")})
        self.conv_host = [weights[f"conv.{i}.w"].float() for i in range(2)]  # [g, 31 cg, cg]
        self.conv_w: dict[tuple[int, int], Any] = {}  # (conv, batch) -> [1, b * g, 31 cg, cg] bf16
        # per-channel rows carry the guidance-row batch dim: no op here relies on batch broadcasting
        self.row_host = {"conv.0.b": weights["conv.0.b"].float(), "conv.1.b": weights["conv.1.b"].float(),
                         "out.b": weights["out.b"].float()}
        self.row_dev: dict[tuple[str, int], Any] = {}
        batch = 2 if prec.batch_branches else 1  # the usual batch now: song-time allocations never add them
        for i in range(2):
            self._conv_weight(i, batch)
        for name in self.row_host:
            self._row(name, batch)
        self.w_out = up("out.w")
        self.trans_mat = upload(dev, rope_trans_mat(), bf)
        self._tracer: Any = None  # tt_trace.DiTTracer, built on first use in trace mode

    # ---- per song ------------------------------------------------------------------------------------
    @torch.inference_mode()
    def prepare(self, cond: torch.Tensor, text: torch.Tensor, style: torch.Tensor,
                start_time: float | torch.Tensor | None = None, duration: float | torch.Tensor | None = None,
                seq: int | None = None) -> TtSong:
        """cond [b, n, m], text [b, n], style [b, c] (b = guidance rows) -> the job's device state."""
        b, n = text.shape
        geo = Geometry(n, seq) if seq is not None else Geometry.for_frames(n)
        s, d = geo.seq, self.config.dim
        start, dur = self.host.song_rows(b, n, start_time, duration)
        song = TtSong(geo, start, dur, style.float())
        te = upload(self.dev, pad_rows(self.host.text_features(text), s).reshape(b, 1, s, -1), ttnn.bfloat16)
        cd = upload(self.dev, pad_rows(cond.float(), s).reshape(b, 1, s, -1), ttnn.bfloat16)
        lt = ttnn.linear(te, self.wtext, compute_kernel_config=self.cf.mm, memory_config=MEM, dtype=ttnn.float32)
        lc = ttnn.linear(cd, self.wcond, compute_kernel_config=self.cf.mm, memory_config=MEM, dtype=ttnn.float32)
        song.dev["base"] = ttnn.add(lt, lc, memory_config=MEM, dtype=ttnn.float32)  # [b, 1, s, d]
        free(lt, lc, cd)
        for i, (w, bias) in enumerate(self.fusion):
            f = ttnn.linear(te, w, bias=bias, compute_kernel_config=self.cf.mm, memory_config=MEM, dtype=ttnn.bfloat16)
            song.dev[f"fusion.{i}"] = ttnn.silu(f, memory_config=MEM)
            free(f)
        free(te)
        cos, sin = pair_rope_tables(self.dit, s)  # [1, 1, s, k]
        song.dev["cos"], song.dev["sin"] = upload(self.dev, cos, ttnn.bfloat16), upload(self.dev, sin, ttnn.bfloat16)
        mask = (torch.arange(s) < n).float()[None, None, :, None].expand(b, 1, s, d)  # [b, 1, s, d]
        song.dev["row_mask"] = upload(self.dev, mask, ttnn.bfloat16)
        if not self.config.causal:
            if self.prec.windowed_attention:
                song.dev["windows"] = upload(self.dev, torch.tensor(geo.windows, dtype=torch.int32), ttnn.int32,
                                             ttnn.ROW_MAJOR_LAYOUT)
            else:  # additive mask [b, 1, s, s]: 0 inside the window, -1e9 outside
                add = torch.where(window_mask(geo.windows, s), 0.0, -1e9)[None, None].expand(b, 1, s, s)
                song.dev["attn_mask"] = upload(self.dev, add, ttnn.bfloat16)
        if self.prec.trace:  # the song waits on the host; a step copies it into the bucket's slots
            song.host = {k: ttnn.to_torch(v) for k, v in song.dev.items()}
            self.release(song)
        return song

    def release(self, song: TtSong) -> None:
        free(*song.dev.values())
        song.dev.clear()

    # ---- ops -------------------------------------------------------------------------------------------
    def _mm_config(self, m: int, k: int, n: int) -> Any:
        for max_m, (mb, kb, nb, sh, sw) in MM_BLOCKS.get((k, n), []):
            if max_m is None or m <= max_m:
                return ttnn.MinimalMatmulConfig(M_block_size=mb, K_block_size=kb, N_block_size=nb, subblock_h=sh,
                                                subblock_w=sw, compute_with_storage_grid_size=self.cf.grid)
        return None  # ttnn chooses (documented default: 2x2 subblocks over the whole grid)

    def _mm(self, x: Any, w: Any, *, out_dtype: Any = None, swiglu: bool = False) -> Any:
        """x [b, 1, s, K] @ w [K, N] -> [b, 1, s, N] (N/2 with the fused SwiGLU); frees nothing."""
        b, _, s, k = x.shape
        xin = x
        if w.dtype != x.dtype:  # minimal_matmul wants equal dtypes (bfloat8_b weights: quantise x too)
            xin = ttnn.typecast(x, w.dtype)
        out = ttnn.experimental.minimal_matmul(xin, w, config=self._mm_config(b * s, k, w.shape[-1]),
                                               compute_kernel_config=self.cf.mm, memory_config=MEM,
                                               dtype=out_dtype or ttnn.bfloat16, fuse_swiglu=swiglu)
        if xin is not x:
            free(xin)
        n = w.shape[-1] // 2 if swiglu else w.shape[-1]
        return out if tuple(out.shape) == (b, 1, s, n) else ttnn.reshape(out, [b, 1, s, n])

    def _bf16(self, x: Any) -> Any:
        """x as bf16 (a matmul input); frees x when it had to be converted."""
        if x.dtype == ttnn.bfloat16:
            return x
        out = ttnn.typecast(x, ttnn.bfloat16)
        free(x)
        return out

    def _conv_weight(self, i: int, b: int) -> Any:
        if (i, b) not in self.conv_w:  # one copy per guidance row: the batched matmul pairs batch dims
            w = self.conv_host[i]  # [g, 31 cg, cg]
            self.conv_w[(i, b)] = upload(self.dev, w.repeat(b, 1, 1)[None], ttnn.bfloat16)
        return self.conv_w[(i, b)]

    def _row(self, name: str, b: int) -> Any:
        """A bias row as [b, 1, 1, d] (fp32 for the output bias, DRPrecision.rows_fp32)."""
        if (name, b) not in self.row_dev:
            fp32 = name == "out.b" and self.prec.rows_fp32
            self.row_dev[(name, b)] = rows(self.dev, self.row_host[name].expand(b, -1), fp32)
        return self.row_dev[(name, b)]

    def _conv(self, x: Any, i: int) -> Any:
        """Grouped k31 conv (padding 15) as per-group unfolded matmuls: [b, 1, s, d] bf16 -> same."""
        b, _, s, d = x.shape
        g, cg, pad, k = CONV_GROUPS, d // CONV_GROUPS, CONV_KERNEL // 2, CONV_KERNEL
        r = ttnn.reshape(ttnn.to_layout(x, ttnn.ROW_MAJOR_LAYOUT), [b, s, g, cg])
        p = ttnn.permute(r, [0, 2, 1, 3])  # [b, g, s, cg]
        free(r)
        xp = ttnn.pad(p, [(0, 0), (0, 0), (pad, pad), (0, 0)], 0.0)  # [b, g, s + 30, cg]
        free(p)
        parts = [ttnn.slice(xp, [0, 0, j, 0], [b, g, j + s, cg]) for j in range(k)]
        free(xp)
        u = ttnn.concat(parts, dim=3, memory_config=MEM)  # [b, g, s, 31 cg]
        free(*parts)
        ut = ttnn.to_layout(ttnn.reshape(u, [1, b * g, s, k * cg]), ttnn.TILE_LAYOUT)
        free(u)
        y = ttnn.matmul(ut, self._conv_weight(i, b), compute_kernel_config=self.cf.conv, memory_config=MEM,
                        dtype=ttnn.bfloat16)  # [1, b g, s, cg]
        free(ut)
        yr = ttnn.reshape(ttnn.to_layout(y, ttnn.ROW_MAJOR_LAYOUT), [b, g, s, cg])
        free(y)
        yp = ttnn.permute(yr, [0, 2, 1, 3])  # [b, s, g, cg]
        free(yr)
        yt = ttnn.to_layout(ttnn.reshape(yp, [b, 1, s, d]), ttnn.TILE_LAYOUT)
        free(yp)
        out = ttnn.add(yt, self._row(f"conv.{i}.b", b), memory_config=MEM)
        free(yt)
        return out

    def _sdpa_config(self, s: int) -> Any:
        # port's sdpa_check.py: 256 x 256 chunks fastest from 3072 rows on, 128-row q chunks at <= 2560
        q = 128 if s <= 2560 else 256
        while s % q:
            q //= 2
        kc = 256
        while s % kc:
            kc //= 2
        return ttnn.SDPAProgramConfig(compute_with_storage_grid_size=self.cf.grid, q_chunk_size=q, k_chunk_size=kc,
                                      exp_approx_mode=False)

    def _attention(self, a: Any, L: dict[str, Any], sd: dict[str, Any]) -> Any:
        b, _, s, d = a.shape
        hd = self.config.head_dim
        qkv = self._mm(a, L["wqkv"])  # [b, 1, s, 3d]
        q, k, v = ttnn.experimental.nlp_create_qkv_heads(qkv, num_heads=self.config.n_head, num_kv_heads=self.config.n_head,
                                                         transpose_k_heads=False, memory_config=MEM)
        free(qkv)
        roped = []
        for t in (q, k):  # prefill RoPE runs batch 1: fold the guidance rows into the heads
            t1 = ttnn.reshape(t, [1, b * self.config.n_head, s, hd])
            r = ttnn.experimental.rotary_embedding_llama(t1, sd["cos"], sd["sin"], self.trans_mat,
                                                         is_decode_mode=False, compute_kernel_config=self.cf.norm)
            roped.append(ttnn.reshape(r, [b, self.config.n_head, s, hd]))
            free(t)
        kw: dict[str, Any] = {"is_causal": self.config.causal}
        if "windows" in sd:
            kw["cu_window_seqlens"] = sd["windows"]
        elif "attn_mask" in sd:
            kw["attn_mask"] = sd["attn_mask"]
        y = ttnn.transformer.scaled_dot_product_attention(
            roped[0], roped[1], v, scale=hd**-0.5, program_config=self._sdpa_config(s),
            compute_kernel_config=self.cf.sdpa, memory_config=MEM, **kw)
        free(*roped, v)
        y2 = ttnn.transformer.concatenate_heads(y, memory_config=MEM)  # [b, 1, s, d]
        free(y)
        o = self._mm(y2, L["wo"], out_dtype=self.res)
        free(y2)
        return o

    def _add(self, h: Any, o: Any) -> Any:
        """h + o in the residual dtype; frees both."""
        out = ttnn.add(h, o, memory_config=MEM, dtype=self.res)
        free(h, o)
        return out

    def body(self, x: Any, in_row: Any, gamma: Any, shift: Any, sd: dict[str, Any],
             taps: list[torch.Tensor] | None = None) -> Any:
        """x [b, 1, s, 64] fp32, rows [b, 1, 1, d] -> velocity [b, 1, s, 64] fp32 (padded rows included).
        `taps` (eager only) collects each block's residual [b, s, d] on the host, for per-block PCC."""
        xw = ttnn.linear(x, self.wx, compute_kernel_config=self.cf.mm, memory_config=MEM, dtype=self.res)
        h0 = ttnn.add(xw, sd["base"], memory_config=MEM, dtype=self.res)
        free(xw)
        h1 = ttnn.add(h0, in_row, memory_config=MEM, dtype=self.res)  # [b, 1, s, d] + [b, 1, 1, d]
        free(h0)
        h = ttnn.multiply(h1, sd["row_mask"], memory_config=MEM, dtype=self.res)  # padded rows -> 0
        free(h1)
        y = ttnn.typecast(h, ttnn.bfloat16)
        for i in range(2):  # zero the padding before each conv, then Mish
            m = ttnn.multiply(y, sd["row_mask"], memory_config=MEM)
            free(y)
            c = self._conv(m, i)
            free(m)
            y = ttnn.mish(c, memory_config=MEM)
            free(c)
        h = self._add(h, y)
        for i, L in enumerate(self.layers):
            a = self._bf16(ttnn.rms_norm(h, epsilon=1e-6, weight=L["ln1"], compute_kernel_config=self.cf.norm,
                                         memory_config=MEM))
            o = self._attention(a, L, sd)
            free(a)
            h = self._add(h, o)
            m = self._bf16(ttnn.rms_norm(h, epsilon=1e-6, weight=L["ln2"], compute_kernel_config=self.cf.norm,
                                         memory_config=MEM))
            gu = self._mm(m, L["w_gateup"], swiglu=True)  # [b, 1, s, f] = SiLU(gate) * up
            free(m)
            dn = self._mm(gu, L["w_down"], out_dtype=self.res)
            free(gu)
            h = self._add(h, dn)
            if i < len(self.fusion):
                h2 = ttnn.add(h, sd[f"fusion.{i}"], memory_config=MEM, dtype=self.res)
                free(h)
                h = h2
            if taps is not None:
                taps.append(ttnn.to_torch(h).float().reshape(h.shape[0], h.shape[2], -1))
        n = ttnn.layer_norm(h, epsilon=1e-6, compute_kernel_config=self.cf.norm, memory_config=MEM)
        free(h)
        g = ttnn.multiply(n, gamma, memory_config=MEM)
        free(n)
        mod = self._bf16(ttnn.add(g, shift, memory_config=MEM))
        free(g)
        o = ttnn.linear(mod, self.w_out, compute_kernel_config=self.cf.mm, memory_config=MEM,
                        dtype=ttnn.float32 if self.prec.out_fp32 else ttnn.bfloat16)
        free(mod)
        out = ttnn.add(o, self._row("out.b", o.shape[0]), memory_config=MEM, dtype=ttnn.float32)
        free(o)
        return out

    # ---- per step --------------------------------------------------------------------------------------
    def _host_inputs(self, x: torch.Tensor, time: torch.Tensor | float, song: TtSong) -> list[torch.Tensor]:
        c = self.host.cond_embedding(time, song)  # [b, c]
        in_row, gamma, shift = self.host.call_rows(song.style, c)  # [b, d] fp32 each
        xs = pad_rows(x.float(), song.geo.seq).reshape(x.shape[0], 1, song.geo.seq, -1)  # [b, 1, s, m]
        return [xs, in_row, gamma, shift]

    @torch.inference_mode()
    def forward(self, x: torch.Tensor, time: torch.Tensor | float, song: TtSong,
                taps: list[torch.Tensor] | None = None) -> torch.Tensor:
        """Velocity [b, n, m] float32 for latent x [b, n, m] at flow time `time`."""
        xs, in_row, gamma, shift = self._host_inputs(x, time, song)
        if taps is not None:
            out = self.eager(song.dev, xs, in_row, gamma, shift, taps)
        elif self.prec.trace:
            out = self.tracer.step(song, xs, in_row, gamma, shift)
        else:
            out = self.eager(song.dev, xs, in_row, gamma, shift)
        return out.float().reshape(x.shape[0], song.geo.seq, -1)[:, : song.geo.frames, : self.config.mel_dim]

    def eager(self, sd: dict[str, Any], xs: torch.Tensor, in_row: torch.Tensor, gamma: torch.Tensor,
              shift: torch.Tensor, taps: list[torch.Tensor] | None = None) -> torch.Tensor:
        """One call without a trace: upload x and the rows, run, read back [b, 1, s, 64]."""
        fp = self.prec.rows_fp32
        ins = [upload(self.dev, xs, ttnn.float32 if self.prec.x_fp32 else ttnn.bfloat16),
               rows(self.dev, in_row, fp), rows(self.dev, gamma, fp), rows(self.dev, shift, fp)]
        dev_out = self.body(*ins, sd, taps)
        free(*ins)
        out = ttnn.to_torch(dev_out)
        free(dev_out)
        return out

    @torch.inference_mode()
    def warm(self, seq: int, batch: int) -> None:
        """Compile every program of bucket `seq` with `batch` guidance rows: one eager call on a dummy song
        whose real length is one frame short of the bucket (the common case: three attention windows)."""
        n = seq - 1
        trace, self.prec = self.prec.trace, replace(self.prec, trace=False)
        try:
            song = self.prepare(torch.zeros(batch, n, self.config.mel_dim), torch.zeros(batch, n, dtype=torch.long),
                                torch.zeros(batch, 512), seq=seq)
            self.forward(torch.zeros(batch, n, self.config.mel_dim), 0.0, song)
            self.release(song)
        finally:
            self.prec = replace(self.prec, trace=trace)

    @property
    def tracer(self) -> Any:
        if self._tracer is None:
            from device_worker.backends.ttnn.tt_trace import DiTTracer

            self._tracer = DiTTracer(self)
        return self._tracer


class TtBackbone:
    """`TtDiT` as the shared sampler's backbone (`device_worker.model.sampling.Backbone`): host tensors in and out,
    float32 state. A prepared song is a list of `TtSong`: one batch-2 song for both guidance rows, or, with
    `DRPrecision.batch_branches` off (DRS_TTNN_BATCH_BRANCHES=0, the port's way), one batch-1 song per row,
    each its own call, so every traced bucket stays batch 1."""

    device = torch.device("cpu")  # the card's inputs are built on the host and uploaded per call
    state_dtype = torch.float32

    def __init__(self, dit: TtDiT) -> None:
        self.dit, self.config = dit, dit.config

    def prepare(self, cond: torch.Tensor, text: torch.Tensor, style_prompt: torch.Tensor,
                start_time: torch.Tensor | None = None, duration: torch.Tensor | None = None) -> list[TtSong]:
        if self.dit.prec.batch_branches or text.shape[0] == 1:
            return [self.dit.prepare(cond, text, style_prompt, start_time, duration)]
        return [self.dit.prepare(cond[i : i + 1], text[i : i + 1], style_prompt[i : i + 1], _row(start_time, i),
                                 _row(duration, i)) for i in range(text.shape[0])]

    def forward_prepared(self, x: torch.Tensor, time: torch.Tensor, songs: list[TtSong]) -> torch.Tensor:
        if len(songs) == 1:
            return self.dit.forward(x, time, songs[0])
        return torch.cat([self.dit.forward(x[i : i + 1], time, song) for i, song in enumerate(songs)])

    def release(self, songs: list[TtSong]) -> None:
        for song in songs:
            self.dit.release(song)
        songs.clear()


def _row(v: torch.Tensor | None, i: int) -> torch.Tensor | None:
    """Row i of a per-row value (b,), or the value itself when it is shared (None or one element)."""
    return v if v is None or v.numel() == 1 else v[i : i + 1]
