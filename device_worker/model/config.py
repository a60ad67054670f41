"""The DiT's architecture: `DiTConfig`, and the published checkpoints' presets beside it (`from_name`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

COND_DIM = 512  # width of time/start/duration embeddings and of the style embedding (upstream constant)
HALF_MODES = ("mixed", "upstream")  # how float16/bfloat16 weights run (see `load.load_dit`)

# The released architecture (upstream config/diffrhythm-1b.json) for each published checkpoint.
# Parameter counts: 1.2 base 1,109,315,648; 1.2 full 1,109,709,888 (+ duration embedding).
_RELEASE = dict(dim=2048, depth=16, ff_mult=4, text_dim=512, conv_layers=4, mel_dim=64, text_num_embeds=363)
PRESETS: dict[str, dict[str, Any]] = {
    "diffrhythm-1.2-base": dict(_RELEASE, max_frames=2048),
    "diffrhythm-1.2-full": dict(_RELEASE, max_frames=6144),
    # v1.0: causal attention (no mask was passed), no duration embedding, lyric positions clamped at 4096
    "diffrhythm-1.0-base": dict(_RELEASE, max_frames=2048, causal=True, duration_embed=False, text_max_pos=4096),
    "diffrhythm-1.0-full": dict(_RELEASE, max_frames=6144, causal=True, duration_embed=False, text_max_pos=4096),
}


@dataclass
class DiTConfig:
    dim: int = 2048
    depth: int = 16
    # Upstream's configs say `heads: 32`, but it never passes them to LlamaConfig, whose default is 32: a
    # config's `heads` is not read (`load.config_from_upstream` drops it), and 32 is what every model ran.
    n_head: int = 32
    ff_mult: int = 4
    text_dim: int = 512  # must be 512: upstream's text-fusion linears take COND_DIM inputs
    conv_layers: int = 4
    mel_dim: int = 64
    text_num_embeds: int = 363  # phone ids 1..363; the embedding has one more row for filler id 0
    max_frames: int = 2048  # 2048 base, 6144 full
    causal: bool = False  # v1.0 checkpoints ran causal SDPA (no mask passed); v1.2 is bidirectional
    duration_embed: bool | None = None  # None: present iff max_frames == 6144 (v1.2 full)
    text_max_pos: int | None = None  # clamp of the lyric position table; None: max_frames (v1.0 used 4096)

    def __post_init__(self) -> None:
        if self.duration_embed is None:
            self.duration_embed = self.max_frames == 6144
        if self.text_max_pos is None:
            self.text_max_pos = self.max_frames
        if self.dim % (2 * self.n_head):
            raise ValueError(f"dim {self.dim} must be a multiple of {2 * self.n_head} ({self.n_head} heads, "
                             "even RoPE width)")
        if self.text_dim != COND_DIM:
            raise ValueError(f"text_dim must be {COND_DIM} (upstream text fusion takes {COND_DIM} inputs)")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_head

    @classmethod
    def from_name(cls, name: str) -> DiTConfig:
        """The architecture of a published checkpoint (`PRESETS`)."""
        if name not in PRESETS:
            raise ValueError(f"unknown model name {name!r}; known: {', '.join(PRESETS)}")
        return cls(**PRESETS[name])
