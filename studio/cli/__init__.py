"""`studio`: the command line. A table of contents; each group lives in its own module.

| module | role |
|---|---|
| `__init__`, `__main__` | `main`: the `studio` group, each command imported only when it is called; `python -m studio.cli` |
| `serve` | `studio serve`: the page, the API (and MCP), the workers behind them |
| `render` | `studio render`: headless batches (the work itself is in `studio/render/`) |
| `options` | what serve and render share: model names -> files, the worker plan, the data folder |
| `lyrics`, `heard`, `common` | `studio lyrics check / time / heard`; their exit codes and file reading |
| `model_files` | `studio models list / fetch / verify` |
| `worker`, `warm` | `studio worker` (one device worker by hand); `studio warm-cache` (ttnn) |
| `token` | `studio token`: the command line's owner key |
"""

from __future__ import annotations

import importlib
import importlib.util

import click

# name -> "module:attribute". Imported lazily so `studio lyrics ...` does not pay for gradio or torch.
COMMANDS = {
    "lyrics": "studio.cli.lyrics:lyrics",
    "models": "studio.cli.model_files:models",
    "worker": "studio.cli.worker:worker",
    "serve": "studio.cli.serve:serve",
    "render": "studio.cli.render:render",
    "warm-cache": "studio.cli.warm:warm_cache",
    "token": "studio.cli.token:token",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if _available(name))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not _available(name):
            return None
        module, attr = COMMANDS[name].split(":")
        return getattr(importlib.import_module(module), attr)


def _available(name: str) -> bool:
    module = COMMANDS[name].split(":")[0]
    return importlib.util.find_spec(module) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="diffrhythm-studio")
def main() -> None:
    """DiffRhythm Studio: write lyrics, pick a style, get a song."""
