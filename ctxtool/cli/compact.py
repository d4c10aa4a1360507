"""`ctxtool compact`: offline compaction of one session or, from cron, of every session over
its threshold."""

from __future__ import annotations

import click

from ..compaction import DEFAULT_KEEP_RECENT_TOKENS, DEFAULT_RESERVE_TOKENS, CompactionSettings
from ..compactor import COMPACTED, DEFAULT_LEASE_SECONDS, Compactor, parse_duration
from ..errors import CtxtoolError, PartialFailure
from ..output import OutputFormat, Progress, dumps, output_options, print_rows
from ..summarizers import (DEFAULT_MAX_SUMMARY_TOKENS, DEFAULT_RETRIES, DEFAULT_TIMEOUT_S,
                           make_summarizer)
from . import main, pass_app

_COLUMNS = ["session_id", "status", "tokens_before", "tokens_kept", "tokens_after",
            "summarised_messages", "kept_messages", "first_kept_message_id", "split_turn",
            "summarizer", "model", "seconds", "error"]


@main.command()
@click.argument("session_id", type=int, required=False)
@click.option("--all", "all_sessions", is_flag=True, help="Every session over its threshold (the cron job).")
@click.option("--limit", type=click.IntRange(1),
              help="With --all: at most N sessions, largest overrun first.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 256),
              help="Concurrent compactions (LLM calls) with --all.")
@click.option("--older-than", metavar="DURATION",
              help="With --all: only sessions whose newest message is older (e.g. 10m, 2h).")
@click.option("--dry-run", is_flag=True, help="Print the plan; call no LLM, write nothing.")
@click.option("--force", is_flag=True, help="Compact even below the threshold.")
@click.option("--summarizer", "summarizer_kind", default="auto", show_default=True,
              type=click.Choice(["auto", "openai", "extractive"]),
              help="auto = openai when an endpoint is configured, else extractive.")
@click.option("--model", help="Summary model [env CTXTOOL_SUMMARY_MODEL; default gpt-4o-mini].")
@click.option("--base-url", envvar="OPENAI_BASE_URL",
              help="OpenAI-compatible endpoint [env OPENAI_BASE_URL]. "
              "The key comes from OPENAI_API_KEY.")
@click.option("--timeout", default=DEFAULT_TIMEOUT_S, show_default=True, type=float,
              help="Seconds per LLM request.")
@click.option("--retries", default=DEFAULT_RETRIES, show_default=True, type=click.IntRange(0, 20),
              help="Retries (with backoff) on 429, 5xx, timeouts.")
@click.option("--max-summary-tokens", default=DEFAULT_MAX_SUMMARY_TOKENS, show_default=True,
              type=click.IntRange(64))
@click.option("--context-window", type=click.IntRange(1024),
              help="Override the model's context window.")
@click.option("--reserve-tokens", default=DEFAULT_RESERVE_TOKENS, show_default=True, type=click.IntRange(0))
@click.option("--keep-recent-tokens", default=DEFAULT_KEEP_RECENT_TOKENS, show_default=True,
              type=click.IntRange(0))
@click.option("--encoding", help="Count tokens with this encoding instead of the session model's.")
@click.option("--lease-seconds", default=DEFAULT_LEASE_SECONDS, show_default=True, type=click.IntRange(10),
              help="How long a claimed session stays reserved for this run.")
@output_options
@pass_app
def compact(app, session_id, all_sessions, limit, workers, older_than, dry_run, force,
            summarizer_kind, model, base_url, timeout, retries, max_summary_tokens,
            context_window, reserve_tokens, keep_recent_tokens, encoding, lease_seconds,
            output: OutputFormat):
    """Compact a session's context: summarise old messages, keep recent ones verbatim.

    Only adds an agent_compaction row; history is never changed. Exit code 0 when everything
    went well, 4 when some sessions failed (--all), 1 on error.

    \b
    Examples:
      ctxtool compact 42 --dry-run
      ctxtool compact --all --workers 8 --older-than 10m
    """
    if (session_id is None) == (not all_sessions):
        raise click.UsageError("give a SESSION_ID or --all")
    if limit is not None and not all_sessions:
        raise click.UsageError("--limit goes with --all")
    engine = app.store_engine(pool_size=workers + 2, max_overflow=workers)
    summarizer = make_summarizer(summarizer_kind, model, base_url, None, timeout, retries,
                                 max_summary_tokens)
    lease = max(lease_seconds, int(timeout * (retries + 1)) + 60)
    settings = CompactionSettings(context_window, reserve_tokens, keep_recent_tokens)
    compactor = Compactor(engine, summarizer, settings, lease_seconds=lease, encoding=encoding)
    if not output.machine:
        click.echo(f"summarizer: {summarizer.describe()}", err=True)

    if session_id is not None:
        outcome = compactor.compact_session(session_id, force=force, dry_run=dry_run)
        if output.machine:
            click.echo(dumps(outcome.as_dict()))
        else:
            _print_outcome(outcome)
        if not outcome.ok:
            raise CtxtoolError(f"session {session_id}: {outcome.status}: {outcome.error}")
        return

    candidates = compactor.find_candidates(force=force, older_than=parse_duration(older_than))[:limit]
    with Progress(len(candidates), "compacting") as progress:
        outcomes = compactor.compact_sessions([c.session_id for c in candidates], workers, force,
                                              dry_run, on_done=lambda _o: progress.update(1))
    print_rows([o.as_dict() for o in outcomes], output, headers=None if output.machine else _COLUMNS)
    if not output.machine:
        done = sum(o.status == COMPACTED for o in outcomes)
        click.echo(f"{len(outcomes)} session(s) over threshold, {done} compacted", err=True)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise PartialFailure(f"{len(failed)} of {len(outcomes)} session(s) failed: "
                             + "; ".join(f"{o.session_id}: {o.error}" for o in failed[:3]))


def _print_outcome(o) -> None:
    lines = [f"session {o.session_id}: {o.status}"]
    if o.tokens_before is not None:
        lines.append(f"  tokens before:      {o.tokens_before} (threshold {o.threshold})")
    if o.first_kept_message_id is not None:
        lines.append(f"  cut:                first kept message {o.first_kept_message_id}"
                     f"{' (inside a turn)' if o.split_turn else ' (turn boundary)'}")
        lines.append(f"  summarised / kept:  {o.summarised_messages} / {o.kept_messages} messages")
    if o.tokens_after is not None:
        lines.append(f"  tokens after:       {o.tokens_after}")
    elif o.tokens_kept is not None:
        lines.append(f"  tokens after:       {o.tokens_kept} + the new summary")
    if o.compaction_id:
        lines.append(f"  checkpoint:         {o.compaction_id} by {o.summarizer}"
                     f"{' (' + o.model + ')' if o.model else ''}")
    for note in o.notes:
        lines.append(f"  note: {note}")
    if o.error:
        lines.append(f"  error: {o.error}")
    click.echo("\n".join(lines))
