"""`ctxtool context show`: a session's restored context on the terminal, as JSON or as the
OpenAI message list. In a module of its own, with the helpers the other `context` commands
share, so that the command people run most starts without what only they load (the chart,
the HTML export, redaction)."""

from __future__ import annotations

from itertools import chain

import click

from ..context_text import json_lines, openai_lines, table_lines, text_lines
from ..output import OutputFormat
from ..store.outline import stream_context
from ..store.reads import SessionHistory, Store
from ..terminal import echo_pieces, page, table_width
from .app import pass_app
from .options import json_option, session_argument
from .root import context
from .types import WholeNumber

# A message table written to a pipe or file keeps lines this long (--width 0: whole).
PIPED_WIDTH = 160


def session_history(app, session: str) -> SessionHistory:
    return SessionHistory(Store(app.checked_engine()), session)


def at_options(func):
    func = click.option(
        "--before-first", is_flag=True, help="The context before the first checkpoint (no summary)."
    )(func)
    return click.option(
        "--at",
        "at",
        type=WholeNumber(),
        metavar="CHECKPOINT",
        help="The context as it was after this checkpoint (its id, see `context "
        "checkpoints`; -1 the latest, -2 the one before), until the next "
        "one replaced it.",
    )(func)


def one_point(at: int | None, before_first: bool) -> None:
    if at is not None and before_first:
        raise click.UsageError("choose one of --at and --before-first")


@context.command("show")
@session_argument()
@at_options
@click.option(
    "--full",
    is_flag=True,
    help="Whole contents with real newlines, tool calls with their arguments, results "
    "with their tool's name (through a pager on a terminal).",
)
@click.option(
    "--openai",
    "as_openai",
    is_flag=True,
    help="Print only the OpenAI-style message list (JSON), ready to send to an API: "
    "the summary is its first user message, every tool call is answered.",
)
@click.option(
    "--width",
    type=WholeNumber(0),
    metavar="N",
    help="Characters per line of the message table (default: the terminal's, 160 "
    "when piped; 0: no limit).",
)
@json_option
@pass_app
def show(app, session, at, before_first, full, as_openai, width, output: OutputFormat):
    """Show system prompt + summary + the messages kept since its cut.

    Without --at: the latest checkpoint and every message after its cut. With --at CHECKPOINT:
    that checkpoint's summary and the messages of its context until the next checkpoint
    replaced it (those the next one summarized, and those it kept that were written by its
    time). SESSION is its id, its source id (e.g. the transcript's UUID) or a unique prefix.

    \b
    Example: ctxtool context show 42
             ctxtool context show fe5e1c67 --at 3 --full
             ctxtool context show 42 --json | jq '.messages[] | {id, role, token_count}'
    """
    history = session_history(app, session)
    one_point(at, before_first)
    # Streamed: a page of messages in memory at a time, however long the context.
    stream = stream_context(history, at, before_first)
    if as_openai:
        echo_pieces(chain(openai_lines(stream), ["\n"]))
        return
    if output.json:
        echo_pieces(chain(json_lines(stream), ["\n"]))
        return
    if full:
        page(text_lines(stream))
        return
    page(table_lines(stream, table_width(width, piped=PIPED_WIDTH)))
