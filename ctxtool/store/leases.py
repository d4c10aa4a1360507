"""Session leases: which compactor works on a session, until when (server time).

A lease is taken by a conditional UPDATE whose affected-row count says who won, so it holds on
engines where ``FOR UPDATE SKIP LOCKED`` does not lock (TiDB); an expired lease is simply taken
over. Expiry is on the database server's clock, never a host's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..compaction.status import CompactionStatus
from ..db import dialect_of
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
    process that reaches it (a sibling's session costs one UPDATE). :func:`claim` still
    checks the parent after the plan."""
    with conn.begin():
        return _take(conn, session_id, owner, seconds)


def _take(conn: Connection, session_id: int, owner: str, seconds: int) -> bool:
    dialect = dialect_of(conn)
    taken = conn.execute(
        S.update()
        .where(
            S.c.session_id == session_id,
            # An owner with no expiry (written by hand, or by a runtime) bounds nothing:
            # free, as holder() and the batch read it (it was held forever here).
            sa.or_(
                S.c.lease_owner.is_(None),
                S.c.lease_expires_at.is_(None),
                S.c.lease_expires_at < dialect.server_now(),
                S.c.lease_owner == owner,
            ),
        )
        .values(
            lease_owner=owner,
            lease_expires_at=dialect.server_now_plus(seconds),
            **_KEEP_UPDATED_AT,
        )
    ).rowcount
    return taken == 1


# A lease is no activity of the session: assigned to itself, MySQL's ON UPDATE
# CURRENT_TIMESTAMP leaves `updated_at` as it is (a compaction that writes nothing, or is
# refused, must not move it; the row is still written, which is what orders it on Galera).
_KEEP_UPDATED_AT = {"updated_at": S.c.updated_at}


def release(conn: Connection, session_id: int, owner: str) -> None:
    """Give the lease back (only if it is still ours)."""
    with conn.begin():
        give_back(conn, session_id, owner)


def give_back(conn: Connection, session_id: int, owner: str) -> bool:
    """Inside the caller's transaction: clear the lease if it is still ours; True if it was."""
    return (
        conn.execute(
            S.update()
            .where(S.c.session_id == session_id, S.c.lease_owner == owner)
            .values(lease_owner=None, lease_expires_at=None, **_KEEP_UPDATED_AT)
        ).rowcount
        == 1
    )


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
