"""`studio serve`: open the studio in the browser; the workers start (or are connected) behind it.

The page is up in seconds; the model loads in the background with its progress in the page's banner
(Generate waits until it is ready). Without weights the page still opens and names what is missing and
the command that fetches it; `--model test` uses tiny random weights (noise, not music) instead.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any

import click

log = logging.getLogger("studio.serve")


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(os.environ.get("STUDIO_DATA_DIR", Path(base) / "diffrhythm-studio"))


@click.command("serve", context_settings={"show_default": True})
@click.option("--host", default="127.0.0.1", help="Interface to listen on (0.0.0.0 = the whole network).")
@click.option("--port", default=7860, type=int, help="Port to listen on.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Sessions, takes and uploads [default: $STUDIO_DATA_DIR or ~/.local/share/diffrhythm-studio].")
@click.option("--worker", "workers", multiple=True, metavar="ADDR",
              help="A running worker (tcp://host:port); repeat for several. Default: start one locally.")
@click.option("--device", "devices", multiple=True, help="Start a local worker on this device (cpu, cuda:0, ...); repeat.")
@click.option("--backend", default="torch", help="Worker backend for local workers (torch, ttnn).")
@click.option("--precision", default="float32", type=click.Choice(["float32", "float16", "bfloat16"]),
              help="Local workers' precision (float16/bfloat16 on GPUs).")
@click.option("--dit", "dits", multiple=True, metavar="PATH|NAME",
              help="DiT checkpoint folder/file or model name; repeat for base and full. Default: the release.")
@click.option("--vae", type=click.Path(exists=True), default=None, help="VAE checkpoint (vae_model.pt).")
@click.option("--model", type=click.Choice(["release", "test"]), default="release",
              help="'test': tiny random weights (noise, not music) to try the whole flow without downloads.")
@click.option("--models-dir", type=click.Path(file_okay=False), default=None, help="Folder of model files laid out by hand.")
@click.option("--secret-file", type=click.Path(exists=True), default=None, help="Shared secret for tcp workers.")
@click.option("--threads", type=int, default=None, help="torch threads per local CPU worker.")
@click.option("--test-crop-frames", type=int, default=None, hidden=True,
              help="Test model only: crop songs to this many frames (fast tests).")
def serve(host: str, port: int, data_dir: Path | None, workers: tuple[str, ...], devices: tuple[str, ...],
          backend: str, precision: str, dits: tuple[str, ...], vae: str | None, model: str,
          models_dir: str | None, secret_file: str | None, threads: int | None,
          test_crop_frames: int | None) -> None:
    """Open the studio.

    \b
    Examples:
      studio serve --model test                  # try it now: tiny random weights, noise not music
      studio serve                               # the released DiffRhythm 1.2 weights (studio models fetch)
      studio serve --device cuda:0 --port 8080 --data-dir ~/songs
      studio serve --worker tcp://10.0.0.5:5601 --secret-file secret.key
    """
    logging.basicConfig(level=os.environ.get("STUDIO_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from studio.app import build_app, launch
    from studio.config import StudioConfig
    from studio.services import ModelStatus, Services
    from studio.store import Store

    data_dir = (data_dir or default_data_dir()).expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    store = Store(data_dir)
    recovered = store.recover_interrupted()
    if recovered:
        log.info("[serve] %d take(s) were interrupted by the last stop; they can be retried", len(recovered))
    config = StudioConfig(data_dir, test_model=model == "test")
    svc = Services(store, config, model_status=ModelStatus(ready=False, loading="preparing model files"))
    spec = _WorkerPlan(workers, devices, backend, precision, secret_file, threads)
    loader = threading.Thread(target=_load_engine, name="engine-loader", daemon=True,
                              args=(svc, data_dir, model, dits, vae, models_dir, spec, test_crop_frames))
    loader.start()
    demo = build_app(svc)
    _, url, _ = launch(demo, svc, host=host, port=port, block=False)
    click.echo(f"DiffRhythm Studio: {url}  (data: {data_dir}; Ctrl-C stops)", err=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    click.echo("stopping: cancelling takes in flight, stopping workers", err=True)
    demo.close()
    svc.close()


class _WorkerPlan:
    def __init__(self, workers: tuple[str, ...], devices: tuple[str, ...], backend: str, precision: str,
                 secret_file: str | None, threads: int | None) -> None:
        self.workers, self.devices, self.backend, self.precision = workers, devices, backend, precision
        self.secret_file, self.threads = secret_file, threads

    def specs(self) -> list[Any]:
        from engine.config import WorkerSpec

        out = [WorkerSpec(address=a, secret_file=self.secret_file) for a in self.workers]
        out += [WorkerSpec(device=d, backend=self.backend, precision=self.precision, threads=self.threads)
                for d in (self.devices or (() if self.workers else ("cpu",)))]
        return out


def _load_engine(svc: Any, data_dir: Path, model: str, dits: tuple[str, ...], vae: str | None,
                 models_dir: str | None, plan: _WorkerPlan, crop: int | None) -> None:
    """Resolve the model files and start the workers; every outcome ends up in the page's banner."""
    from studio.services import ModelStatus

    try:
        models = _models(model, dits, vae, models_dir, svc)
    except Exception as exc:
        log.warning("[serve] model files missing: %s", exc)
        _offer_fetch(svc, exc, models_dir,
                     lambda: _load_engine(svc, data_dir, model, dits, vae, models_dir, plan, crop))
        return
    try:
        from engine.config import EngineConfig
        from engine.engine import Engine
        from studio.testmodel import LABEL

        specs = plan.specs()
        svc.model_status = ModelStatus(ready=False, loading=f"starting {len(specs)} worker(s): "
                                       + ", ".join(s.name for s in specs))
        cfg = EngineConfig(data_dir, models, workers=specs, policy="fair",
                           crop_frames=crop if models.test else None)
        engine = Engine(cfg)
        label = LABEL if models.test else "DiffRhythm 1.2"
        workers = ", ".join(f"{s.name} {s.precision}" for s in specs)
        svc.attach_engine(engine, ModelStatus(ready=True, label=label, workers=workers))
        log.info("[serve] ready: %s on %s", label, workers)
    except Exception as exc:
        log.exception("[serve] the workers did not start")
        svc.model_status = ModelStatus(ready=False, missing=[], detail=f"The workers did not start: {exc}")


def _offer_fetch(svc: Any, exc: Exception, models_dir: str | None, retry: Any) -> None:
    """Name every missing file; online, let the page download them and then start the workers."""
    from studio.fetcher import Fetcher, can_fetch, missing_files
    from studio.services import ModelStatus

    try:
        missing = [f"{m}: {getattr(spec, 'key', None) or spec.filename}"
                   for m, spec in missing_files(models_dir)] or [str(exc)]
    except Exception:
        missing = [str(exc)]
    online = can_fetch()
    svc.model_status = ModelStatus(ready=False, missing=missing, detail=_offline_hint(), can_fetch=online)
    if not online:
        return

    def progress(text: str) -> None:
        svc.model_status = ModelStatus(ready=False, loading=text)

    def done(failures: list[str]) -> None:
        if failures:
            svc.model_status = ModelStatus(ready=False, missing=failures, can_fetch=True,
                                           detail="Some downloads failed; press the button to try again.")
        else:
            retry()

    fetcher = Fetcher(progress, done, models_dir=models_dir)
    svc.on_fetch = fetcher.start


def _models(model: str, dits: tuple[str, ...], vae: str | None, models_dir: str | None, svc: Any) -> Any:
    from engine.config import Models

    if model == "test":
        from studio.services import ModelStatus
        from studio.testmodel import ensure_test_models

        svc.model_status = ModelStatus(ready=False, loading="writing the test model's tiny random weights")
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


def _offline_hint() -> str:
    offline = os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True")
    return ("Offline (HF_HUB_OFFLINE is set): copy the files into --models-dir on another machine."
            if offline else "`studio models list` shows each file, its size and licence.")
