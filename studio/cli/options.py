"""What `studio serve` and `studio render` share: where the models come from and which workers run them.

`model_options` declares the command-line options once; `resolve_models` turns them into the engine's
`Models` (release files, hand-picked checkpoints, or the test model) and `WorkerPlan` into worker specs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from device_worker.config import PRECISIONS


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(os.environ.get("STUDIO_DATA_DIR", Path(base) / "diffrhythm-studio"))


DB_URL_ENV = "STUDIO_DB_URL"
RAY_ENV = "STUDIO_RAY_ADDRESS"


def model_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The data-dir, database, worker and model options of serve and render (one declaration, one help)."""
    options = [
        click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="The studio's data: sessions, takes, uploads, style cache "
                          "[default: $STUDIO_DATA_DIR or ~/.local/share/diffrhythm-studio]."),
        click.option("--db", "db_url", default=None, envvar=DB_URL_ENV, metavar="URL", show_envvar=False,
                     help="The store's database: a SQLAlchemy URL, e.g. postgresql://studio@dbhost/studio for "
                          "several studios sharing one database (they must share the data folder too) "
                          f"[default: ${DB_URL_ENV}, else studio.db in the data folder]."),
        click.option("--ray", "ray_address", default=None, envvar=RAY_ENV, metavar="auto|ADDRESS", show_envvar=False,
                     help="Run the device workers on a Ray cluster, one per accelerator (pip install -e "
                          "\".[cluster]\"): 'auto' (the cluster of this host's `ray start`) or its address "
                          f"host:6379. --device/--backend give the kind of worker [default: ${RAY_ENV}, else off]."),
        click.option("--ray-resource", default=None, metavar="NAME",
                     help="With --ray: the Ray resource that is one card [default: GPU for --device cuda, "
                          "p100a for --backend ttnn, else one CPU worker per node]."),
        click.option("--worker", "workers", multiple=True, metavar="ADDR",
                     help="A running worker (tcp://host:port); repeat for several. Default: start one locally."),
        click.option("--device", "devices", multiple=True,
                     help="Start a local worker on this device (auto, cpu, cuda:0, mps, ...); repeat. "
                          "Default: one on auto (the worker picks CUDA if visible, else MPS, else the CPU)."),
        click.option("--backend", default="torch", help="Worker backend for local workers (torch, ttnn)."),
        click.option("--precision", default="auto", type=click.Choice(list(PRECISIONS)),
                     help="Local workers' precision. auto: bfloat16 (mixed) on CUDA, float32 on the CPU; "
                          "float32 is the exact path."),
        click.option("--dit", "dits", multiple=True, metavar="PATH|NAME",
                     help="DiT checkpoint folder/file or model name; repeat for base and full. Default: the release."),
        click.option("--vae", type=click.Path(exists=True), default=None, help="VAE checkpoint (vae_model.pt)."),
        click.option("--model", type=click.Choice(["release", "test"]), default="release",
                     help="'test': tiny random weights (noise, not music) to try the whole flow without downloads."),
        click.option("--models-dir", type=click.Path(file_okay=False), default=None,
                     help="Folder of model files laid out by hand."),
        click.option("--secret-file", type=click.Path(exists=True), default=None, help="Shared secret for tcp workers."),
        click.option("--threads", type=int, default=None, help="torch threads per local CPU worker."),
        click.option("--lock-dir", default=None, metavar="DIR",
                     help="Folder of the one-worker-per-card locks (GPUs, Tenstorrent cards; CPU workers take "
                          "none) [default: $DRS_LOCK_DIR or <temp>/diffrhythm-studio-<uid>]."),
        click.option("--lyrics-model", default="auto", metavar="auto|off|NAME|PATH",
                     help="The Whisper that hears each take for the lyrics check: a model name "
                          "(whisper-large-v3-turbo, whisper-small), a checkpoint folder, or off [default auto: "
                          "large-v3-turbo on a GPU, small on the CPU; the test model's own with --model test]."),
        click.option("--lyrics-check/--no-lyrics-check", default=True,
                     help="Hear every sung take after it is written and mark each lyric line sung, partly or "
                          "missed (never delays the take's audio)."),
        click.option("--test-crop-frames", type=int, default=None, hidden=True,
                     help="Test model only: crop songs to this many frames (fast tests)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


class WorkerPlan:
    """Which workers a command runs: running ones by address, local ones per device (default: one on the best device, chosen by the worker)."""

    def __init__(self, workers: tuple[str, ...], devices: tuple[str, ...], backend: str, precision: str,
                 secret_file: str | None, threads: int | None, lock_dir: str | None = None,
                 ray: str | None = None, ray_resource: str | None = None, lyrics_model: str = "auto",
                 lyrics_check: bool = True) -> None:
        self.workers, self.devices, self.backend, self.precision = workers, devices, backend, precision
        self.lyrics_model, self.lyrics_check = lyrics_model, lyrics_check
        if lyrics_model not in ("auto", "off") and not Path(lyrics_model).expanduser().is_dir():
            from engine.modelfiles.manifest import BY_NAME

            if not lyrics_model.startswith("whisper") or lyrics_model not in BY_NAME:
                raise click.UsageError(f"--lyrics-model {lyrics_model}: not a folder and not a model name "
                                       "(whisper-large-v3-turbo, whisper-small, auto or off)")
        self.secret_file, self.threads, self.lock_dir = secret_file, threads, lock_dir
        self.ray, self.ray_resource = ray or None, ray_resource
        if self.ray and (workers or len(devices) > 1):
            raise click.UsageError("--ray starts one worker per accelerator of the cluster: give no --worker, "
                                   "and --device at most once (the kind: cpu or cuda)")
        if ray_resource and not self.ray:
            raise click.UsageError("--ray-resource is for --ray")

    def engine_options(self) -> dict[str, Any]:
        """The EngineConfig settings besides the worker specs (the lock folder, Ray, the lyrics check)."""
        return {"lock_dir": self.lock_dir, "ray": self.ray, "ray_resource": self.ray_resource,
                "lyrics_check": self.lyrics_check}

    def with_lyrics(self, models: Any, models_dir: str | None) -> Any:
        """`models` with the Whisper the workers load for the lyrics check (studio.lyrics_model)."""
        import dataclasses
        import logging

        from studio.lyrics_model import resolve_lyrics_model

        if not self.lyrics_check or self.lyrics_model == "off":
            return dataclasses.replace(models, lyrics=None)
        if models.test and self.lyrics_model == "auto":
            return models  # the test model's tiny random Whisper
        try:
            path, line = resolve_lyrics_model(self.lyrics_model, self.devices, models_dir)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        logging.getLogger("studio").log(logging.INFO if path else logging.WARNING, "[studio] %s", line)
        return dataclasses.replace(models, lyrics=path)

    def describe(self) -> str:
        if self.ray:
            return f"Ray cluster {self.ray} ({self.ray_resource or 'one worker per accelerator'})"
        return ", ".join(s.name for s in self.specs())

    def specs(self) -> list[Any]:
        from engine.config import WorkerSpec

        out = [WorkerSpec(address=a, secret_file=self.secret_file) for a in self.workers]
        out += [WorkerSpec(device=d, backend=self.backend, precision=self.precision, threads=self.threads)
                for d in (self.devices or (() if self.workers else ("auto",)))]
        return out


def resolve_models(model: str, dits: tuple[str, ...], vae: str | None, models_dir: str | None,
                   status: Callable[[str], None] = lambda text: None) -> Any:
    """The command line's model choice -> `engine.config.Models`; raises naming what is missing.
    `status` hears about slow steps (writing the test model)."""
    from engine.config import Models

    if model == "test":
        from studio.testmodel import ensure_test_models

        status("writing the test model's tiny random weights")
        return ensure_test_models()
    if not dits and not vae:
        return Models.release(models_dir)
    # Hand-picked checkpoints: the rest (the other DiT, style model, negative style, vocabulary) comes
    # from the released files where they are present.
    base = _optional("diffrhythm-1.2", "cfm_model.pt", models_dir, parent=True)
    full = _optional("diffrhythm-1.2-full", "cfm_model.pt", models_dir, parent=True)
    for d in dits:
        path = _dit_path(d, models_dir)
        if _is_full(path):
            full = path
        else:
            base = path
    vae = vae or _optional("vae", "vae_model.pt", models_dir)
    if vae is None:
        raise click.UsageError("--dit needs --vae PATH too (the VAE of the release was not found)")
    return Models(vae=str(vae), base=base, full=full,
                  style=_optional("mulan", "pytorch_model.bin", models_dir, parent=True),
                  negative_style=_optional("negative-style", "vocal.npy", models_dir),
                  vocab=_optional("vocab", "vocab.json", models_dir))


def _optional(name: str, filename: str, models_dir: str | None, *, parent: bool = False) -> str | None:
    from engine import modelfiles as mf

    try:
        path = mf.resolve_file(name, filename, models_dir=models_dir)
    except Exception:  # missing: the engine names what it needs when it needs it
        return None
    return str(path.parent if parent else path)


def _dit_path(value: str, models_dir: str | None) -> str:
    if Path(value).exists():
        return str(Path(value).resolve())
    from engine import modelfiles as mf

    return str(mf.resolve_file(value, "cfm_model.pt", models_dir=models_dir).parent)


def _is_full(path: str) -> bool:
    import json

    cfg = Path(path) / "config.json" if Path(path).is_dir() else Path(path).with_name("config.json")
    try:
        return int(json.loads(cfg.read_text()).get("max_frames", 2048)) == 6144
    except (OSError, ValueError):
        return "full" in Path(path).name
