"""The style-match figure: which part of a take is heard, and the cosine it reports."""

from __future__ import annotations

import numpy as np
import pytest

from engine.style_match import style_match, take_window


def test_the_central_ten_seconds_are_heard_at_24_khz():
    audio = np.zeros((2, 44_100 * 30), np.float32)
    audio[:, 44_100 * 10 : 44_100 * 20] = 0.5  # only the middle is loud
    wav, start, length = take_window(audio)
    assert (start, length) == (10.0, 10.0) and abs(len(wav) - 240_000) <= 1
    assert wav[100:-100].min() == pytest.approx(0.5, abs=1e-3)
    short, start, length = take_window(np.ones((2, 44_100 * 3), np.float32))
    assert start == 0.0 and length == pytest.approx(3.0) and abs(len(short) - 72_000) <= 1


def test_cosine_against_the_style_it_was_asked_for():
    rng = np.random.default_rng(1)
    style = rng.standard_normal(512).astype(np.float32)
    audio = rng.standard_normal((2, 44_100 * 12)).astype(np.float32) * 0.1
    seen = []

    def embed(wavs):  # stands in for the worker's MuQ-MuLan STYLE op
        seen.append(wavs.shape)
        return style[None] * 3.0  # any length: the figure is a cosine

    assert style_match(audio, style, embed) == {"cosine": 1.0, "window_s": [1.0, 10.0]}
    assert seen == [(1, 240_001)]  # librosa's length for 441,000 samples at 44.1 kHz, as the style path
    assert style_match(audio, -style, embed)["cosine"] == -1.0
