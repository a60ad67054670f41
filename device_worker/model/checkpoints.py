"""What the model loaders share: one error type, one strict key/shape comparison, and modules built as
shapes only (`empty_modules`) for the checkpoint to fill.

Upstream loads non-strictly and silently keeps random weights for anything that does not match; here a
checkpoint either fits the architecture exactly or the error names every key that does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode


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


# Every random initialiser a module's constructor may call, as functions and as tensor methods.
_INITS = frozenset(
    [getattr(torch.nn.init, name) for name in dir(torch.nn.init) if name.endswith("_") and not name.startswith("_")]
    + [torch.Tensor.normal_, torch.Tensor.uniform_, torch.Tensor.zero_, torch.Tensor.fill_]
)


class _SkipInit(TorchFunctionMode):
    """Initialisers return a meta tensor untouched (there is nothing to fill); a real one is filled."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _INITS:  # torch.nn.init passes its tensor by keyword, Tensor methods as self
            tensor = args[0] if args else kwargs["tensor"]
            if tensor.is_meta:
                return tensor
        return func(*args, **kwargs)


@contextmanager
def empty_modules() -> Iterator[None]:
    """Build modules as shapes only, for `load_state_dict(..., assign=True)` to fill from the checkpoint:
    on the meta device (no memory for weights that are replaced) and with the random init skipped. The
    skip matters beyond time: `normal_` has no meta kernel, and its Python fallback imports torch._dynamo,
    1.5 s of CPU at every worker start (nn.Embedding draws its init that way)."""
    with torch.device("meta"), _SkipInit():
        yield
