"""Wire format: every dtype and shape round-trips bit for bit; bad frames are refused before use.

What these tests pin: tensors keep dtype, shape and bytes (bfloat16 as raw bits); views are zero-copy on
receive; a declared size is checked against the limit and the frame before any array exists; the HMAC
covers every frame; the version and op byte are checked; nothing is pickled.
"""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from device_worker import protocol as P
from device_worker import wire

KEY = b"0123456789abcdef0123"
DTYPES = ["float32", "float16", "bfloat16", "int64", "int16"]
shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=7)


def _roundtrip(tensors, key=None, copy_frames=True):
    frames = wire.encode(P.Submit(song=P.SongParams(seed=7), label="x"), 42, tensors, key=key)
    if copy_frames:  # what comes off a socket: plain bytes per frame
        frames = [bytes(memoryview(f)) for f in frames]
    return wire.decode(frames, key=key)


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(DTYPES), shape=shapes, data=st.data(), signed=st.booleans())
def test_roundtrip_every_dtype_and_shape(dtype, shape, data, signed):
    if dtype == "bfloat16":
        bits = data.draw(hnp.arrays(np.uint16, shape))
        msg = _roundtrip({"t": wire.BF16(bits)}, key=KEY if signed else None)
        out = msg.tensors["t"]
        assert isinstance(out, wire.BF16) and out.bits.shape == shape
        assert out.bits.tobytes() == bits.tobytes()
        return
    np_dtype = np.dtype(dtype)
    arr = data.draw(hnp.arrays(np_dtype, shape))  # floats include NaN/inf payloads: compare bytes
    msg = _roundtrip({"t": arr}, key=KEY if signed else None)
    out = msg.tensors["t"]
    assert out.dtype == np_dtype and out.shape == shape, f"{out.dtype=} {out.shape=} {dtype=} {shape=}"
    assert out.tobytes() == arr.tobytes()
    assert msg.rid == 42 and msg.body.song.seed == 7


@pytest.mark.parametrize("make", [
    lambda: np.arange(24, dtype=">f4").reshape(2, 3, 4),  # big-endian input goes out little-endian
    lambda: np.arange(24, dtype=np.float32).reshape(4, 6).T,  # non-contiguous view
    lambda: np.arange(24, dtype=np.int64).reshape(2, 3, 4)[:, ::2],
    lambda: np.array(3.5, dtype=np.float16),  # 0-d
    lambda: np.zeros((0, 64), np.float32),  # empty
])
def test_layout_edge_cases(make):
    arr = make()
    out = _roundtrip({"t": arr}).tensors["t"]
    assert out.shape == arr.shape and np.array_equal(out, arr)
    assert out.dtype == arr.dtype.newbyteorder("<")


def test_receive_is_zero_copy_view_of_the_frame():
    arr = np.arange(6144 * 64, dtype=np.float32).reshape(6144, 64)
    frames = [bytearray(memoryview(f)) for f in wire.encode(P.Latent(6144), 1, {"latent": arr})]
    out = wire.decode(frames).tensors["latent"]
    frames[3][:4] = np.float32(-1).tobytes()  # the array must see a change to the frame it came from
    assert out[0, 0] == -1.0


def test_send_is_zero_copy_buffer_of_the_array():
    arr = np.zeros(1024, np.float32)
    frames = wire.encode(P.Latent(1), 1, {"a": arr})
    arr[0] = 5.0
    assert np.frombuffer(frames[3], np.float32)[0] == 5.0


def test_several_tensors_keep_names_and_order():
    t = {"text": np.arange(5, dtype=np.int64), "style": np.ones(512, np.float16), "cond": np.zeros((5, 64), np.float32)}
    out = _roundtrip(t).tensors
    assert list(out) == list(t) and all(np.array_equal(out[k], t[k]) for k in t)


def _frames(tensors=None, **kw):
    return [bytes(memoryview(f)) for f in wire.encode(P.Submit(), 9, tensors or {}, **kw)]


def test_oversized_declared_tensor_refused_before_allocation():
    # Declares 10^12 float32 elements but ships 4 bytes: the limit is checked from the header alone.
    env = P.Envelope(P.PROTOCOL_VERSION, 9, [P.TensorMeta("text", "float32", [10**6, 10**6])])
    frames = [P.Op.SUBMIT.value, wire._ENCODER.encode(env), wire._ENCODER.encode(P.Submit()), b"\0" * 4]
    with pytest.raises(wire.LimitError, match="limit"):
        wire.decode(frames)


def test_declared_size_must_match_frame():
    frames = _frames({"t": np.zeros(16, np.float32)})
    frames[3] = frames[3][:-4]
    with pytest.raises(wire.ProtocolError, match="declares 64 bytes but its frame holds 60"):
        wire.decode(frames)


@pytest.mark.parametrize("mutate, error", [
    (lambda f: f[:2], "at least 3 frames"),
    (lambda f: [b"\xff", *f[1:]], "unknown op"),
    (lambda f: [f[0], b"\x93garbage", *f[2:]], "malformed envelope"),
    (lambda f: [f[0], f[1], b"\xc1", *f[3:]], "malformed SUBMIT body"),
    (lambda f: [*f, b"extra"], "declares 0 tensors but carries 1"),
])
def test_malformed_messages_are_refused(mutate, error):
    with pytest.raises(wire.ProtocolError, match=error):
        wire.decode(mutate(_frames()))


def test_unknown_dtype_and_negative_dims_are_refused():
    for meta, error in ((P.TensorMeta("t", "complex64", [2]), "unknown dtype"),
                        (P.TensorMeta("t", "float32", [-1]), "dims >= 0"),
                        (P.TensorMeta("t", "float32", [1] * 9), "rank")):
        env = P.Envelope(P.PROTOCOL_VERSION, 1, [meta])
        frames = [P.Op.SUBMIT.value, wire._ENCODER.encode(env), wire._ENCODER.encode(P.Submit()), b""]
        with pytest.raises(wire.ProtocolError, match=error):
            wire.decode(frames)


def test_wrong_version_is_refused_and_rid_is_recoverable():
    frames = [bytes(memoryview(f)) for f in wire.encode(P.Ping(), 77, version=P.PROTOCOL_VERSION + 1)]
    with pytest.raises(wire.VersionError, match=f"speaks protocol {P.PROTOCOL_VERSION + 1}"):
        wire.decode(frames)
    assert wire.peek_rid(frames) == 77


def test_hmac_covers_every_frame():
    frames = _frames({"t": np.arange(8, dtype=np.float32)}, key=KEY)
    assert wire.decode(frames, key=KEY).tensors["t"][7] == 7
    for i in range(len(frames) - 1):  # flip one byte in any frame
        bad = list(frames)
        b = bytearray(bad[i])
        b[-1] ^= 1
        bad[i] = bytes(b)
        with pytest.raises(wire.AuthError):
            wire.decode(bad, key=KEY)
    with pytest.raises(wire.AuthError, match="not signed|authentication"):
        wire.decode(_frames({"t": np.zeros(1, np.float32)}), key=KEY)  # unsigned
    with pytest.raises(wire.AuthError):
        wire.decode(frames, key=b"another-secret-16bytes")


def test_pickle_never_goes_on_the_wire():
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    # An object array would need pickle: it is refused, and so is an object inside a header.
    with pytest.raises(TypeError, match="cannot go on the wire"):
        wire.encode(P.Submit(), 1, {"t": np.array([Evil()], dtype=object)})
    with pytest.raises(TypeError):
        wire.encode(P.Submit(label=Evil()), 1)


def test_check_tensors_names_dtypes_and_required():
    msg = _roundtrip({"text": np.zeros(4, np.int64), "style": np.zeros(512, np.float32)})
    with pytest.raises(wire.ProtocolError, match="needs tensor 'negative_style'"):
        wire.check_tensors(msg, P.TENSORS[P.Op.SUBMIT])
    msg = _roundtrip({"text": np.zeros(4, np.float32)})
    with pytest.raises(wire.ProtocolError, match="tensor 'text' is float32"):
        wire.check_tensors(msg, P.TENSORS[P.Op.SUBMIT])
    msg = _roundtrip({"bogus": np.zeros(4, np.float32)})
    with pytest.raises(wire.ProtocolError, match="does not take a tensor named 'bogus'"):
        wire.check_tensors(msg, P.TENSORS[P.Op.SUBMIT])


# ---- fuzzing the header: any bytes, any envelope, any rid ----------------------------------------------

_RID_MIN, _RID_MAX = -(2**63), 2**64 - 1
_scalars = (st.none() | st.booleans() | st.integers(_RID_MIN, _RID_MAX) | st.floats(allow_nan=True)
            | st.text(max_size=8) | st.binary(max_size=8))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=12)


def _check_refusal(frames: list[bytes], key: bytes | None) -> None:
    """What the worker does with a message: decode it, or take its rid and say why in a signed ERROR."""
    try:
        wire.decode(frames, key=key)
    except wire.WireError as exc:
        rid = wire.peek_rid(frames)
        assert type(rid) is int and _RID_MIN <= rid <= _RID_MAX
        reply = wire.encode(P.Error(P.exc_text(exc)), rid, key=key)  # the reply itself never fails
        assert wire.decode([bytes(memoryview(f)) for f in reply], key=key).rid == rid


@settings(max_examples=300, deadline=None)
@given(op=st.sampled_from([o.value for o in P.REQUESTS]) | st.binary(max_size=2),
       rid=st.floats(allow_nan=True) | st.integers(_RID_MIN, _RID_MAX) | _values,
       version=st.just(P.PROTOCOL_VERSION) | _values,
       tensors=_values, body=_values, extra=st.lists(st.binary(max_size=16), max_size=2), signed=st.booleans())
def test_fuzz_envelopes_with_any_rid_are_refused_cleanly(op, rid, version, tensors, body, extra, signed):
    env = msgspec.msgpack.encode([version, rid, tensors])
    frames = [op, env, msgspec.msgpack.encode(body), *extra]
    if signed:
        frames.append(wire._mac(KEY, frames))
    _check_refusal(frames, KEY)
    _check_refusal(frames[:-1] if signed else frames, None)


@settings(max_examples=300, deadline=None)
@given(frames=st.lists(st.binary(max_size=40), max_size=5), signed=st.booleans())
def test_fuzz_random_frames_are_refused_cleanly(frames, signed):
    if signed:
        frames = [*frames, wire._mac(KEY, frames)]
    _check_refusal(frames, KEY if signed else None)


@pytest.mark.parametrize("packed", [
    msgspec.msgpack.encode(1e300), msgspec.msgpack.encode(float("nan")), msgspec.msgpack.encode(float(2**70)),
    msgspec.msgpack.encode("x"), msgspec.msgpack.encode(True), msgspec.msgpack.encode([[1]]),
    b"\x91" * 30000 + b"\x01", b"\xcf\x00",
])
def test_peek_rid_of_a_rid_that_cannot_go_back_is_zero(packed):
    frames = [P.Op.PING.value, b"\x93\x01" + packed + b"\x90", b"\x90"]
    assert wire.peek_rid(frames) == 0
    wire.encode(P.Error("x"), wire.peek_rid(frames))
    assert wire.peek_rid([P.Op.PING.value, wire._ENCODER.encode(P.Envelope(1, -1)), b"\x90"]) == -1
    assert wire.peek_rid([P.Op.PING.value, wire._ENCODER.encode(P.Envelope(1, _RID_MAX)), b"\x90"]) == _RID_MAX
    assert wire.peek_rid([P.Op.PING.value, b"\x93\x01\x05" + b"\x90" * 70_000]) == 0  # oversized: not read
