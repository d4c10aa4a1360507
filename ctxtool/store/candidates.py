"""Finding sessions to compact without reading whole histories (reads only: never writes).

Two indexed steps. First, every session with its latest checkpoint and its lease (one query,
through idx_compaction_session_id). Then the stored token counts since each cut, summed from
the covering index ``(session_id, id, token_count)`` with :func:`suffix_ranges`, 500 sessions a
query, so the cost follows the messages since each cut. Messages the runtime wrote without a
count are counted as ``uncounted``: filling them in is a separate, explicit step.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..db import dialect_of
from ..db.schema import agent_compaction as C
from ..db.schema import agent_message as M
from ..db.schema import agent_session as S
from .reads import SESSIONS_PER_RANGE_QUERY, suffix_ranges


@dataclass(frozen=True)
class EffectiveContext:
    """A session's effective context as the indexes see it: the stored counts since its cut."""

    session_id: int
    model: str | None
    summary_tokens: int | None
    first_kept_message_id: int | None
    tokens: int
    uncounted: int
    last_message_id: int
    lease_owner: str | None = None          # set only while a live lease holds the session
    lease_expires_at: datetime | None = None
    # UTF-8 bytes of what the sums leave out: the system prompt, and the summary when it has no
    # stored count. A byte-level BPE token is at least one byte, so this bounds its tokens.
    unsummed_bytes: int = 0


def effective_contexts(conn: Connection) -> list[EffectiveContext]:
    """Every session that has messages, with its latest cut, stored-count sum and live lease."""
    now = dialect_of(conn).server_now()
    latest_id = (sa.select(sa.func.max(C.c.id)).where(C.c.session_id == S.c.session_id)
                 .scalar_subquery())
    cp = C.alias("cp")
    live = sa.and_(S.c.lease_owner.is_not(None), S.c.lease_expires_at >= now)
    uncounted_summary = sa.case((cp.c.summary_tokens.is_(None), _bytes(cp.c.summary)), else_=0)
    sessions = conn.execute(
        sa.select(S.c.session_id, S.c.model, cp.c.summary_tokens, cp.c.first_kept_message_id,
                  sa.case((live, S.c.lease_owner), else_=None).label("lease_owner"),
                  sa.case((live, S.c.lease_expires_at), else_=None).label("lease_expires_at"),
                  (_bytes(S.c.system_prompt) + uncounted_summary).label("unsummed_bytes"))
        .select_from(S.outerjoin(cp, cp.c.id == latest_id))).all()
    out: list[EffectiveContext] = []
    for i in range(0, len(sessions), SESSIONS_PER_RANGE_QUERY):
        chunk = {r.session_id: r for r in sessions[i:i + SESSIONS_PER_RANGE_QUERY]}
        ranges = suffix_ranges({sid: r.first_kept_message_id for sid, r in chunk.items()})
        sums = conn.execute(
            sa.select(M.c.session_id, sa.func.sum(M.c.token_count).label("tokens"),
                      sa.func.sum(sa.case((M.c.token_count.is_(None), 1), else_=0)).label("uncounted"),
                      sa.func.max(M.c.id).label("last_message_id"))
            .where(ranges).group_by(M.c.session_id))
        for row in sums:
            r = chunk[row.session_id]
            out.append(EffectiveContext(r.session_id, r.model, r.summary_tokens,
                                        r.first_kept_message_id, int(row.tokens or 0),
                                        int(row.uncounted or 0), int(row.last_message_id),
                                        r.lease_owner, r.lease_expires_at,
                                        int(r.unsummed_bytes or 0)))
    return out


def _bytes(text_column):
    """SQL: a text's length in UTF-8 bytes, 0 for NULL (LENGTH of its bytes on both databases;
    SQLite's LENGTH of text counts characters)."""
    return sa.func.coalesce(sa.func.length(sa.cast(text_column, sa.LargeBinary)), 0)


def quiet_messages(conn: Connection, message_ids: Iterable[int], seconds: int) -> set[int]:
    """Of the given (newest) message ids, those written more than ``seconds`` ago (server time)."""
    ids = list(message_ids)
    cutoff = dialect_of(conn).server_now_plus(-seconds)
    quiet: set[int] = set()
    for i in range(0, len(ids), 1000):
        quiet.update(r[0] for r in conn.execute(
            sa.select(M.c.id).where(M.c.id.in_(ids[i:i + 1000]), M.c.created_at < cutoff)))
    return quiet
