"""`studio lyrics`: check lyrics before spending device time, and time plain lyrics.

Exit status of `check`: 0 the lyrics can be sung as given (warnings allowed), 1 some words would be
lost (dropped, truncated, skipped or unsung lines), 2 the input could not be read (or the phone
vocabulary / espeak-ng is missing). `time` exits 0 with the LRC on stdout, 1 when the lyrics cannot
fit the duration, 2 for unreadable input.
"""

from __future__ import annotations

import json
import sys

import click

from studio.cli.common import EXIT_LOST, EXIT_OK, EXIT_UNREADABLE, read_lyrics


def _duration(ctx: click.Context, param: click.Parameter, value: float) -> float:
    from device_worker.shapes import max_frames_for

    try:
        max_frames_for(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    return value


def _models_dir_option(f):
    return click.option("--models-dir", type=click.Path(file_okay=False), default=None,
                        help="folder of model files laid out as <dir>/<org>/<repo>/<file> (env STUDIO_MODELS_DIR): "
                             "the phone vocabulary and the Chinese lexicon and polyphone model are taken from it")(f)


def _tokenizer(models_dir: str | None):
    """None (the default lookup) unless a models folder is given."""
    if models_dir is None:
        return None
    from engine.lyrics import LyricTokenizer

    return LyricTokenizer(models_dir=models_dir)


def _environment_error(exc: Exception) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(EXIT_UNREADABLE)


@click.group()
def lyrics() -> None:
    """Check and time lyrics (LRC) for DiffRhythm."""


@lyrics.command()
@click.argument("file", type=str)
@click.option("--duration", "-d", type=float, required=True, callback=_duration,
              help="Song length in seconds: 95 (base model) or 96-285 (full model).")
@click.option("--json", "as_json", is_flag=True, help="Print the token track and per-line report as JSON.")
@_models_dir_option
def check(file: str, duration: float, as_json: bool, models_dir: str | None) -> None:
    """Report what happens to every line of FILE (an LRC, or plain lyrics timed as the page would;
    '-' reads stdin): the same layout the page's report and a render use."""
    from engine.lyrics import EspeakMissing, VocabError, render_text
    from engine.request import SongRequest, layout_request_lyrics, lyrics_problem

    text = read_lyrics(file)
    problem = lyrics_problem(text, duration)
    if problem:
        click.echo(f"error: {problem}", err=True)
        sys.exit(EXIT_UNREADABLE)
    try:
        layout = layout_request_lyrics(SongRequest(lyrics=text, duration=duration), tokenizer=_tokenizer(models_dir))
    except (VocabError, EspeakMissing) as exc:
        _environment_error(exc)
        return
    except ValueError as exc:  # a request the engine refuses, or plain lyrics that cannot fit the duration
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_LOST)
    if as_json:
        click.echo(json.dumps(layout.to_dict(), ensure_ascii=False))
    else:
        click.echo(render_text(layout))
    sys.exit(EXIT_OK if layout.can_sing else EXIT_LOST)


@lyrics.command()
@click.argument("file", type=str)
@click.option("--duration", "-d", type=float, required=True, callback=_duration,
              help="Song length in seconds: 95 (base model) or 96-285 (full model).")
@click.option("--tempo", type=click.FloatRange(30, 300), default=None, help="Tempo in BPM (lines snap to beats).")
@click.option("--intro", type=click.FloatRange(0, None), default=None, help="Seconds before the first line.")
@click.option("--explain", is_flag=True, help="Also print the phoneme counts behind each time (to stderr).")
@_models_dir_option
def time(file: str, duration: float, tempo: float | None, intro: float | None, explain: bool,
         models_dir: str | None) -> None:
    """Print a timed LRC for the plain lyrics in FILE ([Verse]/[Chorus] tags allowed; '-' reads stdin)."""
    from engine.lyrics import EspeakMissing, VocabError, plan_timing

    text = read_lyrics(file)
    try:
        plan = plan_timing(text, duration, tempo_bpm=tempo, intro_s=intro, tokenizer=_tokenizer(models_dir))
    except (VocabError, EspeakMissing) as exc:
        _environment_error(exc)
        return
    except ValueError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_LOST)
    if explain or not plan.lines:
        for row in plan.explanation:
            click.echo(row, err=True)
    click.echo(plan.lrc, nl=False)


from studio.cli.heard import heard  # noqa: E402 - registered here so `studio lyrics` lists it

lyrics.add_command(heard)
