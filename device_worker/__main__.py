"""`python -m device_worker --backend torch --device cpu --bind ipc://PATH --dit DIR --vae FILE`.

Imports nothing from `engine` or `studio`, so it runs in the card's own environment (ttnn pins its own
torch). Logs go to stderr as `time level logger [prefix] key=value ...`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from device_worker.config import WorkerConfig, add_arguments


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m device_worker", description=__doc__.splitlines()[0])
    add_arguments(p)  # every flag is a WorkerConfig field (device_worker/config.py)
    return p


def main(argv: list[str] | None = None) -> int:
    config = WorkerConfig(**vars(build_parser().parse_args(argv)))
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    from device_worker.lifecycle import BindError
    from device_worker.worker import WorkerServer

    try:
        return WorkerServer(config).serve()
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
