"""What the `studio lyrics` commands share: their exit codes and reading a lyrics file."""

from __future__ import annotations

import sys

import click

from engine.textfile import TextFileError, read_text_file

# 0: every line can be sung / was heard; 1: a line is lost (cannot be laid out, or was missed);
# 2: the file cannot be read.
EXIT_OK, EXIT_LOST, EXIT_UNREADABLE = 0, 1, 2


def read_lyrics(path: str) -> str:
    """The text of a lyrics file (any encoding the studio reads), or exit 2 saying why."""
    try:
        return read_text_file(path).text
    except TextFileError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_UNREADABLE)
