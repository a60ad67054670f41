"""The worker protocol: op bytes, one msgspec Struct per message, the version, the limits.

Every message is a ZMQ multipart message (the ROUTER side adds the peer identity in front):

    [op (1 byte), envelope (msgpack), body (msgpack), *tensor buffers, (hmac, 32 bytes)]

`envelope` is `Envelope(version, rid, tensors)`: the protocol version (a mismatch is refused with an
error reply), the request id the reply or event belongs to (a song job's id is the rid of its submit),
and one `TensorMeta(name, dtype, shape)` per buffer frame that follows. Buffers are raw little-endian
bytes; bfloat16 travels as its raw uint16 bits under the name "bfloat16". With a shared secret the last
frame is HMAC-SHA256 over all frames before it (see `wire.py`). Nothing is ever pickled.

| op (byte)        | body         | tensors (name: dtype [shape])                              | answer        |
|------------------|--------------|------------------------------------------------------------|---------------|
| HELLO    0x01    | Hello        | -                                                          | WELCOME, then LOADING..., READY |
| PING     0x02    | Ping         | -                                                          | PONG          |
| SUBMIT   0x03    | Submit       | text: int64 [N]; style, negative_style: f32/f16/bf16 [512]; cond: f32 [N,64] (optional) | ACCEPTED, STEP x steps-1, LATENT, WINDOW x M (audio f32 [2,n]), DONE; or ERROR / CANCELLED |
| CANCEL   0x04    | Cancel       | -                                                          | CANCELLED (for the job) or ERROR |
| ENCODE   0x05    | Encode       | audio: f32 [2, n] (44.1 kHz)                                | ENCODED latent: f32 [T, 64] |
| STYLE    0x06    | Style        | audio: f32 [B, n] (24 kHz mono) unless `texts`              | STYLE_EMB embedding: f32 [B, 512] |
| FORWARD  0x07    | Forward      | x, cond: [B,N,64]; text: int64 [B,N]; time: [B] or []; style_prompt: [B,512]; start_time, duration: [B] (optional); B <= max_forward_batch, B*N <= max_forward_work | VELOCITY v: [B,N,64] |
| DECODE   0x0a    | Decode       | latent: f32 [64, T] (channels first)                        | ACCEPTED, WINDOW x M, DONE (a job: cancellable) |
| TRANSCRIBE 0x0b  | Transcribe   | audio: f32 [n] (16 kHz mono); windows in the body (s, each <= 30 s) | TRANSCRIPT (words with times; Whisper loaded on first use) |
| STATS    0x08    | Stats        | -                                                          | STATS_REPLY   |
| SHUTDOWN 0x09    | Shutdown     | -                                                          | BYE, then the worker exits |

Events carry the job's rid. `ERROR.error` is "ExceptionName: message" and ends only that request or job;
the worker keeps serving. STEP counts guided steps done (k of `total`, with the unit's measured seconds);
WINDOW counts VAE windows decoded (j of `total`) and carries that window's kept audio, so playback can
start before the song is decoded. DONE carries per-stage seconds (`prepare`, `steps`, `decode`, `queue`).
"""

from __future__ import annotations

import enum

import msgspec

from device_worker import controls

# Bumped on any change to a message's fields or meaning; peers of another version are refused at HELLO.
# 1: first release. 2: Limits gained max_forward_batch / max_forward_work (the bounds of one FORWARD);
# Done gained `memory` (the song's peak device memory). 3: TRANSCRIBE / TRANSCRIPT (the lyrics check).
# 4: Submit's song settings moved into one `SongParams` (`song`), `cfg_strength` renamed `cfg`;
# Submit.style_match and Done's style embedding (the style-match figure rides on the job).
PROTOCOL_VERSION = 4

# Struct options as vLLM's EngineCoreOutputs: positional arrays (small headers), defaults left out,
# no GC tracking (messages hold no cycles).
_OPTS = dict(array_like=True, omit_defaults=True, gc=False, forbid_unknown_fields=True)


class Op(bytes, enum.Enum):
    """Message type, sent as the first frame so the receiver picks a typed decoder without parsing."""

    # client -> worker
    HELLO = b"\x01"
    PING = b"\x02"
    SUBMIT = b"\x03"
    CANCEL = b"\x04"
    ENCODE = b"\x05"
    STYLE = b"\x06"
    FORWARD = b"\x07"
    STATS = b"\x08"
    SHUTDOWN = b"\x09"
    DECODE = b"\x0a"
    TRANSCRIBE = b"\x0b"
    # worker -> client
    WELCOME = b"\x41"
    LOADING = b"\x42"
    READY = b"\x43"
    PONG = b"\x44"
    ACCEPTED = b"\x45"
    STEP = b"\x46"
    LATENT = b"\x47"
    WINDOW = b"\x48"
    DONE = b"\x49"
    ERROR = b"\x4a"
    CANCELLED = b"\x4b"
    ENCODED = b"\x4c"
    STYLE_EMB = b"\x4d"
    VELOCITY = b"\x4e"
    STATS_REPLY = b"\x4f"
    BYE = b"\x50"
    TRANSCRIPT = b"\x51"


class Limits(msgspec.Struct, **_OPTS):
    """What the worker accepts; sent in WELCOME so the client can refuse early with the same numbers."""

    max_tensor_bytes: int = 256 << 20  # one buffer; a 285 s stereo f32 song is ~100 MB
    max_header_bytes: int = 64 << 10  # envelope and body frames
    max_tensors: int = 8  # buffers per message
    max_rank: int = 4
    max_frames: int = 6144  # latent frames per song (the full model's budget)
    max_jobs: int = 8  # song jobs held at once (queued + running)
    max_steps: int = int(controls.STEPS.hi)
    # FORWARD (RemoteDiT): one call is one unit on the compute thread and holds every job behind it, so
    # it may not cost more than one guided step of the longest song (batch 2 x max_frames frames).
    max_forward_batch: int = 8
    max_forward_work: int = 2 * 6144  # batch x frames


class TensorMeta(msgspec.Struct, **_OPTS):
    name: str
    dtype: str
    shape: list[int]


class Envelope(msgspec.Struct, **_OPTS):
    version: int
    rid: int
    tensors: list[TensorMeta] = []


# ---- requests ---------------------------------------------------------------------------------------


class Hello(msgspec.Struct, **_OPTS):
    client: str = ""


class Ping(msgspec.Struct, **_OPTS):
    pass


class SongParams(msgspec.Struct, **_OPTS):
    """How one song is sampled, under one set of names from the compose form to the sampler: the engine
    builds it, `Submit.song` carries it, the worker's `JobSpec.song` holds it and
    `sampling.start_song(params=...)` reads it. `cfg` is the guidance strength,
    `v = v_c + (v_c - v_u) * cfg` (upstream's `cfg_strength`)."""

    steps: int = int(controls.STEPS.default)
    cfg: float = controls.CFG.default
    # The wire takes one whole number (checked against controls.SEED); in process the sampler also takes
    # None (draw one) or one seed per batch item.
    seed: int | list[int] | None = 0
    sway: float | None = None  # sway sampling coefficient of the time grid; None = a uniform grid
    start_time: float = 0.0
    song_duration: float | None = None  # fp16-rounded end_frame / max_frames; None = the sampler's default
    edit_segments: list[list[int]] | None = None  # [[start, end), ...] in frames to regenerate, with `cond`


class Submit(msgspec.Struct, **_OPTS):
    """A song job. `text` (tensor) holds one lyric token per latent frame; its length is the frame count."""

    song: SongParams = msgspec.field(default_factory=SongParams)
    # Hear the finished take's central 10 s with the style model and send that embedding with DONE
    # (`style_embedding`), so the style-match figure needs no call of its own.
    style_match: bool = False
    precision: str = ""  # "" = whatever the worker loaded; otherwise must match it
    decode_window: int = 0  # latent frames per VAE window; 0: the worker's choice (larger on a GPU)
    decode_overlap: int = 32
    label: str = ""  # free text for logs


class Cancel(msgspec.Struct, **_OPTS):
    job: int


class Encode(msgspec.Struct, **_OPTS):
    seed: int | None = None  # None: the worker draws one and returns it


class Style(msgspec.Struct, **_OPTS):
    texts: list[str] | None = None  # None: embed the `audio` tensor


class Forward(msgspec.Struct, **_OPTS):
    drop_audio_cond: bool = False
    drop_text: bool = False
    drop_prompt: bool = False


class Decode(msgspec.Struct, **_OPTS):
    window: int = 128
    overlap: int = 32


class Transcribe(msgspec.Struct, **_OPTS):
    """Hear the `audio` tensor (16 kHz mono) in these windows ([start_s, end_s], each at most 30 s;
    empty: consecutive 30 s windows) with the worker's Whisper (`--lyrics-model`)."""

    windows: list[list[float]] = []
    language: str = ""  # "en", "zh", ...; "": Whisper detects it


class Stats(msgspec.Struct, **_OPTS):
    pass


class Shutdown(msgspec.Struct, **_OPTS):
    pass


# ---- replies and events -----------------------------------------------------------------------------


class Welcome(msgspec.Struct, **_OPTS):
    version: int
    backend: str
    device: str
    precision: str
    policy: str
    ready: bool
    limits: Limits
    models: dict[str, str] = {}  # role -> id (file name + size + mtime hash)
    pid: int = 0


class Loading(msgspec.Struct, **_OPTS):
    stage: str
    fraction: float


class Ready(msgspec.Struct, **_OPTS):
    load_s: float
    models: dict[str, str] = {}
    info: dict[str, str] = {}


class Pong(msgspec.Struct, **_OPTS):
    busy_s: float = 0.0  # how long the unit in flight has run (0 when idle): lets the client see a hang
    jobs: int = 0


class Accepted(msgspec.Struct, **_OPTS):
    frames: int
    steps: int
    windows: int
    queued: int  # jobs held before this one


class StepDone(msgspec.Struct, **_OPTS):
    k: int
    total: int
    seconds: float


class Latent(msgspec.Struct, **_OPTS):
    frames: int


class WindowDone(msgspec.Struct, **_OPTS):
    j: int
    total: int
    seconds: float
    start_sample: int  # where this block starts in the song


class Done(msgspec.Struct, **_OPTS):
    timings: dict[str, float]  # seconds per stage, each unit timed after the device finished it
    # "device_peak_mb": the device's peak memory while this song's units ran (absent on the CPU)
    memory: dict[str, float] = {}
    # With Submit.style_match: [start s, length s] of what was heard (tensor `style_embedding` [512]), or
    # why there is no embedding.
    style_window: list[float] = []
    style_error: str = ""


class Error(msgspec.Struct, **_OPTS):
    error: str  # "ExceptionName: message"


class JobCancelled(msgspec.Struct, **_OPTS):
    """The job stopped on a CANCEL (named apart from the engine's `Cancelled` event, which ends a whole song)."""

    stage: str  # "queued", "steps" or "decode"


class Encoded(msgspec.Struct, **_OPTS):
    seed: int


class StyleEmb(msgspec.Struct, **_OPTS):
    pass


class HeardWord(msgspec.Struct, **_OPTS):
    text: str
    start: float
    end: float


class Transcript(msgspec.Struct, **_OPTS):
    model: str  # the Whisper checkpoint's id (folder name + size + mtime hash)
    words: list[HeardWord] = []
    seconds: float = 0.0


class Velocity(msgspec.Struct, **_OPTS):
    seconds: float = 0.0


class StatsReply(msgspec.Struct, **_OPTS):
    rss_bytes: int
    peak_rss_bytes: int
    device_bytes: int
    jobs: int  # held by the scheduler
    backend_jobs: int  # prepared states the backend still holds (0 when idle: nothing leaked)
    jobs_done: int
    policy: str
    device_calls: dict[str, int] = {}  # requests that use the device, by op ("SUBMIT", "STYLE", ...), since start


class Bye(msgspec.Struct, **_OPTS):
    pass


BODY: dict[Op, type[msgspec.Struct]] = {
    Op.HELLO: Hello, Op.PING: Ping, Op.SUBMIT: Submit, Op.CANCEL: Cancel, Op.ENCODE: Encode,
    Op.STYLE: Style, Op.FORWARD: Forward, Op.DECODE: Decode, Op.STATS: Stats, Op.SHUTDOWN: Shutdown,
    Op.WELCOME: Welcome, Op.LOADING: Loading, Op.READY: Ready, Op.PONG: Pong, Op.ACCEPTED: Accepted,
    Op.STEP: StepDone, Op.LATENT: Latent, Op.WINDOW: WindowDone, Op.DONE: Done, Op.ERROR: Error,
    Op.CANCELLED: JobCancelled, Op.ENCODED: Encoded, Op.STYLE_EMB: StyleEmb, Op.VELOCITY: Velocity,
    Op.STATS_REPLY: StatsReply, Op.BYE: Bye, Op.TRANSCRIBE: Transcribe, Op.TRANSCRIPT: Transcript,
}
OP_OF: dict[type[msgspec.Struct], Op] = {cls: op for op, cls in BODY.items()}

REQUESTS = frozenset({Op.HELLO, Op.PING, Op.SUBMIT, Op.CANCEL, Op.ENCODE, Op.STYLE, Op.FORWARD, Op.DECODE,
                      Op.STATS, Op.SHUTDOWN, Op.TRANSCRIBE})

_FLOATS = ("float32", "float16", "bfloat16")
# op -> tensor name -> (allowed dtypes, allowed ranks, required). Checked by the worker before use.
TENSORS: dict[Op, dict[str, tuple[tuple[str, ...], tuple[int, ...], bool]]] = {
    Op.SUBMIT: {
        "text": (("int64",), (1,), True),
        "style": (_FLOATS, (1,), True),
        "negative_style": (_FLOATS, (1,), True),
        "cond": (_FLOATS, (2,), False),
    },
    Op.ENCODE: {"audio": (("float32",), (2,), True)},
    Op.DECODE: {"latent": (("float32",), (2,), True)},
    Op.STYLE: {"audio": (("float32",), (2,), False)},
    Op.TRANSCRIBE: {"audio": (("float32",), (1,), True)},
    Op.FORWARD: {
        "x": (_FLOATS, (3,), True),
        "cond": (_FLOATS, (3,), True),
        "text": (("int64",), (2,), True),
        "time": (_FLOATS, (0, 1), True),
        "style_prompt": (_FLOATS, (2,), True),
        "start_time": (_FLOATS, (0, 1), False),
        "duration": (_FLOATS, (0, 1), False),
    },
}


def exc_text(exc: BaseException) -> str:
    """The error string every ERROR event carries: "ExceptionName: message"."""
    return f"{type(exc).__name__}: {exc}"
