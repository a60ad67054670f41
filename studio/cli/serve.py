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

from studio.cli.options import WorkerPlan, default_data_dir, model_options, resolve_models
from studio.services import Services, worker_summary

logger = logging.getLogger("studio.serve")


@click.command("serve", context_settings={"show_default": True})
@click.option("--host", default="127.0.0.1", help="Interface to listen on (0.0.0.0 = the whole network).")
@click.option("--port", default=7860, type=int, help="Port to listen on.")
@click.option("--takes-per-owner", default=16, type=click.IntRange(1, 1000),
              help="Takes one person may have queued or rendering at once (so everyone gets a turn).")
@click.option("--mcp", is_flag=True, help="Also serve the studio's tools to agents over MCP "
              "(http://HOST:PORT/gradio_api/mcp/; needs `pip install -e \".[mcp]\"`; docs/agents.md).")
@model_options
def serve(host: str, port: int, takes_per_owner: int, mcp: bool, data_dir: Path | None, db_url: str | None, workers: tuple[str, ...],
          devices: tuple[str, ...], backend: str, precision: str, dits: tuple[str, ...], vae: str | None, model: str,
          models_dir: str | None, secret_file: str | None, threads: int | None, lock_dir: str | None,
          test_crop_frames: int | None, ray_address: str | None = None, ray_resource: str | None = None,
          lyrics_model: str = "auto", lyrics_check: bool = True) -> None:
    """Open the studio.

    \b
    Examples:
      studio serve --model test                  # try it now: tiny random weights, noise not music
      studio serve                               # the released DiffRhythm 1.2 weights (studio models fetch)
      studio serve --device cuda:0 --port 8080 --data-dir ~/songs
      studio serve --worker tcp://10.0.0.5:5601 --secret-file secret.key
      studio serve --db postgresql://studio@dbhost/studio --data-dir /mnt/shared/studio   # one of several
      studio serve --ray auto --device cuda      # one worker per GPU of the Ray cluster (docs/scaleout.md)
      studio serve --mcp                         # and the tools for agents (MCP clients; docs/agents.md)
    """
    logging.basicConfig(level=os.environ.get("STUDIO_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from studio import memory

    memory.tune()  # before the first take: freed audio windows must go back to the system
    from studio.app import build_app, launch
    from studio.config import StudioConfig
    from studio.services import ModelStatus, Services
    from studio.store import Store

    if mcp:
        _need_mcp()
    data_dir = (data_dir or default_data_dir()).expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        store = Store(data_dir, db_url=db_url)
    except Exception as exc:  # a wrong URL, a database that is down, a missing driver: one line, no trace
        raise click.ClickException(f"the store's database did not open: {_first_line(exc)}") from None
    logger.info("[serve] store: %s", store.database)
    recovered = store.recover_interrupted()
    if recovered:
        logger.info("[serve] %d take(s) were interrupted by the last stop; they can be retried", len(recovered))
    config = StudioConfig(data_dir, test_model=model == "test", takes_per_owner=takes_per_owner)
    svc = Services(store, config, model_status=ModelStatus(ready=False, loading="preparing model files"))
    spec = WorkerPlan(workers, devices, backend, precision, secret_file, threads, lock_dir, ray_address, ray_resource,
                      lyrics_model, lyrics_check)
    loader = threading.Thread(target=_load_engine, name="engine-loader", daemon=True,
                              args=(svc, data_dir, model, dits, vae, models_dir, spec, test_crop_frames))
    loader.start()
    demo = build_app(svc)
    _, url, _ = launch(demo, svc, host=host, port=port, block=False, mcp=mcp)
    click.echo(f"DiffRhythm Studio: {url}  (data: {data_dir}; database: {store.database}; Ctrl-C stops)", err=True)
    if mcp:
        click.echo(f"MCP tools for agents: {url.rstrip('/')}/gradio_api/mcp/ (header: Authorization: Bearer "
                   "<`studio token`>; docs/agents.md)", err=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    click.echo("stopping: cancelling takes in flight, stopping workers", err=True)
    demo.close()
    svc.close()


def _load_engine(svc: Services, data_dir: Path, model: str, dits: tuple[str, ...], vae: str | None,
                 models_dir: str | None, plan: WorkerPlan, crop: int | None) -> None:
    """Resolve the model files and start the workers; every outcome ends up in the page's banner."""
    from studio.services import ModelStatus

    try:
        models = plan.with_lyrics(resolve_models(model, dits, vae, models_dir, lambda text: setattr(
            svc, "model_status", ModelStatus(ready=False, loading=text))), models_dir)
    except Exception as exc:
        _offer_fetch(svc, exc, models_dir,
                     lambda: _load_engine(svc, data_dir, model, dits, vae, models_dir, plan, crop))
        return
    try:
        from engine.config import EngineConfig
        from engine.engine import Engine
        from studio.testmodel import LABEL

        specs = plan.specs()
        what = f"the workers on the {plan.describe()}" if plan.ray else f"{len(specs)} worker(s): {plan.describe()}"
        svc.model_status = ModelStatus(ready=False, loading=f"starting {what}")
        config = EngineConfig(data_dir, models, workers=specs, policy="fair", **plan.engine_options(),
                           crop_frames=crop if models.test else None)
        # The engine first, its workers after: takes submitted meanwhile queue and run when one is ready.
        engine = Engine(config, start=False)
        label = LABEL if models.test else "DiffRhythm 1.2"
        svc.attach_engine(engine, ModelStatus(ready=False, label=label, loading=f"starting {what}"))
        engine.pool.start()
        status = ModelStatus(ready=True, label=label, **worker_summary(engine.pool.worker_info()))
        svc.model_status = status
        logger.info("[serve] ready: %s on %s", label, status.workers)
    except Exception as exc:
        logger.exception("[serve] the workers did not start")
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        svc.model_status = ModelStatus(ready=False, problem=f"the workers did not start: {reason}")


def _need_mcp() -> None:
    """--mcp without the mcp package: one line saying what to install, before anything starts."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise click.ClickException('--mcp needs the MCP extra: pip install -e ".[mcp]" (or "diffrhythm-studio[mcp]")') from None


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _offer_fetch(svc: Services, exc: Exception, models_dir: str | None, retry: Any) -> None:
    """Name every missing file; online, let the page download them and then start the workers."""
    from studio.fetcher import Fetcher, can_fetch, missing_files
    from studio.services import ModelStatus

    size = ""
    try:
        files = missing_files(models_dir)
        missing = [f"{m}: {getattr(spec, 'key', None) or spec.filename}" for m, spec in files] or [str(exc)]
        known = sum(spec.size or 0 for _, spec in files)
        size = f" (at least {known / 1e9:.1f} GB)" if known else ""
    except Exception:
        missing = [str(exc)]
    # Every missing file at once, with the size: one name at a time hid how much was missing (18 files).
    logger.warning("[serve] %d model file(s) missing%s: %s; `studio models list` shows each", len(missing), size,
                ", ".join(missing[:6]) + (" ..." if len(missing) > 6 else ""))
    online = can_fetch()
    detail = f"{len(missing)} file(s) to download{size}. {_offline_hint()}"
    svc.model_status = ModelStatus(ready=False, missing=missing, detail=detail, can_fetch=online)
    if not online:
        return

    def progress(text: str) -> None:
        svc.model_status = ModelStatus(ready=False, loading=text, downloading=True)

    def done(failures: list[str]) -> None:
        if failures:
            svc.model_status = ModelStatus(ready=False, missing=failures, can_fetch=True,
                                           detail="Some downloads failed; press the button to try again.")
        else:
            retry()

    fetcher = Fetcher(progress, done, models_dir=models_dir)
    svc.on_fetch = fetcher.start


def _offline_hint() -> str:
    offline = os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True")
    return ("Offline (HF_HUB_OFFLINE is set): fetch the files on a machine with internet (`studio models fetch "
            "--models-dir DIR`), copy DIR here and start with `--models-dir DIR` (a copied Hugging Face cache "
            "in `$HF_HOME` works too)." if offline else
            "`studio models list` shows each file, its size and licence; offline, see `studio models fetch --help`.")
