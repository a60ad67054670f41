"""`studio render`: headless batch rendering that can run overnight and be trusted the next morning.

Every job is validated before the workers start; each id gets `OUTDIR/<id>/` (audio, records, or
`failure.json`), committed by rename so nothing half-written looks complete; `OUTDIR/manifest.json`
lists every job's outcome. Progress goes to stderr, the result to stdout (`--json`: machine-readable).

Exit status: 0 every job rendered (or skipped as unchanged by --resume); 1 some job failed or was
invalid; 2 nothing was rendered because of the command line, the jobs file (with --strict), the model
files or the workers; 130 interrupted (Ctrl-C / SIGTERM).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import click

from device_worker import controls
from studio.cli.options import WorkerPlan, default_data_dir, model_options, resolve_models

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXAMPLES = """\b
Examples:
  studio render album.jsonl -o album/                      # every line of album.jsonl, one folder per id
  studio render album.jsonl -o album/ --resume             # after a crash: only what is missing or changed
  studio render album.jsonl -o album/ --session "Album"    # also in the studio's history
  studio render --lyrics song.lrc --style "city pop, female vocal" --duration 180 -o song.wav
  studio render tests.jsonl --model test --json            # tiny random weights: noise, not music

\b
A jobs line:
  {"id": "track-01", "lyrics": "lyrics/01.lrc", "style": "dreamy synthwave", "duration": 180, "seed": 7}
  keys: id, lyrics (inline LRC/plain or a .lrc/.txt path; empty: instrumental), style (text,
  {"audio": PATH} or {"embedding": PATH.npy}), duration, seed, variations, steps, cfg, formats, edit
  ({"song": PATH, "segments": [[start_s, end_s], ...]}), best_of (N variations checked by ear; the
  manifest's "pick" has the lowest PER). Paths are relative to the jobs file.
"""


class RenderError(click.ClickException):
    """A one-line error (printed as `error: ...`) with exit status 2: nothing was rendered."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.message}", err=True)


@click.command("render", epilog=EXAMPLES, context_settings={"show_default": True})
@click.argument("jobs_file", required=False, metavar="JOBS.jsonl")
@click.option("-o", "--out", type=click.Path(path_type=Path), default=None,
              help="Output folder (batch) [default: ./renders/<jobs file name>], or the song file (one-song form).")
@click.option("--lyrics", "lyrics_path", default=None, metavar="PATH", help="One-song form: the lyrics file (LRC or plain).")
@click.option("--style", default=None, help="One-song form: a text prompt, or a reference audio / .npy embedding file.")
@click.option("--duration", type=float, default=None, help="One-song form: seconds (95, or 96-285).")
@click.option("--seed", type=int, default=None, help="One-song form: the seed [default: random, recorded].")
@click.option("--steps", type=int, default=None,
              help=f"One-song form: {controls.STEPS.help} ({controls.STEPS.range_text}) "
                   f"[default: {controls.STEPS.default}].")
@click.option("--cfg", type=float, default=None,
              help=f"One-song form: {controls.CFG.help} ({controls.CFG.range_text}) [default: {controls.CFG.default}].")
@click.option("--best-of", type=click.IntRange(1, 16), default=None, metavar="N",
              help="Render N variations of each job (lines without their own \"best_of\"), check each by ear, keep "
                   "all; the manifest's \"pick\" is the one with the lowest PER (one-song form: -o gets it).")
@click.option("--resume", is_flag=True, help="Skip jobs whose outputs exist and whose identity is unchanged.")
@click.option("--strict", is_flag=True, help="Any invalid job stops the run before it begins.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr (problems and errors still show).")
@click.option("--session", default=None, metavar="NAME", help="Also record the takes in the studio's session NAME.")
@click.option("--policy", type=click.Choice(["fifo", "fair", "share"]), default="fifo",
              help="Worker scheduling: fifo renders in file order.")
@model_options
def render(jobs_file: str | None, out: Path | None, lyrics_path: str | None, style: str | None,
           duration: float | None, seed: int | None, steps: int | None, cfg: float | None, best_of: int | None,
           resume: bool,
           strict: bool, as_json: bool, quiet: bool, session: str | None, data_dir: Path | None,
           db_url: str | None, policy: str,
           workers: tuple[str, ...], devices: tuple[str, ...], backend: str, precision: str,
           dits: tuple[str, ...], vae: str | None, model: str, models_dir: str | None, secret_file: str | None,
           threads: int | None, lock_dir: str | None, test_crop_frames: int | None,
           ray_address: str | None = None, ray_resource: str | None = None, lyrics_model: str = "auto",
           lyrics_check: bool = True) -> None:
    """Render songs without a browser: a JSONL batch, or one song."""
    logging.basicConfig(level=os.environ.get("STUDIO_LOG_LEVEL", "ERROR" if quiet else "WARNING"),
                        format="%(levelname)s %(name)s: %(message)s")
    from engine.textfile import TextFileError, read_text_file
    from studio.render import single
    from studio.render.batch import Batch, BatchOptions

    one_song = lyrics_path is not None or style is not None or duration is not None
    if jobs_file and one_song:
        raise RenderError("give a jobs file or --lyrics/--style/--duration (one song), not both")
    if not jobs_file and not one_song:
        raise RenderError("give a jobs file (studio render JOBS.jsonl -o OUTDIR), or --style and --duration "
                          "with -o FILE for one song; see studio render --help")
    if not one_song and any(v is not None for v in (seed, steps, cfg)):
        raise RenderError("--seed/--steps/--cfg are for the one-song form; in a jobs file they are per-line keys")
    song_out = None
    if one_song:
        if style is None or duration is None or out is None:
            raise RenderError("the one-song form needs --style, --duration and -o FILE (e.g. -o song.wav)")
        try:
            lyrics = read_text_file(lyrics_path).text if lyrics_path else ""
            line = single.job_line(out, lyrics, style, duration, seed=seed, steps=steps, cfg=cfg, best_of=best_of)
        except (TextFileError, ValueError) as exc:
            raise RenderError(str(exc)) from None
        song_out = out.expanduser().resolve()
        text, base = line, Path.cwd()
        outdir = song_out.parent / f".render-{song_out.stem}-{secrets.token_hex(4)}"
        source = "(one song)"
    else:
        from studio.render.jobs import read_jobs_text

        try:
            text = read_jobs_text(jobs_file)
        except TextFileError as exc:
            raise RenderError(str(exc)) from None
        base = Path.cwd() if jobs_file == "-" else Path(jobs_file).resolve().parent
        stem = "stdin" if jobs_file == "-" else Path(jobs_file).stem
        outdir = (out or _default_outdir(stem, session, data_dir)).expanduser().resolve()
        source = jobs_file
    data_dir = (data_dir or default_data_dir()).expanduser().resolve()
    plan = WorkerPlan(workers, devices or (), backend, precision, secret_file, threads, lock_dir, ray_address,
                      ray_resource, lyrics_model, lyrics_check)
    try:
        models = plan.with_lyrics(resolve_models(model, dits, vae, models_dir), models_dir)
    except click.UsageError:
        raise
    except Exception as exc:
        raise RenderError(f"model files: {exc}") from None
    if test_crop_frames is not None and not models.test:
        raise RenderError("--test-crop-frames is for the test model (--model test) only")
    if session:  # the store opens (and migrates) before the workers start, or the run stops here
        from studio.store import Store

        try:
            Store(data_dir, db_url=db_url).close()
        except Exception as exc:  # a wrong URL, a database that is down, a missing driver
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise RenderError(f"the store's database did not open: {first}") from None
    opts = BatchOptions(source=source, text=text, base_dir=base, outdir=outdir, data_dir=data_dir,
                        models=models, plan=plan,
                        policy=policy, crop_frames=test_crop_frames, resume=resume and not one_song,
                        strict=strict, quiet=quiet, session=session, single=song_out is not None,
                        db_url=db_url, best_of=best_of)
    try:
        result = Batch(opts).run()
    except KeyboardInterrupt:  # before the workers started (validation, model files): nothing to clean up
        click.echo("\ninterrupted before rendering began", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if song_out is not None and result.code == EXIT_OK:
        try:
            result.summary["files"] = files = single.deliver(outdir, song_out)
            take_ids = (result.summary.get("jobs") or [{}])[0].get("store_take_ids") or []
            if take_ids:
                single.relink_takes(data_dir, take_ids, files, db_url=db_url)
        except (OSError, RuntimeError) as exc:
            raise RenderError(str(exc)) from None
        result.summary.pop("manifest", None)
        result.summary["outdir"] = str(song_out.parent)
    elif song_out is not None:
        result.summary.pop("manifest", None)
        if (outdir / "song" / "failure.json").is_file():  # kept: it says why
            result.summary["failure"] = str(outdir / "song" / "failure.json")
        result.summary["outdir"] = str(outdir) if outdir.exists() else None
    _print_summary(result.summary, as_json)
    sys.exit(result.code)


def _default_outdir(stem: str, session: str | None, data_dir: Path | None) -> Path:
    if session:  # inside the data dir: the studio serves (plays) only files under it
        from engine.outputs import slug

        return (data_dir or default_data_dir()) / "renders" / slug(session, 60)
    return Path("renders") / stem


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True, default=str))
        return
    counts = summary.get("counts") or {}
    parts = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing to do"
    where = (summary.get("manifest") or (summary.get("files") or {}).get("json") or summary.get("failure")
             or summary.get("outdir"))
    click.echo(f"{summary.get('status', 'done')}: {parts}" + (f"  ({where})" if where else ""))
