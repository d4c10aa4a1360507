"""Removing whole sessions: for real mistakes only (a transcript imported into the wrong store,
with the wrong format). Compaction never deletes anything; this is the one deliberate way out,
and it removes a session completely — messages, checkpoints and the session row — in one
transaction, or not at all."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.errors import CtxtoolError
from ..db.schema import agent_compaction as C
from ..db.schema import agent_message as M
from ..db.schema import agent_session as S
from ..db.schema import transcript_files as F
from . import context_sums
from .reads import per_session


@dataclass(frozen=True)
class SessionFootprint:
    """What removing a session takes away."""

    session_id: int
    source: str | None
    messages: int
    checkpoints: int

    def as_dict(self) -> dict:
        return {
            "session_id": self.session_id,
            "source": self.source,
            "messages": self.messages,
            "checkpoints": self.checkpoints,
        }


def footprints(conn: Connection, session_ids: list[int]) -> list[SessionFootprint]:
    """What each session holds (for the confirmation, and the report). A session whose row is
    gone but whose messages or checkpoints are left is one too (source: None)."""
    sources = {
        r.session_id: (f"{r.source_format}:{r.source_id}" if r.source_format else None)
        for r in conn.execute(
            sa.select(S.c.session_id, S.c.source_format, S.c.source_id).where(
                S.c.session_id.in_(session_ids)
            )
        )
    }
    messages = per_session(conn, M, session_ids, sa.func.count())
    checkpoints = per_session(conn, C, session_ids, sa.func.count())
    missing = [
        sid
        for sid in session_ids
        if sid not in sources and sid not in messages and sid not in checkpoints
    ]
    if missing:
        raise CtxtoolError(f"session {missing[0]} does not exist")
    return [
        SessionFootprint(
            sid,
            sources.get(sid),
            int(messages.get(sid, (0,))[0]),
            int(checkpoints.get(sid, (0,))[0]),
        )
        for sid in session_ids
    ]


def remove_sessions(conn: Connection, session_ids: list[int]) -> list[SessionFootprint]:
    """Remove the sessions with everything they hold, in the caller's transaction (see
    ``Store.delete_sessions``); what was removed."""
    ids = list(dict.fromkeys(session_ids))
    removed = footprints(conn, ids)
    remove_rows(conn, ids)
    return removed


def remove_rows(conn: Connection, session_ids: list[int]) -> None:
    """Delete every row of the sessions, in the caller's transaction: checkpoints, messages,
    the records of the files they were imported from (a later import of such a file is a
    new session, as it would be without them), their kept sums and the session rows."""
    conn.execute(C.delete().where(C.c.session_id.in_(session_ids)))
    conn.execute(M.delete().where(M.c.session_id.in_(session_ids)))
    sources = sa.select(S.c.source_format, S.c.source_id).where(
        S.c.session_id.in_(session_ids), S.c.source_id.is_not(None)
    )
    conn.execute(F.delete().where(sa.tuple_(F.c.source_format, F.c.source_id).in_(sources)))
    context_sums.drop(conn, session_ids)
    conn.execute(S.delete().where(S.c.session_id.in_(session_ids)))
