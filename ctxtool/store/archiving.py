"""The queries of archiving and purging (``ctxtool.retention``): which sessions to archive, the
message a checkpoint keeps from, and the session row a purge locks before it checks and
deletes."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..db.schema import agent_message as M
from ..db.schema import agent_session as S


def matching_sessions(
    conn: Connection,
    session_ids: list[int] | None = None,
    project: str | None = None,
    quiet_since: datetime | None = None,
) -> list[int]:
    """The sessions among ``session_ids`` (all when None), of ``project``, whose last message
    (or start, without one) is older than ``quiet_since``; in id order."""
    query = sa.select(S.c.session_id).order_by(S.c.session_id)
    if session_ids is not None:
        query = query.where(S.c.session_id.in_(session_ids))
    if project is not None:
        query = query.where(S.c.project_id == project)
    if quiet_since is not None:
        last = (
            sa.select(sa.func.max(M.c.created_at))
            .where(M.c.session_id == S.c.session_id)
            .scalar_subquery()
        )
        query = query.where(sa.func.coalesce(last, S.c.created_at) < quiet_since)
    return [r[0] for r in conn.execute(query)]


def first_message_from(
    conn: Connection, session_id: int, cut: int
) -> tuple[int, str | None] | None:
    """The id and source id of the session's first message from ``cut`` on (what restore keeps
    first after a checkpoint cut there), or None when it has none."""
    row = conn.execute(
        sa.select(M.c.id, M.c.source_id)
        .where(M.c.session_id == session_id, M.c.id >= cut)
        .order_by(M.c.id)
        .limit(1)
    ).first()
    return (row.id, row.source_id) if row is not None else None


def lock_session(conn: Connection, session_id: int) -> bool:
    """Lock the session's row for the rest of the transaction (an import waits); False when the
    session is not in the store."""
    row = conn.execute(
        sa.select(S.c.source_format, S.c.source_id)
        .where(S.c.session_id == session_id)
        .with_for_update()
    ).first()
    return row is not None
