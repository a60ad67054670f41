"""The DiT computed exactly the way the card computes it, in plain torch (float32 by default).

This is the oracle for the device path and the CPU check of every layout it depends on: it runs on the
converted weights (`convert.py`) and must equal the model core (`device_worker.model.dit`) within float32
rounding for any bucket. What the card does differently from the model core, and how padding stays exact:
- the sequence is padded to a bucket S >= N (`plan.Geometry`); real rows are 0..N-1;
- lyric features are computed on the UNPADDED sequence (GRN normalises over time) and then zero-padded;
- the input projection is split: x @ Wx per step, cond @ Wcond + text @ Wtext once per song and branch
  (`base`), style @ Ws + c @ Wc + b once per call (`in_row`, a host row);
- rows >= N are zeroed before each of the two k31 position convs (upstream's conv sees zeros there);
  the convs run as per-group unfolded matmuls;
- attention is block-diagonal over windows [0, N) and [N, S) (ttnn SDPA `cu_window_seqlens`), so no
  real query sees a padded key; v1.0 (causal) checkpoints use causal attention, which excludes them too;
- RoPE rotates adjacent pairs with tables repeated per pair, on q/k weights whose rows were permuted;
- SwiGLU reads an interleaved [gate | up] matmul output (32-column tiles);
- the residual stream is float32; velocities are cropped to N rows.
Options: `weight_dtype=torch.bfloat16` rounds the device weights like the card's bf16 storage and
`act_bf16=True` rounds every matmul input that the card holds in bf16 (a CPU estimate of the card).

Einsum legend: b batch (guidance rows), s padded sequence, n real frames, d width, f FFN width,
h heads (32), k head width, g conv groups (16), m latent channels (64), c condition width (512).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from device_worker.backends.ttnn.convert import CONV_KERNEL, TILE, convert_dit
from device_worker.backends.ttnn.plan import Geometry
from device_worker.model.dit import DiT, fp16_value, rope_inv_freq, text_position_table


def pad_rows(x: torch.Tensor, seq: int) -> torch.Tensor:
    """[b, n, ...] -> [b, seq, ...] with zero rows appended."""
    return F.pad(x, (0, 0, 0, seq - x.shape[1]))


def pair_rope_tables(dit: DiT, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin [1, 1, s, k] for adjacent-pair RoPE: column 2i and 2i + 1 both hold frequency i (the model
    core's frequencies, fp16-rounded unless exact_buffers, as upstream)."""
    inv = rope_inv_freq(dit.config.head_dim, dit.exact_buffers)  # [k/2]
    angles = torch.arange(seq).float()[:, None] * inv[None, :]  # [s, k/2]
    emb = angles.repeat_interleave(2, dim=-1)[None, None]  # [1, 1, s, k]
    return emb.cos(), emb.sin()


def rope_adjacent(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """ttnn rotary_embedding_llama: out[2i] = x[2i] cos - x[2i+1] sin, out[2i+1] = x[2i+1] cos + x[2i] sin."""
    rot = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * cos + rot * sin


def window_mask(windows: list[int], seq: int) -> torch.Tensor:
    """Bool [s, s]: query row r may see key column j iff both lie in the same window (cu_window_seqlens)."""
    wid = torch.bucketize(torch.arange(seq), torch.tensor(windows[1:-1]), right=True)  # [s] window index
    return wid[:, None] == wid[None, :]


def swiglu_tiles(gu: torch.Tensor, tile: int = TILE) -> torch.Tensor:
    """minimal_matmul(fuse_swiglu=True) on an interleaved [gate | up] product [..., 2f] -> [..., f]."""
    *lead, n2 = gu.shape
    v = gu.view(*lead, n2 // (2 * tile), 2, tile)
    return (F.silu(v[..., 0, :]) * v[..., 1, :]).reshape(*lead, n2 // 2)


def conv_unfolded(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Grouped k31 conv (padding 15) as the card runs it: [b, s, d] -> [b, s, d].
    w: [g, 31 * cg, cg] from `convert.conv_group_unfold`."""
    b, s, d = x.shape
    g, pad = w.shape[0], CONV_KERNEL // 2
    xp = F.pad(x, (0, 0, pad, pad))  # [b, s + 30, d]
    xg = xp.view(b, s + 2 * pad, g, d // g).permute(0, 2, 1, 3)  # [b, g, s + 30, cg]
    unf = torch.cat([xg[:, :, j : j + s, :] for j in range(CONV_KERNEL)], dim=-1)  # [b, g, s, 31 cg]
    y = unf @ w  # [b, g, s, cg] (w broadcast over b)
    return y.permute(0, 2, 1, 3).reshape(b, s, d) + bias


def bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).float()


@dataclass
class RefSong:
    """One prepared batch (rows = guidance branches) in the card's formulation."""

    geo: Geometry
    base: torch.Tensor  # [b, s, d] cond @ Wcond + lyric features @ Wtext (zero rows past n)
    fusion: list[torch.Tensor]  # depth//2 x [b, s, d] SiLU(lyric features @ Wf + bf)
    start: torch.Tensor  # [b, c]
    duration: torch.Tensor | None  # [b, c]
    style: torch.Tensor  # [b, c]
    cos: torch.Tensor  # [1, 1, s, k]
    sin: torch.Tensor
    row_mask: torch.Tensor  # [s, 1] 1.0 for real rows
    attn_mask: torch.Tensor | None  # [s, s] bool (None: causal, v1.0)

    @property
    def batch(self) -> int:
        return self.base.shape[0]


class DeviceShapedDiT:
    """The card's DiT on the CPU. `dit` supplies the host-side modules (lyric ConvNeXt, time MLPs,
    output modulation) exactly as the model core runs them; the rest runs on `convert_dit` weights."""

    def __init__(self, dit: DiT, weights: dict[str, torch.Tensor] | None = None, *,
                 weight_dtype: torch.dtype = torch.float32, act_bf16: bool = False) -> None:
        self.dit, self.config = dit, dit.config
        w = weights if weights is not None else convert_dit(dit.state_dict(), dit.config)
        host = ("in.wstyle", "in.wc", "in.b")  # host rows stay float32 (DRPrecision.rows_fp32), and so do
        # vectors (norm weights, biases): only matrices are stored in weight_dtype (convert.WeightCache)
        keep = lambda k, v: k in host or v.ndim < 2 or weight_dtype == torch.float32  # noqa: E731
        self.w = {k: v.float() if keep(k, v) else bf16(v.float()) for k, v in w.items()}
        self.act_bf16 = act_bf16

    def _a(self, x: torch.Tensor) -> torch.Tensor:
        """A matmul input the card holds in bf16."""
        return bf16(x) if self.act_bf16 else x

    # ---- host side (shared with tt_dit) ------------------------------------------------------------------
    def text_features(self, text: torch.Tensor) -> torch.Tensor:
        """[b, n] ids -> [b, n, t] lyric features on the UNPADDED sequence (GRN statistics over time)."""
        config = self.config
        pos = text_position_table(config.text_dim, text.shape[1], config.text_max_pos, self.dit.exact_buffers)
        return self.dit.text_embed(text, pos).float()

    def cond_embedding(self, time: torch.Tensor | float, song: RefSong) -> torch.Tensor:
        """c = time + start (+ duration) embeddings, [b, c], in the model core's order of additions."""
        b = song.batch
        c = self.dit.time_embed(self.dit._scalar(time, b, torch.device("cpu"))) + song.start
        return c + song.duration if song.duration is not None else c

    def song_rows(self, b: int, n: int, start_time: torch.Tensor | float | None,
                  duration: torch.Tensor | float | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Start-time and duration embeddings [b, c] (duration None for models without it)."""
        dit, cpu = self.dit, torch.device("cpu")
        start = dit.start_time_embed(dit._scalar(0.0 if start_time is None else start_time, b, cpu))
        if not self.config.duration_embed:
            return start, None
        duration = fp16_value(n / self.config.max_frames) if duration is None else duration
        return start, dit.duration_time_embed(dit._scalar(duration, b, cpu))

    def call_rows(self, style: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Per-call rows [b, d]: input row (style @ Ws + c @ Wc + b), 1 + scale, shift."""
        w = self.w
        in_row = style.float() @ w["in.wstyle"] + c.float() @ w["in.wc"] + w["in.b"]
        scale, shift = self.dit.norm_out.linear(F.silu(c)).float().chunk(2, dim=1)
        return in_row, 1 + scale, shift

    # ---- per song ----------------------------------------------------------------------------------------
    @torch.inference_mode()
    def prepare(self, cond: torch.Tensor, text: torch.Tensor, style: torch.Tensor,
                start_time: torch.Tensor | float | None = None, duration: torch.Tensor | float | None = None,
                seq: int | None = None) -> RefSong:
        """cond [b, n, m], text [b, n], style [b, c] (branches already built, as sampling.start_song does)."""
        b, n = text.shape
        geo = Geometry(n, seq) if seq is not None else Geometry.for_frames(n)
        if geo.seq < n:
            raise ValueError(f"bucket {geo.seq} is shorter than the song ({n} frames)")
        dit, w, s = self.dit, self.w, geo.seq
        start, dur = self.song_rows(b, n, start_time, duration)
        te = self._a(pad_rows(self.text_features(text), s))  # [b, s, t]
        base = self._a(pad_rows(cond.float(), s)) @ w["in.wcond"] + te @ w["in.wtext"]  # [b, s, d]
        fusion = [F.silu(te @ w[f"fusion.{i}.w"] + w[f"fusion.{i}.b"]) for i in range(self.config.depth // 2)]
        cos, sin = pair_rope_tables(dit, s)
        row_mask = (torch.arange(s) < n).float()[:, None]  # [s, 1]
        attn = None if self.config.causal else window_mask(geo.windows, s)
        return RefSong(geo, base, fusion, start, dur, style.float(), cos, sin, row_mask, attn)

    # ---- per step ----------------------------------------------------------------------------------------
    def _attention(self, a: torch.Tensor, i: int, song: RefSong) -> torch.Tensor:
        b, s, d = a.shape
        qkv = self._a(a) @ self.w[f"layers.{i}.wqkv"]  # [b, s, 3d]
        q, k, v = (t.view(b, s, self.config.n_head, -1).transpose(1, 2) for t in qkv.split(d, dim=-1))  # [b, h, s, k]
        q, k = rope_adjacent(q, song.cos, song.sin), rope_adjacent(k, song.cos, song.sin)
        if song.attn_mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=song.attn_mask)  # [b, h, s, k]
        return self._a(y.transpose(1, 2).reshape(b, s, d)) @ self.w[f"layers.{i}.wo"]

    @staticmethod
    def _rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight

    @torch.inference_mode()
    def forward(self, x: torch.Tensor, time: torch.Tensor | float, song: RefSong,
                taps: list[torch.Tensor] | None = None) -> torch.Tensor:
        """Velocity [b, n, m] float32 of the latent x [b, n, m] at flow time `time`."""
        w, geo = self.w, song.geo
        c = self.cond_embedding(time, song)
        in_row, gamma, shift = self.call_rows(song.style, c)  # [b, d] each
        xs = pad_rows(x.float(), geo.seq)  # [b, s, m] (fp32 on the card too: DRPrecision.x_fp32)
        h = (xs @ w["in.wx"] + song.base + in_row[:, None, :]) * song.row_mask  # [b, s, d] fp32
        y = h
        for i in range(2):  # zero the padding before each conv: upstream's sequence ends at n
            y = F.mish(conv_unfolded(self._a(y * song.row_mask), w[f"conv.{i}.w"], w[f"conv.{i}.b"]))
        h = h + y
        for i in range(self.config.depth):
            h = h + self._attention(self._rms(h, w[f"layers.{i}.ln1"]), i, song)
            m = self._a(self._rms(h, w[f"layers.{i}.ln2"]))
            h = h + self._a(swiglu_tiles(m @ w[f"layers.{i}.w_gateup"])) @ w[f"layers.{i}.w_down"]
            if i < len(song.fusion):
                h = h + song.fusion[i]
            if taps is not None:
                taps.append(h[:, : geo.frames].clone())
        hn = F.layer_norm(h, h.shape[-1:], eps=1e-6) * gamma[:, None, :] + shift[:, None, :]
        v = self._a(hn) @ w["out.w"] + w["out.b"]  # [b, s, m]
        return v[:, : geo.frames]


