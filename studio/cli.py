"""`studio`: the command line. A table of contents; each group lives in its own module."""

from __future__ import annotations

import importlib
import importlib.util

import click

# name -> "module:attribute". Imported lazily so `studio lyrics ...` does not pay for gradio or torch.
COMMANDS = {
    "lyrics": "studio.cli_lyrics:lyrics",
    "models": "studio.cli_models:models",
    "worker": "studio.cli_worker:worker",
    "serve": "studio.cli_serve:serve",
    "render": "studio.cli_render:render",
    "warm-cache": "studio.cli_warm:warm_cache",
    "token": "studio.cli_token:token",
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


if __name__ == "__main__":
    main()
