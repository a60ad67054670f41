"""The numbers a musician sets, declared once: default, range, label and help of each.

Both processes read this table (the worker ships it; the engine and the studio import it, as they do
`shapes`): the page's sliders, the compose form, `studio render`'s options, the jobs file, the request's
validation, the wire's defaults and the worker's own checks all agree because they all read it. A value
outside a range is refused with the range named, never clamped. No imports beyond the standard library.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Control:
    name: str
    default: float
    lo: float
    hi: float
    whole: bool  # an integer setting
    label: str  # what the page calls it
    help: str  # one line for tooltips, --help and the docs

    def problem(self, value: Any) -> str | None:
        """Why `value` is not a valid setting (None: it is)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"must be a number, got {value!r}"
        if self.whole and value != int(value):
            return f"must be a whole number, got {value!r}"
        if not self.lo <= value <= self.hi:
            kind = "a whole number" if self.whole else "a number"
            return f"must be {kind} from {_fmt(self.lo)} to {_fmt(self.hi)}, got {_fmt(value)}"
        return None

    @property
    def range_text(self) -> str:
        return f"{_fmt(self.lo)}-{_fmt(self.hi)}"


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# Euler points of the flow-matching time grid: steps - 1 updates, so 2 is the fewest that moves at all.
STEPS = Control("steps", 32, 2, 200, True, "Steps",
                "how many passes refine the song from noise: more is cleaner and slower; DiffRhythm's default is 32")
CFG = Control("cfg", 4.0, 0.0, 20.0, False, "Guidance strength",
              "how strongly the lyrics and the style steer the song; DiffRhythm's default is 4")
SEED = Control("seed", 0, 0, 2**32 - 1, True, "Seed", "the noise seed; the same seed and settings remake the same song")
VARIATIONS = Control("variations", 1, 1, 16, True, "Variations",
                     "takes of the same request, seeds seed, seed+1, ...")

ALL = {c.name: c for c in (STEPS, CFG, SEED, VARIATIONS)}
