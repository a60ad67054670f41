"""`studio token`: this machine's access token for the API and for opening CLI-made sessions in a browser."""

from __future__ import annotations

from pathlib import Path

import click

from studio.runtime_options import default_data_dir


@click.command("token")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The studio's data folder (default: the one `studio serve` uses).")
@click.option("--url", default="http://127.0.0.1:7860/", show_default=True, help="Where the studio serves.")
@click.option("--quiet", is_flag=True, help="Print only the token.")
def token(data_dir: Path | None, url: str, quiet: bool) -> None:
    """Print the token that owns `studio render --session` sessions and authorises API scripts.

    Keep it like a password: whoever holds it can read and change those sessions.
    """
    from studio.identity import Identity

    data_dir = data_dir or default_data_dir()
    tok = Identity(data_dir).cli_token()
    if quiet:
        click.echo(tok)
        return
    click.echo(f"token: {tok}\n")
    click.echo("API scripts (gradio_client):")
    click.echo(f'  Client("{url}", headers={{"Authorization": "Bearer {tok}"}})')
    click.echo("\nSee the sessions of `studio render --session` in a browser (once; the browser keeps the key):")
    click.echo(f"  {url.rstrip('/')}/?key={tok}")
