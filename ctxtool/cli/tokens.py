"""`ctxtool tokens ...`: count and report tokens."""

from __future__ import annotations

import click

from ..output import OutputFormat, Progress, json_option, output_options, print_document, print_rows
from ..store import Store
from ..token_counting import count_pending, count_tokens, token_report
from ..tokens import SHIPPED_VOCABULARIES, get_encoding
from . import main, pass_app


@main.group()
def tokens():
    """Exact token counts per message (tiktoken, offline).

    Example: ctxtool tokens count --all && ctxtool tokens report
    """


@tokens.command("count")
@click.option("--session", "session_id", type=int, help="Only this session.")
@click.option("--all", "all_sessions", is_flag=True, help="Every session.")
@click.option("--encoding", help="Count with this encoding instead of the session model's "
                                 f"(shipped: {', '.join(SHIPPED_VOCABULARIES)}).")
@click.option("--recount", is_flag=True, help="Recount messages that already have a count.")
@click.option("--batch-size", default=2000, show_default=True, type=click.IntRange(1, 50000))
@json_option
@pass_app
def count_cmd(app, session_id, all_sessions, encoding, recount, batch_size, output: OutputFormat):
    """Fill agent_message token counts where missing or counted with another encoding.

    Resumable: each batch commits, so an interrupted run loses nothing and a re-run continues.

    Example: ctxtool tokens count --all
    """
    if (session_id is None) == (not all_sessions):
        raise click.UsageError("give --session ID or --all")
    engine = app.store_engine()
    if encoding:
        get_encoding(encoding)  # fail fast, before touching the database
    if session_id is not None:
        Store(engine).session(session_id)  # names a missing session before any work
    total = count_pending(engine, session_id, encoding, recount) if Progress.on_terminal() else None
    with Progress(total, "counting tokens") as progress:
        result = count_tokens(engine, session_id, encoding, recount, batch_size, progress.update)
    doc = {"messages_counted": result.messages_counted, "tokens": result.tokens,
           "batches": result.batches, "by_encoding": result.by_encoding}
    human = (f"counted {result.messages_counted} message(s), {result.tokens} tokens"
             + "".join(f"\n  {enc}: {n} message(s)" for enc, n in result.by_encoding.items()))
    print_document(doc, output, human)


@tokens.command("report")
@click.option("--session", "session_id", type=int, help="Only this session.")
@click.option("--encoding", help="Report with this encoding instead of the session model's.")
@output_options
@pass_app
def report_cmd(app, session_id, encoding, output: OutputFormat):
    """Per session: messages, full-history tokens, effective (restored) tokens, summary tokens,
    compression ratio, and the context size the provider reported, where the transcript had it.

    Example: ctxtool tokens report --session 42 --json
    """
    rows = token_report(app.store_engine(), session_id, encoding)
    print_rows(rows, output)
