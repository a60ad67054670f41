"""The style-match figure: which part of a take is heard, and the cosine it reports."""

from __future__ import annotations

import numpy as np
import pytest

from device_worker.audio import StyleWindowTap, take_window
from engine.style_match import style_match


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
    wav, start, length = take_window(audio)
    assert wav.shape == (240_001,)  # librosa's length for 441,000 samples at 44.1 kHz, as the style path
    # the embedding of any length and scale: the figure is a cosine
    assert style_match(style * 3.0, style, [start, length]) == {"cosine": 1.0, "window_s": [1.0, 10.0]}
    assert style_match(style, -style, [start, length])["cosine"] == -1.0


def test_the_worker_keeps_only_the_window_as_blocks_go_by():
    """What the worker hears from streamed blocks equals what the whole take gives (any block sizes)."""
    rng = np.random.default_rng(2)
    audio = rng.standard_normal((2, 44_100 * 25 + 1234)).astype(np.float32)
    tap = StyleWindowTap(audio.shape[1])
    at = 0
    for size in (70_000, 1, 500_000, 44_100 * 3, 10**7):  # the last block holds the rest
        block = audio[:, at : at + size]
        tap.add(at, block)
        at += block.shape[1]
    want, start, length = take_window(audio)
    got, got_start, got_length = tap.clip()
    assert (got_start, got_length) == (start, length) == (7.0, 10.0)
    assert np.array_equal(got, want)
    tap.release()
    with pytest.raises(RuntimeError, match="released"):
        tap.clip()
