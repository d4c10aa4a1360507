"""What a shell may complete from the store: session ids and source ids.

Completion runs on every Tab, so it is one query with a LIMIT, newest sessions first, and a
store that cannot answer (missing, unmigrated, a server that is down) completes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..db.schema import agent_session as S

COMPLETION_LIMIT = 50


@dataclass(frozen=True)
class SessionCandidate:
    """A value the SESSION argument takes, and the session's title to show beside it."""

    value: str
    title: str


def session_candidates(
    conn: Connection, prefix: str, limit: int = COMPLETION_LIMIT
) -> list[SessionCandidate]:
    """Session ids starting with ``prefix`` (newest first), then source ids starting with it:
    at most ``limit`` in all. An empty prefix offers the newest ids alone (source ids are long
    and, unasked, only crowd them out)."""
    found: list[SessionCandidate] = []
    if prefix == "" or prefix.isdigit():
        ids = sa.select(S.c.session_id, S.c.title).order_by(S.c.session_id.desc())
        if prefix:
            ids = ids.where(sa.cast(S.c.session_id, sa.String).startswith(prefix))
        found += [
            SessionCandidate(str(r.session_id), r.title or "")
            for r in conn.execute(ids.limit(limit))
        ]
    if prefix and len(found) < limit:
        sources = (
            sa.select(S.c.source_id, S.c.title)
            .where(S.c.source_id.startswith(prefix, autoescape=True))
            .order_by(S.c.source_id)
            .limit(limit - len(found))
        )
        found += [
            SessionCandidate(r.source_id, r.title or "")
            for r in conn.execute(sources)
            if r.source_id.startswith(prefix)  # a case-insensitive collation matches more
        ]
    return found
