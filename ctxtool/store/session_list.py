"""`sessions list`: sessions with their last activity and counts, found through the indexes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.context_size import context_bounds
from ..db.schema import agent_compaction as C
from ..db.schema import agent_message as M
from ..db.schema import agent_session as S
from ..db.stored_time import parse_stored_time
from .candidates import (
    EffectiveContext,
    effective_contexts,
    exact_context_tokens,
)
from .reads import per_session

# How `sessions list` orders what it shows (the first is the default): the newest session id
# (the first N of the primary key), the newest activity (the time of a session's newest
# message, or of the session itself when it has none: a row read per session, slow on a store
# larger than the buffer pool), the most messages, the largest restored context.
SORT_ORDERS = ("id", "last-activity", "messages", "tokens")


def check_order(sort: str, rescan: bool, over_window: bool) -> None:
    """ValueError for a ``sort`` :func:`list_sessions` does not know, or a ``rescan`` that
    nothing reads (it sums what ``over_window`` or ``sort="tokens"`` reads)."""
    if sort not in SORT_ORDERS:
        raise ValueError(f"unknown sort order {sort!r} (one of {', '.join(SORT_ORDERS)})")
    if rescan and not over_window and sort != "tokens":
        raise ValueError("rescan sums what over_window or sort='tokens' reads: give one")


def list_sessions(
    conn: Connection,
    user_id: str | None = None,
    project_id: str | None = None,
    source_format: str | None = None,
    limit: int = 50,
    *,
    search: str | None = None,
    model: str | None = None,
    since: datetime | None = None,
    over: Mapping[int, tuple[int, int, EffectiveContext]] | None = None,
    sort: str = SORT_ORDERS[0],
    rescan: bool = False,
) -> list[dict[str, Any]]:
    """Sessions with their last activity, message and checkpoint counts, for finding one to
    inspect, in ``sort`` order (:data:`SORT_ORDERS`; ties newest id first). Counts and times
    come from the indexes (no message text is read).

    ``search`` matches (case-insensitively) the title, the source id or the first user message;
    ``model`` is a model name or its prefix; ``since`` keeps sessions active at or after it
    (their last activity: a session imported today from an old transcript is old).
    ``over`` (the sessions over their threshold, as ``Store.over_threshold`` finds them:
    ``compact --all``'s set-based sums of stored counts, exact measures only near the
    threshold) keeps only those sessions; they get ``context_tokens`` and ``threshold``.
    The sums leave out the system prompt and the summary (enough to know a session is over),
    so the listed sessions' ``context_tokens`` count those too, as ``context show`` and
    ``compact`` do (``sort="tokens"`` as well): from the stored counts where they tell the
    whole story, else measured reading the suffix (:func:`~.candidates.exact_context_tokens`).
    ``rescan``: those sums read from every suffix's messages, not from the sums kept by
    ``compact --all`` (``store.context_sums``).
    """
    check_order(sort, rescan, over is not None)
    query = _sessions_query(
        user_id=user_id,
        project_id=project_id,
        source_format=source_format,
        model=model,
        search=search,
    )
    estimates: dict[int, int] = {}
    thresholds: dict[int, int] = {}
    summed: dict[int, EffectiveContext] = {}
    if over is not None:  # the cron batch's own measure
        estimates = {sid: tokens for sid, (tokens, _, _) in over.items()}
        thresholds = {sid: threshold for sid, (_, threshold, _) in over.items()}
        summed = {sid: c for sid, (_, _, c) in over.items()}
        query = query.where(S.c.session_id.in_(list(over) or [0]))
    elif sort == "tokens":  # the batch's sums, one walk of the message index
        for c in effective_contexts(conn, rescan=rescan):
            estimates[c.session_id] = context_bounds(c.suffix, c.head_bytes)[0]
            summed[c.session_id] = c
    if sort == "id" and since is None:  # the newest ids: the index gives them in order
        sessions = conn.execute(query.limit(limit)).all()
    else:
        sessions = _ordered(conn, query.subquery(), sort, since, estimates, limit)
    ids = [s.session_id for s in sessions]
    if not ids:
        return []
    messages = per_session(conn, M, ids, sa.func.count(), sa.func.max(M.c.id))
    compactions = per_session(conn, C, ids, sa.func.count())
    exact: dict[int, int] = {}
    if over is not None or sort == "tokens":  # each restored context, whole
        exact = {
            sid: exact_context_tokens(
                conn,
                sid,
                None,
                summed[sid].suffix if sid in summed else None,
                context=summed.get(sid),
            )
            for sid in ids
        }
    rows = []
    for s in sessions:
        count, newest = messages.get(s.session_id, (0, None))
        row = {
            "session_id": s.session_id,
            "title": s.title,
            "model": s.model,
            "user_id": s.user_id,
            "project_id": s.project_id,
            "source": f"{s.source_format}:{s.source_id}" if s.source_format else None,
            "messages": int(count),
            "compactions": int(compactions.get(s.session_id, (0,))[0]),
            "last_message_id": newest,
            "last_activity": last_activity(s),
            "created_at": s.created_at,
            "leased_by": s.lease_owner,
            "over_window_ok_at": s.over_window_ok_at,  # `sessions mark S --over-window-ok`
        }
        if exact:
            row["context_tokens"] = exact[s.session_id]
        if over is not None:
            row["threshold"] = thresholds[s.session_id]
        rows.append(row)
    if sort == "tokens":  # the page in the order of what was measured exactly
        rows.sort(key=lambda r: (-r["context_tokens"], -r["session_id"]))
    return rows


def last_activity(session) -> datetime | None:
    """When a session (a row of :func:`_sessions_query`) was last active: the time of its newest
    message (the last of its restored context), else the session's own creation time."""
    newest = parse_stored_time(session.newest_message_at)
    return newest if newest is not None else parse_stored_time(session.created_at)


def _ordered(conn, sessions, sort: str, since: datetime | None, estimates, limit: int):
    """The first ``limit`` of ``sessions`` (a subquery of :func:`_sessions_query`) active since
    ``since``, in ``sort`` order. Times are compared in Python, as ``db.stored_time`` reads them
    (SQLite's text column may hold any shape a runtime wrote); the orders by size read one
    walk of the message index (``tokens``: ``estimates``, the batch's own sums)."""
    rows = conn.execute(sa.select(sessions).order_by(sessions.c.session_id.desc())).all()
    if since is not None:
        rows = [r for r in rows if (t := last_activity(r)) is not None and t >= since]
    if sort == "last-activity":
        # Sorted twice (stable): newest id first among equal times, sessions without a time last.
        rows.sort(key=lambda r: last_activity(r) or datetime.min, reverse=True)
    elif sort == "messages":
        wanted = {r.session_id for r in rows}
        counts = {
            sid: n
            for sid, n in conn.execute(
                sa.select(M.c.session_id, sa.func.count()).group_by(M.c.session_id)
            )
            if sid in wanted
        }
        rows.sort(key=lambda r: counts.get(r.session_id, 0), reverse=True)
    elif sort == "tokens":
        rows.sort(key=lambda r: estimates.get(r.session_id, 0), reverse=True)
    return rows[:limit]


def _sessions_query(*, user_id, project_id, source_format, model, search):
    """The sessions matching ``sessions list``'s filters, newest first, with the time of each
    one's newest message (one step down idx_message_session_id_tokens and its row)."""
    newest_message_at = (
        sa.select(M.c.created_at)
        .where(M.c.session_id == S.c.session_id)
        .order_by(M.c.id.desc())
        .limit(1)
        .correlate(S)
        .scalar_subquery()
    )
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
        newest_message_at.label("newest_message_at"),
    ).order_by(S.c.session_id.desc())
    if user_id is not None:
        query = query.where(S.c.user_id == user_id)
    if project_id is not None:
        query = query.where(S.c.project_id == project_id)
    if source_format is not None:
        query = query.where(S.c.source_format == source_format)
    if model is not None:
        query = query.where(S.c.model.startswith(model, autoescape=True))
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
