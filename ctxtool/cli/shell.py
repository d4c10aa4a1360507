"""`ctxtool completion`: the shell's completion script. Light on purpose: it loads click and
the root alone (a shell's start-up may run it)."""

from __future__ import annotations

import os

import click
from click.shell_completion import get_completion_class

from .root import main

SHELLS = ("bash", "zsh", "fish")


def _shell_from_environment() -> str:
    """The shell $SHELL names (its file name), or a usage error saying what to give."""
    name = os.path.basename(os.environ.get("SHELL", ""))
    if name not in SHELLS:
        said = f"$SHELL is {name!r}" if name else "$SHELL is not set"
        raise click.UsageError(f"{said}: give the shell, one of {', '.join(SHELLS)}")
    return name


@main.command("completion")
@click.argument("shell", type=click.Choice(SHELLS), required=False)
def completion_cmd(shell):
    """Print the shell completion script for SHELL.

    SHELL (bash, zsh or fish) defaults to the one $SHELL names.

    \b
    Examples:
      eval "$(ctxtool completion)"               # in ~/.bashrc
      ctxtool completion fish > ~/.config/fish/completions/ctxtool.fish
    """
    cls = get_completion_class(shell or _shell_from_environment())
    click.echo(cls(main, {}, "ctxtool", "_CTXTOOL_COMPLETE").source())
