"""`ctxtool compact`: offline compaction of one session or, from cron, of every session over
its threshold. Parses options into the library's settings objects and prints outcomes."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import click
from sqlalchemy.exc import SQLAlchemyError

from ..compaction.batch import BatchInterrupted
from ..compaction.compactor import Compactor
from ..compaction.summarizers import (
    DEFAULT_MAX_SUMMARY_TOKENS,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    FALLBACKS,
    KINDS,
    MAX_REQUEST_TIMEOUT_S,
    SummarizerSettings,
    make_fallback,
    make_summarizer,
)
from ..compaction.summarizers.openai import REQUEST_STYLES
from ..core.compaction_outcome import CompactionOutcome
from ..core.durations import MAX_DURATION_S
from ..core.errors import CtxtoolError, PartialFailure
from ..core.evaluator import DEFAULT_MIN_QUALITY, describe
from ..core.plan import DEFAULT_KEEP_RECENT_TOKENS, CompactionSettings
from ..core.prepare import DEFAULT_MIN_CARRY_OVER
from ..core.status import CompactionStatus
from ..core.windows import DEFAULT_MAX_SUMMARY_GROWTH
from ..db import read_connection
from ..output import OutputFormat, Progress, dumps, echo_text, print_rows
from ..store import Store
from ..store.acknowledgement import acknowledged_at, batch_failures, excused, way_out
from ..terminal import fit_table, table_width, wrap
from .app import pass_app
from .options import encoding_option, output_options, session_argument, window_options
from .root import main
from .types import Duration, FiniteNumber, WholeNumber

_COLUMNS = [
    "session_id",
    "status",
    "tokens_before",
    "tokens_kept",
    "tokens_after",
    "summary_tokens",
    "score",
    "fabrications",
    "carry_over",
    "summarised_messages",
    "kept_messages",
    "first_kept_message_id",
    "split_turn",
    "summarizer",
    "model",
    "seconds",
    "error",
]

# The human table: what a person reads at 80 columns, the label of each; --json has every field.
_LABELS = {
    "session_id": "session",
    "status": "status",
    "tokens_before": "before",
    "after": "after",
    "summary_tokens": "summary",
    "score": "score",
    "fabrications": "fabrications",
    "carry_over": "carry-over",
    "first_kept_message_id": "cut at",
    "seconds": "secs",
    "error": "error",
}


@main.command()
@session_argument(required=False)
@click.option(
    "--all", "all_sessions", is_flag=True, help="Every session over its threshold (the cron job)."
)
@click.option(
    "--limit",
    type=WholeNumber(1),
    help="With --all: compact at most N sessions, the largest overruns first.",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=WholeNumber(1, 256),
    help="Concurrent compactions (LLM calls) with --all.",
)
@click.option(
    "--older-than",
    type=Duration(),
    metavar="DURATION",
    help="With --all: only sessions whose newest message is older (a number and a "
    "unit: 90s, 10m, 2h, 1d).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; call no LLM, write nothing.")
@click.option(
    "--summarize",
    is_flag=True,
    help="With --dry-run: also run the summarizer and report summary tokens, the quality "
    "gate's figures, carry-over and over-window per session, writing nothing (compare "
    "settings or models).",
)
@click.option(
    "--show-summary",
    is_flag=True,
    help="With --dry-run --summarize: print each summary after the report.",
)
@click.option("--force", is_flag=True, help="Compact even below the threshold.")
@click.option(
    "--rescan",
    is_flag=True,
    help="With --all: sum every session's context from its messages, not from the sums "
    "earlier runs kept (after a runtime inserted messages without the session-row rule).",
)
@click.option(
    "--summarizer",
    "kind",
    default="auto",
    show_default=True,
    type=click.Choice(KINDS),
    help="auto = openai when an endpoint is configured, else extractive.",
)
@click.option("--model", help="Summary model [env CTXTOOL_SUMMARY_MODEL; default gpt-4o-mini].")
@click.option(
    "--base-url",
    envvar="OPENAI_BASE_URL",
    help="OpenAI-compatible endpoint [env OPENAI_BASE_URL]. The key comes from OPENAI_API_KEY.",
)
@click.option(
    "--timeout",
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    type=FiniteNumber(0, MAX_REQUEST_TIMEOUT_S, min_open=True),
    help="Seconds per LLM request (at most a day).",
)
@click.option(
    "--retries",
    default=DEFAULT_RETRIES,
    show_default=True,
    type=WholeNumber(0, 20),
    help="Retries (with backoff) on 429, 5xx, timeouts.",
)
@click.option(
    "--max-summary-tokens",
    default=DEFAULT_MAX_SUMMARY_TOKENS,
    show_default=True,
    type=WholeNumber(64),
    help="Largest summary any summarizer may write (at most a quarter of the threshold "
    "is used); a longer one is rejected. A summary that carries earlier summaries may "
    "be allowed more: this budget times --max-summary-growth.",
)
@click.option(
    "--max-summary-growth",
    default=DEFAULT_MAX_SUMMARY_GROWTH,
    show_default=True,
    type=FiniteNumber(1, 4),
    help="How many times its budget a summary that carries earlier summaries may grow, as "
    "far as the carried content needs and no further than the restored context fits its "
    "threshold; the kept messages leave it room (1: never).",
)
@click.option(
    "--min-carry-over",
    default=DEFAULT_MIN_CARRY_OVER,
    show_default=True,
    type=FiniteNumber(0, 1),
    help="Least share of the previous summary's items a new summary must hold; an "
    "LLM answer below it is sent back once with the dropped items, then rejected "
    "(0: not checked).",
)
@click.option(
    "--min-quality",
    default=DEFAULT_MIN_QUALITY,
    show_default=True,
    type=FiniteNumber(0, 1),
    help="Least share of the probes only the summary can answer (ctxtool eval) a summary "
    "must answer; one under it or stating fabrications is not written (an LLM answer is "
    "sent back once with the missed probes first).",
)
@click.option(
    "--instructions",
    metavar="TEXT",
    help="What the summary should focus on, for the summarizer (adds to its sections).",
)
@click.option(
    "--summary-input-tokens",
    type=WholeNumber(2048),
    help="Largest prompt one LLM request may carry; a longer span is folded in chunks "
    "[default: the summary model's window less the answer and the instructions].",
)
@click.option(
    "--fallback",
    default="none",
    show_default=True,
    type=click.Choice(FALLBACKS),
    help="When the LLM fails or its summary is rejected: extractive = write the extractive "
    "summary instead (the checkpoint records the LLM's failure; the report names the "
    "sessions and why); none = the session stays as it was.",
)
@click.option(
    "--request-style",
    default="auto",
    show_default=True,
    type=click.Choice(REQUEST_STYLES),
    help="LLM request parameters: reasoning = max_completion_tokens and no temperature "
    "(o-series, GPT-5), chat = max_tokens and temperature 0; auto picks by model name.",
)
@window_options
@click.option(
    "--keep-recent-tokens",
    default=DEFAULT_KEEP_RECENT_TOKENS,
    show_default=True,
    type=WholeNumber(0),
    help="Newest messages kept verbatim (a target: less is kept when needed to fit the window).",
)
@encoding_option
@click.option(
    "--lease-seconds",
    type=WholeNumber(10, MAX_DURATION_S),
    help="Hold each claimed session at least this long, up to ten years [default: "
    "sized from the summarizer: LLM timeout x attempts per request + 60 s; 2 minutes "
    "for extractive]. Written for 30 s at a time and renewed every 10 s while the work "
    "runs: a killed run's sessions are free again within 30 s.",
)
@click.option(
    "--outage-wait",
    type=WholeNumber(0, MAX_DURATION_S),
    metavar="SECONDS",
    help="How long a database server out of reach (a cluster node restarting, a failover) "
    "is waited for, with backoff, before the sessions in hand fail [default: 30].",
)
@output_options
@pass_app
def compact(
    app, session, all_sessions, settings: CompactionSettings, output: OutputFormat, **options
):
    """Compact a session's context: summarize old messages, keep recent ones verbatim.

    Only adds an agent_compaction row; history is never changed. Exit code 0 when everything
    went well, 4 when some sessions failed or stay over their window (--all), 1 on error.

    \b
    Examples:
      ctxtool compact 42 --dry-run
      ctxtool compact --all --workers 8 --older-than 10m
      ctxtool compact --all --dry-run --summarize --summarizer openai --model gpt-5-mini
    """
    if session is not None and all_sessions:
        raise click.UsageError(f"give a SESSION or --all, not both (SESSION {session} and --all)")
    if session is None and not all_sessions:
        raise click.UsageError("give a SESSION or --all")
    if options["limit"] is not None and not all_sessions:
        raise click.UsageError("--limit goes with --all")
    if options["rescan"] and not all_sessions:
        raise click.UsageError("--rescan goes with --all")
    if options["summarize"] and not options["dry_run"]:
        raise click.UsageError("--summarize goes with --dry-run (a real run summarizes anyway)")
    if options["show_summary"] and not options["summarize"]:
        raise click.UsageError("--show-summary goes with --dry-run --summarize")
    summarizer = make_summarizer(_summarizer_settings(options))
    learn_window = getattr(summarizer, "learn_window", None)
    if learn_window is not None and (options["summarize"] or not options["dry_run"]):
        learn_window()  # the server's window and slots, before the budgets are sized
    engine = app.checked_engine(pool_size=options["workers"] + 2, max_overflow=options["workers"])
    compactor = Compactor(
        engine,
        summarizer,
        replace(
            settings,
            keep_recent_tokens=options["keep_recent_tokens"],
            max_summary_growth=options["max_summary_growth"],
        ),
        lease_seconds=options["lease_seconds"],
        encoding=options["encoding"],
        max_summary_tokens=options["max_summary_tokens"],
        min_carry_over=options["min_carry_over"],
        min_quality=options["min_quality"],
        outage_seconds=options["outage_wait"],
        fallback=make_fallback(options["fallback"], summarizer),
    )
    run = {
        "force": options["force"],
        "dry_run": options["dry_run"],
        "summarize": options["summarize"],
    }
    # The session is found before anything is said about the run: `compact 999` is its error.
    session_id = Store(engine).resolve_session(session) if session is not None else None
    if not output.machine:
        click.echo(f"summarizer: {summarizer.describe()}", err=True)
    if session_id is not None:
        # Off a terminal a line every few seconds says which step it is in (the LLM's answer
        # can take minutes); on one, nothing until the report.
        with Progress(None, f"compacting session {session_id}", bar=False) as progress:
            compactor.on_phase = lambda _sid, what: progress.phase(what)
            outcome = compactor.compact_session(session_id, **run)
        _one(outcome, output, options["show_summary"])
    else:
        _all(compactor, run, options, output)


def _summarizer_settings(options: dict) -> SummarizerSettings:
    return SummarizerSettings(
        kind=options["kind"],
        model=options["model"],
        base_url=options["base_url"],
        timeout=options["timeout"],
        retries=options["retries"],
        max_summary_tokens=options["max_summary_tokens"],
        input_tokens=options["summary_input_tokens"],
        request_style=options["request_style"],
        instructions=options["instructions"],
    )


def _one(outcome, output: OutputFormat, show_summary: bool = False) -> None:
    if output.json:
        click.echo(dumps(outcome.as_dict()))
    elif output.machine:
        print_rows([outcome.as_dict()], output, headers=_COLUMNS)
    elif outcome.status != CompactionStatus.FAILED:
        _print_outcome(outcome)
    if show_summary and not output.json:
        _print_summaries([outcome])
    if not outcome.ok:
        over = outcome.status == CompactionStatus.OVER_WINDOW
        raise CtxtoolError(
            outcome.message() + (f"; {way_out([outcome.session_id])}" if over else "")
        )


def _acknowledged(compactor: Compactor, outcomes: list[CompactionOutcome]) -> dict[int, datetime]:
    """The over-window sessions an operator marked (`sessions mark S --over-window-ok`). Only
    an over-window outcome can be excused, so a batch with none asks nothing; a database that
    stopped answering (a node killed mid-batch) excuses nothing: each such session stays a
    failure, never the end of the report."""
    over = [o.session_id for o in outcomes if o.status == CompactionStatus.OVER_WINDOW]
    if not over:
        return {}
    try:
        with read_connection(compactor.engine) as conn:
            return acknowledged_at(conn, over)
    except SQLAlchemyError:
        return {}


def _all(compactor: Compactor, run: dict, options: dict, output: OutputFormat) -> None:
    with Progress(None, "finding the sessions over their threshold", bar=False):
        batch = compactor.batch(
            force=run["force"],
            older_than=options["older_than"],
            limit=options["limit"],
            dry_run=run["dry_run"],
            rescan=options["rescan"],
        )
    try:
        with Progress(len(batch.candidates), "compacting") as progress:
            # Sessions in a server's queue (a llama.cpp server's few slots) are the batch's
            # phase: "waiting for the server (3 queued)"; the other steps are each session's.
            compactor.on_phase = lambda _sid, _what: progress.phase(_queued(compactor.summarizer))
            outcomes = compactor.run_batch(
                batch, workers=options["workers"], on_done=lambda _o: progress.update(1), **run
            )
    except BatchInterrupted as stop:
        # What finished is written: its table (each rejection's reason) as a normal run
        # prints it, then the interrupt line.
        ended = sorted(batch.leased + stop.done + stop.finished, key=lambda o: o.session_id)
        _print_table(ended, _acknowledged(compactor, ended), output)
        raise
    acknowledged = _acknowledged(compactor, outcomes)
    _print_table(outcomes, acknowledged, output)
    if options["show_summary"] and not output.json:
        _print_summaries(outcomes)
    if not output.machine:
        width = table_width(None)
        done = sum(o.status == CompactionStatus.COMPACTED for o in outcomes)
        click.echo(f"{len(outcomes)} session(s) over threshold, {done} compacted", err=True)
        for o in outcomes:
            for note in o.notes if o.status == CompactionStatus.LEASE_HELD else ():
                echo_text(wrap(f"session {o.session_id}: {note}", width, "  "), err=True)
            if o.fell_back is not None:
                line = f"session {o.session_id}: fell back to {o.summarizer}: {o.fell_back}"
                echo_text(wrap(line, width, "  "), err=True)
            if excused(o, acknowledged):
                echo_text(f"session {o.session_id}: over its window, acknowledged", err=True)
        for note in _window_notes(outcomes):
            echo_text(wrap(f"note: {note}", width, "  "), err=True)
    failed = batch_failures(outcomes, acknowledged)
    if failed:
        over = sum(o.status == CompactionStatus.OVER_WINDOW for o in failed)
        what = (
            "stay over their window"
            if over == len(failed)
            else "failed"
            if not over
            else "failed or stay over their window"
        )
        more = f"; and {len(failed) - 3} more" if len(failed) > 3 else ""
        stuck = [o.session_id for o in failed if o.status == CompactionStatus.OVER_WINDOW]
        raise PartialFailure(
            f"{len(failed)} of {len(outcomes)} session(s) {what}: "
            + "; ".join(o.message() for o in failed[:3])
            + more
            + (f"; {way_out(stuck)}" if stuck else "")
        )


def _queued(summarizer) -> str | None:
    queued = getattr(summarizer, "queued", 0)
    return f"waiting for the server ({queued} queued)" if queued else None


def _window_notes(outcomes: list[CompactionOutcome]) -> list[str]:
    """What the run learned of the summary model's window, said once (the first session to
    meet it carries the note; the checkpoints' details carry the figures)."""
    said: list[str] = []
    for o in outcomes:
        for note in o.notes:
            if "summary model's window" in note and note not in said:
                said.append(note)
    return said


def _print_table(
    outcomes: list[CompactionOutcome], acknowledged: dict[int, datetime], output: OutputFormat
) -> None:
    if output.machine:
        print_rows(
            [{**o.as_dict(), "over_window_ok": excused(o, acknowledged)} for o in outcomes],
            output,
        )
    else:
        click.echo(render_outcomes(outcomes, output, table_width(None)))


def render_outcomes(outcomes: list[CompactionOutcome], output: OutputFormat, width: int | None):
    """The batch as a table fitted to ``width``: the columns a person reads (those with a
    value in some row), the error shortened first, then the gate's figures left out."""
    rows = [
        {
            "session_id": o.session_id,
            "status": o.status.value,
            "tokens_before": o.tokens_before,
            "after": o.tokens_after
            if o.tokens_after is not None
            else (f"{o.tokens_kept}+" if o.tokens_kept is not None else None),
            "summary_tokens": o.summary_tokens,
            "score": _percent(o.score) if o.score is not None else None,
            "fabrications": o.fabrications,
            "carry_over": _percent(o.carry_over) if o.carry_over is not None else None,
            "first_kept_message_id": o.first_kept_message_id,
            "seconds": f"{o.seconds:.1f}",
            "error": o.error,
        }
        for o in outcomes
    ]
    keys = [
        k for k in _LABELS if k in ("session_id", "status") or any(r[k] is not None for r in rows)
    ]
    table = [{_LABELS[k]: r[k] for k in keys} for r in rows]
    text = fit_table(
        table,
        output,
        [_LABELS[k] for k in keys],
        width,
        ["error"],
        optional=["cut at", "carry-over", "fabrications", "secs"],
        wrapped=["error"],
        readable=24,
    )
    if any(isinstance(r["after"], str) for r in rows):
        text += "\n(after: N+ is the kept tokens plus the new summary's; --json: every field)"
    return text


def _print_outcome(o) -> None:
    lines = [f"session {o.session_id}: {o.status}"]
    if o.tokens_before is not None:
        lines.append(f"  tokens before:      {o.tokens_before} (threshold {o.threshold})")
    if o.first_kept_message_id is not None:
        lines.append(
            f"  cut:                first kept message {o.first_kept_message_id}"
            f"{' (inside a turn)' if o.split_turn else ' (turn boundary)'}"
        )
        lines.append(f"  summarized / kept:  {o.summarised_messages} / {o.kept_messages} messages")
    if o.tokens_after is not None:
        lines.append(f"  tokens after:       {o.tokens_after}")
    elif o.tokens_kept is not None:
        lines.append(f"  tokens after:       {o.tokens_kept} + the new summary")
    if o.quality is not None:
        lines.append(
            f"  quality:            {describe(o.quality)}, carry-over {_percent(o.carry_over)}"
        )
        if o.quality["missed"]:
            lines.append(f"  missed probes:      {', '.join(o.quality['missed'])}")
    if o.compaction_id:
        lines.append(
            f"  checkpoint:         {o.compaction_id} by {o.summarizer}"
            f"{' (' + o.model + ')' if o.model else ''}"
        )
    for note in o.notes:
        lines.append(f"  note: {note}")
    width = table_width(None)
    echo_text("\n".join(wrap(line, width, " " * 22) for line in lines))


def _print_summaries(outcomes) -> None:
    """Each summary a dry run produced, under a line naming its session, its lines wrapped
    to the terminal (a list item's continuation indented under its text)."""
    width = table_width(None)
    for o in outcomes:
        if o.summary is not None:
            text = "\n".join(wrap(line, width) for line in o.summary.splitlines())
            echo_text(f"\n--- session {o.session_id}: summary ---\n{text}")


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
