"""The per-session token report: full history next to the restored context, summary tokens,
compression, and the context size the provider itself reported where a transcript recorded it."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.tokens import count_text, encoding_for_model
from ..db import dialect_of
from ..db.schema import agent_compaction as C
from ..db.schema import agent_message as M
from ..db.schema import agent_session as S
from .candidates import exact_context_tokens
from .counts import expected_encoding
from .reads import (
    json_as_text,
    json_value,
    read_session,
    session_head,
    usable_count_sums,
)


def token_report(
    conn: Connection, session_id: int | None = None, encoding: str | None = None
) -> list[dict]:
    """Per session: history vs effective (restored) tokens, summary tokens, provider usage,
    read in the caller's transaction (``Store.token_report`` opens one).

    Full-history figures are one aggregate query over the stored counts; the effective context
    is measured per session from its restored suffix (``candidates.exact_context_tokens``).
    """
    q = sa.select(S.c.session_id, S.c.model, S.c.title, json_as_text(S.c.details)).order_by(
        S.c.session_id
    )
    if session_id is not None:
        read_session(conn, session_id)
        q = q.where(S.c.session_id == session_id)
    sessions = conn.execute(q).all()
    # Only counts made with the encoding the report uses add up: a message counted with
    # another is uncounted here. One walk of the index that holds counts and encodings.
    expected = expected_encoding(conn, encoding)
    agg = (
        sa.select(M.c.session_id, sa.func.count().label("messages"), *usable_count_sums(expected))
        .select_from(M.join(S, S.c.session_id == M.c.session_id))
        .group_by(M.c.session_id)
    )
    if session_id is not None:
        agg = agg.where(M.c.session_id == session_id)
    totals = {r.session_id: r for r in conn.execute(dialect_of(conn).through_session_index(agg, M))}
    ccount = sa.select(C.c.session_id, sa.func.count().label("n")).group_by(C.c.session_id)
    if session_id is not None:
        ccount = ccount.where(C.c.session_id == session_id)
    compactions = {r.session_id: r.n for r in conn.execute(ccount)}
    report = []
    for s in sessions:
        choice = encoding_for_model(s.model, encoding)
        # The restored context measured as Store.context_tokens does, its suffix's text read
        # only where its stored counts are not what is sent.
        head = session_head(conn, s.session_id, encoding)
        effective = exact_context_tokens(conn, s.session_id, encoding, head=head)
        t = totals.get(s.session_id)
        history = int(t.tokens or 0) if t else 0
        summary = head.latest.summary if head.latest else None
        summary_tokens = count_text(summary, choice.name) if summary else 0
        usage = _latest_provider_usage(conn, s.session_id)
        details = json_value(s.details)
        last = details.get("last_usage") if isinstance(details, dict) else None
        if usage is None and isinstance(last, dict):  # Codex reports usage per turn
            usage = last.get("context_tokens")
        report.append(
            {
                "session_id": s.session_id,
                "model": s.model,
                "encoding": choice.name + (" (estimate)" if choice.estimate else ""),
                "messages": int(t.messages) if t else 0,
                "uncounted": int(t.uncounted or 0) if t else 0,
                "history_tokens": history,
                "effective_tokens": effective,
                "summary_tokens": summary_tokens,
                "compactions": compactions.get(s.session_id, 0),
                "compression": round(history / effective, 2) if effective and history else None,
                "provider_context_tokens": usage,
            }
        )
    return report


def _latest_provider_usage(conn, session_id: int) -> int | None:
    """Context size the provider reported on the latest assistant message that carried usage."""
    rows = conn.execute(
        sa.select(json_as_text(M.c.details))
        .where(M.c.session_id == session_id, M.c.role == "assistant", M.c.details.is_not(None))
        .order_by(M.c.id.desc())
        .limit(20)
    )
    for (text,) in rows:
        details = json_value(text)
        usage = (details or {}).get("usage") if isinstance(details, dict) else None
        if usage:
            return int(usage.get("context_tokens") or 0) or None
    return None
