"""Studio settings: where data lives, what is served, upload limits and queue sizes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UI_ASSETS = ROOT / "assets" / "ui"
LYRIC_EXAMPLES = ROOT / "assets" / "lyrics"


class PathRefused(ValueError):
    """A path outside the studio's data directory (never read or served)."""


@dataclass(frozen=True)
class StudioConfig:
    data_dir: Path
    # Uploads: a reference song of a few minutes is a few tens of MB as WAV; anything longer than
    # 20 minutes is almost certainly a wrong file (MuQ hears 10 s of it; edits need the song length).
    max_upload_mb: int = 100
    max_upload_s: float = 20 * 60
    # Generate handlers only follow engine jobs (the engine queues and schedules the card), so several
    # may run at once; cheap handlers (lists, renames) get their own larger pool.
    follow_concurrency: int = 16
    queue_max_size: int = 64
    # Takes one owner may have queued or rendering at once (studio.admission): 16 fits one request's
    # variations; a batch script or a one-musician studio may raise it.
    takes_per_owner: int = 16
    # Gradio copies every file it shows (each take viewed) into its temporary folder and, by default,
    # never removes them while serving (297 MB after one walk): copies older than this go, checked every
    # `browser_copies_every_s`. A copy handed out again is touched (Gradio), so a take being played stays.
    browser_copies_max_age_s: int = 1800
    browser_copies_every_s: int = 300
    # An upload nothing uses (no session, no take names it) goes after a day (studio.uploads).
    upload_max_age_s: float = 24 * 3600
    upload_sweep_every_s: float = 3600
    # The label shown in the header when the weights are random (`--model test`).
    model_label: str = ""
    test_model: bool = False

    @property
    def uploads_dir(self) -> Path:
        return self.data_dir / "uploads"

    @property
    def styles_dir(self) -> Path:
        return self.data_dir / "styles"

    @property
    def cache_dir(self) -> Path:
        """Derived pictures (waveforms) and subtitle files; safe to delete."""
        return self.data_dir / "cache" / "studio"

    def inside_data(self, path: str | Path) -> Path:
        """`path` resolved, if it lies inside the data directory; else PathRefused (symlinks followed)."""
        p = Path(path)
        if not p.is_absolute():
            p = self.data_dir / p
        resolved = p.resolve()
        root = self.data_dir.resolve()
        if resolved != root and root not in resolved.parents:
            # The file's name only: the message goes back to the client, which must learn nothing about
            # the server's folders (the caller already knows which file it sent).
            raise PathRefused(f"{Path(path).name or 'that path'} is outside the studio's data directory: "
                              "refused (upload the file instead).")
        return resolved

    def served_paths(self) -> list[str]:
        """What Gradio may serve from disk: the app's own UI assets only.

        Takes, uploads and derived files go out only through signed, owner-checked URLs
        (`studio.access`, `studio.files`, `studio.page_files`): a path Gradio serves answers anyone who
        has it, and keeps answering after a delete or a revoked share link.
        """
        return [str(UI_ASSETS)]

    def blocked_paths(self) -> list[str]:
        root = self.data_dir.resolve()
        return [str(root / name) for name in ("studio.db", "studio.db-wal", "studio.db-shm", "styles", ".secrets")]
