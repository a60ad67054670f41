"""`studio warm-cache`: compile the worker's shapes ahead of time, so no song waits for a compile.

ttnn (the default, `--device N`): every DiT bucket and VAE window, in the worker's environment
(`--python`, a Python 3.12 with ttnn) as `python -m device_worker.backends.ttnn.warm`; this process only
shows progress and the final table, so the studio never imports ttnn.
CUDA (`--device cuda:N`): a worker loads with its step compiled (`--compile on`) and exits; torch's
inductor keeps the compiled graphs in its on-disk cache ($TORCHINDUCTOR_CACHE_DIR), so the studio's own
workers start without compiling from scratch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click

NO_TTNN, NO_CARD = 3, 4


@click.command("warm-cache")
@click.option("--dit", required=True, type=click.Path(exists=True), help="DiT checkpoint folder or cfm_model.pt.")
@click.option("--vae", required=True, type=click.Path(exists=True), help="VAE checkpoint (vae_model.pt).")
@click.option("--python", "python", default=None, help="Interpreter of the ttnn environment (default: this one).")
@click.option("--device", default="0", show_default=True, help="Tenstorrent card index.")
@click.option("--min-s", default=96, show_default=True, help="Shortest song (seconds).")
@click.option("--max-s", default=285, show_default=True, help="Longest song (seconds).")
@click.option("--windows", default="128", show_default=True, help="VAE window lengths (latent frames), comma list.")
@click.option("--seq", default="", help="Compile these sequence lengths instead of the song buckets.")
def warm_cache(dit: str, vae: str, python: str | None, device: str, min_s: int, max_s: int, windows: str,
               seq: str) -> None:
    """Compile the ttnn backend's shapes for 96-285 s songs (both guidance branches) and every VAE window.

    Example: studio warm-cache --python ~/venv312/bin/python --dit models/DiffRhythm-1_2-full --vae models/vae_model.pt
             studio warm-cache --device cuda:0 --dit models/DiffRhythm-1_2-full --vae models/vae_model.pt
    """
    if device.startswith("cuda"):
        _warm_cuda(dit, vae, python, device)
        return
    argv = [python or sys.executable, "-m", "device_worker.backends.ttnn.warm", "--dit", os.path.abspath(dit),
            "--vae", os.path.abspath(vae), "--device", device, "--min-s", str(min_s), "--max-s", str(max_s),
            "--windows", windows]
    if seq:
        argv += ["--seq", seq]
    rows: list[dict] = []
    error: dict | None = None
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = event.get("event")
        if kind == "start":
            click.echo(f"compiling {len(event['shapes'])} shapes; kernel cache {event['kernel_cache']}", err=True)
        elif kind == "shape":
            rows.append(event)
            click.echo(f"[{event['index']}/{event['total']}] {event['key']:>14}  {event['seconds']:8.1f} s", err=True)
        elif kind == "error":
            error = event
    stderr = proc.stderr.read() if proc.stderr else ""
    code = proc.wait()
    if error is not None or code != 0:
        if error is not None and error.get("reason") == "no-ttnn":
            raise click.ClickException(f"warm-cache needs the ttnn environment: {error['message']}")
        if error is not None and error.get("reason") == "no-card":
            raise click.ClickException(f"warm-cache needs a Tenstorrent card: {error['message']}")
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        raise click.ClickException(f"warm-cache failed (exit {code}); last worker log lines:\n{tail}")
    click.echo(f"{'shape':<14} {'kind':<4} {'length':>6} {'batch':>5} {'compile s':>10}")
    for r in rows:
        click.echo(f"{r['key']:<14} {r['kind']:<4} {r['length']:>6} {r['batch']:>5} {r['seconds']:>10.2f}")
    click.echo(f"{'total':<14} {'':<4} {'':>6} {'':>5} {sum(r['seconds'] for r in rows):>10.2f}")


def _warm_cuda(dit: str, vae: str, python: str | None, device: str) -> None:
    from engine.worker_client import Worker, WorkerError

    click.echo(f"compiling the DiT step for {device} (a worker loads with --compile on, then exits)", err=True)
    try:
        with Worker(dit=os.path.abspath(dit), vae=os.path.abspath(vae), device=device, python=python,
                    compile="on") as w:
            ready = w.wait_ready(1800)
    except (WorkerError, TimeoutError) as exc:  # WorkerDeadError is a WorkerError
        raise click.ClickException(f"warm-cache failed: {str(exc).splitlines()[0]}") from None
    click.echo(f"compiled in {ready.info.get('compile_s', '?')} s (load {ready.load_s:.1f} s); "
               "later workers on this machine reuse torch's inductor cache")
