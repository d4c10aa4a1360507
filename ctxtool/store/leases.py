"""Session leases: which compactor works on a session, until when (server time).

A lease is taken by a conditional UPDATE whose affected-row count says who won, so it holds on
engines where ``FOR UPDATE SKIP LOCKED`` does not lock (TiDB); an expired lease is simply taken
over. Expiry is on the database server's clock, never a host's.

A lease as written is short (:data:`LEASE_BEAT_S`) and renewed while its holder works
(:class:`Heartbeat`, every :data:`BEAT_EVERY_S`): a holder killed, or cut off from the server
(a node down past the outage wait), stops renewing, and its sessions are free again within
:data:`LEASE_BEAT_S`, where a lease sized for the whole summary (LLM timeout x attempts + 60 s)
kept them about 11.5 minutes. How long the work may take is the compactor's own reckoning
(``compaction.settings``); the checkpoint's append refuses a holder whose lease was taken over.
A renewal waits a moment at most for a row another transaction holds (an import of that
session), so that one busy session never lets the holder's other leases lapse.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from ..core.status import CompactionStatus
from ..db import dialect_of
from ..db.dialects import CONFLICT, Dialect
from ..db.schema import agent_compaction as C
from ..db.schema import agent_session as S
from .reads import latest_compaction_id


@dataclass(frozen=True)
class Lease:
    owner: str
    expires_at: datetime | None


def claim(
    conn: Connection, session_id: int, owner: str, seconds: int, parent_id: int
) -> CompactionStatus | None:
    """Take the session's lease if it is free, expired or already ours, and check no checkpoint
    was appended since the caller planned. None when taken, else why not: LEASE_HELD (another
    compactor holds it) or LOST_RACE (a checkpoint was appended since the caller read it)."""
    with conn.begin() as tx:
        if not _take(conn, session_id, owner, seconds):
            tx.rollback()
            return CompactionStatus.LEASE_HELD
        if latest_compaction_id(conn, session_id) != parent_id:
            tx.rollback()  # another compactor finished between our read and our claim
            return CompactionStatus.LOST_RACE
    return None


def take(conn: Connection, session_id: int, owner: str, seconds: int) -> bool:
    """Take the session's lease before reading it, if it is free, expired or already ours: a
    batch run from several processes then reads and plans each session once, not once per
    process that reaches it (a sibling's session costs one UPDATE). The checkpoint's append
    re-checks the lease and the parent; :func:`claim` takes the lease again after the plan only
    when the plan needs it longer."""
    with conn.begin():
        return _take(conn, session_id, owner, seconds)


def _take(conn: Connection, session_id: int, owner: str, seconds: int) -> bool:
    taken = conn.execute(
        _take_statement(dialect_of(conn), seconds), {"sid": session_id, "owner": owner}
    ).rowcount
    return taken == 1


# The statements of every compaction's lease are built once (per dialect and lease length),
# their values bound at execution: building one per call cost more CPU than its round trip.


@functools.lru_cache(maxsize=64)
def _take_statement(dialect: Dialect, seconds: int) -> sa.Update:
    return (
        S.update()
        .where(S.c.session_id == sa.bindparam("sid"), _free_for(dialect))
        .values(_taken_by(dialect, seconds))
    )


class _IdList(sa.types.UserDefinedType):
    """A list of session ids written into a statement as one literal when it runs,
    ``(1, 2, 3)`` (``(NULL)``, which no row matches, for none): an expanding parameter has
    SQLAlchemy render each id through the dialect's literal machinery, a cost on every claim
    of the sessions ahead."""

    cache_ok = True

    def get_col_spec(self, **_kw) -> str:  # never a column's type; required of the class
        return "INTEGER"

    def literal_processor(self, dialect):
        def process(ids) -> str:
            return "(" + (", ".join(str(int(i)) for i in ids) or "NULL") + ")"

        return process


def _in_ids(column: sa.ColumnElement[int], name: str) -> sa.ColumnElement[bool]:
    """SQL: ``column IN (ids)``, the list bound as ``name`` and written into the statement as
    integers (:class:`_IdList`): a parameter for each id, which SQLAlchemy and PyMySQL handle
    one by one, made every claim's read dearer."""
    ids = sa.bindparam(name, literal_execute=True, type_=_IdList())
    return column.op("IN")(ids)


@functools.lru_cache(maxsize=64)
def _take_many_statement(dialect: Dialect, seconds: int) -> sa.Update:
    return (
        S.update()
        .where(
            _in_ids(S.c.session_id, "ids"),
            _free_for(dialect),
            ~_checkpointed_since(sa.bindparam("through")),
        )
        .values(_taken_by(dialect, seconds))
    )


@functools.lru_cache(maxsize=8)
def _lease_states_statement(dialect: Dialect) -> sa.Select:
    live = S.c.lease_expires_at >= dialect.server_now()
    since = _checkpointed_since(sa.bindparam("through"))
    return sa.select(
        S.c.session_id,
        S.c.lease_owner,
        S.c.lease_expires_at,
        sa.case((live, 1), else_=0).label("live"),
        sa.case((since, 1), else_=0).label("since"),
    ).where(
        sa.or_(
            _in_ids(S.c.session_id, "ids"),
            # Of the sessions ahead, only those a live lease holds or a checkpoint passed: a
            # free one says what its absence says (try it), and each row read costs the claim.
            sa.and_(
                _in_ids(S.c.session_id, "also"),
                sa.or_(sa.and_(S.c.lease_owner.is_not(None), live), since),
            ),
        )
    )


def _free_for(dialect: Dialect) -> sa.ColumnElement[bool]:
    """SQL: the session's lease is free, expired or the bound ``owner``'s. An owner with no
    expiry (written by hand, or by a runtime) bounds nothing: free, as holder() and the batch
    read it."""
    return sa.or_(
        S.c.lease_owner.is_(None),
        S.c.lease_expires_at.is_(None),
        S.c.lease_expires_at < dialect.server_now(),
        S.c.lease_owner == sa.bindparam("owner"),
    )


def _taken_by(dialect: Dialect, seconds: int) -> dict:
    return {
        "lease_owner": sa.bindparam("owner"),
        "lease_expires_at": dialect.server_now_plus(seconds),
        **_KEEP_UPDATED_AT,
    }


@dataclass(frozen=True)
class LeaseState:
    """A session's lease as one read saw it: its live holder (None when free or expired), and
    whether a checkpoint newer than a batch's last one was appended since (by a sibling)."""

    holder: Lease | None
    checkpointed: bool


def take_many(
    conn: Connection,
    session_ids: Sequence[int],
    owner: str,
    seconds: int,
    *,
    checkpoints_through: int,
    also: Sequence[int] = (),
) -> dict[int, LeaseState]:
    """Take the leases of several sessions of a batch in one conditional UPDATE: those free,
    expired or ours with no checkpoint above ``checkpoints_through`` (the batch's newest when it
    was found: a sibling has compacted the others since). Then, in the same transaction, read
    the leases of those sessions and of ``also`` (the ones the batch reaches next): the caller
    won those whose holder is ``owner``, and passes over the rest without taking them one at a
    time. The checkpoint test saves a visit, never decides one: an id from another node that
    came out lower is read and planned as before (the append checks the parent). A session of
    ``also`` that is free and not checkpointed since is left out (as one no longer stored is):
    there is nothing to pass over, and reading the 32 rows ahead of every claim was a tenth of
    a batch's CPU when nothing was held.
    """
    states: dict[int, LeaseState] = {}
    dialect = dialect_of(conn)
    with conn.begin():
        if session_ids:
            conn.execute(
                _take_many_statement(dialect, seconds),
                {"ids": list(session_ids), "owner": owner, "through": checkpoints_through},
            )
        for row in conn.execute(
            _lease_states_statement(dialect),
            {"ids": list(session_ids), "also": list(also), "through": checkpoints_through},
        ):
            live = row.lease_owner is not None and bool(row.live)
            states[row.session_id] = LeaseState(
                Lease(row.lease_owner, row.lease_expires_at) if live else None, bool(row.since)
            )
    return states


def newest_checkpoint_id(conn: Connection) -> int:
    """The store's newest checkpoint id (0: none), what :func:`take_many` compares against."""
    return int(conn.execute(sa.select(sa.func.max(C.c.id))).scalar() or 0)


def _checkpointed_since(checkpoint_id: sa.BindParameter[int]) -> sa.Exists:
    """SQL: the session of agent_session's row has a checkpoint with an id above this one."""
    return sa.exists().where(C.c.session_id == S.c.session_id, C.c.id > checkpoint_id)


# A lease is no activity of the session: assigned to itself, MySQL's ON UPDATE
# CURRENT_TIMESTAMP leaves `updated_at` as it is (a compaction that writes nothing, or is
# refused, must not move it; the row is still written, which is what orders it on Galera).
_KEEP_UPDATED_AT = {"updated_at": S.c.updated_at}


def release(conn: Connection, session_id: int, owner: str) -> None:
    """Give the lease back (only if it is still ours)."""
    with conn.begin():
        give_back(conn, session_id, owner)


def release_many(conn: Connection, session_ids: Sequence[int], owner: str) -> None:
    """Give back the leases of sessions a batch took and will not start (interrupted)."""
    with conn.begin():
        conn.execute(
            S.update()
            .where(S.c.session_id.in_(session_ids), S.c.lease_owner == owner)
            .values(lease_owner=None, lease_expires_at=None, **_KEEP_UPDATED_AT)
        )


_GIVE_BACK = (
    S.update()
    .where(S.c.session_id == sa.bindparam("sid"), S.c.lease_owner == sa.bindparam("owner"))
    .values(lease_owner=None, lease_expires_at=None, **_KEEP_UPDATED_AT)
)


def give_back(conn: Connection, session_id: int, owner: str) -> bool:
    """Inside the caller's transaction: clear the lease if it is still ours; True if it was."""
    return conn.execute(_GIVE_BACK, {"sid": session_id, "owner": owner}).rowcount == 1


def holder(conn: Connection, session_id: int) -> Lease | None:
    """Who holds the session's lease now (None when it is free or expired)."""
    row = conn.execute(
        sa.select(S.c.lease_owner, S.c.lease_expires_at).where(
            S.c.session_id == session_id,
            S.c.lease_owner.is_not(None),
            S.c.lease_expires_at >= dialect_of(conn).server_now(),
        )
    ).first()
    return Lease(row.lease_owner, row.lease_expires_at) if row else None


# A lease as written, and how often a holder's heartbeat renews it: two beats may be missed (a
# busy machine, a lost race for the row) before it lapses.
LEASE_BEAT_S = 30
BEAT_EVERY_S = 10
# How long a renewal waits for a session's row another transaction holds before it renews the
# others without it (see Heartbeat._renew).
RENEW_LOCK_WAIT_S = 1


def written_seconds(seconds: int) -> int:
    """How long a lease a holder needs for ``seconds`` is written for: no longer than
    :data:`LEASE_BEAT_S` (its :class:`Heartbeat` renews it while the work runs)."""
    return min(seconds, LEASE_BEAT_S)


class Heartbeat:
    """Renews the leases one owner holds while its work runs: every ``every`` seconds, one
    conditional UPDATE of the sessions :meth:`hold` named and :meth:`drop` has not, each only
    where the lease is still the owner's (one taken over stays the taker's). A thread of its
    own, on an engine of its own (a pool the workers do not wait on), started at the first
    hold and ended by a beat that finds nothing held (a batch's worker drops a session and
    holds its next a moment later: ending the thread whenever the set emptied started a new
    one for nearly every session). A renewal that fails (the server out of reach, a lost
    race for the row) is tried again at the next beat; the lease lapses once ``seconds`` pass
    without one."""

    def __init__(
        self,
        engine: Engine,
        owner: str,
        seconds: int = LEASE_BEAT_S,
        every: float = BEAT_EVERY_S,
    ):
        self.engine, self.owner, self.seconds, self.every = engine, owner, seconds, every
        self._held: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._own: Engine | None = None
        self.beats = 0  # renewals sent (what a test watches)

    def hold(self, session_ids: Sequence[int]) -> None:
        """Renew these sessions' leases from now on, until :meth:`drop`."""
        if not session_ids:
            return
        with self._lock:
            self._held.update(session_ids)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"lease-heartbeat-{self.owner}", daemon=True
                )
                self._thread.start()

    def drop(self, session_ids: Sequence[int]) -> None:
        """Stop renewing these sessions' leases (given back, or no longer ours)."""
        with self._lock:
            self._held.difference_update(session_ids)

    def _run(self) -> None:
        while True:
            time.sleep(self.every)
            with self._lock:
                held = sorted(self._held)
                if not held:
                    self._thread = None
                    return
            with contextlib.suppress(SQLAlchemyError):
                self._renew(held)

    def _renew(self, session_ids: list[int]) -> None:
        """One UPDATE for every held session; when a row is held by another transaction (an
        import appending to that session writes its row first and holds it to its commit),
        each session in a transaction of its own, so that the held row delays its own
        renewal alone. Every statement waits :data:`RENEW_LOCK_WAIT_S` at most for a row."""
        if self._own is None:
            from ..db import create_engine

            self._own = create_engine(self.engine.url.render_as_string(hide_password=False))
        dialect = dialect_of(self._own)
        try:
            self._renew_in_one(session_ids)
        except SQLAlchemyError as exc:
            if dialect.transient(exc) != CONFLICT or len(session_ids) == 1:
                raise
            for session_id in session_ids:
                try:
                    self._renew_in_one([session_id])
                except SQLAlchemyError as one:
                    if dialect.transient(one) != CONFLICT:
                        raise  # tried again at the next beat
        self.beats += 1

    def _renew_in_one(self, session_ids: list[int]) -> None:
        assert self._own is not None
        with self._own.begin() as conn:
            dialect = dialect_of(conn)
            dialect.bound_lock_wait(conn, RENEW_LOCK_WAIT_S)
            conn.execute(
                S.update()
                .where(S.c.session_id.in_(session_ids), S.c.lease_owner == self.owner)
                .values(lease_expires_at=dialect.server_now_plus(self.seconds), **_KEEP_UPDATED_AT)
            )
