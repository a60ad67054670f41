"""Shared fixtures: the reference folder beside the checkout, tiny checkpoints, temp data dirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from shared_paths import REFERENCE

# The product finds the phone vocabulary only where a musician's machine has it (the model files); tests
# that read real lyrics use the reference copy, handed over the documented way (subprocesses inherit it).
if (REFERENCE / "g2p" / "g2p" / "vocab.json").is_file():
    os.environ.setdefault("STUDIO_LYRICS_VOCAB", str(REFERENCE / "g2p" / "g2p" / "vocab.json"))


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """`../shared/reference/diffrhythm`, or skip saying why."""
    if not REFERENCE.is_dir():
        pytest.skip(f"upstream reference vectors not found at {REFERENCE} (CI keeps ../shared beside the checkout)")
    return REFERENCE


@pytest.fixture(scope="session")
def tiny_dit_base(reference_dir: Path) -> Path:
    return reference_dir / "dit-tiny-base"


@pytest.fixture(scope="session")
def tiny_dit_full(reference_dir: Path) -> Path:
    return reference_dir / "dit-tiny-full"


@pytest.fixture(scope="session")
def tiny_vae(reference_dir: Path) -> Path:
    return reference_dir / "vae-tiny" / "vae_model.pt"
