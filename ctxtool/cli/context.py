"""`ctxtool context`: what a session restores to, at any checkpoint, and how it came about."""

from __future__ import annotations

import sys

import click

from ..chart_drawings import text_chart, unicode_allowed
from ..core.context_chart import ContextChart
from ..core.windows import CompactionSettings, context_window_for
from ..export import (
    FORMATS,
    export_format,
    export_pieces,
    markdown_lines,
    render_checkpoints,
    render_diff,
)
from ..output import OutputFormat, is_terminal, print_rows, print_with_rows
from ..redaction import Redactor, redact_stream
from ..store.chart import session_chart
from ..store.outline import stream_context
from ..store.reads import SessionHistory
from ..terminal import echo_pieces, page, print_result, table_width, wrap
from ..whole_file import write_whole
from .app import pass_app
from .context_show import PIPED_WIDTH, at_options, one_point, session_history
from .findings import print_findings
from .options import (
    document_output_options,
    output_options,
    redact_options,
    session_argument,
    window_options,
)
from .root import context
from .types import WholeNumber


def _chart(history: SessionHistory, settings: CompactionSettings) -> ContextChart:
    """The session's chart against its model's window and threshold (or the options')."""
    model = history.session.model
    window = context_window_for(model, settings.context_window)
    return session_chart(history, window, settings.threshold(model))


@context.command("checkpoints")
@session_argument()
@click.option(
    "--details",
    is_flag=True,
    help="Under the table, each checkpoint's quality figures and the probes it missed.",
)
@click.option(
    "--chart",
    "chart",
    is_flag=True,
    help="Under the table, the context's size at each message as block characters fitted to "
    "the terminal, each checkpoint marked, with the window and the compaction threshold "
    "(plain characters when the output is not UTF-8 or NO_COLOR is set). With --json: the "
    "chart's points and drops; with --nl or --csv: its points.",
)
@window_options
@output_options
@pass_app
def checkpoints(app, session, details, chart, settings, output: OutputFormat):
    """Every checkpoint of a session in order: parent, time, summarizer and model, cut,
    messages summarized, tokens before / after, summary tokens, and the quality gate's
    figures (the probe score, fabrications and missed probes, as `ctxtool eval` measures).

    SESSION is its id, its source id (e.g. the transcript's UUID) or a unique prefix.

    \b
    Example: ctxtool context checkpoints a5c478e1
             ctxtool context checkpoints a5c478e1 --details
             ctxtool context checkpoints a5c478e1 --chart
             ctxtool context checkpoints a5c478e1 --chart --json
    """
    history = session_history(app, session)
    if chart and output.machine:
        print_with_rows(_chart(history, settings).as_dict(), "points", output)
        return
    rows = history.checkpoint_rows()
    if output.machine:
        print_rows(rows, output)
        return
    width = table_width(None)
    click.echo(render_checkpoints(rows, output, width))
    for row in rows if details else ():
        missed = f"; missed: {', '.join(row['missed'])}" if row["missed"] else ""
        line = f"checkpoint {row['checkpoint_id']}: {row['quality'] or 'no figures'}{missed}"
        click.echo(wrap(line, width, "  "))
    if chart:
        lines = text_chart(_chart(history, settings), width or 80, unicode_allowed(sys.stdout))
        click.echo("\n" + "\n".join(lines))


@context.command("diff")
@session_argument()
@click.argument("a", type=WholeNumber(), required=False)
@click.argument("b", type=WholeNumber(), required=False)
@click.option(
    "--side-by-side",
    "-y",
    is_flag=True,
    help="The summaries in two columns (as diff -y) instead of a unified diff.",
)
@document_output_options
@pass_app
def diff(app, session, a, b, side_by_side, output: OutputFormat):
    """What changed from checkpoint A to checkpoint B: the summaries as a unified diff, how far
    the cut moved, and the messages that went from kept to summarized.

    Default: the last two checkpoints (before the first one and the first, when there is only
    one). A alone: A against the checkpoint before it. A = 0: before the first checkpoint.
    A and B are checkpoint ids, or count from the latest as --at does (-1 the latest, -2 the
    one before). SESSION is its id, its source id (e.g. the transcript's UUID) or a unique
    prefix.

    \b
    Example: ctxtool context diff 42
             ctxtool context diff 42 -3 -1
    """
    d = session_history(app, session).diff(a, b)
    doc = d.as_dict()
    print_result(
        doc,
        doc["newly_summarised"],
        output,
        DIFF_COLUMNS,
        [],
        lambda: page(render_diff(d, table_width(None, piped=PIPED_WIDTH), side_by_side)),
    )


# A diff's rows (--nl, --csv, --fmt): the messages that went from kept to summarized.
DIFF_COLUMNS = ["id", "role", "created_at", "token_count"]


@context.command("export")
@session_argument()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    help="markdown or md (a bug report), html (one self-contained page) or jsonl (an "
    "OpenAI-chat transcript `ctxtool import` reads back). Default: what the -o file's "
    "extension says (.html, .md, .jsonl), else markdown.",
)
@at_options
@click.option(
    "-o",
    "--output",
    "path",
    type=click.Path(dir_okay=False, writable=True),
    help="Write to this file instead of standard output.",
)
@click.option(
    "--chart/--no-chart",
    "chart",
    default=None,
    help="The HTML page's chart of the context's size at each message, with every checkpoint, "
    "the window and the threshold [default: drawn in --format html].",
)
@window_options
@redact_options
@output_options
@pass_app
def export(
    app,
    session,
    fmt,
    at,
    before_first,
    path,
    chart,
    settings,
    redact,
    redact_preview,
    output: OutputFormat,
):
    """Export a session's restored context (the latest, or --at a checkpoint).

    SESSION is its id, its source id (e.g. the transcript's UUID) or a unique prefix.

    \b
    Example: ctxtool context export 42 -o session-42.html
             ctxtool context export 42 --format jsonl | ctxtool import - --format openai-chat
             ctxtool context export 42 --redact-preview --json
    """
    if (output.machine or output.fmt != "simple") and not redact_preview:
        raise click.UsageError(
            "--json, --nl, --csv and --fmt list what --redact-preview finds; an export's own "
            "format is --format"
        )
    if redact_preview and path:
        raise click.UsageError("--redact-preview lists what it finds and writes nothing: no -o")
    fmt = export_format(fmt, path)
    if chart and fmt != "html":
        raise click.UsageError("the chart is drawn in the HTML export: --format html")
    history = session_history(app, session)
    one_point(at, before_first)
    # Streamed: a page of messages in memory at a time, however long the context (redacted
    # message by message).
    stream = stream_context(history, at, before_first)
    if redact or redact_preview:
        redactor = Redactor(keep_findings=redact_preview)
        redact_stream(stream, redactor)
        if redact_preview:
            for _ in stream.items(counted=False):  # every text seen once
                pass
            print_findings([f.as_dict() for f in redactor.findings or ()], output)
            return
    drawn = _chart(history, settings) if fmt == "html" and chart is not False else None
    pieces = export_pieces(stream, fmt, history.compactions, drawn)
    if path:
        size = write_whole(path, pieces)
        click.echo(f"wrote {path} ({fmt}, {size} bytes)", err=True)
    elif fmt == "markdown":
        page(markdown_lines(stream))
    elif fmt == "html" and is_terminal(sys.stdout):
        # A person reading a page's source: a pager.
        page("".join(pieces).rstrip("\n"))
    else:
        echo_pieces(pieces)
