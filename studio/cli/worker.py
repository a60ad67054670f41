"""`studio worker`: run the device worker in the foreground (the process that owns the card).

Its options are `device_worker.config.WorkerConfig`'s, the same as `python -m device_worker`'s (made from
one declaration); this command only parses them with click and hands over, so the worker behaves the same
whichever way it is started. Exit status: 0 after SHUTDOWN/SIGTERM, 1 when the weights fail to load, 2
when it cannot bind or the device is taken by another worker.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from device_worker.config import OPTIONS, WorkerConfig, flag


def _click_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for field in reversed(OPTIONS):
        m = field.metadata
        kind: Any = click.Choice(list(m["choices"])) if m["choices"] else m["type"]
        if m["path"]:
            kind = click.Path(exists=True)
        extra = {"required": True} if m["required"] else {"default": field.default}
        f = click.option(flag(field), field.name, type=kind, help=m["help"] + ".",
                         **extra)(f)
    return f


@click.command("worker", context_settings={"show_default": True})
@_click_options
def worker(**options: Any) -> None:
    """Run the device worker: load the model once, then serve songs over pyzmq.

    \b
    Examples:
      studio worker --device cpu --bind ipc:///tmp/drs.sock --dit ckpt/dit --vae ckpt/vae_model.pt
      studio worker --device cuda:0 --bind tcp://127.0.0.1:5601 --dit ... --vae ... --policy fifo
    """
    from device_worker.__main__ import main

    try:
        config = WorkerConfig(**options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    sys.exit(main(config.to_argv()))
