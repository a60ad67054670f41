"""Backends the worker can run on; each is imported only when chosen (ttnn lives in its own environment).

| module | role |
|---|---|
| `base` | the interface (`Backend`, `JobSpec`, `JobHandle`) and `SamplerBackend`, the shared sampler driver |
| `torch_backend` | CPU, CUDA and MPS: the model core driven one unit (a step or a VAE window) at a time |
| `ttnn/` | the Tenstorrent p100a: the DiT and the VAE on the card (its own table) |
"""

from __future__ import annotations

import importlib

from device_worker.backends.base import Backend, JobHandle, JobSpec, NotSupported

# name -> "module:class"
BACKENDS = {
    "torch": "device_worker.backends.torch_backend:TorchBackend",
    "ttnn": "device_worker.backends.ttnn.backend:TtnnBackend",
}


def make_backend(name: str, device: str, precision: str = "float32", **options: object) -> Backend:
    """Import and build the backend called `name`; an unknown or absent backend is refused in a sentence."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {sorted(BACKENDS)}")
    module, cls = BACKENDS[name].split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise RuntimeError(f"backend {name!r} is not available in this environment ({exc}); "
                           "run the worker with the interpreter that has it (Worker(python=...))") from exc
    return getattr(mod, cls)(device=device, precision=precision, **options)


__all__ = ["BACKENDS", "Backend", "JobHandle", "JobSpec", "NotSupported", "make_backend"]
