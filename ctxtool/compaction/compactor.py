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
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from sqlalchemy.engine import Connection, Engine

from ..core.compaction_outcome import CompactionOutcome
from ..core.durations import lease_covers, lease_for_plan
from ..core.errors import InvalidSettings
from ..core.evaluator import DEFAULT_MIN_QUALITY, carry_over, meets_floor
from ..core.plan import CompactionSettings, NeedsEarlier, with_earlier
from ..core.prepare import (
    DEFAULT_MIN_CARRY_OVER,
    MIN_SUMMARY_BUDGET,
    Preparation,
    carry_over_floor,
    check_quality,
    check_summary,
    checkpoint_values,
    evaluate_summary,
    plan_of_tail,
    prepare,
    quality_figures,
    settle_plan,
    start_preparation,
)
from ..core.records import Session
from ..core.span_facts import shared_signals
from ..core.status import CompactionStatus
from ..core.tokens import get_encoding, token_lengths
from ..db import DEFAULT_POLICY, retry_transaction
from ..failures import describe_failure
from ..store import Store, leases
from ..store.candidates import summed_context_tokens
from ..store.checkpoints import append_checkpoint
from ..store.counts import read_suffix, read_tails, span_token_totals
from ..store.reads import session_head
from .batch import (
    Batch,
    Claims,
    WorkerConnections,
    counted_batch,
    find_batch,
    run_claimed,
    run_concurrently,
)
from .fold import fold, frame_tokens
from .summarizers import Summarizer
from .summarizers.base import (
    DEFAULT_MAX_SUMMARY_TOKENS,
    SummarizerError,
    Summary,
    SummaryRequest,
    reporting,
)
from .summarizers.prompt import unanswered_question

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
        min_quality: float = DEFAULT_MIN_QUALITY,
        on_phase: Callable[[int, str], None] | None = None,
        outage_seconds: float | None = None,
        fallback: Summarizer | None = None,
    ):
        self.engine = engine
        # How long a server out of reach (a node restarting) is waited for before a session
        # fails: db.retry_transaction's backoff, for every transaction of this run.
        policy = (
            DEFAULT_POLICY
            if outage_seconds is None
            else replace(DEFAULT_POLICY, outage_s=outage_seconds)
        )
        self._retry = partial(retry_transaction, policy=policy)
        # Told (session id, what now) as a session moves on: a progress line off a terminal.
        self.on_phase = on_phase
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
        source = "--max-summary-tokens: raise it"
        if summarizer.input_tokens:
            # A summary must fit the next compaction's request beside a chunk of conversation,
            # or that one would have to clip it.
            third = max(MIN_SUMMARY_BUDGET, summarizer.input_tokens // 3)
            if third < budget:
                budget, source = (
                    third,
                    (
                        f"a third of the summarizer's input bound of {summarizer.input_tokens} "
                        "tokens, so the summary fits the next compaction's request: raise "
                        "--summary-input-tokens (within the model's window)"
                    ),
                )
        self.max_summary_tokens = budget
        self.gate = Gate(min_quality, min_carry_over or None, budget_source=source)
        # Writes the extractive summary when the LLM fails or its summary is refused.
        self.fallback = fallback
        self.store = Store(engine)
        # Renews the leases this compactor holds while it works on them (store.leases).
        self.heartbeat = leases.Heartbeat(engine, self.owner)

    # -- one session -----------------------------------------------------------------------------

    # Planning, the summarizer and the gate read each message's kind and calls once.
    @shared_signals()
    def compact_session(
        self,
        session_id: int,
        *,
        force: bool = False,
        dry_run: bool = False,
        summarize: bool = False,
        leased_at: float | None = None,
        connection: Callable[[], AbstractContextManager[Connection]] | None = None,
    ) -> CompactionOutcome:
        """Compact one session if it is over its threshold (or ``force``). ``dry_run`` writes
        nothing (``summarize``: run the summarizer and judge its summary all the same).
        ``leased_at``: the caller (a batch's claim) took the session's lease for this compactor
        at this ``time.monotonic()`` (read before its take), for as long as one summarizer
        request may need (:meth:`_lease_before_plan`); this compactor gives it back when it
        writes nothing. ``connection``: where the session's connection comes from (a batch
        worker's own, :class:`ctxtool.compaction.batch.WorkerConnections`); else one is checked
        out for it. Never raises for per-session failures: they are reported in the
        outcome, with the figures of the steps that went through."""
        started = time.perf_counter()
        outcome = CompactionOutcome(
            session_id,
            CompactionStatus.FAILED,
            summarizer=self.summarizer.name,
            model=self.summarizer.model,
        )
        try:
            # One connection for the whole session; each step ends its transaction, so nothing
            # (in particular SQLite's write lock) is held while the summarizer works. Each
            # transaction runs again after a lost race or a passing outage (a certification
            # conflict at COMMIT on Galera, a node restarting): db.retry_transaction.
            with (connection or self._connect)() as conn:
                # Since when, and for how long, the lease taken before the read is held.
                taken_at = time.monotonic() if leased_at is None else leased_at
                held = self._lease_before_plan()
                taken = not dry_run and (leased_at is not None or self._take(conn, session_id))
                if not dry_run and not taken:
                    holder = self._retry(conn, lambda: leases.holder(conn, session_id))
                    if holder is not None and holder.owner != self.owner:
                        # A sibling run (another process found the same batch) has it: not
                        # read and planned for nothing.
                        return replace(
                            outcome,
                            status=CompactionStatus.LEASE_HELD,
                            notes=[f"leased by {holder.owner} until {holder.expires_at}"],
                            seconds=time.perf_counter() - started,
                        )
                try:
                    phase = partial(self._phase, session_id)
                    for _ in range(SPAN_ATTEMPTS):
                        phase("reading and counting its context")
                        session, prep = self._retry(
                            conn,
                            lambda: self._prepare(
                                conn, session_id, force, not dry_run, texts=summarize or not dry_run
                            ),
                        )
                        outcome = _record_plan(outcome, prep)
                        if prep.status is not None or (dry_run and not summarize):
                            outcome = replace(
                                outcome, status=prep.status or CompactionStatus.PLANNED
                            )
                            break
                        if dry_run:
                            outcome, row = summarized(
                                self.summarizer,
                                outcome,
                                prep,
                                session.title,
                                replace(self.gate, keep_text=True),
                                phase,
                                self.fallback,
                            )
                            if row is not None:
                                outcome = _check_fit(outcome, prep, CompactionStatus.EVALUATED)
                            break
                        needed = lease_for_plan(
                            self.summarizer, prep.summarized_tokens, self.lease_seconds
                        )
                        if taken and lease_covers(held, time.monotonic() - taken_at, needed):
                            # The lease taken before the read covers the plan: the append
                            # re-checks it and the parent, so taking it again proves nothing.
                            refused = None
                        else:
                            taken_at, held = time.monotonic(), needed  # for a next attempt
                            refused = self._claim(conn, outcome, prep, needed)
                        if refused is not None:
                            outcome = refused
                            break
                        try:
                            outcome, row = summarized(
                                self.summarizer,
                                outcome,
                                prep,
                                session.title,
                                self.gate,
                                phase,
                                self.fallback,
                            )
                            if row is not None:
                                phase("writing the checkpoint")
                                outcome = self._write(conn, outcome, prep, row)
                        finally:
                            # Taken before the read, the lease is given back once, below.
                            if not taken and outcome.compaction_id is None:
                                self._give_back(conn, session_id)
                        if outcome.status is not CompactionStatus.SPAN_CHANGED:
                            break
                    else:
                        outcome = replace(
                            outcome,
                            status=CompactionStatus.FAILED,
                            error="messages kept arriving inside the summarized span",
                        )
                finally:
                    if taken and outcome.compaction_id is None:  # else the append released it
                        self._give_back(conn, session_id)
        except InvalidSettings:
            self.heartbeat.drop([session_id])
            raise  # the settings' fault, not this session's: a usage error, as --all says it
        except Exception as exc:  # noqa: BLE001 - one session's failure must not end a batch
            outcome = replace(outcome, status=CompactionStatus.FAILED, error=self._described(exc))
        self.heartbeat.drop([session_id])
        return replace(outcome, seconds=time.perf_counter() - started)

    def _give_back(self, conn: Connection, session_id: int) -> None:
        """Give the session's lease back. A failure (or Ctrl-C) inside a read leaves its
        transaction open, so that ends first: the release begins its own. While such a failure
        is on its way out, a failing release does not hide it (the lease then lapses by itself)."""
        leaving = sys.exc_info()[1] is not None
        try:
            if conn.in_transaction():
                conn.rollback()
            self._retry(conn, lambda: leases.release(conn, session_id, self.owner))
        except Exception:
            if not leaving:
                raise

    def _connect(self) -> Connection:
        """A connection of the engine's pool, checked out again through a passing outage."""
        return self._retry(self.engine, self.engine.connect)

    def _described(self, exc: Exception) -> str:
        """A session's failure as its one line, without the store's or the LLM's credentials."""
        secrets = (self.engine.url, getattr(self.summarizer, "base_url", None))
        return describe_failure(exc, secrets=secrets).message

    def _lease_before_plan(self) -> int:
        """How long a lease taken before the read lasts: as long as one summarizer request may
        need. A plan that needs longer takes it again for its own length (:func:`lease_covers`)."""
        return lease_for_plan(self.summarizer, 0, self.lease_seconds)

    def _take(self, conn: Connection, session_id: int) -> bool:
        """Take the session's lease before reading it (:meth:`_lease_before_plan`)."""
        seconds = leases.written_seconds(self._lease_before_plan())
        taken = self._retry(conn, lambda: leases.take(conn, session_id, self.owner, seconds))
        if taken:
            self.heartbeat.hold([session_id])
        return taken

    def _phase(self, session_id: int, what: str) -> None:
        if self.on_phase is not None:
            self.on_phase(session_id, what)

    def _prepare(
        self, conn: Connection, session_id: int, force: bool, write_counts: bool, texts: bool
    ) -> tuple[Session, Preparation]:
        """Read the restored suffix, count what the runtime left uncounted (stored unless this
        is a dry run, which writes nothing), and prepare the plan. ``texts``: every message's
        text, for a summarizer; without, a dry run reads the suffix from its end only as far
        as its plan needs (:meth:`_prepare_from_tail`)."""
        if not texts and not write_counts:
            try:
                return self._prepare_from_tail(conn, session_id, force)
            finally:
                conn.rollback()  # a dry run ends its read transaction having written nothing
        session, ctx, encoding = read_suffix(
            conn, session_id, self.encoding, store_counts=write_counts, texts=texts
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

    def _prepare_from_tail(
        self, conn: Connection, session_id: int, force: bool
    ) -> tuple[Session, Preparation]:
        """A dry run's preparation, the same as :func:`prepare` makes over the whole suffix:
        the context measured from the suffix's sums (its rows read only where the sums cannot
        tell), then the suffix read from its end, in ever longer tails, until one settles the
        cut; the summarized messages before that tail are summed by the server."""
        # The head is read once: the sums and the tails start from it.
        head = session_head(conn, session_id, self.encoding)
        session, previous, encoding = head.session, head.latest, head.encoding
        summed = summed_context_tokens(conn, session_id, self.encoding, head)
        prep = start_preparation(
            session_id,
            summed.tokens,
            previous,
            session.model,
            self.settings,
            encoding,
            max_summary_tokens=self.max_summary_tokens,
            force=force,
        )
        if prep.status is not None:
            return session, prep
        for tail in read_tails(conn, session_id, self.encoding, head):
            plan = plan_of_tail(
                prep, session.system_prompt, tail.messages, self.settings, whole=tail.whole
            )
            if isinstance(plan, NeedsEarlier):
                continue
            if plan is not None and not tail.whole:
                earlier = summed.before(tail.messages) or span_token_totals(
                    conn,
                    session_id,
                    previous.first_kept_message_id if previous else None,
                    tail.messages[0].id,
                    encoding,
                )
                plan = with_earlier(plan, *earlier)
            return session, settle_plan(prep, plan, session.system_prompt, tail.messages)
        raise AssertionError("the whole suffix always settles its plan")

    def _claim(
        self, conn: Connection, outcome: CompactionOutcome, prep: Preparation, seconds: int
    ) -> CompactionOutcome | None:
        """Take the session's lease for as long as the plan needs (``seconds``) and check its
        parent is still the newest checkpoint; None when taken, else the outcome that says why
        not (and who holds it)."""
        written = leases.written_seconds(seconds)
        refused = self._retry(
            conn,
            lambda: leases.claim(conn, prep.session_id, self.owner, written, prep.parent_id),
        )
        if refused is None:
            self.heartbeat.hold([prep.session_id])
            return None
        held = refused is CompactionStatus.LEASE_HELD
        holder = leases.holder(conn, prep.session_id) if held else None
        notes = [f"leased by {holder.owner} until {holder.expires_at}"] if holder else []
        return replace(outcome, status=refused, notes=outcome.notes + notes)

    def _write(
        self, conn: Connection, outcome: CompactionOutcome, prep: Preparation, row: dict[str, Any]
    ) -> CompactionOutcome:
        """Append the checkpoint (the append proves the span and releases the lease)."""
        result = self._retry(
            conn,
            lambda: append_checkpoint(
                conn, owner=self.owner, parent_id=prep.parent_id, values=row, span=prep.span()
            ),
        )
        if result.compaction_id is None:  # LOST_RACE, or SPAN_CHANGED: compact_session plans again
            return replace(outcome, status=result.status)
        return _check_fit(replace(outcome, compaction_id=result.compaction_id), prep, result.status)

    # -- the batch (ctxtool.compaction.batch) ---------------------------------------------------

    def batch(
        self,
        *,
        force: bool = False,
        older_than: int | None = None,
        limit: int | None = None,
        dry_run: bool = False,
        rescan: bool = False,
    ) -> Batch:
        """What ``compact --all`` works on: the sessions over threshold (all with ``force``),
        largest overrun first, and those over it that a live lease holds. A real run stores
        the missing counts first; a dry run writes nothing (see
        :func:`ctxtool.compaction.batch.find_batch`)."""
        find: dict[str, Any] = {
            "force": force,
            "older_than": older_than,
            "limit": limit,
            "rescan": rescan,
        }
        # Every step reads again what it decides on (and writes only counts and sums it can
        # write twice), so the whole finding runs again after a lost connection or a passing
        # outage, as a session's own transactions do.
        if dry_run:
            return self._retry(
                self.engine, lambda: find_batch(self.store, self.settings, self.encoding, **find)
            )
        return self._retry(
            self.engine,
            lambda: counted_batch(self.store, self.settings, self.encoding, self._retry, **find),
        )

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
        sessions included) by session id. A real run claims them as workers come free
        (:class:`ctxtool.compaction.batch.Claims`), passing over what sibling processes hold;
        a dry run takes no lease."""
        session_ids = [c.session_id for c in batch.candidates]
        if dry_run:
            ran = run_concurrently(
                lambda sid: self.compact_session(
                    sid, force=force, dry_run=True, summarize=summarize
                ),
                session_ids,
                workers,
                on_done,
            )
        else:
            # Each worker claims and compacts on a connection of its own, kept for the batch.
            connections = WorkerConnections(self._connect)
            claims = Claims(
                session_ids,
                partial(self._take_many, batch.checkpoints_through, connections.lend),
                self.owner,
                self._described,
            )
            try:
                ran = run_claimed(
                    lambda sid, at: self.compact_session(
                        sid, force=force, leased_at=at, connection=connections.lend
                    ),
                    claims,
                    workers,
                    on_done,
                    self._release_many,
                )
            finally:
                connections.close()
        return sorted(list(batch.leased) + ran, key=lambda o: o.session_id)

    def _take_many(
        self,
        checkpoints_through: int,
        connection: Callable[[], AbstractContextManager[Connection]],
        session_ids: list[int],
        ahead: list[int],
    ) -> dict[int, leases.LeaseState]:
        """A batch's claim (:func:`ctxtool.store.leases.take_many`) on the worker's
        ``connection``, each lease taken before the read (:meth:`_lease_before_plan`)."""
        seconds = leases.written_seconds(self._lease_before_plan())
        with connection() as conn:
            states = self._retry(
                conn,
                lambda: leases.take_many(
                    conn,
                    session_ids,
                    self.owner,
                    seconds,
                    checkpoints_through=checkpoints_through,
                    also=ahead,
                ),
            )
        self.heartbeat.hold(
            [
                sid
                for sid, state in states.items()
                if state.holder is not None and state.holder.owner == self.owner
            ]
        )
        return states

    def _release_many(self, session_ids: list[int]) -> None:
        self.heartbeat.drop(session_ids)
        with self._retry(self.engine, self.engine.connect) as conn:
            self._retry(conn, lambda: leases.release_many(conn, session_ids, self.owner))

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
        """:meth:`batch` then :meth:`run_batch`: find sessions over threshold and compact them
        with ``workers`` concurrent calls."""
        batch = self.batch(force=force, older_than=older_than, limit=limit, dry_run=dry_run)
        return self.run_batch(
            batch,
            workers=workers,
            force=force,
            dry_run=dry_run,
            summarize=summarize,
            on_done=on_done,
        )


@shared_signals()  # the summarizer (span_notes) and the gate read the span's signals once
def summarized(
    summarizer: Summarizer,
    outcome: CompactionOutcome,
    prep: Preparation,
    title: str | None,
    gate: Gate,
    phase: Callable[[str], None] = lambda _what: None,
    fallback: Summarizer | None = None,
) -> tuple[CompactionOutcome, dict[str, Any] | None]:
    """Ask the summarizer (folding a span larger than its input bound) and judge the
    answer: the outcome with the summary's figures, and the checkpoint row to write (None,
    the outcome REJECTED and why, when refused). An answer the gate refuses is sent back
    once, with the missed probes and the dropped items, to a summarizer that revises.
    ``fallback`` (``--fallback extractive``): when the summarizer fails or its summary is
    refused, the fallback's summary is judged and written instead, the failure in the
    checkpoint's details and the outcome's ``fell_back``."""
    started = time.perf_counter()
    fell_back, tried = None, None
    try:
        summary, judged = ask(summarizer, prep, title, gate, phase)
    except SummarizerError as exc:
        if fallback is None:
            raise
        fell_back = f"{summarizer.name} failed: {exc}"
    else:
        if judged.refusal is not None and fallback is not None:
            fell_back = f"{summarizer.name}'s summary was rejected: {judged.refusal}"
            tried = summary
    if fell_back is not None and fallback is not None:
        phase(f"summarizing ({fallback.name}, the fallback)")
        summary, judged = ask(fallback, prep, title, gate, phase)
        failure: dict[str, Any] = {"summarizer": summarizer.describe(), "reason": fell_back}
        if tried is not None:  # what the LLM's attempt came to (its requests, a revision)
            failure.update(requests=tried.requests, notes=list(tried.notes))
        window = getattr(summarizer, "window_details", lambda: None)()
        if window is not None:  # the window the LLM's requests were sized to
            failure["summary_window"] = window
        summary = replace(
            summary,
            notes=(tried.notes if tried else ())
            + summary.notes
            + (f"fell back to {fallback.name}: {fell_back}",),
            details={**(summary.details or {}), "fallback_from": failure},
        )
    if summary.details:
        judged.row["details"].update(summary.details)
    figures = judged.row["details"]["quality"]
    outcome = replace(
        outcome,
        summarizer=summary.summarizer,
        model=summary.model,
        summarizer_requests=summary.requests,
        summarizer_seconds=time.perf_counter() - started,
        notes=outcome.notes + list(summary.notes),
        error=judged.refusal,
        summary_tokens=judged.row["summary_tokens"],
        quality=figures,
        score=figures["score"],
        fabrications=len(figures["fabrications"]),
        carry_over=figures["carry_over"],
        summary=summary.text if gate.keep_text else None,
        fell_back=fell_back,
    )
    if judged.refusal is not None:
        return replace(outcome, status=CompactionStatus.REJECTED), None
    return replace(outcome, tokens_after=judged.row["tokens_after"]), judged.row


@dataclass(frozen=True)
class Gate:
    """What a summary must meet to be written (``--min-quality``, ``--min-carry-over``), and
    whether the outcome keeps the summary's text (a dry run's ``--show-summary``)."""

    min_quality: float = DEFAULT_MIN_QUALITY
    min_carry_over: float | None = DEFAULT_MIN_CARRY_OVER
    keep_text: bool = False
    # What set the summary's budget, for a message about an answer cut at it.
    budget_source: str = "--max-summary-tokens: raise it"


@dataclass(frozen=True)
class Judged:
    row: dict[str, Any]  # the checkpoint row, its quality figures in details
    refusal: str | None  # why the summary is not written, or None
    missing: tuple[str, ...]  # what a revision must put back: the dropped items
    questions: tuple[str, ...] = ()  # the missed probes, as the questions left unanswered


def ask(
    summarizer: Summarizer,
    prep: Preparation,
    title: str | None,
    gate: Gate,
    phase: Callable[[str], None] = lambda _what: None,
) -> tuple[Summary, Judged]:
    """(the summary, how it was judged): revised once when refused for what it left out.
    ``phase`` is told each step (waiting for the LLM, the gate)."""
    request = summary_request(prep, title, gate)
    waiting = f"waiting for {summarizer.model}" if summarizer.model else summarizer.name
    phase(f"summarizing ({waiting})")
    learn_window = getattr(summarizer, "learn_window", None)
    if learn_window is not None:
        learn_window()  # once a run: the server's window bounds the requests from the first
    with reporting(phase):
        summary = fold(
            summarizer.summarize,
            request,
            summarizer.input_tokens,
            estimated_tokens=prep.summarized_tokens,
            bound=lambda: summarizer.input_tokens,
            brief=lambda: bool(getattr(summarizer, "brief_prompt", False)),
        )
    phase("checking the summary (quality gate)")
    judged = judge_summary(prep, summary, gate)
    listed = judged.questions + judged.missing
    if judged.refusal is None or not listed or not getattr(summarizer, "revises", False):
        return summary, judged
    fitting = _fitting(list(listed), request, summarizer.input_tokens)
    revision = replace(
        request,
        draft=summary.text,
        messages=(),
        transcript="",
        questions=fitting[: len(judged.questions)],
        missing=fitting[len(judged.questions) :],
    )
    phase(f"revising the summary ({waiting})")
    with reporting(phase):
        revised = summarizer.summarize(revision)
    summary = replace(
        revised,
        requests=summary.requests + revised.requests,
        notes=summary.notes
        + revised.notes
        + (f"revised once: the first answer missed {len(listed)} items",),
    )
    phase("checking the revised summary (quality gate)")
    return summary, judge_summary(prep, summary, gate)


def summary_request(
    prep: Preparation, title: str | None = None, gate: Gate = Gate()
) -> SummaryRequest:
    """What the summarizer is asked for the prepared span."""
    assert prep.plan is not None
    return SummaryRequest(
        prep.previous_summary,
        prep.summarized,
        prep.files,
        prep.plan.split_turn,
        max_tokens=prep.summary_budget,
        title=title,
        encoding=prep.encoding,
        min_carry_over=carry_over_floor(prep, gate.min_carry_over),
        kept=prep.kept,
        max_tokens_source=gate.budget_source
        if prep.summary_budget < max(MIN_SUMMARY_BUDGET, prep.threshold // 4)
        else f"a quarter of the session's threshold of {prep.threshold} tokens "
        "(a larger --context-window or a smaller --reserve-tokens raises it)",
    )


def judge_summary(prep: Preparation, summary: Summary, gate: Gate = Gate()) -> Judged:
    """The checkpoint row with its quality figures, and why the summary is refused: the
    structural checks first (size, budget, carry-over), then the quality gate."""
    tokens, refusal = check_summary(prep, summary.text, min_carry_over=gate.min_carry_over)
    evaluation = evaluate_summary(prep, summary.text)
    figures = quality_figures(prep, evaluation, summary.text)
    row = checkpoint_values(prep, summary.text, tokens, summary.summarizer, summary.model, figures)
    if refusal is None:
        refusal = check_quality(evaluation, gate.min_quality)
    questions = tuple(
        unanswered_question(v.probe.question, v.probe.answer)
        for v in meets_floor(evaluation, gate.min_quality).missed
    )
    missing: tuple[str, ...] = ()
    floor = carry_over_floor(prep, gate.min_carry_over)
    if floor is not None and prep.previous is not None:
        dropped = carry_over(prep.previous.summary, summary.text, prep.overtaken)
        if dropped.share is not None and dropped.share < floor:
            missing = dropped.missing
    if refusal is None:
        return Judged(row, None, ())
    return Judged(row, refusal, missing, questions)


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


def _record_plan(outcome: CompactionOutcome, prep: Preparation) -> CompactionOutcome:
    """The outcome with the plan's figures (a new attempt's plan replaces an earlier one's)."""
    outcome = replace(
        outcome, tokens_before=prep.tokens_before, threshold=prep.threshold, error=prep.error
    )
    plan = prep.plan
    if plan is None:
        return outcome
    return replace(
        outcome,
        summarised_messages=plan.summarized_count,
        kept_messages=len(plan.kept_ids),
        first_kept_message_id=plan.first_kept_message_id,
        split_turn=plan.split_turn,
        notes=list(plan.notes),
        tokens_kept=prep.tokens_kept,
    )


# How the plan's notes begin that say it left the summary no room (core.plan).
_NO_ROOM = ("no room is left for messages", "no safe cut keeps under")


def _check_fit(
    outcome: CompactionOutcome, prep: Preparation, status: CompactionStatus
) -> CompactionOutcome:
    """The outcome with ``status``, or OVER_WINDOW (and why) when the restored context as
    measured stays over its threshold: a plan that left the summary too little room is no
    failure when the summary came out small enough."""
    over_window = prep.plan is not None and prep.plan.over_window
    measured = outcome.tokens_after
    if not (over_window if measured is None else measured > prep.threshold):
        if over_window:  # the plan's note of no room says what came of it
            fitted = (
                f"; the summary came out small enough: the restored context holds {measured} "
                f"of its {prep.threshold} tokens"
            )
            notes = [n + fitted if n.startswith(_NO_ROOM) else n for n in outcome.notes]
            return replace(outcome, status=status, notes=notes)
        return replace(outcome, status=status)
    return replace(
        outcome,
        status=CompactionStatus.OVER_WINDOW,
        error=prep.error
        if over_window
        else f"restored context of {outcome.tokens_after} tokens stays over its threshold "
        f"of {prep.threshold} tokens",
    )
