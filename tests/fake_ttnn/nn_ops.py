"""The stand-in's transformer and convolution ops (ttnn 0.81.1 signatures, torch arithmetic)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .core import TILE, DataType, Layout, Tensor, device_op
from .ops import _need, _out, _tile


@device_op("nlp_create_qkv_heads")
def nlp_create_qkv_heads(x: Tensor, *, num_heads: int, num_kv_heads: int | None = None,
                         transpose_k_heads: bool = False, memory_config: Any = None, **kw: Any):
    _tile(x, op="nlp_create_qkv_heads")
    b, one, s, w = x.data.shape
    _need(one == 1, f"nlp_create_qkv_heads: input must be [B, 1, S, 3 * H * k], got {tuple(x.data.shape)}")
    kv = num_kv_heads or num_heads
    hd = w // (num_heads + 2 * kv)
    _need(hd % TILE == 0, f"nlp_create_qkv_heads: head dim {hd} must be a multiple of {TILE}")
    q, k, v = x.data.split([num_heads * hd, kv * hd, kv * hd], dim=-1)
    heads = lambda t, h: t.reshape(b, s, h, hd).transpose(1, 2).contiguous()  # noqa: E731
    kh = heads(k, kv).transpose(-1, -2) if transpose_k_heads else heads(k, kv)
    return _out(heads(q, num_heads), x), _out(kh, x), _out(heads(v, kv), x)


@device_op("concatenate_heads")
def concatenate_heads(x: Tensor, *, memory_config: Any = None, **kw: Any) -> Tensor:
    _tile(x, op="concatenate_heads")
    b, h, s, hd = x.data.shape
    return _out(x.data.transpose(1, 2).reshape(b, 1, s, h * hd), x)


@device_op("rotary_embedding_llama")
def rotary_embedding_llama(x: Tensor, cos: Tensor, sin: Tensor, trans_mat: Tensor, is_decode_mode: bool = False,
                           memory_config: Any = None, compute_kernel_config: Any = None) -> Tensor:
    _tile(x, cos, sin, trans_mat, op="rotary_embedding_llama")
    _need(not is_decode_mode, "this backend runs prefill mode only")
    b, h, s, hd = x.data.shape
    _need(b == 1, f"rotary_embedding_llama (prefill): batch must be 1, got {b}; fold batch into heads")
    _need(hd % TILE == 0 and s % TILE == 0, f"rotary_embedding_llama: head dim {hd} and seq {s} must be tile multiples")
    _need(tuple(cos.data.shape) in ((1, 1, s, hd), (1, h, s, hd)), f"rotary_embedding_llama: cos {tuple(cos.data.shape)}")
    _need(tuple(trans_mat.data.shape) == (1, 1, TILE, TILE), "rotary_embedding_llama: trans_mat must be [1, 1, 32, 32]")
    xr = x.data.reshape(b, h, s, hd // TILE, TILE) @ trans_mat.data.reshape(TILE, TILE)  # per 32-column tile
    return _out(x.data * cos.data + xr.reshape(b, h, s, hd) * sin.data, x)


@device_op("scaled_dot_product_attention")
def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, *, is_causal: bool = True,
                                 attn_mask: Tensor | None = None, cu_window_seqlens: Tensor | None = None,
                                 scale: float | None = None, program_config: Any = None, **kw: Any) -> Tensor:
    _tile(q, k, v, op="scaled_dot_product_attention")
    s = q.data.shape[-2]
    if program_config is not None:
        for name in ("q_chunk_size", "k_chunk_size"):
            chunk = getattr(program_config, name)
            _need(s % chunk == 0, f"SDPA: sequence {s} not divisible by {name}={chunk}")
    mask = None
    if cu_window_seqlens is not None:
        _need(attn_mask is None and not is_causal, "SDPA: cu_window_seqlens is exclusive with attn_mask/is_causal")
        w = cu_window_seqlens
        _need(w.layout == Layout.ROW_MAJOR and w.dtype in (DataType.INT32, DataType.UINT32) and w.data.ndim == 1,
              "SDPA: cu_window_seqlens must be a 1-D int32 ROW_MAJOR tensor")
        bounds = [int(b) for b in w.data.tolist()]
        _need(bounds[0] == 0 and bounds[-1] == s and bounds == sorted(bounds), f"SDPA: bad windows {bounds}")
        wid = torch.bucketize(torch.arange(s), torch.tensor(bounds[1:-1], dtype=torch.long), right=True)
        mask = wid[:, None] == wid[None, :]
    elif attn_mask is not None:
        _need(not is_causal, "SDPA: attn_mask with is_causal")
        mask = attn_mask.data
    out = F.scaled_dot_product_attention(q.data, k.data, v.data, attn_mask=mask, is_causal=is_causal and mask is None,
                                         scale=scale)
    return _out(out, q)


def _conv_common(x: Tensor, w: Tensor, device: Any, conv_config: Any, key: tuple, op: str) -> torch.Tensor:
    _need(x.device is not None, f"{op}: input must be on the device")
    if not getattr(conv_config, "config_tensors_in_dram", False):
        _need(device.open_kwargs.get("l1_small_size", 0) > 0, f"{op}: L1_SMALL out of memory (open with l1_small_size)")
    prepared = getattr(w, "_prepared_for", None)
    if prepared is None:
        _need(w.device is None, f"{op}: pass the host weight the first time (it is prepared on the device)")
    else:  # tt_dit's warning: a weight prepared for another shape decodes to garbage without raising
        _need(prepared == key, f"{op}: weight prepared for {prepared} reused for {key}")
    return w.data


def _finish(out: torch.Tensor, x: Tensor, w: Tensor, b: Tensor | None, dtype: DataType | None, key: tuple,
            dims: Any, return_output_dim: bool, return_weights_and_bias: bool):
    res = Tensor(out, dtype or x.dtype, Layout.ROW_MAJOR, x.device)  # like the card: not TILE
    if w.device is None:
        w = Tensor(w.data, DataType.BFLOAT16, Layout.TILE, x.device)
        w._prepared_for = key
        if b is not None:
            b = Tensor(b.data, DataType.BFLOAT16, Layout.TILE, x.device)
    result: list[Any] = [res]
    if return_output_dim:
        result.append(dims)
    if return_weights_and_bias:
        result.append((w, b))
    return result[0] if len(result) == 1 else tuple(result)


@device_op("conv1d")
def conv1d(*, input_tensor: Tensor, weight_tensor: Tensor, device: Any, in_channels: int, out_channels: int,
           batch_size: int, input_length: int, kernel_size: int, stride: int = 1, padding: int = 0,
           dilation: int = 1, groups: int = 1, bias_tensor: Tensor | None = None, dtype: DataType | None = None,
           conv_config: Any = None, compute_config: Any = None, memory_config: Any = None,
           slice_config: Any = None, return_output_dim: bool = False, return_weights_and_bias: bool = False):
    x = input_tensor
    key = ("conv1d", batch_size, input_length, in_channels, out_channels, kernel_size, dilation, groups)
    w = _conv_common(x, weight_tensor, device, conv_config, key, "conv1d")
    _need(x.data.numel() == batch_size * input_length * in_channels, f"conv1d: input {x} is not [N, 1, L, C]")
    _need(tuple(w.shape) == (out_channels, in_channels // groups, 1, kernel_size), f"conv1d: weight {tuple(w.shape)}")
    xin = x.data.reshape(batch_size, input_length, in_channels).transpose(1, 2)  # [N, C, L]
    bias = None if bias_tensor is None else bias_tensor.data.reshape(-1)
    y = F.conv1d(xin, w.squeeze(2), bias, stride, padding, dilation, groups)  # [N, O, L']
    out_len = y.shape[-1]
    out = y.transpose(1, 2).reshape(1, 1, batch_size * out_len, out_channels)
    return _finish(out, x, weight_tensor, bias_tensor, dtype, key, out_len, return_output_dim,
                   return_weights_and_bias)


@device_op("conv_transpose2d")
def conv_transpose2d(*, input_tensor: Tensor, weight_tensor: Tensor, device: Any, in_channels: int,
                     out_channels: int, batch_size: int, input_height: int, input_width: int, kernel_size: Any,
                     stride: Any, padding: Any, output_padding: Any = (0, 0), dilation: Any = (1, 1),
                     groups: int = 1, bias_tensor: Tensor | None = None, dtype: DataType | None = None,
                     conv_config: Any = None, compute_config: Any = None, mirror_kernel: bool = False,
                     dram_slice_config: Any = None, return_output_dim: bool = False,
                     return_weights_and_bias: bool = False, **kw: Any):
    x = input_tensor
    key = ("conv_transpose2d", batch_size, input_height, input_width, in_channels, out_channels, tuple(kernel_size),
           tuple(stride))
    w = _conv_common(x, weight_tensor, device, conv_config, key, "conv_transpose2d")
    _need(tuple(w.shape) == (in_channels, out_channels // groups, *kernel_size), f"conv_transpose2d: weight {tuple(w.shape)}")
    xin = x.data.reshape(batch_size, input_height, input_width, in_channels).permute(0, 3, 1, 2)  # NCHW
    bias = None if bias_tensor is None else bias_tensor.data.reshape(-1)
    y = F.conv_transpose2d(xin, w, bias, tuple(stride), tuple(padding), tuple(output_padding), groups, tuple(dilation))
    h, wd = y.shape[-2:]
    out = y.permute(0, 2, 3, 1).reshape(1, 1, batch_size * h * wd, out_channels)
    return _finish(out, x, weight_tensor, bias_tensor, dtype, key, (h, wd), return_output_dim,
                   return_weights_and_bias)
