"""Which device a worker runs on when it was asked for "auto": decided in the worker, where torch is.

CUDA when a GPU is visible, else Apple's MPS, else the CPU; the ttnn backend takes card 0. The host never
guesses (it has no torch): the worker's welcome and ready line say what was chosen.
"""

from __future__ import annotations

AUTO = "auto"


def resolve_device(backend: str, device: str) -> str:
    """`device` itself unless it is "auto"; then the best device this machine has for `backend`."""
    if device != AUTO:
        return device
    if backend == "ttnn":
        return "0"
    import torch

    if torch.cuda.is_available():
        return "cuda:0"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"
