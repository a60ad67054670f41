"""`studio models list | verify | fetch`: the model files behind the studio (see docs/models.md)."""

from __future__ import annotations

import sys

import click

from engine.modelfiles import MODELS, FileStatus, check_model, chosen, hf_cache_dir, hf_offline
from engine.modelfiles.locate import default_models_dir, user_models_dir

ONLY_HELP = "model to handle (repeatable); default: every model marked default"
# "\b" keeps click from re-wrapping the examples into one line.
EXAMPLES = """\b
Examples:
  studio models list
  studio models verify --only vae --only mulan
  studio models fetch --only diffrhythm-1.2-full
  STUDIO_MODELS_DIR=/data/models studio models verify

\b
Offline: on a machine with internet run `studio models fetch --models-dir DIR`, copy DIR over, then
`studio serve --models-dir DIR` (or copy a Hugging Face cache and point $HF_HOME at it).
"""


def _human(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


def _select(only: tuple[str, ...], all_models: bool) -> list:
    if all_models:
        return list(MODELS)
    try:
        return chosen(list(only))
    except KeyError as exc:
        raise click.BadParameter(exc.args[0], param_hint="--only") from None


def _where() -> str:
    user = user_models_dir(click.get_current_context().params.get("models_dir"))
    parts = [f"models dir: {user}" if user else "models dir: (none given)", f"HF cache: {hf_cache_dir()}",
             f"studio downloads: {default_models_dir()}"]
    if hf_offline():
        parts.append("offline (HF_HUB_OFFLINE)")
    return "; ".join(parts)


def _line(s: FileStatus) -> str:
    spec = s.spec
    size = _human(s.size) if s.size is not None else (spec.approx or "-")
    where = str(s.path) if s.path else spec.source.label
    if s.real is not None and s.path is not None and s.real != s.path:
        where += f" -> {s.real}"
    extra = f"  ({s.reason})" if s.state == "corrupt" else ""
    check = " checked" if s.checked else ""
    return f"    {s.state:<8}{check:<8} {spec.id:<28} {size:>10}  {where}{extra}"


def _models_dir_option(f):
    return click.option("--models-dir", type=click.Path(file_okay=False), default=None,
                        help="folder laid out by hand as <dir>/<org>/<repo>/<file> (env STUDIO_MODELS_DIR)")(f)


def _only_option(f):
    f = click.option("--all", "all_models", is_flag=True, help="every model in the manifest")(f)
    return click.option("--only", multiple=True, metavar="NAME", help=ONLY_HELP)(f)


@click.group(epilog=EXAMPLES)
def models() -> None:
    """Model files: list what is present, verify it, fetch what is missing."""


@models.command("list", epilog=EXAMPLES)
@_only_option
@_models_dir_option
def list_cmd(only: tuple[str, ...], all_models: bool, models_dir: str | None) -> None:
    """Show every file (present / missing / corrupt), its size, where it is and its licence."""
    click.echo(_where())
    for model in _select(only, all_models or not only):
        tag = "" if model.default else "  [optional]"
        click.echo(f"\n{model.name}: {model.title}{tag}\n  licence: {model.licence}")
        if model.note:
            click.echo(f"  note: {model.note}")
        for s in check_model(model, models_dir):
            click.echo(_line(s))


@models.command(epilog=EXAMPLES)
@_only_option
@_models_dir_option
@click.option("--quick", is_flag=True, help="check presence and sizes only, skip checksums")
def verify(only: tuple[str, ...], all_models: bool, models_dir: str | None, quick: bool) -> None:
    """Exit non-zero when a file the chosen models need is missing or corrupt."""
    bad: list[FileStatus] = []
    for model in _select(only, all_models):
        statuses = check_model(model, models_dir, checksum=not quick)
        click.echo(f"{model.name}: {'ok' if all(s.ok for s in statuses) else 'NOT OK'}  ({model.licence})")
        for s in statuses:
            click.echo(_line(s))
        bad += [s for s in statuses if not s.ok]
    if bad:
        names = sorted({s.model for s in bad})
        click.echo(f"\n{len(bad)} file(s) missing or corrupt; fetch them with: studio models fetch "
                   + " ".join(f"--only {n}" for n in names), err=True)
        sys.exit(1)
    click.echo("\nall model files present" + ("" if quick else " (checksums compared where the manifest pins one)"))


@models.command(epilog=EXAMPLES)
@_only_option
@_models_dir_option
def fetch(only: tuple[str, ...], all_models: bool, models_dir: str | None) -> None:
    """Download missing files (progress bars; interrupted downloads resume)."""
    from engine.modelfiles.fetch import fetch_models

    selected = _select(only, all_models)
    for model in selected:
        click.echo(f"{model.name}: licence {model.licence}")
    results = fetch_models(selected, models_dir)
    failed = [r for r in results if r.action in ("failed", "offline")]
    for r in results:
        click.echo(f"  {r.action:<10} {r.status.model}/{r.status.spec.id}" + (f": {r.message}" if r.message else ""))
    if failed:
        click.echo(f"\n{len(failed)} file(s) could not be fetched", err=True)
        sys.exit(1)
    click.echo("\nall requested model files are present")
