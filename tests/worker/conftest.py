"""What the worker tests share: the tiny reference DiT and VAE a worker loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from _worker_util import tiny_paths


@pytest.fixture(scope="module")
def paths(reference_dir: Path) -> tuple[str, str]:
    """(tiny base DiT folder, tiny VAE file) of the reference set."""
    return tiny_paths(reference_dir)
