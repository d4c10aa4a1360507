"""The cron batch: which sessions to compact, found over their effective contexts only.

Sums of stored counts come from the messages since each cut, read without their text
(``store.candidates``). They leave out the system prompt and the summary, whose tokens are at
most their UTF-8 bytes: a session is measured exactly, in memory, only when some of its counts
cannot be trusted (none, made with another encoding, a result resent as a user message) or when
its threshold lies between the sum and the sum plus that bound. Finding writes nothing: filling
in counts is the explicit :func:`count_missing` step a real run takes first.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from ..db import dialect_of, read_connection, retry_transaction
from ..store import Store
from ..store.candidates import effective_contexts, measured, quiet_messages
from ..store.counts import read_suffix
from .outcome import CompactionOutcome
from .plan import CompactionSettings
from .status import CompactionStatus


@dataclass(frozen=True)
class Candidate:
    """A session found by the batch query, with its effective-context figures."""

    session_id: int
    model: str | None
    estimated_tokens: int
    uncounted: int
    last_message_id: int


@dataclass
class Batch:
    """Sessions a batch will compact (largest overrun first), and the ones over threshold that
    a live lease holds (reported, never skipped silently)."""

    candidates: list[Candidate] = field(default_factory=list)
    leased: list[CompactionOutcome] = field(default_factory=list)


def find_batch(
    engine: Engine,
    settings: CompactionSettings,
    encoding: str | None,
    *,
    force: bool = False,
    older_than: int | None = None,
    limit: int | None = None,
) -> Batch:
    """The sessions over threshold (all with ``force``), largest overrun first. Reads only."""
    store = Store(engine)
    with read_connection(engine) as conn:
        rows = effective_contexts(conn, encoding)
        if older_than is not None and rows:
            # Before anything is measured: a session still being written is not a candidate.
            quiet = quiet_messages(conn, [r.last_message_id for r in rows], older_than)
            rows = [r for r in rows if r.last_message_id in quiet]
    found = [
        (r, estimate)
        for r, estimate in measured(store, rows, settings, encoding, force)
        if force or estimate > settings.threshold(r.model)
    ]
    found.sort(key=lambda f: (-(f[1] - settings.threshold(f[0].model)), f[0].session_id))
    batch = Batch()
    for r, estimate in found:
        if r.lease_owner is not None:
            batch.leased.append(
                _leased(
                    r.session_id,
                    r.lease_owner,
                    r.lease_expires_at,
                    estimate,
                    settings.threshold(r.model),
                )
            )
        else:
            batch.candidates.append(
                Candidate(r.session_id, r.model, estimate, r.uncounted, r.last_message_id)
            )
    batch.candidates = batch.candidates[:limit]
    return batch


def count_missing(engine: Engine, encoding: str | None = None) -> int:
    """Store the token counts the runtime left out of the sessions' restored suffixes (or that
    were made with another encoding than the one each session needs), so later runs sum the
    stored counts alone; returns how many messages were counted."""
    with read_connection(engine) as conn:
        uncounted = [r for r in effective_contexts(conn, encoding) if r.uncounted]
    store = Store(engine)

    def count_session(session_id: int) -> None:
        with engine.begin() as conn:
            read_suffix(store, conn, session_id, encoding, store_counts=True)

    for r in uncounted:
        try:
            retry_transaction(engine, partial(count_session, r.session_id))
        except SQLAlchemyError as exc:
            # Still contended (a sibling on another node counts the same messages): this
            # session is counted when it is compacted. Anything else ends the run.
            if dialect_of(engine).transient(exc) is None:
                raise
    return sum(r.uncounted for r in uncounted)


def run_concurrently(
    compact: Callable[[int], CompactionOutcome],
    session_ids: list[int],
    workers: int,
    on_done: Callable[[CompactionOutcome], None] | None = None,
) -> list[CompactionOutcome]:
    """``compact`` each session on ``workers`` threads (the LLM calls overlap); outcomes by
    session id, ``on_done`` called as each finishes (a progress bar).

    Interrupted (Ctrl-C, or ``on_done`` raising), the sessions not started yet are not started:
    leaving the pool's ``with`` ran every queued one first, LLM calls and all, before the
    interrupt got through. Those already running finish (each a transaction of its own that
    releases its lease), then the interrupt goes on."""
    outcomes: list[CompactionOutcome] = []
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        for future in as_completed([pool.submit(compact, sid) for sid in session_ids]):
            outcomes.append(future.result())
            if on_done:
                on_done(outcomes[-1])
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return sorted(outcomes, key=lambda o: o.session_id)


def _leased(
    session_id: int, owner: str, until: datetime | None, estimate: int, threshold: int
) -> CompactionOutcome:
    out = CompactionOutcome(
        session_id, CompactionStatus.LEASE_HELD, tokens_before=estimate, threshold=threshold
    )
    out.notes.append(
        f"over threshold, skipped: leased by {owner} until {until} (a run that was "
        "killed keeps its lease until then)"
    )
    return out
