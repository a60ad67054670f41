"""Shared fixtures: the reference folder beside the checkout, tiny checkpoints, temp data dirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("STUDIO_SHARED_DIR", ROOT.parent / "shared"))
REFERENCE = SHARED / "reference" / "diffrhythm"


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
