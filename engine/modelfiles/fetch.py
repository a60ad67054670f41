"""Downloading model files: hub files through huggingface_hub (progress bar, resume, its cache), upstream
GitHub files by HTTP with Range resume into the studio's folder, checked against their pinned checksums."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .locate import (
    FileStatus,
    check_file,
    default_models_dir,
    git_blob_sha1,
    hf_offline,
    sha256,
    user_models_dir,
)
from .manifest import FileSpec, ModelSpec


class FetchError(RuntimeError):
    pass


@dataclass
class FetchResult:
    status: FileStatus  # after the attempt
    action: str  # "present", "downloaded", "failed", "offline"
    message: str = ""


def download_url(url: str, dest: Path, *, expected_size: int | None = None, progress: bool = True,
                 timeout: float = 60.0) -> Path:
    """GET `url` into `dest`, resuming a previous `dest.part` with an HTTP Range request."""
    from tqdm.auto import tqdm

    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and expected_size is not None and have == expected_size:  # already complete
            os.replace(part, dest)
            return dest
        raise FetchError(f"download of {url} failed: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise FetchError(f"download of {url} failed: {exc}") from None
    with resp:
        if have and resp.status != 206:  # server ignored the Range: start over
            have = 0
        length = resp.headers.get("Content-Length")
        total = have + int(length) if length is not None else expected_size
        with open(part, "ab" if have else "wb") as f, tqdm(
            total=total, initial=have, unit="B", unit_scale=True, desc=dest.name, disable=not progress
        ) as bar:
            while chunk := resp.read(1 << 20):
                f.write(chunk)
                bar.update(len(chunk))
    os.replace(part, dest)
    return dest


def _checksum_ok(spec: FileSpec, path: Path) -> str | None:
    """None if fine, else why not."""
    if spec.size is not None and path.stat().st_size != spec.size:
        return f"size {path.stat().st_size}, expected {spec.size}"
    if spec.sha256 and sha256(path) != spec.sha256:
        return "sha256 does not match the manifest"
    if not spec.sha256 and spec.git_sha1 and git_blob_sha1(path) != spec.git_sha1:
        return "git blob id does not match the manifest"
    return None


def fetch_file(model: str, spec: FileSpec, models_dir: str | Path | None = None, *, progress: bool = True,
               hf_download: Callable | None = None, url_download: Callable = download_url) -> FetchResult:
    status = check_file(model, spec, models_dir)
    if status.ok:
        return FetchResult(status, "present")
    if hf_offline():
        return FetchResult(status, "offline",
                           f"cannot download {spec.filename} from {spec.source.label}: offline mode (HF_HUB_OFFLINE is "
                           "set); copy the file into place by hand or unset HF_HUB_OFFLINE")
    user = user_models_dir(models_dir)
    try:
        if spec.source.kind == "hf":
            if hf_download is None:
                from huggingface_hub import hf_hub_download as hf_download
            kwargs = {"local_dir": str(user / spec.source.repo)} if user is not None else {}
            hf_download(repo_id=spec.source.repo, filename=spec.filename, revision=spec.source.revision, **kwargs)
        else:
            dest = (user or default_models_dir()) / spec.source.repo / spec.filename
            url_download(spec.source.url(spec.filename), dest, expected_size=spec.size, progress=progress)
            if why := _checksum_ok(spec, dest):
                bad = dest.with_name(dest.name + ".bad")
                os.replace(dest, bad)
                raise FetchError(f"downloaded {spec.filename} is wrong ({why}); kept as {bad}")
    except Exception as exc:  # any download failure becomes one line; the next file still runs
        return FetchResult(check_file(model, spec, models_dir), "failed", f"{spec.filename}: {exc}")
    after = check_file(model, spec, models_dir)
    if not after.ok:
        return FetchResult(after, "failed", f"{spec.filename}: downloaded but not found afterwards ({after.reason})")
    return FetchResult(after, "downloaded")


def fetch_models(models: list[ModelSpec], models_dir: str | Path | None = None, **kw) -> list[FetchResult]:
    return [fetch_file(m.name, f, models_dir, **kw) for m in models for f in m.files]
