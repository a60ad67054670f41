"""Finding model files on disk: a hand-laid-out folder, the Hugging Face cache, the studio's own folder.

Search order for a file of source `org/repo`:
1. `--models-dir` / `$STUDIO_MODELS_DIR`: `<dir>/<org>/<repo>/<path>` (upstream GitHub files:
   `<dir>/ASLP-lab/DiffRhythm/<path in the repo>`);
2. hub files: the Hugging Face cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
   `~/.cache/huggingface/hub`), `models--org--repo/snapshots/<commit>/<path>`, symlinks resolved into
   `blobs/`; the pinned commit first, then the commit `refs/<branch>` names, then any snapshot;
3. the studio's default folder (`~/.cache/diffrhythm-studio/models`), where `fetch` puts GitHub files.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .manifest import FileSpec, ModelSpec, Source

ENV_DIR = "STUDIO_MODELS_DIR"


def default_models_dir() -> Path:
    env = os.environ.get(ENV_DIR)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "diffrhythm-studio" / "models"


def user_models_dir(models_dir: str | Path | None) -> Path | None:
    if models_dir:
        return Path(models_dir).expanduser()
    env = os.environ.get(ENV_DIR)
    return Path(env).expanduser() if env else None


def hf_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def hf_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _hf_candidates(source: Source, filename: str) -> list[Path]:
    out: list[Path] = []
    for repo in (source.repo, *source.aliases):
        root = hf_cache_dir() / ("models--" + repo.replace("/", "--"))
        snaps = root / "snapshots"
        if not snaps.is_dir():
            continue
        commits = [source.revision] if source.pinned else []
        ref = root / "refs" / source.revision
        if ref.is_file():
            commits.append(ref.read_text().strip())
        others = sorted((p for p in snaps.iterdir() if p.name not in commits),
                        key=lambda p: p.stat().st_mtime, reverse=True)
        out += [snaps / c / filename for c in commits] + [p / filename for p in others]
    return out


def candidates(spec: FileSpec, models_dir: str | Path | None = None) -> list[Path]:
    """Where `spec` may be, in search order (existing or not)."""
    out: list[Path] = []
    user = user_models_dir(models_dir)
    if user is not None:
        out.append(user / spec.source.repo / spec.filename)
    if spec.source.kind == "hf":
        out += _hf_candidates(spec.source, spec.filename)
    out.append(default_models_dir() / spec.source.repo / spec.filename)
    return out


def git_blob_sha1(path: Path) -> str:
    h = hashlib.sha1()
    h.update(b"blob %d\0" % path.stat().st_size)
    _feed(h, path)
    return h.hexdigest()


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    _feed(h, path)
    return h.hexdigest()


def _feed(h, path: Path) -> None:
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)


@dataclass
class FileStatus:
    model: str
    spec: FileSpec
    state: str  # "present", "missing" or "corrupt"
    path: Path | None  # where it was found (an HF snapshot path keeps the file's name; loaders use this)
    size: int | None
    reason: str = ""
    checked: bool = False  # checksum compared
    real: Path | None = None  # the file behind it (HF symlinks resolved into blobs/)

    @property
    def ok(self) -> bool:
        return self.state == "present"


def check_file(model: str, spec: FileSpec, models_dir: str | Path | None = None, *,
               checksum: bool = False) -> FileStatus:
    """First candidate that exists decides: a dangling HF symlink or a wrong size/checksum is corrupt."""
    for cand in candidates(spec, models_dir):
        if not cand.is_symlink() and not cand.exists():
            continue
        real = cand.resolve()
        if not real.is_file():
            return FileStatus(model, spec, "corrupt", cand, None, f"{cand} points to a missing blob ({real})")
        size = real.stat().st_size
        if size == 0 or (spec.size is not None and size != spec.size):
            want = spec.size if spec.size is not None else "> 0"
            return FileStatus(model, spec, "corrupt", cand, size, f"size {size} bytes, expected {want}", real=real)
        if checksum and (spec.sha256 or spec.git_sha1):
            if spec.sha256:
                got, want, kind = sha256(real), spec.sha256, "sha256"
            else:
                got, want, kind = git_blob_sha1(real), spec.git_sha1, "git blob sha1"
            if got != want:
                return FileStatus(model, spec, "corrupt", cand, size,
                                  f"{kind} {got[:12]}..., expected {want[:12]}...", real=real)
            return FileStatus(model, spec, "present", cand, size, checked=True, real=real)
        return FileStatus(model, spec, "present", cand, size, real=real)
    return FileStatus(model, spec, "missing", None, None, "not found")


def check_model(model: ModelSpec, models_dir: str | Path | None = None, *, checksum: bool = False) -> list[FileStatus]:
    return [check_file(model.name, f, models_dir, checksum=checksum) for f in model.files]
