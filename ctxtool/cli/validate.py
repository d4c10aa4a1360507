"""`ctxtool validate`: are a store's checkpoints consistent and its restored contexts valid."""

from __future__ import annotations

import click

from ..errors import CtxtoolError
from ..output import OutputFormat, output_options, print_rows
from ..store import validate
from . import main, pass_app


@main.command("validate")
@click.option("--session", "session_id", type=int, help="Only this session (default: all).")
@output_options
@pass_app
def validate_cmd(app, session_id, output: OutputFormat):
    """Check checkpoint consistency: cuts point at messages of their session and never orphan a
    tool result, checkpoints form one chain, restored contexts are valid for an API.

    Exits 1 when any error is found (warnings alone exit 0).

    Example: ctxtool validate --json
    """
    issues, checked = validate(app.store_engine(), session_id)
    print_rows([i.as_dict() for i in issues], output,
               headers=["session_id", "severity", "rule", "compaction_id", "message_id", "message"])
    errors = [i for i in issues if i.severity == "error"]
    if not output.machine:
        click.echo(f"{checked} session(s) checked: {len(errors)} error(s), "
                   f"{len(issues) - len(errors)} warning(s)", err=True)
    if errors:
        raise CtxtoolError(f"{len(errors)} consistency error(s) found")
