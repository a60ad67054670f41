"""What the DiT and VAE loaders share: one error type and one strict key/shape comparison.

Upstream loads non-strictly and silently keeps random weights for anything that does not match; here a
checkpoint either fits the architecture exactly or the error names every key that does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable, or does not fit the architecture it is loaded into."""


def show_keys(keys: Iterable[str], limit: int = 12) -> str:
    keys = sorted(keys)
    more = f" ... and {len(keys) - limit} more" if len(keys) > limit else ""
    return ", ".join(keys[:limit]) + more


def check_keys(expected: Mapping[str, Sequence[int]], found: Mapping[str, Sequence[int]], what: str) -> None:
    """Raise CheckpointError naming every missing, unexpected and mis-shaped key (shapes as int tuples)."""
    missing = set(expected) - set(found)
    unexpected = set(found) - set(expected)
    shapes = [
        f"{k}: checkpoint {tuple(found[k])} vs model {tuple(expected[k])}"
        for k in sorted(set(expected) & set(found))
        if tuple(found[k]) != tuple(expected[k])
    ]
    problems = []
    if missing:
        problems.append(f"missing keys ({len(missing)}): {show_keys(missing, 64)}")
    if unexpected:
        problems.append(f"unexpected keys ({len(unexpected)}): {show_keys(unexpected, 64)}")
    if shapes:
        problems.append(f"wrong shapes ({len(shapes)}): {'; '.join(shapes[:12])}")
    if problems:
        raise CheckpointError(f"{what} does not match the architecture: " + " | ".join(problems))
