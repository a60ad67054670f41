"""`python -m device_worker --backend torch --device cpu --bind ipc://PATH --dit DIR --vae FILE`.

Imports nothing from `engine` or `studio`, so it runs in the card's own environment (ttnn pins its own
torch). Logs go to stderr as `time level logger [prefix] key=value ...`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from device_worker.scheduler import POLICIES


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m device_worker", description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="torch", help="torch (CPU/CUDA) or ttnn")
    p.add_argument("--device", default="cpu", help="cpu, cuda:N, or the ttnn device id")
    p.add_argument("--bind", required=True, help="ipc://PATH or tcp://127.0.0.1:PORT")
    p.add_argument("--dit", required=True, help="DiT checkpoint folder or cfm_model.pt")
    p.add_argument("--vae", required=True, help="VAE checkpoint (vae_model.pt)")
    p.add_argument("--style", default=None, help="style model checkpoint (MuQ-MuLan); omit to run without")
    p.add_argument("--precision", default="float32", choices=("float32", "float16", "bfloat16"))
    p.add_argument("--mode", default="mixed", choices=("mixed", "upstream"), help="half-precision flavour")
    p.add_argument("--policy", default="fair", choices=POLICIES)
    p.add_argument("--max-jobs", type=int, default=8, help="song jobs held at once (told to the engine)")
    p.add_argument("--secret-file", default=None, help="shared secret: every message carries an HMAC")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    p.add_argument("--lock-dir", default=None, help="where the one-worker-per-device lock lives")
    p.add_argument("--parent-pid", type=int, default=None,
                   help="exit when this process (the engine that started the worker) is gone")
    p.add_argument("--log-level", default="INFO")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    from device_worker.lifecycle import BindError
    from device_worker.wire import read_secret
    from device_worker.worker import WorkerConfig, WorkerServer

    cfg = WorkerConfig(
        bind=args.bind, dit=args.dit, vae=args.vae, backend=args.backend, device=args.device,
        precision=args.precision, policy=args.policy, max_jobs=args.max_jobs, secret=read_secret(args.secret_file),
        threads=args.threads, lock_dir=args.lock_dir, style=args.style, mode=args.mode,
        parent_pid=args.parent_pid,
    )
    try:
        return WorkerServer(cfg).serve()
    except BindError as exc:
        logging.getLogger("device_worker").error("[worker] cannot start: %s", exc)
        return 2


if __name__ == "__main__":
    code = main()
    # Everything the worker holds (sockets, ipc file, device lock, the card) is released explicitly by now;
    # skip the interpreter's teardown of torch, which takes seconds on a loaded machine and delays close().
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
