"""`ctxtool sessions`: find the sessions of a store."""

from __future__ import annotations

import click

from ..core.windows import CompactionSettings
from ..db import read_connection
from ..output import OutputFormat, print_rows
from ..store import Store
from ..store.removal import footprints
from ..store.session_list import SORT_ORDERS
from ..terminal import fit_table, table_width
from .app import pass_app
from .options import complete_session, output_options, session_argument, window_options
from .root import sessions
from .types import SinceType, TranscriptFormat, WholeNumber


@sessions.command("list")
@click.option("--user", "user_id", help="Only this user_id.")
@click.option("--project", "project_id", help="Only this project_id.")
@click.option(
    "--source-format",
    type=TranscriptFormat(),
    help="Only sessions imported from this transcript format.",
)
@click.option(
    "--search",
    metavar="TEXT",
    help="Only sessions whose title, source id or first request contains TEXT (case-insensitive).",
)
@click.option("--model", help="Only sessions of this model (or a model starting with it).")
@click.option(
    "--since",
    type=SinceType(),
    help="Only sessions active since then (their newest message, not their import): a "
    "date/time (UTC) or an age (7d, 12h).",
)
@click.option(
    "--over-window",
    is_flag=True,
    help="Only sessions whose restored context is over their compaction threshold "
    "(context window - reserve); adds context_tokens and threshold.",
)
@window_options
@click.option(
    "--rescan",
    is_flag=True,
    help="With --over-window or --sort tokens: sum every session's context from its "
    "messages, not from the sums compact --all kept (after a runtime inserted messages "
    "without the session-row rule).",
)
@click.option(
    "--sort",
    type=click.Choice(SORT_ORDERS),
    default=SORT_ORDERS[0],
    show_default=True,
    help="id: newest session first; last-activity: newest message first (reads a row per "
    "session); messages: most first; tokens: largest restored context first (measured as "
    "compact --all measures).",
)
@click.option(
    "--limit",
    default=50,
    show_default=True,
    type=WholeNumber(1),
    help="At most this many sessions, the first in --sort order.",
)
@click.option(
    "--width",
    type=WholeNumber(0),
    metavar="N",
    help="Fit the table in N characters (default: the terminal's width; 0: no limit).",
)
@output_options
@pass_app
def sessions_list(
    app,
    user_id,
    project_id,
    source_format,
    search,
    model,
    since,
    over_window,
    settings: CompactionSettings,
    rescan,
    sort,
    limit,
    width,
    output: OutputFormat,
):
    """Sessions with their last activity (the time of their newest message), message and
    checkpoint counts, newest first (--sort last-activity: most recently active first).

    The table fits the terminal (long titles and sources shortened); --json has every value
    whole.

    \b
    Example: ctxtool sessions list --search fe5e1c67
             ctxtool sessions list --model claude --since 7d --sort last-activity
             ctxtool sessions list --over-window --sort tokens --limit 10
    """
    if rescan and not (over_window or sort == "tokens"):
        raise click.UsageError("--rescan goes with --over-window or --sort tokens")
    # One more than asked: whether the list stopped at --limit is said, not left to guess.
    rows = Store(app.checked_engine()).list_sessions(
        user_id,
        project_id,
        source_format,
        limit + 1,
        search=search,
        model=model,
        since=since,
        over_window=settings if over_window else None,
        sort=sort,
        rescan=rescan,
    )
    more = len(rows) > limit
    rows = rows[:limit]
    if output.machine:
        print_rows(rows, output)
        return
    _print_session_table(rows, over_window, sort, since, width, output)
    if more:
        click.echo(
            f"{limit} shown, more match: the first {limit} in --sort {sort} order "
            f"(--limit {limit * 2} shows more)",
            err=True,
        )


def _print_session_table(rows, over_window, sort, since, width, output: OutputFormat) -> None:
    # Short labels and whole-second times keep the table narrow; --json has the full names.
    labels = {
        "session_id": "id",
        "title": "title",
        "model": "model",
        "source": "source",
        "messages": "msgs",
        "compactions": "checkpoints",
        "context_tokens": "tokens",
        "threshold": "threshold",
        "last_activity": "last active",
        "created_at": "created",
        "over_window_ok_at": "over window",
    }
    if not over_window:
        del labels["threshold"]
        if sort != "tokens":
            del labels["context_tokens"]
    fit = table_width(width)
    marked = [r["session_id"] for r in rows if r["over_window_ok_at"]]
    # A column for the few sessions marked (mostly empty) only where the table has room;
    # in a terminal's width a line under the table names them instead.
    if not marked or fit is not None:
        del labels["over_window_ok_at"]
    table = [
        {
            label: (
                r[key].isoformat(sep=" ", timespec="minutes")
                if key in ("created_at", "last_activity") and r[key] is not None
                else ("ok" if r[key] is not None else "")
                if key == "over_window_ok_at"
                else r[key]
            )
            for key, label in labels.items()
        }
        for r in rows
    ]
    click.echo(
        fit_table(
            table,
            output,
            labels.values(),
            fit,
            ["title", "source", "model"],
            # The column the rows are sorted or filtered by stays; titles shorten instead.
            optional=[
                c
                for c in ("last active", "created")
                if not (c == "last active" and (sort == "last-activity" or since))
            ],
        )
    )
    if marked and fit is not None:
        shown = ", ".join(map(str, marked))
        click.echo(f"over their window, acknowledged (sessions mark): {shown}", err=True)


@sessions.command("mark")
@session_argument()
@click.option(
    "--over-window-ok",
    "ok",
    flag_value=True,
    default=None,
    help="Acknowledge that the session stays over its window (a message larger than what "
    "the window leaves): `compact --all` reports it and no longer fails on it.",
)
@click.option("--clear", "ok", flag_value=False, help="Take the acknowledgement back.")
@pass_app
def sessions_mark(app, session, ok):
    """Record what an operator decided about a session.

    \b
    Example: ctxtool sessions mark 42 --over-window-ok
             ctxtool sessions mark 42 --clear
    """
    if ok is None:
        raise click.UsageError("say what to mark: --over-window-ok or --clear")
    session_id = Store(app.checked_engine()).mark_over_window_ok(session, ok)
    click.echo(
        f"session {session_id}: "
        + ("over its window, acknowledged" if ok else "acknowledgement cleared"),
        err=True,
    )


@sessions.command("delete")
@click.argument(
    "sessions_", metavar="SESSION...", nargs=-1, required=True, shell_complete=complete_session
)
@click.option(
    "--yes", is_flag=True, help="Really remove them (without it, only say what would go)."
)
@output_options
@pass_app
def sessions_delete(app, sessions_, yes, output: OutputFormat):
    """Remove sessions completely — messages, checkpoints and the session — for real mistakes
    such as a transcript imported with the wrong format. One transaction: all or nothing.

    Without --yes nothing is removed: it lists what would go and exits 2.

    \b
    Examples:
      ctxtool sessions delete 42
      ctxtool sessions delete 42 43 --yes
    """
    engine = app.checked_engine()
    store = Store(engine)
    ids = list(dict.fromkeys(store.resolve_session(ref, leftovers=True) for ref in sessions_))
    if not yes:
        with read_connection(engine) as conn:
            planned = footprints(conn, ids)
        _print_footprints([f.as_dict() for f in planned], output)
        raise click.UsageError(
            "nothing removed: add --yes to remove "
            f"{len(planned)} session(s) and everything they hold"
        )
    removed = store.delete_sessions(ids)
    _print_footprints([{**f.as_dict(), "removed": True} for f in removed], output)


def _print_footprints(rows: list[dict], output: OutputFormat) -> None:
    """What `sessions delete` would remove or removed; for a person fitted to the terminal,
    the source shortened (--json has it whole)."""
    if output.machine or not rows:
        print_rows(rows, output)
    else:
        click.echo(fit_table(rows, output, list(rows[0]), table_width(None), ["source"]))
