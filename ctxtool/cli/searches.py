"""`ctxtool search` and `ctxtool context trace`: why did the agent forget X?"""

from __future__ import annotations

import re

import click

from ..core.trace import TextMatch
from ..output import OutputFormat, print_rows, visible
from ..store.reads import Store
from ..store.search import (
    FULLTEXT_INDEXES,
    SUMMARY_ROLE,
    SearchHit,
    SessionTrace,
    fulltext_index,
)
from ..terminal import fit_table, page, print_result, table_width, wrap
from .app import pass_app
from .options import document_output_options, output_options, session_argument
from .root import context, main
from .types import SinceType, WholeNumber

ROLES = ("system", "user", "assistant", "tool", SUMMARY_ROLE)


def _text_match(text: str, regex: bool) -> TextMatch:
    try:
        return TextMatch(text, regex)
    except re.error as exc:
        raise click.BadParameter(f"{text!r} is not a regular expression: {exc}") from None
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _time(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else "no time"


def _hit_lines(hit: SearchHit, width: int | None = None) -> list[str]:
    """A hit in three lines, wrapped to ``width``: the snippet whole (the match is inside it)."""
    what = (
        f"message {hit.id} ({hit.role})"
        if hit.kind == "message"
        else f"summary of checkpoint {hit.id}"
    )
    return [
        wrap(f"session {hit.session_id} · {what} · {_time(hit.created_at)}", width, "  "),
        wrap(f"  {hit.snippet}", width, "  "),
        wrap(f"  → {hit.trace.describe()}", width, "    "),
    ]


@main.command("search")
@click.argument("text", required=False)
@click.option("--session", metavar="SESSION", help="Only this session (id, source id or prefix).")
@click.option(
    "--role",
    type=click.Choice(ROLES),
    help=f"Only messages of this role ({SUMMARY_ROLE}: only checkpoint summaries).",
)
@click.option(
    "--since",
    type=SinceType(),
    help="Only what was written since then: a date/time (UTC) or an age (7d, 12h).",
)
@click.option(
    "--regex",
    is_flag=True,
    help="TEXT is a regular expression (REGEXP on the server), not a plain substring.",
)
@click.option(
    "--limit",
    default=50,
    show_default=True,
    type=WholeNumber(1),
    help="At most this many hits, newest first.",
)
@click.option(
    "--create-index",
    is_flag=True,
    help="Add FULLTEXT indexes on the messages and their tool calls (MySQL/MariaDB, in place; "
    "the runtime's inserts wait while they build and pay for them afterwards, see "
    "docs/search.md), then search with them.",
)
@output_options
@pass_app
def search_command(
    app, text, session, role, since, regex, limit, create_index, output: OutputFormat
):
    """Find what was said: messages (content, tool-call arguments, tool results) and checkpoint
    summaries across sessions, newest first, and where each hit stands in its session's
    restored context today: kept verbatim, summarized and still held by the latest summary,
    or summarized and lost (at which checkpoint).

    The match is case-insensitive and runs on the server; only hits come back. No hit exits
    1, as grep does.

    \b
    Example: ctxtool search "Light theme"
             ctxtool search "pastel|light theme" --regex --session 7 --json
             ctxtool search --create-index
    """
    engine = app.checked_engine()
    if create_index:
        added = Store(engine).create_fulltext_index()
        with engine.connect() as conn:
            indexed = fulltext_index(conn)
        unindexed = [c for c in FULLTEXT_INDEXES if c not in indexed]
        click.echo(
            (
                f"FULLTEXT index created on {' and '.join(added)}"
                if added
                else "the FULLTEXT indexes are already there"
            )
            + (
                f"; {' and '.join(unindexed)} cannot have one on this server (MySQL's JSON "
                "type): searched by scanning"
                if unindexed
                else ""
            ),
            err=True,
        )
        if text is None:
            return
    if text is None:
        raise click.UsageError("give the TEXT to search for")
    hits = Store(engine).search(
        _text_match(text, regex), session=session, role=role, since=since, limit=limit
    )
    if output.machine:
        # CSV has the flat columns; JSON keeps every value (the checkpoints on the way too).
        print_rows([h.as_dict() for h in hits], output, _HIT_COLUMNS if output.csv else None)
    elif output.fmt != "simple":  # a table style asked for: one row a hit
        _hit_table(hits, output)
    elif not hits:
        click.echo(f"nothing says {visible(text)!s}", err=True)
    else:
        width = table_width(None)
        page("\n".join("\n".join(_hit_lines(h, width)) for h in hits))
    if not hits:
        _nothing_found()


def _nothing_found() -> None:
    """No hit exits 1, as grep does: a script tests for it."""
    raise click.exceptions.Exit(1)


# A hit's columns (--csv's header even when nothing is found); --json/--nl add the
# checkpoints each hit went through.
_HIT_COLUMNS = ["session_id", "kind", "id", "role", "created_at", "snippet", "where"]


def _hit_table(hits: list[SearchHit], output: OutputFormat) -> None:
    """One row a hit, fitted to the terminal: the time to the minute (--json has it whole);
    what was said and where it stands now are what is read, so the time, then the role, go
    before they are cut short."""
    rows = [
        {k: h.as_dict()[k] for k in _HIT_COLUMNS}
        | {"created_at": h.created_at and h.created_at.isoformat(sep=" ", timespec="minutes")}
        for h in hits
    ]
    fitted = fit_table(
        rows,
        output,
        _HIT_COLUMNS,
        table_width(None),
        ["snippet", "where"],
        optional=["role", "created_at"],
    )
    click.echo(fitted)


# A trace's rows (--nl, --csv, --fmt): each message that said it, then each checkpoint since.
TRACE_COLUMNS = ["step", "id", "role", "created_at", "says"]


def trace_rows(found: SessionTrace) -> list[dict]:
    """The trace as rows: ``appeared`` (a message saying it, its snippet), then ``checkpoint``
    (each one since, whether it still holds it)."""
    appeared = [
        {
            "step": "appeared",
            **{k: m[k] for k in ("id", "role", "created_at")},
            "says": m["snippet"],
        }
        for m in found.as_dict()["appeared_in"]
    ]
    return appeared + [
        {"step": "checkpoint", "id": s.checkpoint_id, "role": None, "created_at": None}
        | {"says": s.describe()}
        for s in found.trace.steps
    ]


def trace_lines(found: SessionTrace, width: int | None = None) -> list[str]:
    """The trace as a person reads it: where it appeared, each checkpoint since, the answer;
    each line wrapped to ``width``."""
    return [wrap(line, width, "    ") for line in _trace_lines(found)]


def _trace_lines(found: SessionTrace) -> list[str]:
    trace = found.trace
    lines = [f"session {found.session_id}: {visible(found.match.text)}"]
    if not trace.message_ids and not trace.summary_ids:
        return [*lines, "no message and no summary of this session says it"]
    lines.append("appeared in:")
    lines += [
        f"  message {m['id']} ({m['role']}, {_time(m['created_at'])}): {visible(m['snippet'])}"
        for m in found.as_dict()["appeared_in"]
    ] or ["  no message (only summaries say it)"]
    lines.append("checkpoints since:" if trace.steps else "no checkpoint since")
    lines += [f"  {visible(step.describe())}" for step in trace.steps]
    dropped = trace.dropped_by
    lines.append(f"now: {trace.describe()}")
    if dropped is not None:
        lines.append(
            f"why it forgot: checkpoint {dropped.checkpoint_id} neither kept a message saying "
            "it nor said it in its summary"
        )
    return lines


@context.command("trace")
@session_argument()
@click.argument("text")
@click.option("--regex", is_flag=True, help="TEXT is a regular expression, not a substring.")
@document_output_options
@pass_app
def trace_command(app, session, text, regex, output: OutputFormat):
    """Trace a fact through a session's checkpoints: the message(s) where it appeared, then
    every checkpoint since, saying whether its summary or its kept messages still hold it. The
    first checkpoint that dropped it is why the agent forgot.

    Exits 1 when no message and no summary of the session says it, as grep does.

    SESSION is its id, its source id (e.g. the transcript's UUID) or a unique prefix.

    \b
    Example: ctxtool context trace 7 "Light theme"
             ctxtool context trace 7 "light (theme|background)" --regex --json
    """
    found = Store(app.checked_engine()).trace_session(session, _text_match(text, regex))
    print_result(
        found.as_dict(),
        trace_rows(found),
        output,
        TRACE_COLUMNS,
        ["says"],
        lambda: page("\n".join(trace_lines(found, table_width(None)))),
    )
    if not found.trace.message_ids and not found.trace.summary_ids:
        _nothing_found()
