"""What a session's chart is drawn from: every message's id, time and stored count, and its
checkpoints with their summaries counted as sent (the rule is ``core.context_chart``)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from ..core.context_chart import ChartCheckpoint, ContextChart, context_chart
from ..db import dialect_of
from ..db.schema import agent_message as M
from ..db.stored_time import parse_stored_time
from ..inspection import messages_through
from ..records import Compaction, RestoredContext
from ..tokens import TOKENS_PER_MESSAGE, count_messages, encoding_for_model
from .reads import (
    STORED_TOKEN_COUNT,
    SessionHistory,
    connection_for,
    json_as_text,
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
    read of its messages' ids, times and stored counts (no text), the head of each checkpoint
    counted as sent. A message without a usable count is estimated from its length in SQL
    (:data:`BYTES_PER_TOKEN`), never counted here."""
    session = history.session
    name = encoding_for_model(session.model, encoding).name
    usable = usable_count(name)
    count = sa.case((usable, STORED_TOKEN_COUNT.element), else_=None)
    length = text_bytes(M.c.content) + text_bytes(json_as_text(M.c.tool_calls))
    estimate = sa.case((usable, None), else_=length / BYTES_PER_TOKEN + TOKENS_PER_MESSAGE)
    query = (
        sa.select(M.c.id, count, M.c.created_at, estimate)
        .where(M.c.session_id == history.session_id)
        .order_by(M.c.id)
    )
    with connection_for(history.store.engine, None) as conn:
        rows = dialect_of(conn).plain_rows(conn, query)
    ids = [r[0] for r in rows]
    counts = [r[1] for r in rows]
    times = [parse_stored_time(r[2]) if isinstance(r[2], str) else r[2] for r in rows]
    estimates = [None if r[3] is None else int(r[3]) for r in rows]
    system = session.system_prompt
    head = RestoredContext(history.session_id, system, None).texts(head_only=True)
    return context_chart(
        ids,
        counts,
        times,
        chart_checkpoints(history.session_id, system, history.compactions, name),
        sum(count_messages(head, name)),
        window,
        threshold,
        estimates,
    )


def chart_checkpoints(
    session_id: int, system_prompt: str | None, compactions: Sequence[Compaction], encoding: str
) -> list[ChartCheckpoint]:
    """The checkpoints as the chart takes them, each head (system prompt and summary as sent)
    counted once."""
    out = []
    for cp in compactions:
        head = RestoredContext(session_id, system_prompt, cp).texts(head_only=True)
        out.append(
            ChartCheckpoint(
                cp.id,
                cp.first_kept_message_id,
                sum(count_messages(head, encoding)),
                cp.created_at,
                messages_through(cp),
                cp.tokens_before,
                cp.tokens_after,
            )
        )
    return out
