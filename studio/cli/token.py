"""`studio token`: this machine's access token for the API and for opening CLI-made sessions in a browser."""

from __future__ import annotations

from pathlib import Path

import click

from studio.cli.options import default_data_dir


@click.command("token")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The studio's data folder (default: the one `studio serve` uses).")
@click.option("--url", default="http://127.0.0.1:7860/", show_default=True, help="Where the studio serves.")
@click.option("--quiet", is_flag=True, help="Print only the token.")
@click.option("--rotate", is_flag=True,
              help="Sign with a new key from now on; tokens of the old key still work until --retire "
                   "(browsers that open the page meanwhile get their token re-signed).")
@click.option("--retire", is_flag=True, help="Stop accepting tokens and file URLs of keys replaced by --rotate.")
def token(data_dir: Path | None, url: str, quiet: bool, rotate: bool, retire: bool) -> None:
    """Print the token that owns `studio render --session` sessions and authorises API scripts.

    Keep it like a password: whoever holds it can read and change those sessions. A token leaked:
    `--rotate`, let the owners' browsers open the page once, then `--retire` (at once, to cut it off now).
    """
    from studio.identity import Identity

    data_dir = data_dir or default_data_dir()
    identity = Identity(data_dir)
    if rotate:
        identity.rotate()
        click.echo("rotated: new tokens are signed with a new key; old ones work until `studio token --retire`")
    if retire:
        n = identity.retire()
        click.echo(f"retired {n} old key(s): their tokens and file URLs no longer work")
    if (rotate or retire) and quiet:
        return
    tok = identity.cli_token()
    if quiet:
        click.echo(tok)
        return
    click.echo(f"token: {tok}\n")
    click.echo("API scripts (gradio_client):")
    click.echo(f'  Client("{url}", headers={{"Authorization": "Bearer {tok}"}})')
    click.echo("\nSee the sessions of `studio render --session` in a browser (once; the browser keeps the key):")
    click.echo(f"  {url.rstrip('/')}/?key={tok}")
