"""How close a take came to the style it was asked for: MuQ-MuLan's cosine between the two.

The take's audio is heard the way the style path hears a reference (`engine.style`): its central 10 s
(all of it when shorter), mono, at 24 kHz; MuQ-MuLan embeds it (the worker's STYLE op) and the figure is
the cosine between that embedding and the style embedding the take was made with (text prompt or
reference, both unit vectors in MuQ-MuLan's joint space). 1 is the same direction. Audio against a text
prompt never reaches 1, so the figure ranks the variations of one request rather than grading a take on
its own. Without a style model it is absent, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from device_worker.shapes import SAMPLE_RATE
from engine.audio_files import resample
from engine.style import STYLE_RATE, WINDOW_S


def take_window(audio: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(24 kHz mono samples, start s, length s) of a take's audio float32 [2, n] at 44.1 kHz."""
    n = audio.shape[1]
    total_s = n / SAMPLE_RATE
    length_s = min(WINDOW_S, total_s)
    start_s = max(0.0, float(total_s // 2 - length_s / 2)) if total_s > WINDOW_S else 0.0
    a, b = int(start_s * SAMPLE_RATE), int(start_s * SAMPLE_RATE) + int(length_s * SAMPLE_RATE)
    mono = audio[:, a:b].mean(axis=0).astype(np.float32)
    return resample(mono, SAMPLE_RATE, STYLE_RATE), start_s, length_s


def style_match(audio: np.ndarray, style: np.ndarray, embed_audio: Callable[[np.ndarray], np.ndarray]) -> dict[str, Any]:
    """{"cosine", "window_s": [start, length]} for the take's audio [2, n] and its style [512]."""
    wav, start_s, length_s = take_window(audio)
    emb = np.asarray(embed_audio(wav[None]), dtype=np.float64).reshape(-1)
    ref = np.asarray(style, dtype=np.float64).reshape(-1)
    denom = float(np.linalg.norm(emb) * np.linalg.norm(ref))
    cosine = float(emb @ ref / denom) if denom > 0 else 0.0
    return {"cosine": round(cosine, 4), "window_s": [round(start_s, 2), round(length_s, 2)]}
