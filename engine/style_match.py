"""How close a take came to the style it was asked for: MuQ-MuLan's cosine between the two.

The take's audio is heard the way the style path hears a reference: its central 10 s (all of it when
shorter), mono, at 24 kHz (`device_worker.audio.style_window`). The worker embeds that with MuQ-MuLan as
the take finishes and sends the embedding with the take's DONE (`Submit.style_match`), so the figure
costs no device call of its own; this is the cosine between that embedding and the style embedding the
take was made with (text prompt or reference, both unit vectors in MuQ-MuLan's joint space). 1 is the
same direction. Audio against a text prompt never reaches 1, so the figure ranks the variations of one
request rather than grading a take on its own. Without a style model it is absent, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def style_match(embedding: np.ndarray, style: np.ndarray, window_s: Sequence[float]) -> dict[str, Any]:
    """{"cosine", "window_s": [start, length]} for the embedding of a take's style window and its style [512]."""
    emb = np.asarray(embedding, dtype=np.float64).reshape(-1)
    ref = np.asarray(style, dtype=np.float64).reshape(-1)
    denom = float(np.linalg.norm(emb) * np.linalg.norm(ref))
    cosine = float(emb @ ref / denom) if denom > 0 else 0.0
    return {"cosine": round(cosine, 4), "window_s": [round(float(w), 2) for w in window_s]}
