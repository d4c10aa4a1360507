"""`ctxtool sessions`: find the sessions of a store."""

from __future__ import annotations

import click

from ..output import OutputFormat, output_options, print_rows
from ..store import list_sessions
from . import main, pass_app


@main.group()
def sessions():
    """Find sessions to inspect.

    Example: ctxtool sessions list --project shop --limit 20
    """


@sessions.command("list")
@click.option("--user", "user_id", help="Only this user_id.")
@click.option("--project", "project_id", help="Only this project_id.")
@click.option("--source-format", help="Only sessions imported from this format (e.g. claude-code).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1))
@output_options
@pass_app
def sessions_list(app, user_id, project_id, source_format, limit, output: OutputFormat):
    """The newest sessions with their message and checkpoint counts.

    Example: ctxtool sessions list --json
    """
    rows = list_sessions(app.store_engine(), user_id, project_id, source_format, limit)
    print_rows(rows, output, headers=None if output.machine else
               ["session_id", "title", "model", "source", "messages", "compactions",
                "last_message_id", "created_at"])
