"""The host input stage: everything a device job needs that is not the seed, once per job.

Lyrics come laid out from validation (the same layout the musician saw in the report); style is a
text prompt or a reference recording embedded by MuQ-MuLan in a worker (`style` op, cached by content
hash) or a saved embedding; an edit or continuation loads the reference song and has a worker's VAE
encode it. The clearly labelled test mode may crop songs to a few frames so tests and demos are fast.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

import numpy as np

from engine.events import Preparing
from engine.units import JobContext, Prepared, Stopping

logger = logging.getLogger(__name__)


class DeviceOps(Protocol):
    """The one-shot device calls the input stage needs (the pool sends them to a healthy worker)."""

    def embed_text(self, texts: list[str]) -> np.ndarray: ...  # [B, 512]
    def embed_audio(self, wavs: np.ndarray) -> np.ndarray: ...  # [B, n] 24 kHz mono -> [B, 512]
    def encode(self, audio: np.ndarray, seed: int) -> np.ndarray: ...  # [2, n] 44.1 kHz -> [T, 64]


class HostInputs:
    def __init__(self, ops: DeviceOps, *, negative_style: np.ndarray, cache_dir: str, style_model_id: str,
                 crop_frames: int | None = None, tokenizer: Any = None):
        from engine.style import StyleService, as_model_input

        self.ops = ops
        self.negative_style = as_model_input(negative_style)[0]
        self.styles = StyleService(ops, cache_dir, model_id=style_model_id)
        self.crop_frames = crop_frames
        self.tokenizer = tokenizer

    def __call__(self, ctx: JobContext) -> Prepared:
        job, request = ctx.job, ctx.request
        t0 = time.perf_counter()
        notes: list[str] = []

        job.publish(Preparing(job.id, what="lyrics", detail="instrumental" if request.instrumental else ""))
        layout = getattr(ctx.validation, "layout", None)
        if layout is None:
            from engine.request import layout_request_lyrics

            layout = layout_request_lyrics(request, tokenizer=self.tokenizer)
        tokens = np.asarray(layout.tokens, dtype=np.int64)
        notes += list(layout.notes) + list(layout.warnings)
        if ctx.stopping:
            raise Stopping

        job.publish(Preparing(job.id, what="style", detail=request.style.kind))
        style, style_notes = self._style(request.style)
        notes += style_notes
        if ctx.stopping:
            raise Stopping

        cond, segments, reference = None, None, {}
        if request.edit is not None:
            job.publish(Preparing(job.id, what="reference", detail=request.edit.mode))
            cond, segments, reference, ref_notes = self._reference(request, ctx.seeds[0], len(tokens))
            notes += ref_notes

        effective: dict[str, Any] = {
            "model": layout.model, "frames": int(tokens.shape[0]), "max_frames": layout.max_frames,
            "song_duration": layout.song_duration, "lyrics_timed": request.is_lrc or request.instrumental,
            **reference,
        }
        if self.crop_frames and tokens.shape[0] > self.crop_frames:
            tokens, cond, segments = _crop(tokens, cond, segments, self.crop_frames)
            notes.append(f"TEST MODE: the song is cropped to its first {self.crop_frames} frames "
                         f"({self.crop_frames / 21.533203125:.1f} s)")
            effective["frames"] = self.crop_frames
            effective["edit_segments_frames"] = segments
        return Prepared(tokens=tokens, style=style, negative_style=self.negative_style,
                        song_duration=layout.song_duration, cond=cond, edit_segments=segments,
                        effective=effective, lyrics_report=[r.to_dict() for r in layout.lines], notes=notes,
                        timings={"prepare": round(time.perf_counter() - t0, 6)})

    def _style(self, spec: Any) -> tuple[np.ndarray, list[str]]:
        from engine.style import as_model_input, check_vector

        if spec.embedding is not None:
            vector = check_vector(np.load(spec.embedding, allow_pickle=False), f"saved style {spec.embedding}")
            return as_model_input(vector)[0], []
        result = self.styles.from_text(spec.text) if spec.text is not None else self.styles.from_audio(spec.audio)
        notes = list(result.notes) + (["style embedding from the cache"] if result.cached else [])
        return as_model_input(result.vector)[0], notes

    def _reference(self, request: Any, seed: int, frames: int) -> tuple[np.ndarray, list[list[int]], dict, list[str]]:
        from engine.reference import plan_edit

        def encode(audio: np.ndarray, seed: int) -> np.ndarray:
            latent = self.ops.encode(np.ascontiguousarray(audio[0], dtype=np.float32), seed)  # [T, 64]
            return np.ascontiguousarray(np.asarray(latent, dtype=np.float32).T[None])  # [1, 64, T]

        edit = request.edit
        segments = [list(s) for s in edit.segments] or None  # None: continue after the reference's end
        plan = plan_edit(edit.song, duration_s=request.duration, segments=segments, encode=encode, seed=seed)
        cond = np.ascontiguousarray(plan.cond[:frames], dtype=np.float32)
        frame_segments = [[int(a), min(int(b), frames)] for a, b in plan.segments if a < frames]
        if not frame_segments:
            raise ValueError("no edit segment lies inside the song")
        info = {"reference_seconds": round(plan.reference_s, 3), "reference_seed": seed,
                "edit_segments_frames": frame_segments}
        return cond, frame_segments, info, list(plan.notes)


def _crop(tokens: np.ndarray, cond: np.ndarray | None, segments: list[list[int]] | None,
          n: int) -> tuple[np.ndarray, np.ndarray | None, list[list[int]] | None]:
    tokens = tokens[:n].copy()
    if cond is not None:
        cond = np.ascontiguousarray(cond[:n])
    if segments is not None:
        segments = [[a, min(b, n)] for a, b in segments if a < n]
        if not segments:
            raise ValueError(f"TEST MODE crops songs to {n} frames and no edit segment starts before that")
    return tokens, cond, segments
