"""Frames on the wire: typed headers plus raw little-endian tensor buffers, zero-copy, optionally signed.

`encode()` turns (op, rid, body, tensors) into a list of frames for `send_multipart(copy=False)`; the
array buffers are passed as memoryviews, not copied. `decode()` checks, in this order and before any
tensor is touched: the HMAC (if a key is set), the op byte, the header sizes, the protocol version, and
for every declared tensor its dtype, rank and byte size against the limits and against the frame's
actual length; then it returns read-only numpy views of the received frames. No pickle path exists.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Union

import msgspec
import numpy as np

from device_worker.protocol import BODY, OP_OF, PROTOCOL_VERSION, Envelope, Limits, Op, TensorMeta

MAC_BYTES = 32


class WireError(Exception):
    """A message the receiver refuses; the text goes back to the sender as an ERROR."""


class ProtocolError(WireError):
    pass


class VersionError(WireError):
    pass


class LimitError(WireError):
    pass


class AuthError(WireError):
    pass


class BF16(NamedTuple):
    """A bfloat16 tensor as its raw bits (numpy has no bfloat16): `bits` is a uint16 array."""

    bits: np.ndarray


Tensor = Union[np.ndarray, BF16]


# The one place bfloat16 crosses between torch and the wire (numpy has no bfloat16: it travels as its bits).
# torch is imported only when a torch tensor is at hand, so the engine, which has none, never loads it.
def to_numpy(t: Any) -> Tensor:
    """A torch tensor on any device, or anything array-like -> numpy (bfloat16 as BF16 bits)."""
    if hasattr(t, "detach"):
        import torch

        t = t.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return BF16(t.view(torch.int16).numpy().view(np.uint16))
        return t.numpy()
    return t if isinstance(t, (np.ndarray, BF16)) else np.asarray(t)


def to_torch(t: Tensor | None) -> Any:
    """numpy (or BF16 bits) -> a torch tensor of the same dtype that owns its memory (wire views are
    read-only)."""
    import torch

    if t is None:
        return None
    if isinstance(t, BF16):
        return torch.from_numpy(t.bits.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(t, copy=True))

# wire dtype name -> little-endian numpy dtype of the buffer
DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype("<f4"),
    "float16": np.dtype("<f2"),
    "bfloat16": np.dtype("<u2"),
    "int64": np.dtype("<i8"),
    "int32": np.dtype("<i4"),
    "int16": np.dtype("<i2"),
    "uint8": np.dtype("u1"),
    "bool": np.dtype("?"),
}
_NAME_OF = {v.str: k for k, v in DTYPES.items() if k != "bfloat16"}  # "<f4" -> "float32"

_ENVELOPE = msgspec.msgpack.Decoder(Envelope)
_DECODERS = {op: msgspec.msgpack.Decoder(cls) for op, cls in BODY.items()}
_ENCODER = msgspec.msgpack.Encoder()


@dataclass
class Message:
    op: Op
    rid: int
    body: msgspec.Struct
    tensors: dict[str, Tensor] = field(default_factory=dict)


def dtype_name(t: Tensor) -> str:
    if isinstance(t, BF16):
        return "bfloat16"
    dt = t.dtype.newbyteorder("<") if t.dtype.itemsize > 1 else t.dtype
    try:
        return _NAME_OF[dt.str]
    except KeyError:
        raise TypeError(f"dtype {t.dtype!r} cannot go on the wire; use one of {sorted(DTYPES)}") from None


def _le_buffer(t: Tensor) -> tuple[str, list[int], memoryview]:
    name = dtype_name(t)
    arr = t.bits if isinstance(t, BF16) else t
    if name == "bfloat16" and (arr.dtype.kind != "u" or arr.dtype.itemsize != 2):
        raise TypeError(f"BF16 bits must be uint16, got {arr.dtype!r}")
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))  # one copy only for big-endian input
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")  # strided views are the only case that costs a copy
    # reshape(-1) of a contiguous array is a view; a 0-d array becomes 1 element.
    return name, list(arr.shape), memoryview(arr.reshape(-1)).cast("B")


def _mac(key: bytes, frames: Sequence[Any]) -> bytes:
    # Length-prefix every frame so moving bytes between frames changes the MAC.
    h = hmac.new(key, digestmod=hashlib.sha256)
    for f in frames:
        buf = f.buffer if hasattr(f, "buffer") else f
        h.update(struct.pack("<Q", memoryview(buf).nbytes))
        h.update(buf)
    return h.digest()


def encode(body: msgspec.Struct, rid: int, tensors: Mapping[str, Tensor] | None = None, *,
           key: bytes | None = None, version: int = PROTOCOL_VERSION) -> list[Any]:
    """(body, rid, tensors) -> frames for `send_multipart(frames, copy=False)` (buffers not copied)."""
    op = OP_OF[type(body)]
    metas: list[TensorMeta] = []
    bufs: list[memoryview] = []
    for name, t in (tensors or {}).items():
        dname, shape, buf = _le_buffer(t)
        metas.append(TensorMeta(name, dname, shape))
        bufs.append(buf)
    frames: list[Any] = [op.value, _ENCODER.encode(Envelope(version, rid, metas)), _ENCODER.encode(body), *bufs]
    if key:
        frames.append(_mac(key, frames))
    return frames


# What msgpack (and so an envelope) can carry as a request id; anything else is no rid at all.
RID_MIN, RID_MAX = -(2**63), 2**64 - 1


def peek_rid(frames: Sequence[Any], max_bytes: int = 64 << 10) -> int:
    """Best-effort request id of a message that failed to decode (so the error reply reaches its waiter).

    Never raises: a missing, oversized or garbled envelope, or a rid that is not an integer msgpack can
    carry back (a float such as 1e300, NaN, a string, a bool, a nested array), is rid 0."""
    try:
        raw = _frame_bytes(frames[1])
        if raw.nbytes > max_bytes:
            return 0
        env = msgspec.msgpack.decode(raw)
        rid = env[1] if isinstance(env, (list, tuple)) else None
    except Exception:  # noqa: BLE001 - a garbled envelope simply has no rid (RecursionError included)
        return 0
    return rid if type(rid) is int and RID_MIN <= rid <= RID_MAX else 0


def _frame_bytes(f: Any) -> memoryview:
    return memoryview(f.buffer if hasattr(f, "buffer") else f)


def decode(frames: Sequence[Any], *, limits: Limits | None = None, key: bytes | None = None) -> Message:
    """Frames (zmq.Frame or bytes, identity already stripped) -> Message with zero-copy tensor views."""
    limits = limits or Limits()
    if key:
        if len(frames) < 4:
            raise AuthError("message is not signed (the worker requires an HMAC; pass the same --secret-file)")
        got = bytes(_frame_bytes(frames[-1]))
        if len(got) != MAC_BYTES or not hmac.compare_digest(got, _mac(key, frames[:-1])):
            raise AuthError("message authentication failed (wrong or missing shared secret)")
        frames = frames[:-1]
    if len(frames) < 3:
        raise ProtocolError(f"a message has at least 3 frames (op, envelope, body), got {len(frames)}")
    op_raw = bytes(_frame_bytes(frames[0]))
    try:
        op = Op(op_raw)
    except ValueError:
        raise ProtocolError(f"unknown op {op_raw[:8]!r}") from None
    env_raw, body_raw = _frame_bytes(frames[1]), _frame_bytes(frames[2])
    for what, raw in (("envelope", env_raw), ("body", body_raw)):
        if raw.nbytes > limits.max_header_bytes:
            raise LimitError(f"{what} is {raw.nbytes} bytes; the limit is {limits.max_header_bytes}")
    try:
        env = _ENVELOPE.decode(env_raw)
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"malformed envelope for {op.name}: {exc}") from None
    if env.version != PROTOCOL_VERSION:
        raise VersionError(f"peer speaks protocol {env.version}, this side speaks {PROTOCOL_VERSION}; "
                           "run the same diffrhythm-studio version on both sides")
    bufs = frames[3:]
    if len(env.tensors) != len(bufs):
        raise ProtocolError(f"{op.name} declares {len(env.tensors)} tensors but carries {len(bufs)} buffers")
    if len(bufs) > limits.max_tensors:
        raise LimitError(f"{len(bufs)} tensors in one message; the limit is {limits.max_tensors}")
    tensors: dict[str, Tensor] = {}
    for meta, frame in zip(env.tensors, bufs, strict=True):
        tensors[meta.name] = _view(meta, _frame_bytes(frame), limits)
    try:
        body = _DECODERS[op].decode(body_raw)
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"malformed {op.name} body: {exc}") from None
    return Message(op, env.rid, body, tensors)


def _view(meta: TensorMeta, buf: memoryview, limits: Limits) -> Tensor:
    dt = DTYPES.get(meta.dtype)
    if dt is None:
        raise ProtocolError(f"tensor {meta.name!r} has unknown dtype {meta.dtype!r}; known: {sorted(DTYPES)}")
    if len(meta.shape) > limits.max_rank or any(d < 0 for d in meta.shape):
        raise ProtocolError(f"tensor {meta.name!r} has shape {meta.shape!r} (rank <= {limits.max_rank}, dims >= 0)")
    # Python ints: no overflow however large the declared dims are.
    nbytes = math.prod(meta.shape) * dt.itemsize
    if nbytes > limits.max_tensor_bytes:
        raise LimitError(f"tensor {meta.name!r} {meta.dtype}{meta.shape!r} declares {nbytes} bytes; "
                         f"the limit is {limits.max_tensor_bytes}")
    if nbytes != buf.nbytes:
        raise ProtocolError(f"tensor {meta.name!r} {meta.dtype}{meta.shape!r} declares {nbytes} bytes "
                            f"but its frame holds {buf.nbytes}")
    arr = np.frombuffer(buf, dtype=dt).reshape(meta.shape)  # a view of the frame, no copy
    return BF16(arr) if meta.dtype == "bfloat16" else arr


def check_tensors(msg: Message, spec: Mapping[str, tuple[tuple[str, ...], tuple[int, ...], bool]]) -> None:
    """Refuse unknown names, missing required tensors and wrong dtypes or ranks, in a sentence."""
    for name, t in msg.tensors.items():
        if name not in spec:
            raise ProtocolError(f"{msg.op.name} does not take a tensor named {name!r} (takes {sorted(spec)})")
        dtypes, ranks, _ = spec[name]
        dn = dtype_name(t)
        ndim = (t.bits if isinstance(t, BF16) else t).ndim
        if dn not in dtypes or ndim not in ranks:
            raise ProtocolError(f"{msg.op.name} tensor {name!r} is {dn} rank {ndim}; wants {dtypes} rank {ranks}")
    for name, (_, _, required) in spec.items():
        if required and name not in msg.tensors:
            raise ProtocolError(f"{msg.op.name} needs tensor {name!r}")


def read_secret(path: str | None) -> bytes | None:
    """The shared secret from a file (whitespace stripped); None when no file is given."""
    if not path:
        return None
    with open(path, "rb") as fh:
        key = fh.read().strip()
    if len(key) < 16:
        raise ValueError(f"secret in {path!r} is {len(key)} bytes; use at least 16 (e.g. `openssl rand -hex 32`)")
    return key
