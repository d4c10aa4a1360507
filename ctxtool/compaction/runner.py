"""Running compaction against the store: one session, or a cron batch on many workers.

The rules are pure (``prepare``, ``check_summary``); the store does leases, candidate queries
and the checkpoint append; this module reads a session, runs those steps in order and reports
an outcome. Safe against other compactors on other hosts: a session is claimed with a lease
(``store.leases``) and the checkpoint append re-checks the lease, the parent and the summarized
span in one transaction (``store.checkpoints``). A crash leaves no checkpoint or a complete one.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from .. import quality
from ..db import describe_db_error, retry_transaction, scrub
from ..errors import DEBUG_ENV, CtxtoolError, InvalidSettings, internal_error
from ..records import Session
from ..store import Store, leases
from ..store.checkpoints import append_checkpoint
from ..store.counts import read_suffix
from ..tokens import get_encoding, token_lengths
from .batch import Batch, Candidate, count_missing, find_batch, run_concurrently
from .fold import fold, frame_tokens
from .outcome import CompactionOutcome
from .plan import CompactionSettings
from .prepare import (
    DEFAULT_MIN_CARRY_OVER,
    MIN_SUMMARY_BUDGET,
    Preparation,
    check_summary,
    checkpoint_values,
    prepare,
)
from .settings import lease_for_plan
from .status import CompactionStatus
from .summarizers import Summarizer
from .summarizers.base import DEFAULT_MAX_SUMMARY_TOKENS, Summary, SummaryRequest

COMPACTED, EVALUATED, FAILED = (
    CompactionStatus.COMPACTED,
    CompactionStatus.EVALUATED,
    CompactionStatus.FAILED,
)
OVER_WINDOW, PLANNED, REJECTED = (
    CompactionStatus.OVER_WINDOW,
    CompactionStatus.PLANNED,
    CompactionStatus.REJECTED,
)
SPAN_CHANGED = CompactionStatus.SPAN_CHANGED

SPAN_ATTEMPTS = 3  # a message committed late inside the summarized span: plan again


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Compactor:
    """Compacts sessions of one store with one summarizer.

    Example::

        compactor = Compactor(engine, ExtractiveSummarizer(), CompactionSettings())
        outcome = compactor.compact_session(42)
        outcomes = compactor.compact_all(workers=8, older_than=600)
    """

    def __init__(
        self,
        engine: Engine,
        summarizer: Summarizer,
        settings: CompactionSettings,
        *,
        owner: str | None = None,
        lease_seconds: int | None = None,
        encoding: str | None = None,
        max_summary_tokens: int | None = None,
        min_carry_over: float | None = DEFAULT_MIN_CARRY_OVER,
    ):
        self.engine = engine
        self.summarizer = summarizer
        self.settings = settings
        self.owner = owner or default_owner()
        self.lease_seconds = lease_seconds
        self.encoding = encoding
        budget = (
            max_summary_tokens
            or getattr(summarizer, "max_summary_tokens", None)
            or DEFAULT_MAX_SUMMARY_TOKENS
        )
        if summarizer.input_tokens:
            # A summary must fit the next compaction's request beside a chunk of conversation,
            # or that one would have to clip it.
            budget = min(budget, max(MIN_SUMMARY_BUDGET, summarizer.input_tokens // 3))
        self.max_summary_tokens = budget
        self.min_carry_over = min_carry_over or None
        self.store = Store(engine)

    # -- one session -----------------------------------------------------------------------------

    def compact_session(
        self,
        session_id: int,
        *,
        force: bool = False,
        dry_run: bool = False,
        summarize: bool = False,
    ) -> CompactionOutcome:
        """Compact one session if it is over its threshold (or ``force``). ``dry_run`` writes
        nothing (``summarize``: run the summarizer and judge its summary all the same). Never
        raises for per-session failures: they are reported in the outcome."""
        started = time.perf_counter()
        out = CompactionOutcome(
            session_id, FAILED, summarizer=self.summarizer.name, model=self.summarizer.model
        )
        try:
            for _ in range(SPAN_ATTEMPTS):
                out.status = FAILED
                self._compact(session_id, force, dry_run, summarize, out)
                if out.status != SPAN_CHANGED:
                    break
            if out.status == SPAN_CHANGED:
                out.status, out.error = FAILED, "messages kept arriving inside the summarized span"
        except InvalidSettings:
            raise  # the settings' fault, not this session's: a usage error, as --all says it
        except CtxtoolError as exc:  # SummarizerError included
            out.status, out.error = FAILED, str(exc)
        except SQLAlchemyError as exc:
            out.status, out.error = FAILED, describe_db_error(exc)
        except Exception as exc:  # noqa: BLE001 - one session's bug must not end a cron batch
            if os.environ.get(DEBUG_ENV):
                raise
            out.status = FAILED
            out.error = scrub(
                scrub(internal_error(exc), self.engine.url),
                getattr(self.summarizer, "base_url", None),
            )
        out.seconds = time.perf_counter() - started
        return out

    def _compact(
        self, session_id: int, force: bool, dry_run: bool, summarize: bool, out: CompactionOutcome
    ) -> None:
        # One connection for the whole session; each phase ends its transaction, so nothing
        # (in particular SQLite's write lock) is held while the summarizer works.
        # Each transaction below runs again after a lost race or a passing outage (a
        # certification conflict at COMMIT on Galera, a node restarting): db.retry_transaction.
        with retry_transaction(self.engine, self.engine.connect) as conn:
            session, prep = retry_transaction(
                conn, lambda: self._prepare(conn, session_id, force, write_counts=not dry_run)
            )
            _record_plan(out, prep)
            if prep.status or (dry_run and not summarize):
                out.status = prep.status or PLANNED
                return
            if dry_run:
                values = summarize_span(
                    self.summarizer, prep, session.title, out, self.min_carry_over
                )
                out.status = _fits(out, prep, EVALUATED) if values else REJECTED
                return
            lease = lease_for_plan(self.summarizer, prep.plan.summarized_tokens, self.lease_seconds)
            refused = retry_transaction(
                conn, lambda: leases.claim(conn, session_id, self.owner, lease, prep.parent_id)
            )
            if refused is not None:
                out.status = refused
                held = refused == CompactionStatus.LEASE_HELD
                holder = leases.holder(conn, session_id) if held else None
                if holder is not None:
                    out.notes.append(f"leased by {holder.owner} until {holder.expires_at}")
                return
            try:
                values = summarize_span(
                    self.summarizer, prep, session.title, out, self.min_carry_over
                )
                if values is not None:
                    retry_transaction(conn, lambda: append(conn, self.owner, prep, values, out))
                else:
                    out.status = REJECTED
            finally:
                if out.compaction_id is None:
                    retry_transaction(conn, lambda: leases.release(conn, session_id, self.owner))

    def _prepare(
        self, conn: Connection, session_id: int, force: bool, write_counts: bool
    ) -> tuple[Session, Preparation]:
        """Read the restored suffix, count what the runtime left uncounted (stored unless this
        is a dry run, which writes nothing), and prepare the plan."""
        session, ctx, encoding = read_suffix(
            self.store, conn, session_id, self.encoding, store_counts=write_counts
        )
        if write_counts:
            conn.commit()
        else:
            conn.rollback()  # a dry run ends its read transaction having written nothing
        prep = prepare(
            ctx,
            session.model,
            self.settings,
            encoding,
            max_summary_tokens=self.max_summary_tokens,
            force=force,
        )
        return session, prep

    # -- the batch (ctxtool.compaction.batch) ---------------------------------------------------

    def find_candidates(
        self, *, force: bool = False, older_than: int | None = None
    ) -> list[Candidate]:
        """Sessions over threshold (free of live leases), largest overrun first. Reads only."""
        return self.find_batch(force=force, older_than=older_than).candidates

    def find_batch(
        self, *, force: bool = False, older_than: int | None = None, limit: int | None = None
    ) -> Batch:
        """The batch as it stands (see :func:`ctxtool.compaction.batch.find_batch`); reads only."""
        return find_batch(
            self.engine,
            self.settings,
            self.encoding,
            force=force,
            older_than=older_than,
            limit=limit,
        )

    def batch(
        self,
        *,
        force: bool = False,
        older_than: int | None = None,
        limit: int | None = None,
        dry_run: bool = False,
    ) -> Batch:
        """What ``compact --all`` works on: missing counts stored first (not on a dry run,
        which writes nothing), then :meth:`find_batch`."""
        if not dry_run:
            count_missing(self.engine, self.encoding)
        return self.find_batch(force=force, older_than=older_than, limit=limit)

    def run_batch(
        self,
        batch: Batch,
        *,
        workers: int = 1,
        force: bool = False,
        dry_run: bool = False,
        summarize: bool = False,
        on_done: Callable[[CompactionOutcome], None] | None = None,
    ) -> list[CompactionOutcome]:
        """Compact the batch's candidates with ``workers`` concurrent calls; outcomes (leased
        sessions included) by session id."""
        outcomes = list(batch.leased) + self.compact_sessions(
            [c.session_id for c in batch.candidates],
            workers=workers,
            force=force,
            dry_run=dry_run,
            summarize=summarize,
            on_done=on_done,
        )
        return sorted(outcomes, key=lambda o: o.session_id)

    def compact_all(
        self,
        *,
        workers: int = 1,
        limit: int | None = None,
        older_than: int | None = None,
        force: bool = False,
        dry_run: bool = False,
        summarize: bool = False,
        on_done: Callable[[CompactionOutcome], None] | None = None,
    ) -> list[CompactionOutcome]:
        """Find sessions over threshold and compact them with ``workers`` concurrent calls."""
        batch = self.batch(force=force, older_than=older_than, limit=limit, dry_run=dry_run)
        return self.run_batch(
            batch,
            workers=workers,
            force=force,
            dry_run=dry_run,
            summarize=summarize,
            on_done=on_done,
        )

    def compact_sessions(
        self,
        session_ids: list[int],
        *,
        workers: int = 1,
        force: bool = False,
        dry_run: bool = False,
        summarize: bool = False,
        on_done: Callable[[CompactionOutcome], None] | None = None,
    ) -> list[CompactionOutcome]:
        """Compact the given sessions with ``workers`` concurrent calls; outcomes by session id."""
        return run_concurrently(
            lambda sid: self.compact_session(
                sid, force=force, dry_run=dry_run, summarize=summarize
            ),
            session_ids,
            workers,
            on_done,
        )


def summarize_span(
    summarizer: Summarizer,
    prep: Preparation,
    title: str | None,
    out: CompactionOutcome,
    min_carry_over: float | None = DEFAULT_MIN_CARRY_OVER,
) -> dict | None:
    """Ask the summarizer (folding a span larger than its input bound) and judge the answer:
    the checkpoint row to write, or None with the refusal left in ``out.error``. An answer
    that dropped items of the previous summary is sent back once, with those items, to a
    summarizer that can revise it."""
    started = time.perf_counter()
    request = summary_request(prep, title, min_carry_over)
    summary = fold(
        summarizer.summarize,
        request,
        summarizer.input_tokens,
        estimated_tokens=prep.plan.summarized_tokens,
    )
    values, refusal = judge_summary(prep, summary, min_carry_over=min_carry_over)
    if (
        refusal is not None
        and _dropped_items(prep, summary.text, min_carry_over)
        and getattr(summarizer, "revises", False)
    ):
        missing = quality.missing_items(prep.previous.summary, summary.text)
        revision = replace(
            request,
            draft=summary.text,
            messages=(),
            transcript="",
            missing=_fitting(missing, request, summarizer.input_tokens),
        )
        revised = summarizer.summarize(revision)
        summary = replace(
            revised,
            requests=summary.requests + 1,
            notes=summary.notes
            + (
                f"revised once: the first answer dropped {len(missing)} items of the previous summary",
            ),
        )
        values, refusal = judge_summary(prep, summary, min_carry_over=min_carry_over)
    out.summarizer_seconds = time.perf_counter() - started
    out.summarizer, out.model = summary.summarizer, summary.model
    out.summarizer_requests = summary.requests
    out.notes.extend(summary.notes)
    out.error = refusal
    measured = values["details"]["quality"]
    out.summary_tokens = values["summary_tokens"]
    out.retention, out.carry_over = measured["retention"], measured["carry_over"]
    if out.error is not None:
        return None
    out.tokens_after = values["tokens_after"]
    return values


def summary_request(
    prep: Preparation, title: str | None = None, min_carry_over: float | None = None
) -> SummaryRequest:
    """What the summarizer is asked for the prepared span."""
    assert prep.plan is not None
    return SummaryRequest(
        prep.previous.summary if prep.previous else None,
        prep.summarized,
        prep.files,
        prep.plan.split_turn,
        max_tokens=prep.summary_budget,
        title=title,
        encoding=prep.encoding,
        min_carry_over=min_carry_over,
    )


def judge_summary(
    prep: Preparation, summary: Summary, *, min_carry_over: float | None = None
) -> tuple[dict, str | None]:
    """(the checkpoint row with its quality figures, why the summary is refused or None)."""
    tokens, refusal = check_summary(prep, summary.text, min_carry_over=min_carry_over)
    return checkpoint_values(prep, summary.text, tokens, summary.summarizer, summary.model), refusal


def _dropped_items(prep: Preparation, text: str, min_carry_over: float | None) -> bool:
    """Whether ``text`` holds less of the previous summary's items than required."""
    if min_carry_over is None or prep.previous is None:
        return False
    kept = quality.carry_over(prep.previous.summary, text)
    return kept is not None and kept < min_carry_over


def _fitting(
    items: list[str], request: SummaryRequest, input_tokens: int | None
) -> tuple[str, ...]:
    """As many of ``items`` as fit one revision request beside the draft (oldest first: the
    rest are still judged by the carry-over check)."""
    if not input_tokens:
        return tuple(items)
    room = input_tokens - frame_tokens(request) - 2 * request.max_tokens - 200
    lengths = token_lengths(items, get_encoding(request.encoding))
    kept, used = [], 0
    for item, n in zip(items, lengths):
        if used + n + 1 > room:
            break
        kept.append(item)
        used += n + 1
    return tuple(kept)


def append(
    conn: Connection, owner: str, prep: Preparation, values: dict, out: CompactionOutcome
) -> None:
    """Write the checkpoint (the append proves the summarized span and releases the lease)."""
    result = append_checkpoint(
        conn, owner=owner, parent_id=prep.parent_id, values=values, span=prep.span()
    )
    if result.compaction_id is not None:
        out.compaction_id = result.compaction_id
        out.status = _fits(out, prep, COMPACTED)
    else:
        out.status = result.status  # LOST_RACE, or SPAN_CHANGED: compact_session plans again


def _record_plan(out: CompactionOutcome, prep: Preparation) -> None:
    out.tokens_before, out.threshold, out.error = prep.tokens_before, prep.threshold, prep.error
    plan = prep.plan
    if plan is None:
        return
    out.summarised_messages, out.kept_messages = len(plan.summarized_ids), len(plan.kept_ids)
    out.first_kept_message_id, out.split_turn = plan.first_kept_message_id, plan.split_turn
    out.notes = list(plan.notes)
    out.tokens_kept = prep.tokens_kept


def _fits(out: CompactionOutcome, prep: Preparation, status: CompactionStatus) -> CompactionStatus:
    """``status``, or OVER_WINDOW when the context stays over its threshold after all."""
    if prep.plan is not None and prep.plan.over_window:
        out.error = prep.error
        return OVER_WINDOW
    if out.tokens_after is not None and out.tokens_after > prep.threshold:
        out.error = (
            f"restored context of {out.tokens_after} tokens stays over its threshold of "
            f"{prep.threshold} tokens"
        )
        return OVER_WINDOW
    return status
