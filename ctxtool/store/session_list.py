"""`sessions list`: the newest sessions with their counts, found through the indexes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..compaction.plan import CompactionSettings
from ..db import dialect_of, read_connection
from ..db.schema import agent_compaction as C
from ..db.schema import agent_message as M
from ..db.schema import agent_session as S
from .candidates import over_threshold
from .reads import Store, per_session


def list_sessions(
    engine: Engine,
    user_id: str | None = None,
    project_id: str | None = None,
    source_format: str | None = None,
    limit: int = 50,
    *,
    search: str | None = None,
    model: str | None = None,
    since: datetime | None = None,
    over_window: CompactionSettings | None = None,
) -> list[dict[str, Any]]:
    """The newest sessions (by id) with message and checkpoint counts, for finding one to
    inspect. Counts come from the indexes (no message text is read).

    ``search`` matches (case-insensitively) the title, the source id or the first user message;
    ``model`` is a model name or its prefix; ``since`` keeps sessions created at or after it.
    ``over_window`` (CompactionSettings) keeps only sessions whose restored context is over
    their threshold, found as ``compact --all`` finds them (set-based sums of stored counts,
    exact measures only near the threshold); they get ``context_tokens`` and ``threshold``.
    The sums leave out the system prompt and the summary (enough to know a session is over),
    so the listed sessions are measured exactly, as ``context show`` and ``compact`` measure.
    """
    query = _sessions_query(
        user_id=user_id,
        project_id=project_id,
        source_format=source_format,
        model=model,
        since=since,
        search=search,
        dialect=dialect_of(engine),
    )
    with read_connection(engine) as conn:
        measured: dict[int, tuple[int, int]] = {}
        if over_window is not None:  # the cron batch's own measure
            measured = over_threshold(engine, over_window)
            query = query.where(S.c.session_id.in_(list(measured) or [0]))
        sessions = conn.execute(query.limit(limit)).all()
        ids = [s.session_id for s in sessions]
        if not ids:
            return []
        messages = per_session(conn, M, ids, sa.func.count(), sa.func.max(M.c.id))
        compactions = per_session(conn, C, ids, sa.func.count())
        if over_window is not None:  # each restored suffix, on this connection
            store = Store(engine)
            exact = {sid: store.context_tokens(sid, conn=conn) for sid in ids}
    rows = []
    for s in sessions:
        row = {
            "session_id": s.session_id,
            "title": s.title,
            "model": s.model,
            "user_id": s.user_id,
            "project_id": s.project_id,
            "source": f"{s.source_format}:{s.source_id}" if s.source_format else None,
            "messages": int(messages.get(s.session_id, (0, None))[0]),
            "compactions": int(compactions.get(s.session_id, (0,))[0]),
            "last_message_id": messages.get(s.session_id, (0, None))[1],
            "created_at": s.created_at,
            "leased_by": s.lease_owner,
            "over_window_ok_at": s.over_window_ok_at,  # `sessions mark S --over-window-ok`
        }
        if over_window is not None:
            row["context_tokens"], row["threshold"] = exact[s.session_id], measured[s.session_id][1]
        rows.append(row)
    return rows


def _sessions_query(*, user_id, project_id, source_format, model, since, search, dialect):
    """The sessions matching ``sessions list``'s filters, newest first."""
    query = sa.select(
        S.c.session_id,
        S.c.title,
        S.c.model,
        S.c.user_id,
        S.c.project_id,
        S.c.source_format,
        S.c.source_id,
        S.c.created_at,
        S.c.lease_owner,
        S.c.over_window_ok_at,
    ).order_by(S.c.session_id.desc())
    if user_id is not None:
        query = query.where(S.c.user_id == user_id)
    if project_id is not None:
        query = query.where(S.c.project_id == project_id)
    if source_format is not None:
        query = query.where(S.c.source_format == source_format)
    if model is not None:
        query = query.where(S.c.model.startswith(model, autoescape=True))
    if since is not None:
        query = query.where(dialect.time_compare(S.c.created_at, ">=", since, no_time=False))
    if search:
        pattern = (
            "%" + search.lower().replace("/", "//").replace("%", "/%").replace("_", "/_") + "%"
        )
        # Each session's first request, looked up per session on (session_id, id): a grouped
        # subquery would read every message of the store on every search.
        first_request = (
            sa.select(M.c.content)
            .where(M.c.session_id == S.c.session_id, M.c.role == "user")
            .order_by(M.c.id)
            .limit(1)
            .correlate(S)
            .scalar_subquery()
        )
        query = query.where(
            sa.or_(
                sa.func.lower(S.c.title).like(pattern, escape="/"),
                sa.func.lower(S.c.source_id).like(pattern, escape="/"),
                sa.func.lower(first_request).like(pattern, escape="/"),
            )
        )
    return query
