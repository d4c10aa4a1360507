"""The cron batch: which sessions to compact, found over their effective contexts only.

Sums of stored counts come from the indexes (``store.candidates``). They leave out the system
prompt and an imported summary without a count, whose tokens are at most their UTF-8 bytes: a
session is measured exactly, in memory, only when it has uncounted messages or when its
threshold lies between the sum and the sum plus that bound. Finding writes nothing: filling in
counts is the explicit :func:`count_missing` step a real run takes first.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

from sqlalchemy.engine import Engine

from ..db import read_connection
from ..store import Store
from ..store.candidates import EffectiveContext, effective_contexts, quiet_messages
from ..records import SUMMARY_PREFIX
from ..tokens import REPLY_PRIMING_TOKENS, TOKENS_PER_MESSAGE
from .outcome import LEASE_HELD, CompactionOutcome
from .plan import CompactionSettings
from .suffix import read_suffix

# The message framing of what the sums leave out (the system prompt's and the summary's role
# and separators, the summary's preface), over and above their texts' bytes.
UNSUMMED_FRAMING_TOKENS = 2 * (TOKENS_PER_MESSAGE + 8) + len(SUMMARY_PREFIX.encode())


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


def find_batch(engine: Engine, settings: CompactionSettings, encoding: str | None, *,
               force: bool = False, older_than: int | None = None,
               limit: int | None = None) -> Batch:
    """The sessions over threshold (all with ``force``), largest overrun first. Reads only."""
    store = Store(engine)
    with read_connection(engine) as conn:
        rows = effective_contexts(conn)
        if older_than is not None and rows:
            # Before anything is measured: a session still being written is not a candidate.
            quiet = quiet_messages(conn, [r.last_message_id for r in rows], older_than)
            rows = [r for r in rows if r.last_message_id in quiet]
    found = [(r, estimate) for r, estimate in _measured(store, rows, settings, encoding, force)
             if force or estimate > settings.threshold(r.model)]
    found.sort(key=lambda f: (-(f[1] - settings.threshold(f[0].model)), f[0].session_id))
    batch = Batch()
    for r, estimate in found:
        if r.lease_owner is not None:
            batch.leased.append(_leased(r.session_id, r.lease_owner, r.lease_expires_at, estimate,
                                        settings.threshold(r.model)))
        else:
            batch.candidates.append(Candidate(r.session_id, r.model, estimate, r.uncounted,
                                              r.last_message_id))
    batch.candidates = batch.candidates[:limit]
    return batch


def _measured(store: Store, rows: list[EffectiveContext], settings: CompactionSettings,
              encoding: str | None, force: bool = False):
    """(row, context tokens) for each session: the indexes' sum, measured exactly (in memory)
    only where the sum cannot decide: uncounted messages, or a threshold between the sum and
    the sum plus what it leaves out (at most its bytes)."""
    for r in rows:
        threshold = settings.threshold(r.model)
        estimate = r.tokens + int(r.summary_tokens or 0) + REPLY_PRIMING_TOKENS
        at_most = estimate + r.unsummed_bytes + UNSUMMED_FRAMING_TOKENS
        if r.uncounted or (not force and estimate <= threshold < at_most):
            estimate = store.context_tokens(r.session_id, encoding)
        yield r, estimate


def over_threshold(engine: Engine, settings: CompactionSettings,
                   encoding: str | None = None) -> dict[int, tuple[int, int]]:
    """{session id: (context tokens, threshold)} of every session whose restored context is
    over its threshold, found as the cron batch finds them (set-based sums). Reads only."""
    with read_connection(engine) as conn:
        rows = effective_contexts(conn)
    return {r.session_id: (estimate, settings.threshold(r.model))
            for r, estimate in _measured(Store(engine), rows, settings, encoding)
            if estimate > settings.threshold(r.model)}


def count_missing(engine: Engine, encoding: str | None = None) -> int:
    """Store the token counts the runtime left out of the sessions' restored suffixes, so later
    runs sum the indexes alone; returns how many messages were counted."""
    with read_connection(engine) as conn:
        uncounted = [r for r in effective_contexts(conn) if r.uncounted]
    store = Store(engine)
    for r in uncounted:
        with engine.begin() as conn:
            read_suffix(store, conn, r.session_id, encoding, store_counts=True)
    return sum(r.uncounted for r in uncounted)


def run_concurrently(compact: Callable[[int], CompactionOutcome], session_ids: list[int],
                     workers: int, on_done: Callable[[CompactionOutcome], None] | None = None
                     ) -> list[CompactionOutcome]:
    """``compact`` each session on ``workers`` threads (the LLM calls overlap); outcomes by
    session id, ``on_done`` called as each finishes (a progress bar)."""
    outcomes: list[CompactionOutcome] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for future in as_completed([pool.submit(compact, sid) for sid in session_ids]):
            outcomes.append(future.result())
            if on_done:
                on_done(outcomes[-1])
    return sorted(outcomes, key=lambda o: o.session_id)


def _leased(session_id: int, owner: str, until: datetime | None, estimate: int,
            threshold: int) -> CompactionOutcome:
    out = CompactionOutcome(session_id, LEASE_HELD, tokens_before=estimate, threshold=threshold)
    out.notes.append(f"over threshold, skipped: leased by {owner} until {until} (a run that was "
                     "killed keeps its lease until then)")
    return out
