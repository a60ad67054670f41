"""Fixtures shared by the lyric tests: the reference vocab and a tokenizer (skips without espeak-ng)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.lyrics.g2p import LyricTokenizer, espeak_available

ESPEAK_REASON = "espeak-ng is not installed (apt-get install espeak-ng): English g2p cannot run"
needs_espeak = pytest.mark.skipif(not espeak_available(), reason=ESPEAK_REASON)


@pytest.fixture(scope="session")
def vocab_path(reference_dir: Path) -> Path:
    return reference_dir / "g2p" / "g2p" / "vocab.json"


@pytest.fixture(scope="session")
def tokenizer(vocab_path: Path) -> LyricTokenizer:
    if not espeak_available():
        pytest.skip(ESPEAK_REASON)
    return LyricTokenizer(vocab_path)
