"""Release weights -> the layouts the card path uses, with inverse maps (tested) and an on-disk cache.

DiT (`convert_dit`, names are ours, shapes for the release in brackets):
- every nn.Linear [out, in] becomes a matmul weight [in, out] (ttnn multiplies x @ W);
- q/k rows are permuted per head from rotate-half pairs (i, i + k/2) to adjacent pairs (2i, 2i + 1), the
  pairing ttnn's `rotary_embedding_llama` rotates; q.k products are unchanged, so attention is too;
- q | k | v are fused into `wqkv` [d, 3d] (one matmul, split by `nlp_create_qkv_heads`);
- gate | up are interleaved per 32-column tile into `w_gateup` [d, 2f] for `minimal_matmul(fuse_swiglu=True)`
  (column tile 2p = gate tile p, 2p + 1 = up tile p);
- the input projection [d, 64 + 64 + 512 + 512 + 512] is split by input: x (per step, on the card), cond and
  lyric features (per song, on the card), style and c (one row per call, on the host);
- each k31 grouped position conv [d, d/16, 31] becomes a per-group unfolded matmul weight [16, 31 * d/16, d/16]
  (row j * cg + i = tap j, input channel i of the group): 16x fewer multiplies than one dense block-diagonal
  [31 d, d] matrix, which is what ttnn's grouped conv1d would expand to.
VAE (`convert_vae`): conv1d [out, in, k] -> conv2d-of-height-1 [out, in, 1, k]; ConvTranspose1d keeps
PyTorch's [in, out, k] order -> [in, out, 1, k] for `conv_transpose2d`; biases -> [1, 1, 1, out] rows;
Snake's log-scale alpha/beta -> rows exp(alpha) and 1 / (exp(beta) + 1e-9) for the two-pass Snake.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from device_worker.model.config import COND_DIM, DiTConfig

LAYOUT_VERSION = 1  # bump when a layout below changes: old cache files are then never read
TILE = 32
CONV_GROUPS = 16  # upstream ConvPositionEmbedding(groups=16)
CONV_KERNEL = 31


# ---- elementary transforms (each has an inverse, tested for exact round trips) ----------------------------


def rope_pair_permutation(head_dim: int) -> torch.Tensor:
    """new[j] = old[p[j]]: (i, i + k/2) rotate-half pairs -> adjacent pairs (2i, 2i + 1)."""
    half = head_dim // 2
    p = torch.empty(head_dim, dtype=torch.long)
    p[0::2] = torch.arange(half)
    p[1::2] = torch.arange(half) + half
    return p


def permute_head_rows(w: torch.Tensor, head_dim: int, inverse: bool = False) -> torch.Tensor:
    """Linear weight [h * k, in] with each head's rows reordered (or put back with inverse=True)."""
    p = rope_pair_permutation(head_dim)
    if inverse:
        p = torch.argsort(p)
    out, inp = w.shape
    return w.view(out // head_dim, head_dim, inp)[:, p, :].reshape(out, inp)


def swiglu_interleave(gate_t: torch.Tensor, up_t: torch.Tensor, tile: int = TILE) -> torch.Tensor:
    """Matmul weights gate, up [K, N] -> [K, 2N] with column tiles gate0, up0, gate1, up1, ..."""
    k, n = gate_t.shape
    if n % tile:
        raise ValueError(f"SwiGLU width {n} must be a multiple of the {tile}-column tile")
    return torch.stack([gate_t.view(k, n // tile, tile), up_t.view(k, n // tile, tile)], dim=2).reshape(k, 2 * n)


def swiglu_deinterleave(w: torch.Tensor, tile: int = TILE) -> tuple[torch.Tensor, torch.Tensor]:
    k, n2 = w.shape
    v = w.view(k, n2 // (2 * tile), 2, tile)
    return v[:, :, 0, :].reshape(k, n2 // 2), v[:, :, 1, :].reshape(k, n2 // 2)


def conv_group_unfold(w: torch.Tensor, groups: int = CONV_GROUPS) -> torch.Tensor:
    """Grouped Conv1d weight [C, C/g, k] -> [g, k * C/g, C/g]: row j * cg + i, column o of group g."""
    c, cg, k = w.shape
    if c != groups * cg:
        raise ValueError(f"conv weight {tuple(w.shape)} is not a {groups}-group square conv")
    return w.view(groups, cg, cg, k).permute(0, 3, 2, 1).reshape(groups, k * cg, cg)  # g, (tap, in), out


def conv_group_fold(u: torch.Tensor, kernel: int = CONV_KERNEL) -> torch.Tensor:
    g, kc, cg = u.shape
    return u.view(g, kernel, cg, cg).permute(0, 3, 2, 1).reshape(g * cg, cg, kernel)


# ---- DiT ---------------------------------------------------------------------------------------------------


def convert_dit(sd: dict[str, torch.Tensor], config: DiTConfig) -> dict[str, torch.Tensor]:
    """Release state dict (no `transformer.` prefix) -> device layout, float32, contiguous."""
    d, m, t, kd = config.dim, config.mel_dim, config.text_dim, config.head_dim
    f = lambda k: sd[k].float()  # noqa: E731
    out: dict[str, torch.Tensor] = {}
    proj = f("input_embed.proj.weight")  # [d, m + m + t + c + c]
    cuts = [0, m, 2 * m, 2 * m + t, 2 * m + t + COND_DIM, 2 * m + t + 2 * COND_DIM]
    for name, a, b in zip(("wx", "wcond", "wtext", "wstyle", "wc"), cuts[:-1], cuts[1:], strict=True):
        out[f"in.{name}"] = proj[:, a:b].t()  # [part, d]
    out["in.b"] = f("input_embed.proj.bias")
    for i, idx in enumerate((0, 2)):
        out[f"conv.{i}.w"] = conv_group_unfold(f(f"input_embed.conv_pos_embed.conv1d.{idx}.weight"))
        out[f"conv.{i}.b"] = f(f"input_embed.conv_pos_embed.conv1d.{idx}.bias")
    for i in range(config.depth):
        p = f"transformer_blocks.{i}."
        q = permute_head_rows(f(p + "self_attn.q_proj.weight"), kd)
        k = permute_head_rows(f(p + "self_attn.k_proj.weight"), kd)
        out[f"layers.{i}.wqkv"] = torch.cat((q, k, f(p + "self_attn.v_proj.weight"))).t()  # [d, 3d]
        out[f"layers.{i}.wo"] = f(p + "self_attn.o_proj.weight").t()
        out[f"layers.{i}.w_gateup"] = swiglu_interleave(f(p + "mlp.gate_proj.weight").t(), f(p + "mlp.up_proj.weight").t())
        out[f"layers.{i}.w_down"] = f(p + "mlp.down_proj.weight").t()
        out[f"layers.{i}.ln1"] = f(p + "input_layernorm.weight")
        out[f"layers.{i}.ln2"] = f(p + "post_attention_layernorm.weight")
    for i in range(config.depth // 2):
        out[f"fusion.{i}.w"] = f(f"text_fusion_linears.{i}.0.weight").t()  # [t, d]
        out[f"fusion.{i}.b"] = f(f"text_fusion_linears.{i}.0.bias")
    out["out.w"] = f("proj_out.weight").t()  # [d, m]
    out["out.b"] = f("proj_out.bias")
    assert out["in.wtext"].shape == (t, d)
    return {k: v.contiguous() for k, v in out.items()}


def unconvert_dit(dev: dict[str, torch.Tensor], config: DiTConfig) -> dict[str, torch.Tensor]:
    """The inverse of `convert_dit` for every key it reads (round trips are tested bit for bit)."""
    kd, d = config.head_dim, config.dim
    sd: dict[str, torch.Tensor] = {}
    sd["input_embed.proj.weight"] = torch.cat([dev[f"in.{n}"].t() for n in ("wx", "wcond", "wtext", "wstyle", "wc")], 1)
    sd["input_embed.proj.bias"] = dev["in.b"]
    for i, idx in enumerate((0, 2)):
        sd[f"input_embed.conv_pos_embed.conv1d.{idx}.weight"] = conv_group_fold(dev[f"conv.{i}.w"])
        sd[f"input_embed.conv_pos_embed.conv1d.{idx}.bias"] = dev[f"conv.{i}.b"]
    for i in range(config.depth):
        p = f"transformer_blocks.{i}."
        q, k, v = dev[f"layers.{i}.wqkv"].t().split(d)
        sd[p + "self_attn.q_proj.weight"] = permute_head_rows(q, kd, inverse=True)
        sd[p + "self_attn.k_proj.weight"] = permute_head_rows(k, kd, inverse=True)
        sd[p + "self_attn.v_proj.weight"] = v
        sd[p + "self_attn.o_proj.weight"] = dev[f"layers.{i}.wo"].t()
        g, u = swiglu_deinterleave(dev[f"layers.{i}.w_gateup"])
        sd[p + "mlp.gate_proj.weight"], sd[p + "mlp.up_proj.weight"] = g.t(), u.t()
        sd[p + "mlp.down_proj.weight"] = dev[f"layers.{i}.w_down"].t()
        sd[p + "input_layernorm.weight"] = dev[f"layers.{i}.ln1"]
        sd[p + "post_attention_layernorm.weight"] = dev[f"layers.{i}.ln2"]
    for i in range(config.depth // 2):
        sd[f"text_fusion_linears.{i}.0.weight"] = dev[f"fusion.{i}.w"].t()
        sd[f"text_fusion_linears.{i}.0.bias"] = dev[f"fusion.{i}.b"]
    sd["proj_out.weight"], sd["proj_out.bias"] = dev["out.w"].t(), dev["out.b"]
    return {k: v.contiguous() for k, v in sd.items()}


# ---- VAE decoder -------------------------------------------------------------------------------------------


def convert_vae(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Canonical decoder tensors (`decoder.layers...`, weight norm folded) -> conv2d/conv_transpose2d layouts."""
    out: dict[str, torch.Tensor] = {}
    for key, v in sd.items():
        if not key.startswith("decoder."):
            continue
        v = v.float()
        if key.endswith(".weight"):
            out[key + "4"] = v.unsqueeze(2).contiguous()  # [out, in, 1, k] (ConvT: [in, out, 1, k])
        elif key.endswith(".bias"):
            out[key + "_row"] = v.reshape(1, 1, 1, -1).contiguous()
        elif key.endswith(".alpha"):
            out[key + "_exp"] = v.reshape(-1).exp().reshape(1, 1, 1, -1)
        elif key.endswith(".beta"):
            out[key[: -len("beta")] + "inv_beta"] = (v.reshape(-1).exp() + 1e-9).reciprocal().reshape(1, 1, 1, -1)
        else:
            raise KeyError(f"unexpected VAE decoder tensor {key!r}")
    return out


def unconvert_vae_convs(dev: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of `convert_vae` for the conv weights and biases (Snake rows are checked by formula)."""
    out = {}
    for key, v in dev.items():
        if key.endswith(".weight4"):
            out[key[:-1]] = v.squeeze(2)
        elif key.endswith(".bias_row"):
            out[key[: -len("_row")]] = v.reshape(-1)
    return out


# ---- cache -------------------------------------------------------------------------------------------------


def cache_key(kind: str, model_id: str, ttnn_version: str, dtype: str) -> str:
    """File stem of a converted-weight cache entry: model, ttnn version, dtype and layout version."""
    h = hashlib.blake2b(model_id.encode(), digest_size=6).hexdigest()
    safe = "".join(ch if ch.isalnum() or ch in ".-_" else "_" for ch in ttnn_version)
    return f"{kind}-{h}-ttnn{safe}-{dtype}-layout{LAYOUT_VERSION}"


_TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class WeightCache:
    """Converted host-layout weights as safetensors files under `root`, keyed by `cache_key`.

    bfloat8_b is a device format (tilized, shared exponents): it is cached as the bfloat16 host layout
    here and quantised at upload (`tt_common.upload_weight`, which also keeps ttnn's own tensorbin cache)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def path(self, kind: str, model_id: str, ttnn_version: str, dtype: str) -> Path:
        return self.root / f"{cache_key(kind, model_id, ttnn_version, dtype)}.safetensors"

    def load_or_convert(self, kind: str, model_id: str, ttnn_version: str, dtype: str,
                        convert: Callable[[], dict[str, torch.Tensor]],
                        keep_fp32: tuple[str, ...] = ()) -> tuple[dict[str, torch.Tensor], bool]:
        """(weights, hit). A hit is read from disk; a miss runs `convert` and writes the file atomically.
        Matrices are stored in `dtype`; vectors (norm weights, biases) and the `keep_fp32` names stay
        float32 (the card keeps those rows in fp32, DRPrecision.rows_fp32)."""
        from safetensors.torch import load_file, save_file

        host_dtype = "bfloat16" if dtype == "bfloat8_b" else dtype
        if host_dtype not in _TORCH_DTYPES:
            raise ValueError(f"cache dtype {dtype!r}; choose float32, bfloat16 or bfloat8_b")
        path = self.path(kind, model_id, ttnn_version, dtype)
        meta = {"kind": kind, "model_id": model_id, "ttnn": ttnn_version, "dtype": dtype,
                "layout": str(LAYOUT_VERSION)}
        if path.is_file():
            from safetensors import safe_open

            with safe_open(str(path), framework="pt") as fh:
                stored = fh.metadata() or {}
            if stored == meta:
                return load_file(str(path)), True
        low = _TORCH_DTYPES[host_dtype]
        weights = {k: v.to(torch.float32 if v.ndim < 2 or k in keep_fp32 else low).contiguous()
                   for k, v in convert().items()}
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
        os.close(fd)
        try:
            save_file(weights, tmp, metadata=meta)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        (self.root / "README.json").write_text(json.dumps({"what": "diffrhythm-studio ttnn weight cache",
                                                           "layout": LAYOUT_VERSION}))
        return weights, False


__all__ = ["CONV_GROUPS", "CONV_KERNEL", "LAYOUT_VERSION", "WeightCache", "cache_key", "convert_dit",
           "convert_vae", "unconvert_dit", "unconvert_vae_convs"]
