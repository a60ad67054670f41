"""The model files the studio needs: manifest, lookup, verification and download.

`resolve("diffrhythm-1.2-full")` -> {filename: Path}; `resolve_file("vae", "vae_model.pt")` -> Path.
A missing or damaged file raises ModelFileMissing, whose message names the file and the command
that fetches it.

| module | role |
|---|---|
| `manifest` | every model file: source, size, checksum, licence |
| `locate` | finding them on disk (a folder by hand, the Hugging Face cache, the studio's folder) |
| `fetch` | downloading what is missing, with progress and resume |
"""

from __future__ import annotations

from pathlib import Path

from .locate import FileStatus, check_file, check_model, default_models_dir, hf_cache_dir, hf_offline
from .manifest import MODELS, FileSpec, ModelSpec, chosen, get

__all__ = [
    "MODELS", "FileSpec", "FileStatus", "ModelFileMissing", "ModelSpec", "check_file", "check_model", "chosen",
    "default_models_dir", "get", "hf_cache_dir", "hf_offline", "resolve", "resolve_file",
]


class ModelFileMissing(FileNotFoundError):
    """A model file is missing or damaged. str() is the one message shown to the user."""

    def __init__(self, status: FileStatus) -> None:
        self.status = status
        spec = status.spec
        what = "is missing" if status.state == "missing" else f"is damaged ({status.reason})"
        # No folder in the message: it reaches the page, where a server path helps no one (`studio models
        # list` on the server shows where each file is looked for).
        super().__init__(
            f"model file {spec.filename} of '{status.model}' ({spec.source.label}) {what}; "
            f"fetch it with: studio models fetch --only {status.model}"
        )

    def __str__(self) -> str:
        return self.args[0]


def resolve(name: str, *, models_dir: str | Path | None = None) -> dict[str, Path]:
    """Local paths of every file of model `name`, keyed by `FileSpec.id` (the base name, or the key
    given where base names clash, e.g. MuLan's "muq/config.json")."""
    out: dict[str, Path] = {}
    for status in check_model(get(name), models_dir):
        if not status.ok:
            raise ModelFileMissing(status)
        out[status.spec.id] = status.path
    return out


def resolve_file(name: str, filename: str, *, models_dir: str | Path | None = None) -> Path:
    """One file of model `name`, matched by its id, full path or base name (first match)."""
    for spec in get(name).files:
        if filename in (spec.id, spec.filename, spec.basename):
            status = check_file(name, spec, models_dir)
            if not status.ok:
                raise ModelFileMissing(status)
            return status.path
    raise KeyError(f"model {name!r} has no file {filename!r}")
