"""Importing ttnn on purpose: one place that says which environment the ttnn backend needs."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

PINNED = "0.81.1"  # the version every layout, API call and cache key here was written against
INSTALL_HINT = (
    "the ttnn backend needs ttnn, which PyPI ships for CPython 3.10 and 3.12 only (not 3.11): create a "
    "Python 3.12 venv, `pip install 'diffrhythm-studio[ttnn]'` in it, and start the worker with that "
    "interpreter (`engine.worker_client.Worker(backend='ttnn', python='/path/to/venv312/bin/python')`, or "
    "`/path/to/venv312/bin/python -m device_worker --backend ttnn ...`; see docs/ttnn.md)"
)


class TtnnUnavailable(ModuleNotFoundError):
    """ttnn cannot be imported in this interpreter (the message names the environment to use)."""


def require_ttnn() -> ModuleType:
    """The `ttnn` module, or TtnnUnavailable saying how to get an environment that has it."""
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        mod = importlib.import_module("ttnn")
    except ModuleNotFoundError as exc:
        if exc.name not in (None, "ttnn"):  # ttnn is there but one of its own dependencies is not
            raise
        raise TtnnUnavailable(f"ttnn is not installed for this Python {py} ({sys.executable}); {INSTALL_HINT}",
                              name="ttnn") from None
    spec = getattr(mod, "__spec__", None)
    if spec is not None and spec.origin is None and spec.submodule_search_locations is not None:
        # A bare folder named ttnn on sys.path (a checkout's tests/ttnn, say) imports as an empty namespace
        # package; without this check it would pass as "installed" and fail later on a missing attribute.
        where = ", ".join(dict.fromkeys(getattr(mod, "__path__", [])))
        sys.modules.pop("ttnn", None)
        raise TtnnUnavailable(f"ttnn is not installed for this Python {py} ({sys.executable}): only a folder "
                              f"named ttnn without code was found ({where}); {INSTALL_HINT}", name="ttnn")
    return mod


def ttnn_installed() -> bool:
    """Whether a real ttnn (code, not a bare folder of that name) can be imported, without importing it."""
    spec = importlib.util.find_spec("ttnn")
    return spec is not None and spec.origin is not None


def ttnn_version(ttnn: ModuleType | None = None) -> str:
    """ttnn's version string (part of the weight-cache key: a new ttnn may lay tensors out differently)."""
    mod = ttnn if ttnn is not None else require_ttnn()
    version = getattr(mod, "__version__", None)
    if version:
        return str(version)
    try:
        from importlib.metadata import version as dist_version

        return dist_version("ttnn")
    except Exception:  # noqa: BLE001 - a source build without metadata
        return "unknown"
