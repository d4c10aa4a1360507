"""`ctxtool tokens ...`: count and report tokens."""

from __future__ import annotations

import sys

import click

from ..chart_drawings import histogram_lines, unicode_allowed
from ..core.context_chart import NEAR_THRESHOLD, WindowHistogram, sessions_histogram
from ..core.errors import CtxtoolError
from ..core.tokens import get_encoding
from ..core.windows import CompactionSettings, context_window_for
from ..interrupts import INTERRUPTED
from ..output import OutputFormat, Progress, print_rows, print_with_rows
from ..store import Store
from ..terminal import fit_table, print_result, table_width, wrap
from .app import pass_app
from .options import (
    document_output_options,
    encoding_option,
    output_options,
    session_argument,
    window_options,
)
from .root import tokens
from .types import WholeNumber


@tokens.command("count")
@session_argument(required=False, old_option=True)
@click.option("--all", "all_sessions", is_flag=True, help="Every session.")
@encoding_option
@click.option("--recount", is_flag=True, help="Recount messages that already have a count.")
@click.option(
    "--batch-size",
    default=2000,
    show_default=True,
    type=WholeNumber(1, 50000),
    help="Messages per batch; each batch commits, so an interruption loses at most one.",
)
@document_output_options
@pass_app
def count_cmd(app, session, all_sessions, encoding, recount, batch_size, output: OutputFormat):
    """Fill agent_message token counts where missing or counted with another encoding.

    Resumable: each batch commits, so an interrupted run loses nothing and a re-run continues.

    SESSION is its id, source id or a unique prefix; --all counts every session.

    \b
    Examples:
      ctxtool tokens count --all
      ctxtool tokens count 42 --recount
    """
    if (session is None) == (not all_sessions):
        raise click.UsageError("give a SESSION or --all")
    if encoding:
        get_encoding(encoding)  # fail fast, before touching the database
    engine = app.checked_engine()
    session_id = Store(engine).resolve_session(session) if session else None
    total = Store(engine).count_pending(session_id, encoding, recount) if Progress.shown() else None
    with Progress(total, "counting tokens") as progress:
        try:
            result = Store(engine).count_tokens(
                session_id, encoding, recount, batch_size, progress.update
            )
        except KeyboardInterrupt:
            # progress.position: the messages of every batch committed before the interrupt.
            raise CtxtoolError(
                f"interrupted: the counts of {progress.position} message(s) were saved "
                "(each batch commits); a re-run counts the rest",
                INTERRUPTED,
            ) from None
    doc = {
        "messages_counted": result.messages_counted,
        "tokens": result.tokens,
        "batches": result.batches,
        "by_encoding": result.by_encoding,
        "heads_counted": result.heads_counted,
    }
    human = (
        f"counted {result.messages_counted} message(s), {result.tokens} tokens, every count saved"
    ) + "".join(f"\n  {enc}: {n} message(s)" for enc, n in result.by_encoding.items())
    if result.heads_counted:
        human += f"\n  and {result.heads_counted} system prompt(s) and summaries"
    rows = [{"encoding": e, "messages": n} for e, n in result.by_encoding.items()]
    print_result(doc, rows, output, ["encoding", "messages"], [], lambda: click.echo(human))


@tokens.command("report")
@session_argument(required=False, old_option=True)
@encoding_option
@click.option(
    "--chart",
    is_flag=True,
    help="Under the table, a histogram of the sessions by their restored context's share of "
    "their window: how many sit near the compaction threshold, how many are over it. With "
    "--json: its buckets and counts; with --nl or --csv: its buckets.",
)
@window_options
@output_options
@pass_app
def report_cmd(app, session, encoding, chart, settings, output: OutputFormat):
    """Per session: messages, full-history tokens, effective (restored) tokens, summary tokens,
    compression ratio, and the context size the provider reported, where the transcript had it.

    SESSION (its id, source id or a unique prefix) reports one session; default: all.

    \b
    Example: ctxtool tokens report 42 --json
             ctxtool tokens report --chart --context-window 200000
             ctxtool tokens report --chart --json
    """
    engine = app.checked_engine()
    session_id = Store(engine).resolve_session(session) if session else None
    rows = Store(engine).token_report(session_id, encoding)
    if chart and output.machine:
        print_with_rows(report_histogram(rows, settings).as_doc(), "buckets", output)
        return
    if output.machine:
        print_rows(rows, output)
        return
    table = [{label: r[key] for key, label in _REPORT_LABELS.items()} for r in rows]
    click.echo(
        fit_table(
            table,
            output,
            _REPORT_LABELS.values(),
            table_width(None),
            ["model", "encoding"],
            optional=["uncounted", "ratio", "provider", "encoding"],
        )
    )
    if rows:
        click.echo("(context: the restored context's tokens; ratio: history / context)")
    if chart:
        click.echo("\n" + "\n".join(window_chart(rows, settings, table_width(None) or 80)))


def report_histogram(rows: list[dict], settings: CompactionSettings) -> WindowHistogram:
    """The report's histogram: each session's context as a share of its model's window (or
    the --context-window), with its model's threshold."""
    return sessions_histogram(
        (
            r["effective_tokens"],
            context_window_for(r["model"], settings.context_window),
            settings.threshold(r["model"]),
        )
        for r in rows
    )


def window_chart(rows: list[dict], settings: CompactionSettings, width: int) -> list[str]:
    """The report's histogram drawn: a bar a bucket, then how many sessions are near the
    threshold, over it, over the window."""
    histogram = report_histogram(rows, settings)
    lines = ["sessions by restored context, as a share of their window:"]
    lines += histogram_lines(
        histogram.buckets, histogram.threshold_share, width, unicode_allowed(sys.stdout)
    )
    lines.append(
        wrap(
            f"{histogram.sessions} session(s): {histogram.near_threshold} near the threshold "
            f"(within {NEAR_THRESHOLD:.0%} of the window below it), {histogram.over_threshold} "
            f"over it, {histogram.over_window} over the window",
            width,
        )
    )
    return lines


# The report's columns at 80 characters, with short labels; --json has every field.
_REPORT_LABELS = {
    "session_id": "session",
    "model": "model",
    "messages": "msgs",
    "history_tokens": "history",
    "effective_tokens": "context",
    "summary_tokens": "summary",
    "compactions": "checkpoints",
    "uncounted": "uncounted",
    "compression": "ratio",
    "provider_context_tokens": "provider",
    "encoding": "encoding",
}
