"""What a session's chart is drawn from: every message's id, time and stored count, and its
checkpoints with their summaries counted as sent (the rule is ``core.context_chart``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from operator import itemgetter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.context_chart import ChartCheckpoint, ContextChart, Series, context_chart
from ..core.context_size import head_token_counts
from ..core.inspection import messages_through
from ..core.records import Compaction, RestoredContext
from ..core.tokens import TOKENS_PER_MESSAGE, encoding_for_model
from ..db import dialect_of
from ..db.schema import agent_message as M
from .reads import (
    SessionHistory,
    connection_for,
    json_as_text,
    no_usable_count,
    text_bytes,
    usable_count,
)

# What a message without a stored count is taken to cost: its UTF-8 bytes over this (English
# and code run 3.5 to 4.5 bytes a token in the shipped encodings).
BYTES_PER_TOKEN = 4


def session_chart(
    history: SessionHistory,
    window: int | None = None,
    threshold: int | None = None,
    encoding: str | None = None,
) -> ContextChart:
    """The :class:`~ctxtool.core.context_chart.ContextChart` of ``history``'s session: one
    read of its messages' stored counts (no text, no time; their ids too unless they run
    without a gap), where each checkpoint was written (one indexed look-up each), the head of
    each checkpoint counted as sent, then the times of the few messages the drawing shows. A
    message without a usable count is estimated from its length in SQL
    (:data:`BYTES_PER_TOKEN`), never counted here."""
    session = history.session
    name = encoding_for_model(session.model, encoding).name
    mine = M.c.session_id == history.session_id
    with connection_for(history.store.engine, None) as conn:
        n, low, high = conn.execute(
            sa.select(sa.func.count(), sa.func.min(M.c.id), sa.func.max(M.c.id)).where(mine)
        ).one()
        # A count the encoding cannot use reads as -1: then the ids and the counts are read
        # again as lists, with an estimate for each message without one.
        count = sa.case((usable_count(name), M.c.token_count), else_=-1)
        ids: Sequence[int]
        counts: Sequence[int | None]
        if n and high - low + 1 == n:  # the ids run without a gap: only the counts read
            ids = Series(range(low, high + 1))
            (counts,) = _columns(conn, sa.select(count).where(mine).order_by(M.c.id))
        else:
            ids, counts = _columns(conn, sa.select(M.c.id, count).where(mine).order_by(M.c.id))
        estimates = None
        if -1 in counts:
            ids, counts = _ids_and_counts(conn, mine, name)
            estimates = _estimates(conn, history.session_id, ids, name)
        checkpoints = [
            _placed(conn, history.session_id, cp)
            for cp in chart_checkpoints(
                history.session_id,
                session.system_prompt,
                history.compactions,
                name,
                session.details,
            )
        ]
        head = RestoredContext(history.session_id, session.system_prompt, None)
        chart = context_chart(
            ids,
            counts,
            {},
            checkpoints,
            sum(head_token_counts(head, session.details, name)),
            window,
            threshold,
            estimates,
        )
        shown = {ids[i]: i for i in chart.shown_indices()}
        timed = conn.execute(sa.select(M.c.id, M.c.created_at).where(mine, M.c.id.in_(shown)))
        times = {shown[r[0]]: r[1] for r in timed}
    return replace(chart, times=times)


# Rows fetched at a time: the driver's tuples live only for a batch.
FETCH_BATCH = 10_000


def _columns(conn: Connection, query: sa.Select[Any]) -> list[Series]:
    """The integer columns of ``query``'s rows, each a :class:`Series`, fetched from the
    driver in batches (SQLAlchemy's row objects, or a list of every row, cost more than the
    read)."""
    result = conn.execute(query)
    out = [Series() for _ in query.selected_columns]
    try:
        while batch := result.cursor.fetchmany(FETCH_BATCH):
            for k, column in enumerate(out):
                column.extend(map(itemgetter(k), batch))
    finally:
        result.close()
    return out


def _ids_and_counts(
    conn: Connection, mine: sa.ColumnElement[bool], encoding: str
) -> tuple[list[int], list[int | None]]:
    """The messages' ids and their usable counts (None where there is none)."""
    count = sa.case((usable_count(encoding), M.c.token_count))
    rows = conn.execute(sa.select(M.c.id, count).where(mine).order_by(M.c.id)).all()
    return [r[0] for r in rows], [r[1] for r in rows]


def _estimates(
    conn: Connection, session_id: int, ids: Sequence[int], encoding: str
) -> list[float | None]:
    """What each message without a usable count is taken to cost: its UTF-8 bytes over
    :data:`BYTES_PER_TOKEN`, in SQL (the text is not read), plus a message's framing."""
    length = text_bytes(M.c.content) + text_bytes(json_as_text(M.c.tool_calls))
    rows = conn.execute(
        sa.select(M.c.id, length).where(M.c.session_id == session_id, no_usable_count(encoding))
    )
    by_id = {r[0]: r[1] / BYTES_PER_TOKEN + TOKENS_PER_MESSAGE for r in rows}
    return [by_id.get(i) for i in ids]


def _placed(conn: Connection, session_id: int, cp: ChartCheckpoint) -> ChartCheckpoint:
    """``cp`` with the newest message stored when it was written, where it recorded none but
    has a time: the message before the first one after its cut written after its time (as
    ``core.context_chart.written_after`` decides from the times, here without reading them)."""
    if cp.messages_through is not None or cp.created_at is None:
        return cp
    later = sa.not_(
        dialect_of(conn).time_compare(M.c.created_at, "<=", cp.created_at, no_time=True)
    )
    first_after = conn.execute(
        sa.select(M.c.id)
        .where(M.c.session_id == session_id, M.c.id >= cp.first_kept_message_id, later)
        .order_by(M.c.id)
        .limit(1)
    ).scalar()
    if first_after is None:
        first_after = 1 + (
            conn.execute(
                sa.select(sa.func.max(M.c.id)).where(M.c.session_id == session_id)
            ).scalar()
            or 0
        )
    return replace(cp, messages_through=int(first_after) - 1)


def chart_checkpoints(
    session_id: int,
    system_prompt: str | None,
    compactions: Sequence[Compaction],
    encoding: str,
    session_details: Any = None,
) -> list[ChartCheckpoint]:
    """The checkpoints as the chart takes them, each head (system prompt and summary as sent)
    counted once: the counts kept in the session's and the checkpoints' details reused (a
    counted store loads no vocabulary for its chart)."""
    out = []
    for cp in compactions:
        head = RestoredContext(session_id, system_prompt, cp)
        out.append(
            ChartCheckpoint(
                cp.id,
                cp.first_kept_message_id,
                sum(head_token_counts(head, session_details, encoding)),
                cp.created_at,
                messages_through(cp),
                cp.tokens_before,
                cp.tokens_after,
            )
        )
    return out
