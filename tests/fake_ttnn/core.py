"""The stand-in's types, tensors, device, program cache and trace recorder (torch-backed, tests only).

Rules it enforces, each as the real ttnn 0.81.1 reports it (see the spec's section 2 table):
- TILE layout pads the last two dims to 32 x 32 (`padded_shape`); bfloat8_b/bfloat4_b exist only in TILE;
- compute ops take device tensors ("must be on device") in the layout they need;
- a deallocated tensor cannot be used again;
- during trace capture nothing may be compiled (program-cache miss), uploaded or read back; replay
  re-runs the captured ops on the same tensor objects (so stale inputs show up as wrong numbers).
Numbers: bfloat16 (and, coarsely, bfloat8_b) values are rounded to bfloat16 unless `EXACT` is set, in
which case storage keeps float32 so the backend's logic can be compared tightly with the reference.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from typing import Any

import torch

TILE = 32
EXACT = False  # tests flip this (monkeypatch) for tight comparisons
_REPLAY = [False]


class DataType(enum.Enum):
    BFLOAT16 = "BFLOAT16"
    FLOAT32 = "FLOAT32"
    BFLOAT8_B = "BFLOAT8_B"
    BFLOAT4_B = "BFLOAT4_B"
    INT32 = "INT32"
    UINT32 = "UINT32"


class Layout(enum.Enum):
    ROW_MAJOR = "ROW_MAJOR"
    TILE = "TILE"


class StorageType(enum.Enum):
    HOST = "HOST"
    DEVICE = "DEVICE"


class MathFidelity(enum.Enum):
    LoFi = 0
    HiFi2 = 2
    HiFi3 = 3
    HiFi4 = 4


class BufferType(enum.Enum):
    DRAM = "DRAM"
    L1 = "L1"


class DispatchCoreType(enum.Enum):
    WORKER = "WORKER"
    ETH = "ETH"


class UnaryOpType(enum.Enum):
    SIN = "SIN"
    SQUARE = "SQUARE"
    SILU = "SILU"


@dataclass(frozen=True)
class MemoryConfig:
    buffer_type: BufferType = BufferType.DRAM


@dataclass(frozen=True)
class DispatchCoreConfig:
    type: DispatchCoreType = DispatchCoreType.WORKER


@dataclass(frozen=True)
class MeshShape:
    rows: int
    cols: int


@dataclass(frozen=True)
class CoreCoord:
    x: int
    y: int


@dataclass(frozen=True)
class UnaryWithParam:
    op_type: UnaryOpType
    param: float | None = None


class _Config:
    """Config objects (MinimalMatmulConfig, SDPAProgramConfig, Conv2dConfig, ...): attribute bags."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__dict__})"


class MinimalMatmulConfig(_Config):
    pass


class SDPAProgramConfig(_Config):
    pass


class Conv2dConfig(_Config):
    pass


class ComputeKernelConfig(_Config):
    pass


def _round(data: torch.Tensor, dtype: DataType) -> torch.Tensor:
    if dtype in (DataType.INT32, DataType.UINT32):
        return data.to(torch.int64)
    data = data.float()
    if EXACT or dtype == DataType.FLOAT32:
        return data
    return data.to(torch.bfloat16).float()  # bfloat8_b is coarser on a card; bf16 here (documented)


class _Buffer:
    freed = False


class Shape(tuple):
    """ttnn.Shape: a tuple of ints."""


class Tensor:
    def __init__(self, data: torch.Tensor, dtype: DataType, layout: Layout, device: FakeDevice | None) -> None:
        if dtype in (DataType.BFLOAT8_B, DataType.BFLOAT4_B) and layout != Layout.TILE:
            raise RuntimeError("Layout must be Layout::TILE for bfloat8_b or bfloat4_b!")
        if layout == Layout.TILE and data.ndim < 2:
            raise RuntimeError("TILE layout needs a tensor of rank >= 2")
        self.data = _round(data, dtype)
        self.dtype, self.layout, self.device = dtype, layout, device
        self.buf = _Buffer()  # views (reshape) share it: freeing any view frees the buffer, as on a card
        if device is not None:
            device._alloc(self)

    @property
    def deallocated(self) -> bool:
        return self.buf.freed

    def view(self, data: torch.Tensor) -> Tensor:
        """A tensor over the same buffer (ttnn.reshape of a device tensor allocates nothing)."""
        out = Tensor.__new__(Tensor)
        out.data, out.dtype, out.layout, out.device, out.buf = data, self.dtype, self.layout, self.device, self.buf
        return out

    # ---- properties ---------------------------------------------------------------------------------
    @property
    def shape(self) -> Shape:
        self._live()
        return Shape(self.data.shape)

    @property
    def padded_shape(self) -> Shape:
        s = list(self.data.shape)
        if self.layout == Layout.TILE:
            s[-1], s[-2] = -(-s[-1] // TILE) * TILE, -(-s[-2] // TILE) * TILE
        return Shape(s)

    def storage_type(self) -> StorageType:
        return StorageType.HOST if self.device is None else StorageType.DEVICE

    def nbytes(self) -> int:
        per = {DataType.FLOAT32: 4, DataType.BFLOAT16: 2, DataType.BFLOAT8_B: 1088 / 1024,
               DataType.BFLOAT4_B: 576 / 1024, DataType.INT32: 4, DataType.UINT32: 4}[self.dtype]
        n = 1
        for v in self.padded_shape:
            n *= v
        return int(n * per)

    def _live(self) -> None:
        if self.deallocated and not _REPLAY[0]:  # a replay re-runs ops on freed intermediates' buffers
            raise RuntimeError("tensor was deallocated and cannot be used")

    def __repr__(self) -> str:
        return f"FakeTensor({tuple(self.data.shape)}, {self.dtype.name}, {self.layout.name}, {self.storage_type().name})"


@dataclass
class _Trace:
    ops: list[tuple[Any, tuple, dict, Any]] = field(default_factory=list)
    done: bool = False


class FakeDevice:
    """One p100a as ttnn shows it: an 11 x 10 compute grid (one Tensix column runs dispatch)."""

    def __init__(self, **open_kwargs: Any) -> None:
        self.open_kwargs = open_kwargs
        self.closed = False
        self.live: dict[int, Tensor] = {}
        self.program_cache: set[tuple] = set()
        self.traces: dict[int, _Trace] = {}
        self.capturing: int | None = None
        self.op_count = 0

    def compute_with_storage_grid_size(self) -> CoreCoord:
        return CoreCoord(11, 10)

    def arch(self) -> str:
        return "BLACKHOLE"

    def num_program_cache_entries(self) -> int:
        return len(self.program_cache)

    def _alloc(self, t: Tensor) -> None:
        if self.closed:
            raise RuntimeError("device is closed")
        self.live[id(t.buf)] = t

    def _free(self, t: Tensor) -> None:
        self.live.pop(id(t.buf), None)

    def dram_bytes(self) -> int:
        return sum(t.nbytes() for t in self.live.values())


def _signature(value: Any) -> Any:
    if isinstance(value, Tensor):
        return ("T", tuple(value.data.shape), value.dtype, value.layout)
    if isinstance(value, (list, tuple)):
        return tuple(_signature(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _signature(v)) for k, v in value.items()))
    if isinstance(value, (int, float, str, bool, type(None), enum.Enum)):
        return value
    return type(value).__name__


def _device_of(args: tuple, kwargs: dict) -> FakeDevice | None:
    for v in (*args, *kwargs.values()):
        if isinstance(v, Tensor) and v.device is not None:
            return v.device
        if isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, Tensor) and x.device is not None:
                    return x.device
    return None


_HOST_OK = ("conv1d", "conv_transpose2d", "reshape", "to_layout")  # also take host tensors


def device_op(name: str):
    """Decorator for compute ops: device inputs only, live tensors, program cache, trace recording."""

    def wrap(fn):
        @functools.wraps(fn)
        def op(*args: Any, **kwargs: Any) -> Any:
            tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, Tensor)]
            tensors += [x for v in (*args, *kwargs.values()) if isinstance(v, (list, tuple)) for x in v
                        if isinstance(x, Tensor)]
            for t in tensors:
                t._live()
                if t.device is None and name not in _HOST_OK:
                    raise RuntimeError(f"{name}: Input tensor A must be on device, got storage type: StorageType::HOST")
            dev = _device_of(args, kwargs)
            key = (name, _signature(args), _signature(kwargs))
            if dev is not None and dev.capturing is not None:
                if key not in dev.program_cache:
                    raise RuntimeError(f"{name}: program cache miss during trace capture (run it eagerly first)")
            out = fn(*args, **kwargs)
            if dev is not None:
                dev.program_cache.add(key)
                dev.op_count += 1
                if dev.capturing is not None:
                    dev.traces[dev.capturing].ops.append((fn, args, kwargs, out))
            return out

        op.__fake_op__ = name
        return op

    return wrap


def _assign(dst: Any, src: Any) -> None:
    if isinstance(dst, Tensor):
        dst.data = src.data
        if src.buf is not dst.buf and src.device is not None:
            src.device._free(src)  # replay writes into the captured buffers; it allocates nothing
    elif isinstance(dst, (list, tuple)):
        for a, b in zip(dst, src, strict=True):
            _assign(a, b)


def begin_trace_capture(device: FakeDevice, *, cq_id: int = 0) -> int:
    _ = device.open_kwargs.get("trace_region_size", 0)  # 0: dynamic trace buffers (allowed in 0.81.1)
    tid = len(device.traces) + 1
    device.traces[tid] = _Trace()
    device.capturing = tid
    return tid


def end_trace_capture(device: FakeDevice, trace_id: int, *, cq_id: int = 0) -> None:
    assert device.capturing == trace_id, "end_trace_capture for a trace that is not being captured"
    device.capturing = None
    device.traces[trace_id].done = True


def execute_trace(device: FakeDevice, trace_id: int, *, cq_id: int = 0, blocking: bool = True) -> None:
    trace = device.traces[trace_id]
    if not trace.done:
        raise RuntimeError("trace not captured")
    _REPLAY[0] = True
    try:
        for fn, args, kwargs, out in trace.ops:  # same tensor objects: new inputs must have been copied in
            _assign(out, fn(*args, **kwargs))
    finally:
        _REPLAY[0] = False


def release_trace(device: FakeDevice, trace_id: int) -> None:
    device.traces.pop(trace_id)
