"""What `ctxtool --version`, `--help`, a group's `--help`, a Tab on a command name and
`completion` load (issue #44): click and the root, never SQLAlchemy, tabulate or a command's
module; and the one-line help the root lists for each command without loading it is the
command's own. Each runs the real entry point in a fresh process."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import click
import pytest

from ctxtool.cli import main
from ctxtool.cli.root import _first_paragraph

_LOADED_AFTER = """
import json, sys
from ctxtool.cli import main
try:
    main(sys.argv[1:], prog_name="ctxtool")
except SystemExit as stop:
    code = stop.code
heavy = ("sqlalchemy", "tabulate", "tiktoken", "ctxtool.cli.app", "ctxtool.store", "openai")
print(json.dumps({"code": code, "loaded": sorted(m for m in heavy if m in sys.modules)}),
      file=sys.stderr)
"""


def _loaded(args: list[str], env: dict[str, str] | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _LOADED_AFTER, *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    return json.loads(out.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["--help"],
        ["context", "--help"],
        ["sessions", "--help"],
        ["migrate", "--help"],
        ["tokens", "--help"],
        ["completion", "bash"],
    ],
)
def test_start_up_loads_no_database_layer(args):
    assert _loaded(args) == {"code": 0, "loaded": []}


def test_a_tab_on_a_command_name_loads_no_command():
    tab = {"_CTXTOOL_COMPLETE": "bash_complete", "COMP_WORDS": "ctxtool con", "COMP_CWORD": "1"}
    assert _loaded([], tab) == {"code": 0, "loaded": []}


def _every_command(group: click.Group, ctx: click.Context):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield group, name, command
        if isinstance(command, click.Group):
            yield from _every_command(command, click.Context(command, parent=ctx))


def test_the_listed_help_is_each_commands_own_and_every_command_is_listed():
    """The root and each group name their commands with a one-line help written beside the
    module that defines them: it must say what the command's docstring says, and a command
    added to a module must be named there too (else it cannot be found)."""
    groups = [main, *(g for g in main.commands.values() if isinstance(g, click.Group))]
    for module in {m for g in groups for m, _ in g.lazy.values()}:
        importlib.import_module(module, "ctxtool.cli")
    ctx = click.Context(main)
    for group, name, command in _every_command(main, ctx):
        if isinstance(command, click.Group):
            assert name in group.commands  # a group is declared in the root module itself
            continue
        assert name in group.lazy, f"{name} is not named in its group's list"
        module, short_help = group.lazy[name]
        assert short_help == _first_paragraph(command.help), name
        assert command.callback.__module__ == f"ctxtool.cli{module}", name


def test_db_after_a_group_name(cli, sqlite_db):
    """`ctxtool sessions --db URL list`: the flag goes anywhere, as the README says."""
    listed = cli("sessions", "--db", sqlite_db.url, "list", "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == []
