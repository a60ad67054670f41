"""Shared setup for the engine benches: the tiny reference model (TEST MODE) and a style embedding."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from engine.config import EngineConfig, Models, WorkerSpec  # noqa: E402

REFERENCE = Path(os.environ.get("STUDIO_SHARED_DIR", ROOT.parent / "shared")) / "reference" / "diffrhythm"


def tiny_models() -> Models:
    if not REFERENCE.is_dir():
        sys.exit(f"the tiny reference model is not at {REFERENCE} (set STUDIO_SHARED_DIR)")
    r = REFERENCE
    return Models(vae=str(r / "vae-tiny" / "vae_model.pt"), base=str(r / "dit-tiny-base"),
                  full=str(r / "dit-tiny-full"), negative_style=str(r / "vocal.npy"), test=True)


def style_file(folder: Path) -> str:
    v = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    path = folder / "style.npy"
    np.save(path, v / np.linalg.norm(v))
    return str(path)


def make_config(frames: int, threads: int, **kw) -> EngineConfig:
    data = Path(tempfile.mkdtemp(prefix="drs-bench-"))
    return EngineConfig(data_dir=data, models=tiny_models(), crop_frames=frames, lock_dir=str(data / "locks"),
                        workers=[WorkerSpec(threads=threads)], **kw)
