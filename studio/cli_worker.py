"""`studio worker`: run the device worker in the foreground (the process that owns the card).

Same flags as `python -m device_worker`; this command only parses them with click and hands over, so the
worker behaves the same whichever way it is started. Exit status: 0 after SHUTDOWN/SIGTERM, 1 when the
weights fail to load, 2 when it cannot bind or the device is taken by another worker.
"""

from __future__ import annotations

import sys

import click

from device_worker.scheduler import POLICIES


@click.command("worker", context_settings={"show_default": True})
@click.option("--backend", default="torch", help="torch (CPU/CUDA) or ttnn.")
@click.option("--device", default="cpu", help="cpu, cuda:N, or the ttnn device id.")
@click.option("--bind", required=True, help="ipc://PATH or tcp://127.0.0.1:PORT (another host needs --secret-file).")
@click.option("--dit", required=True, type=click.Path(exists=True), help="DiT checkpoint folder or cfm_model.pt.")
@click.option("--vae", required=True, type=click.Path(exists=True), help="VAE checkpoint (vae_model.pt).")
@click.option("--style", default=None, type=click.Path(exists=True), help="Style model (MuQ-MuLan) folder.")
@click.option("--precision", default="float32", type=click.Choice(["float32", "float16", "bfloat16"]))
@click.option("--policy", default="fair", type=click.Choice(POLICIES), help="Which job's next unit runs.")
@click.option("--max-jobs", default=8, type=int, help="Song jobs held at once.")
@click.option("--secret-file", default=None, type=click.Path(exists=True), help="Shared secret; signs every message.")
@click.option("--threads", default=None, type=int, help="torch intra-op threads.")
@click.option("--lock-dir", default=None, help="Folder of the one-worker-per-device lock files.")
@click.option("--log-level", default="INFO")
def worker(backend: str, device: str, bind: str, dit: str, vae: str, style: str | None, precision: str, policy: str,
           max_jobs: int, secret_file: str | None, threads: int | None, lock_dir: str | None, log_level: str) -> None:
    """Run the device worker: load the model once, then serve songs over pyzmq.

    \b
    Examples:
      studio worker --device cpu --bind ipc:///tmp/drs.sock --dit ckpt/dit --vae ckpt/vae_model.pt
      studio worker --device cuda:0 --bind tcp://127.0.0.1:5601 --dit ... --vae ... --policy fifo
    """
    from device_worker.__main__ import main

    argv = ["--backend", backend, "--device", device, "--bind", bind, "--dit", dit, "--vae", vae,
            "--precision", precision, "--policy", policy, "--max-jobs", str(max_jobs), "--log-level", log_level]
    for flag, value in (("--style", style), ("--secret-file", secret_file), ("--threads", threads),
                        ("--lock-dir", lock_dir)):
        if value is not None:
            argv += [flag, str(value)]
    sys.exit(main(argv))
