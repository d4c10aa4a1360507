"""The cron batch: which sessions to compact, found over their effective contexts only.

Sums of stored counts come from the messages since each cut, read without their text
(``store.candidates``). They leave out the system prompt and the summary, whose tokens are at
most their UTF-8 bytes: a session is measured exactly, in memory, only when some of its counts
cannot be trusted (none, made with another encoding, a result resent as a user message) or when
its threshold lies between the sum and the sum plus that bound. Finding writes nothing: filling
in counts is the explicit :func:`count_missing` step a real run takes first.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from ..core.compaction_outcome import CompactionOutcome
from ..core.errors import CtxtoolError
from ..core.plan import CompactionSettings
from ..core.status import CompactionStatus
from ..db import dialect_of, read_connection, retry_transaction
from ..interrupts import INTERRUPTED
from ..store import Store, context_sums
from ..store.candidates import (
    EffectiveContext,
    effective_contexts,
    quiet_messages,
    read_effective_contexts,
)
from ..store.counts import read_suffix
from ..store.leases import LeaseState, newest_checkpoint_id


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
    # The newest checkpoint's id when the batch was found (0: none): a session with a newer
    # one was compacted since, by a sibling run (:class:`Claims`).
    checkpoints_through: int = 0


def find_batch(
    store: Store,
    settings: CompactionSettings,
    encoding: str | None,
    *,
    force: bool = False,
    older_than: int | None = None,
    limit: int | None = None,
    contexts: tuple[list[EffectiveContext], int] | None = None,
    rescan: bool = False,
    proofs: dict[int, tuple[int, int]] | None = None,
) -> Batch:
    """The sessions over threshold (all with ``force``), largest overrun first. Reads only;
    ``contexts``: the effective contexts and the newest checkpoint id as just read, in one
    transaction (by :func:`counted_batch`); ``rescan``: sum every suffix from its messages;
    ``proofs``: collects the pairings the server proved (``candidates.exact_context_tokens``)."""
    with read_connection(store.engine) as conn:
        if contexts is None:
            rows = effective_contexts(conn, encoding, rescan=rescan)
            # Read after the contexts: a checkpoint appended between the two reads costs a
            # visit, it never hides a session.
            checkpoints_through = newest_checkpoint_id(conn)
        else:
            rows, checkpoints_through = contexts
        if older_than is not None and rows:
            # Before anything is measured: a session still being written is not a candidate.
            quiet = quiet_messages(conn, [r.last_message_id for r in rows], older_than)
            rows = [r for r in rows if r.last_message_id in quiet]
    found = [
        (r, estimate)
        for r, estimate in store.measure_contexts(rows, settings, encoding, force, proofs)
        if force or estimate > settings.threshold(r.model)
    ]
    found.sort(key=lambda f: (-(f[1] - settings.threshold(f[0].model)), f[0].session_id))
    batch = Batch(checkpoints_through=checkpoints_through)
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


def counted_batch(
    store: Store,
    settings: CompactionSettings,
    encoding: str | None,
    retry: Callable = retry_transaction,
    *,
    rescan: bool = False,
    **find: Any,
) -> Batch:
    """:func:`count_missing` then :func:`find_batch` (``find``: its options), reading the
    sessions' sums once, not twice, when nothing needed counting (a store the runtime counts,
    every run after the first): the batch is found from the counting step's read. The sums it
    read from messages are kept for the next run (``store.context_sums``); ``rescan``: read
    every suffix from its messages, whatever was kept."""
    with read_connection(store.engine) as conn:
        read = read_effective_contexts(conn, encoding, rescan=rescan)
        # In the same read: a session a sibling compacts after it is refused at its claim,
        # not read and planned for nothing.
        checkpoints_through = newest_checkpoint_id(conn)
    # Kept for the next run before anything is counted: a count marks the sums it changes.
    store.remember_sums(read.to_keep)
    if count_missing(store, encoding, retry, contexts=read.contexts):
        # The counts just stored: read again (the sessions counted are summed on their
        # ranges, the rest as just kept), and keep what is now whole.
        with read_connection(store.engine) as conn:
            read = read_effective_contexts(conn, encoding)
            checkpoints_through = newest_checkpoint_id(conn)
        store.remember_sums(read.to_keep)
    proofs: dict[int, tuple[int, int]] = {}
    batch = find_batch(
        store,
        settings,
        encoding,
        contexts=(read.contexts, checkpoints_through),
        proofs=proofs,
        **find,
    )
    # The sessions between their bounds are measured on every run: what the server proved of
    # their pairing is kept, and the next run asks only about what came since.
    # Only on rows nobody wrote since this run read (and kept) them.
    store.remember_pairing(proofs, context_sums.versions_after(read.versions, read.to_keep))
    return batch


def count_missing(
    store: Store,
    encoding: str | None = None,
    retry: Callable = retry_transaction,
    contexts: list[EffectiveContext] | None = None,
) -> int:
    """Store the token counts the runtime left out of the sessions' restored suffixes (or that
    were made with another encoding than the one each session needs), so later runs sum the
    stored counts alone; returns how many messages were counted. ``contexts``: the effective
    contexts as just read."""
    if contexts is None:
        with read_connection(store.engine) as conn:
            contexts = effective_contexts(conn, encoding)
    uncounted = [r for r in contexts if r.uncounted]

    def count_session(session_id: int) -> None:
        with store.engine.begin() as conn:
            read_suffix(conn, session_id, encoding, store_counts=True)

    for r in uncounted:
        try:
            retry(store.engine, partial(count_session, r.session_id))
        except SQLAlchemyError as exc:
            # Still contended (a sibling on another node counts the same messages): this
            # session is counted when it is compacted. Anything else ends the run.
            if dialect_of(store.engine).transient(exc) is None:
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
    releases its lease), then the interrupt goes on; Ctrl-C as :class:`BatchInterrupted`,
    which says what was done."""
    outcomes: list[CompactionOutcome] = []
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    futures = [pool.submit(compact, sid) for sid in session_ids]
    try:
        for future in as_completed(futures):
            outcomes.append(future.result())
            if on_done:
                on_done(outcomes[-1])
    except BaseException as exc:
        pool.shutdown(wait=True, cancel_futures=True)
        if not isinstance(exc, KeyboardInterrupt):
            raise
        seen = {id(o) for o in outcomes}
        finished = [
            f.result()
            for f in futures
            if not f.cancelled() and f.exception() is None and id(f.result()) not in seen
        ]
        raise BatchInterrupted(outcomes, finished, sum(f.cancelled() for f in futures)) from None
    pool.shutdown(wait=True)
    return sorted(outcomes, key=lambda o: o.session_id)


# How many sessions past its claim a worker reads the leases of: enough to see past what the
# siblings took meanwhile (a few processes' workers' worth), a primary-key read.
LOOKAHEAD = 32


class Claims:
    """A batch's candidates, claimed by a process's workers as each comes free (``take``:
    :func:`ctxtool.store.leases.take_many`, the sessions to take and those ahead to read the
    leases of). Several processes find the same batch in the same order. Each claim reads who
    holds the sessions ahead, and later claims pass over those a sibling holds or has compacted
    since the batch was found (each reported, never tried or read). Walking the order in step,
    the processes would still race for the same next session at every claim; a process that
    loses one goes on from a random place of what it has not visited yet instead, so the
    processes soon work apart (the first keeps the order, largest overrun first). Workers claim
    in parallel: only picking is under a lock. ``describe`` says a claim's failure (a server
    gone past the outage wait) as its sessions' error."""

    def __init__(
        self,
        session_ids: list[int],
        take: Callable[[list[int], list[int]], dict[int, LeaseState]],
        owner: str,
        describe: Callable[[Exception], str],
        lookahead: int = LOOKAHEAD,
    ):
        self._order = session_ids
        self._visited = bytearray(len(session_ids))
        self._left = len(session_ids)
        self._at = 0  # where the next claim starts looking
        self._seen: dict[int, LeaseState] = {}  # as the latest claim read them
        self._take, self._owner, self._describe = take, owner, describe
        self._lookahead = lookahead
        self._lock = threading.Lock()
        self._random = random.Random(owner)
        self.tried: list[int] = []  # every session a claim tried to take, won or not

    @property
    def total(self) -> int:
        return len(self._order)

    @property
    def remaining(self) -> int:
        """Sessions neither claimed nor passed over yet."""
        return self._left

    def claim(self, want: int = 1) -> tuple[list[int], list[CompactionOutcome]]:
        """Up to ``want`` sessions whose leases this process now holds, and the outcomes of the
        sessions passed over on the way (fewer taken only when the batch ran out)."""
        won: list[int] = []
        passed: list[CompactionOutcome] = []
        while len(won) < want:
            with self._lock:
                chosen = self._choose(want - len(won), passed)
                ahead = [self._order[i] for i in self._unvisited(self._lookahead)]
                self.tried += chosen
            if not chosen:
                break
            try:
                states = self._take(chosen, ahead)
            except Exception as exc:  # noqa: BLE001 - these sessions' failure, not the batch's
                error = self._describe(exc)
                passed += [
                    CompactionOutcome(s, CompactionStatus.FAILED, error=error) for s in chosen
                ]
                break
            lost = False
            for sid in chosen:
                state = states.get(sid)
                if state is not None and state.holder and state.holder.owner == self._owner:
                    won.append(sid)
                elif state is None:
                    passed.append(
                        CompactionOutcome(
                            sid,
                            CompactionStatus.FAILED,
                            error=f"session {sid} is no longer in the store",
                        )
                    )
                else:
                    lost = True
                    passed.append(
                        _passed_over(sid, state, self._owner)
                        or CompactionOutcome(
                            sid,
                            CompactionStatus.LEASE_HELD,
                            notes=["a sibling run held it at this run's claim"],
                        )
                    )
            with self._lock:
                for sid in ahead:  # one not read is free (or gone): nothing to pass over
                    if sid in states:
                        self._seen[sid] = states[sid]
                    else:
                        self._seen.pop(sid, None)
                if lost and self._left:
                    self._at = self._random.randrange(len(self._order))
        return won, passed

    def _choose(self, want: int, passed: list[CompactionOutcome]) -> list[int]:
        """The next ``want`` sessions not known to be a sibling's (those go to ``passed``)."""
        chosen: list[int] = []
        while len(chosen) < want and self._left:
            (i,) = self._unvisited(1)
            self._visited[i] = 1
            self._left -= 1
            self._at = i + 1
            sid = self._order[i]
            skipped = _passed_over(sid, self._seen.pop(sid, None), self._owner)
            if skipped is None:
                chosen.append(sid)
            else:
                passed.append(skipped)
        return chosen

    def _unvisited(self, n: int) -> list[int]:
        """The next ``n`` positions not visited yet from where claims look, wrapping around."""
        found: list[int] = []
        size = len(self._order)
        for step in range(size):
            if len(found) == n:
                break
            i = (self._at + step) % size
            if not self._visited[i]:
                found.append(i)
        return found


def _passed_over(session_id: int, seen: LeaseState | None, owner: str) -> CompactionOutcome | None:
    """The outcome of a session a claim passes over as read (None: try to take it)."""
    if seen is None:
        return None
    if seen.checkpointed:
        return CompactionOutcome(
            session_id,
            CompactionStatus.LOST_RACE,
            notes=["compacted by a sibling run since this batch was found"],
        )
    if seen.holder is not None and seen.holder.owner != owner:
        return CompactionOutcome(
            session_id,
            CompactionStatus.LEASE_HELD,
            notes=[f"leased by {seen.holder.owner} until {seen.holder.expires_at}"],
        )
    return None


def run_claimed(
    compact: Callable[[int, float], CompactionOutcome],
    claims: Claims,
    workers: int,
    on_done: Callable[[CompactionOutcome], None] | None = None,
    release: Callable[[list[int]], None] = lambda _ids: None,
) -> list[CompactionOutcome]:
    """:func:`run_concurrently` for a batch other processes may be running too: each worker
    claims its next session (``claims``) when it comes free, so a process holds no more leases
    than it has workers and siblings take the rest. ``compact`` is given the session and when
    its lease was taken (``time.monotonic()``, read before the claim: the lease lasts at least
    that long from then). Interrupted, the workers not started claim nothing; a lease a worker
    took for a session it did not start is given back (``release``)."""
    outcomes: list[CompactionOutcome] = []
    pool = ThreadPoolExecutor(max_workers=max(1, workers))

    def next_session() -> tuple[list[CompactionOutcome], CompactionOutcome | None]:
        claimed_at = time.monotonic()
        won, passed = claims.claim(1)
        return passed, compact(won[0], claimed_at) if won else None

    def report(outcome: CompactionOutcome) -> None:
        outcomes.append(outcome)
        if on_done:
            on_done(outcome)

    running: set[Future] = set()
    try:
        while True:
            while len(running) < workers and claims.remaining:
                running.add(pool.submit(next_session))
            if not running:
                break
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                passed, outcome = future.result()
                for o in passed + ([outcome] if outcome else []):
                    report(o)
    except BaseException as exc:
        pool.shutdown(wait=True, cancel_futures=True)
        finished = [
            o
            for f in running
            if not f.cancelled() and f.exception() is None
            for o in f.result()[0] + ([f.result()[1]] if f.result()[1] else [])
        ]
        ended = {o.session_id for o in outcomes + finished}
        if held := [s for s in claims.tried if s not in ended]:
            release(held)
        if not isinstance(exc, KeyboardInterrupt):
            raise
        not_started = claims.total - len(outcomes) - len(finished)
        raise BatchInterrupted(outcomes, finished, not_started) from None
    pool.shutdown(wait=True)
    return sorted(outcomes, key=lambda o: o.session_id)


class WorkerConnections:
    """One connection for each worker thread of a batch, lent to its claims and its sessions
    in turn (:meth:`lend`): a connection checked out of the pool is pinged first and one given
    back pays a ROLLBACK round trip, twice a session when each claim and each session checked
    out its own. A connection is lent again only while it is known clean: no transaction open
    (each step of a session ends its own) and not invalidated. Else it is closed as a
    connection of its own would be (its transaction rolled back, the pool's reset on return)
    and the worker's next loan checks out a fresh one. :meth:`close` ends them all, once the
    workers are done. ``connect`` checks a connection out (retried through an outage)."""

    def __init__(self, connect: Callable[[], Connection]):
        self._connect = connect
        self._local = threading.local()
        self._open: list[Connection] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def lend(self) -> Iterator[Connection]:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            with self._lock:
                self._open.append(conn)
            self._local.conn = conn
        clean = False
        try:
            yield conn
            clean = not conn.in_transaction() and not conn.invalidated
        finally:
            if not clean:
                self._local.conn = None
                with self._lock:
                    self._open.remove(conn)
                conn.close()

    def close(self) -> None:
        """Give every worker's connection back to the pool (called when the workers are done)."""
        with self._lock:
            conns, self._open = self._open, []
        for conn in conns:
            conn.close()


def _running(n: int) -> str:
    return "the one running was" if n == 1 else f"the {n} running were"


class BatchInterrupted(CtxtoolError):
    """Ctrl-C during a batch, saying what it came to: the sessions done before it, those that
    were running and were let finish, and how many were never started."""

    exit_code = INTERRUPTED

    def __init__(
        self, done: list[CompactionOutcome], finished: list[CompactionOutcome], not_started: int
    ):
        self.done, self.finished, self.not_started = done, finished, not_started
        running = (
            f"; {_running(len(finished))} allowed to finish: {_by_status(finished)}"
            if finished
            else ""
        )
        super().__init__(
            f"interrupted: {_by_status(done) or 'no session done'}, {not_started} not started"
            f"{running}; no lease is left behind"
        )


def _by_status(outcomes: list[CompactionOutcome]) -> str:
    """``2 session(s) compacted, 1 failed``: how many ended in each status, most first."""
    counts = Counter(o.status.value for o in outcomes).most_common()
    return ", ".join(
        f"{n} session(s) {status}" if i == 0 else f"{n} {status}"
        for i, (status, n) in enumerate(counts)
    )


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
