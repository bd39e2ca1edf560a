"""``arbormem example``: the sample conversation the quickstarts use, shipped in the
package so that they work from any folder after ``pip install``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from arbormem.cli.common import handle_errors

#: The sample conversation, inside the installed package.
SAMPLE = "examples/conversation.json"


def sample_conversation() -> bytes:
    """The sample conversation's bytes, as shipped in the package."""
    from importlib.resources import files

    return files("arbormem").joinpath(SAMPLE).read_bytes()


@click.command()
@click.argument("dest", required=False, default="conversation.json")
@click.option("--force", "-f", is_flag=True, help="Replace DEST if it exists.")
@handle_errors
def example(dest: str, force: bool) -> None:
    """Write a sample conversation to DEST (- for standard output), to try the
    other commands on.

    \b
    Examples:
      arbormem example && arbormem ingest conversation.json
      arbormem example - | arbormem --db /tmp/try.db ingest -
    """
    from arbormem.errors import InputError

    data = sample_conversation()
    if dest == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    path = Path(dest).expanduser()
    if path.is_file() and path.read_bytes() == data:
        # Run again (the README's quickstarts both start with it): nothing to do.
        click.echo(f"{path} holds the sample conversation already.")
        return
    if path.exists() and not force:
        raise InputError(
            "exists already", source=str(path), hint="give another name, or --force to replace it"
        )
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise InputError(f"cannot be written: {exc.strerror or exc}", source=str(path)) from None
    count = len(json.loads(data))
    click.echo(f"Wrote a sample conversation of {count} messages to {path}.")
    click.echo(f'Next: arbormem ingest {dest} && arbormem search "can Leo eat the cake?"')
