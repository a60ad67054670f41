"""Where the checkout and `../shared` (the reference vectors, present for CI and developers only) are."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("STUDIO_SHARED_DIR", ROOT.parent / "shared"))
REFERENCE = SHARED / "reference" / "diffrhythm"
