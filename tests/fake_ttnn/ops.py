"""The stand-in's operations: the subset of ttnn 0.81.1 the backend calls, with the same signatures."""

from __future__ import annotations

import builtins
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F

from . import core
from .core import (
    TILE,
    BufferType,
    ComputeKernelConfig,
    DataType,
    FakeDevice,
    Layout,
    MemoryConfig,
    Tensor,
    UnaryOpType,
    device_op,
)

OPENED: list[FakeDevice] = []  # every device opened through the stand-in (tests inspect the settings)
_TORCH = {torch.float32: DataType.FLOAT32, torch.bfloat16: DataType.BFLOAT16, torch.int32: DataType.INT32,
          torch.int64: DataType.INT32}


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise RuntimeError(msg)


def _tile(*ts: Tensor, op: str) -> None:
    for t in ts:
        _need(t.layout == Layout.TILE, f"{op}: needs TILE layout, got {t.layout.name}")


def _out(data: torch.Tensor, like: Tensor, dtype: DataType | None = None, layout: Layout | None = None) -> Tensor:
    return Tensor(data, dtype or like.dtype, layout or like.layout, like.device)


def _capturing(dev: FakeDevice | None, what: str) -> None:
    _need(dev is None or dev.capturing is None, f"{what} during trace capture is not allowed")


# ---- device, transfers ------------------------------------------------------------------------------------


def open_mesh_device(mesh_shape: Any = None, l1_small_size: int = 0, trace_region_size: int = 0,
                     num_command_queues: int = 1, dispatch_core_config: Any = None, **kw: Any) -> FakeDevice:
    dev = FakeDevice(mesh_shape=mesh_shape, l1_small_size=l1_small_size, trace_region_size=trace_region_size,
                     num_command_queues=num_command_queues, dispatch_core_config=dispatch_core_config, **kw)
    OPENED.append(dev)
    return dev


def close_mesh_device(dev: FakeDevice) -> None:
    _need(not dev.closed, "device closed twice")
    dev.closed = True


def synchronize_device(dev: FakeDevice) -> None:
    return None


def get_memory_view(dev: FakeDevice, buffer_type: BufferType) -> SimpleNamespace:
    per_bank = dev.dram_bytes() // 7
    return SimpleNamespace(num_banks=7, total_bytes_allocated_per_bank=per_bank,
                           total_bytes_free_per_bank=4_278_190_080 - per_bank)


def init_device_compute_kernel_config(arch: Any, math_fidelity: Any = None, math_approx_mode: bool = True,
                                      fp32_dest_acc_en: bool = False, packer_l1_acc: bool = False,
                                      **kw: Any) -> ComputeKernelConfig:
    return ComputeKernelConfig(math_fidelity=math_fidelity, math_approx_mode=math_approx_mode,
                               fp32_dest_acc_en=fp32_dest_acc_en, packer_l1_acc=packer_l1_acc)


def from_torch(tensor: torch.Tensor | None, dtype: DataType | None = None, *, layout: Layout | None = None,
               device: FakeDevice | None = None, memory_config: MemoryConfig | None = None,
               **kw: Any) -> Tensor | None:
    if tensor is None:
        return None
    _capturing(device, "from_torch onto the device")
    dtype = dtype or _TORCH[tensor.dtype]
    return Tensor(tensor.detach().clone(), dtype, layout or Layout.ROW_MAJOR, device)


def as_tensor(tensor: torch.Tensor, dtype: DataType | None = None, *, layout: Layout = Layout.ROW_MAJOR,
              device: FakeDevice | None = None, memory_config: MemoryConfig | None = None,
              cache_file_name: str | Path | None = None, **kw: Any) -> Tensor:
    if device is not None and memory_config is None:
        raise RuntimeError("memory_config must be specified when device is specified")
    if cache_file_name is not None:
        path = Path(f"{cache_file_name}_dtype_{dtype.name if dtype else 'None'}_layout_{layout.name}.tensorbin")
        if path.is_file():
            tensor = torch.load(path, weights_only=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(core._round(tensor, dtype or DataType.FLOAT32), path)
    return from_torch(tensor, dtype, layout=layout, device=device, memory_config=memory_config)


def to_torch(t: Tensor, dtype: torch.dtype | None = None, **kw: Any) -> torch.Tensor:
    t._live()
    _capturing(t.device, "to_torch")
    if t.dtype in (DataType.INT32, DataType.UINT32):
        return t.data.to(torch.int32)
    out = t.data.clone() if t.dtype == DataType.FLOAT32 or core.EXACT else t.data.to(torch.bfloat16)
    return out.to(dtype) if dtype is not None else out


@device_op("to_layout")
def to_layout(t: Tensor, layout: Layout, **kw: Any) -> Tensor:
    t._live()
    if layout == t.layout:
        return t
    return Tensor(t.data.clone(), t.dtype, layout, t.device)


@device_op("reshape")
def reshape(t: Tensor, shape: Any, **kw: Any) -> Tensor:
    t._live()
    return t.view(t.data.reshape(tuple(shape)))


def deallocate(t: Tensor, force: bool = True) -> None:
    t._live()
    t.buf.freed = True
    if t.device is not None:
        t.device._free(t)


def copy_host_to_device_tensor(host: Tensor, dev_tensor: Tensor, cq_id: int | None = None) -> None:
    _need(host.device is None and dev_tensor.device is not None, "copy_host_to_device_tensor: host -> device only")
    _capturing(dev_tensor.device, "copy_host_to_device_tensor")
    _need(tuple(host.data.shape) == tuple(dev_tensor.data.shape) and host.dtype == dev_tensor.dtype,
          f"copy_host_to_device_tensor: {host} does not match {dev_tensor}")
    dev_tensor._live()
    dev_tensor.data = core._round(host.data, dev_tensor.dtype)


@device_op("copy")
def copy(src: Tensor, dst: Tensor, **kw: Any) -> None:
    _need(tuple(src.data.shape) == tuple(dst.data.shape), f"copy: {src} into {dst}")
    dst.data = core._round(src.data, dst.dtype)


# ---- elementwise ------------------------------------------------------------------------------------------


def _binary_data(a: Tensor, b: Tensor | float, op: str) -> tuple[torch.Tensor, torch.Tensor | float]:
    if isinstance(b, Tensor):
        _tile(a, b, op=op)
        _need(a.data.ndim == b.data.ndim, f"{op}: ranks differ {a} {b}")
        # conservative: the backend never relies on broadcasting over the batch dim (unverified on 0.81.1)
        _need(a.data.shape[0] == b.data.shape[0], f"{op}: batch dims differ {a} {b} (no batch broadcasting)")
        return a.data, b.data
    return a.data, float(b)


_UNARY = {UnaryOpType.SIN: torch.sin, UnaryOpType.SQUARE: torch.square, UnaryOpType.SILU: F.silu}


@device_op("add")
def add(a: Tensor, b: Tensor | float, *, dtype: DataType | None = None, memory_config: Any = None,
        **kw: Any) -> Tensor:
    x, y = _binary_data(a, b, "add")
    return _out(x + y, a, dtype)


@device_op("multiply")
def multiply(a: Tensor, b: Tensor | float, *, dtype: DataType | None = None, activations: list | None = None,
             memory_config: Any = None, **kw: Any) -> Tensor:
    x, y = _binary_data(a, b, "multiply")
    out = x * y
    for act in activations or []:
        out = _UNARY[act.op_type](out)
    return _out(out, a, dtype)


@device_op("addcmul")
def addcmul(a: Tensor, b: Tensor, c: Tensor, *, value: float = 1.0, memory_config: Any = None, **kw: Any) -> Tensor:
    _tile(a, b, c, op="addcmul")
    _need(a.data.shape[0] == b.data.shape[0] == c.data.shape[0], "addcmul: batch dims differ (no batch broadcasting)")
    return _out(a.data + value * b.data * c.data, a)


@device_op("silu")
def silu(x: Tensor, **kw: Any) -> Tensor:
    _tile(x, op="silu")
    return _out(F.silu(x.data), x)


@device_op("mish")
def mish(x: Tensor, **kw: Any) -> Tensor:
    _tile(x, op="mish")
    return _out(F.mish(x.data), x)


@device_op("typecast")
def typecast(x: Tensor, dtype: DataType, **kw: Any) -> Tensor:
    return _out(x.data, x, dtype)


# ---- matmuls and norms ------------------------------------------------------------------------------------


def _mm(a: torch.Tensor, w: torch.Tensor, op: str) -> torch.Tensor:
    _need(a.shape[-1] == w.shape[-2], f"{op}: inner dims differ {tuple(a.shape)} @ {tuple(w.shape)}")
    wb = w.shape[:-2]
    if all(v == 1 for v in wb):
        return a @ w.reshape(w.shape[-2:])
    _need(tuple(a.shape[: len(wb)]) == tuple(wb) or a.shape[-3] == w.shape[-3],
          f"{op}: batch dims differ {tuple(a.shape)} @ {tuple(w.shape)}")
    return a @ w


@device_op("linear")
def linear(a: Tensor, w: Tensor, *, bias: Tensor | None = None, dtype: DataType | None = None, **kw: Any) -> Tensor:
    _tile(a, w, op="linear")
    _need(all(v == 1 for v in w.data.shape[:-2]), "linear: weight must be [1, ..., K, N]")
    out = _mm(a.data, w.data, "linear")
    if bias is not None:
        out = out + bias.data.reshape(-1)
    return _out(out, a, dtype)


@device_op("matmul")
def matmul(a: Tensor, b: Tensor, *, dtype: DataType | None = None, **kw: Any) -> Tensor:
    _tile(a, b, op="matmul")
    return _out(_mm(a.data, b.data, "matmul"), a, dtype)


@device_op("minimal_matmul")
def minimal_matmul(input_tensor: Tensor, weight_tensor: Tensor, bias_tensor: Tensor | None = None, *,
                   fused_activation: Any = None, config: Any = None, memory_config: Any = None,
                   dtype: DataType | None = None, compute_kernel_config: Any = None,
                   fuse_swiglu: bool = False) -> Tensor:
    a, w = input_tensor, weight_tensor
    _tile(a, w, op="minimal_matmul")
    _need(a.dtype == w.dtype, f"minimal_matmul: input dtype {a.dtype.name} must match weight dtype {w.dtype.name}")
    _need(a.dtype != DataType.INT32, "minimal_matmul: float dtypes only")
    _need(all(v == 1 for v in w.data.shape[:-2]), "minimal_matmul: weight leading dims must be 1 (no batching)")
    out = a.data @ w.data.reshape(w.data.shape[-2:])
    if bias_tensor is not None:
        out = out + bias_tensor.data.reshape(-1)
    if fuse_swiglu:
        n2 = out.shape[-1]
        _need(n2 % (2 * TILE) == 0, f"minimal_matmul(fuse_swiglu): N={n2} must be divisible by 2*32")
        v = out.reshape(*out.shape[:-1], n2 // (2 * TILE), 2, TILE)
        out = (F.silu(v[..., 0, :]) * v[..., 1, :]).reshape(*out.shape[:-1], n2 // 2)
    return _out(out, a, dtype)


@device_op("rms_norm")
def rms_norm(x: Tensor, *, epsilon: float = 1e-12, weight: Tensor | None = None, bias: Tensor | None = None,
             **kw: Any) -> Tensor:
    _tile(x, op="rms_norm")
    d = x.data.float()
    out = d * torch.rsqrt(d.pow(2).mean(-1, keepdim=True) + epsilon)
    if weight is not None:
        out = out * weight.data.reshape(-1)
    return _out(out, x)


@device_op("layer_norm")
def layer_norm(x: Tensor, *, epsilon: float = 1e-12, weight: Tensor | None = None, bias: Tensor | None = None,
               **kw: Any) -> Tensor:
    _tile(x, op="layer_norm")
    out = F.layer_norm(x.data.float(), x.data.shape[-1:], eps=epsilon)
    if weight is not None:
        out = out * weight.data.reshape(-1)
    if bias is not None:
        out = out + bias.data.reshape(-1)
    return _out(out, x)


# ---- data movement (row-major) ----------------------------------------------------------------------------


@device_op("pad")
def pad(t: Tensor, padding: list[tuple[int, int]], value: float, **kw: Any) -> Tensor:
    _need(t.layout == Layout.ROW_MAJOR, "pad: this backend pads ROW_MAJOR tensors")
    _need(len(padding) == t.data.ndim, "pad: one (before, after) pair per dim")
    flat = [v for before, after in reversed(padding) for v in (before, after)]
    return _out(F.pad(t.data, flat, value=value), t)


@device_op("slice")
def slice(t: Tensor, starts: list[int], ends: list[int], steps: list[int] | None = None, **kw: Any) -> Tensor:
    idx = tuple(builtins.slice(s, e) for s, e in zip(starts, ends, strict=True))
    return _out(t.data[idx].clone(), t)


@device_op("concat")
def concat(tensors: list[Tensor], dim: int = 0, **kw: Any) -> Tensor:
    _need(len({t.layout for t in tensors}) == 1, "concat: mixed layouts")
    return _out(torch.cat([t.data for t in tensors], dim=dim), tensors[0])


@device_op("permute")
def permute(t: Tensor, dims: list[int], **kw: Any) -> Tensor:
    return _out(t.data.permute(*dims).contiguous(), t)
