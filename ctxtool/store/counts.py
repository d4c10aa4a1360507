"""Filling ``agent_message.token_count`` in the database.

Counting first finds how many messages are left to count and the lowest of their ids, on the
index that holds each count and its encoding (a store counted already costs that walk alone,
not a read of every row), then walks them in id order in batches: read a batch (keyset on the
primary key), measure it with one threaded :func:`~ctxtool.core.tokens.token_lengths`, write the
counts back (one UPDATE per encoding on MySQL), commit. An interrupted run loses at most the
batches in flight; a re-run picks up the messages still uncounted. The three stages overlap: a reader thread
fetches the next batch and a writer thread stores the previous one while the encoder (which
releases the GIL) works.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.context_size import fill_missing_counts, stored_head_count, with_head_count
from ..core.records import (
    SUMMARY_PREFIX,
    Compaction,
    Message,
    RestoredContext,
    Session,
    pair_tool_calls,
    restore_context,
)
from ..core.tokens import DEFAULT_ENCODING, MessageText, count_messages, encoding_for_model
from ..db import dialect_of
from ..db.schema import agent_compaction as C
from ..db.schema import agent_message as M
from ..db.schema import agent_session as S
from . import context_sums
from .reads import (
    SessionHead,
    has_chat_role,
    json_as_text,
    json_value,
    no_usable_count,
    session_head,
    session_messages,
    span_messages,
    usable_count_sums,
)

DEFAULT_BATCH = 2000


@dataclass
class CountResult:
    messages_counted: int = 0
    tokens: int = 0
    batches: int = 0
    by_encoding: dict[str, int] = field(default_factory=dict)
    # System prompts and checkpoint summaries counted (kept in their details).
    heads_counted: int = 0


def expected_encoding(conn, override: str | None):
    """SQL expression: the encoding each message's session calls for (agent_session joined;
    ``override`` for every one)."""
    if override:
        return sa.literal(override)
    models = [r[0] for r in conn.execute(sa.select(S.c.model).distinct()) if r[0] is not None]
    mapping = {m: encoding_for_model(m).name for m in models}
    if not mapping:
        return sa.literal(DEFAULT_ENCODING)
    return sa.case(mapping, value=S.c.model, else_=sa.literal(DEFAULT_ENCODING))


def _pending_filter(expected, recount: bool):
    return sa.true() if recount else no_usable_count(expected)


def count_pending(
    conn: Connection,
    session_id: int | None = None,
    encoding: str | None = None,
    recount: bool = False,
) -> int:
    """How many messages a ``Store.count_tokens`` run would (re)count."""
    return _pending(conn, expected_encoding(conn, encoding), recount, session_id)[0]


def _pending(conn, expected, recount: bool, session_id: int | None) -> tuple[int, int | None]:
    """(how many messages are to count, the lowest of their ids), from one walk of
    idx_message_session_id_tokens, which holds each count and its encoding: what is counted
    already is passed over without reading its rows."""
    query = (
        sa.select(sa.func.count(), sa.func.min(M.c.id))
        .select_from(M.outerjoin(S, S.c.session_id == M.c.session_id))
        .where(_pending_filter(expected, recount))
    )
    if session_id is not None:
        query = query.where(M.c.session_id == session_id)
    n, lowest = conn.execute(dialect_of(conn).through_session_index(query, M)).one()
    return int(n or 0), lowest


@dataclass(frozen=True)
class PendingCounts:
    """The messages a ``Store.count_tokens`` run counts: how many, the lowest of their ids, and
    the query that reads them with the encoding each one's session calls for."""

    pending: int
    lowest: int | None
    query: sa.Select


def pending_counts(
    conn: Connection, session_id: int | None, encoding: str | None, recount: bool
) -> PendingCounts:
    """What is to count: messages that have no count or one made with another encoding than
    their session's (``encoding`` overrides it; ``recount``: every one in scope)."""
    expected = expected_encoding(conn, encoding)
    pending, lowest = _pending(conn, expected, recount, session_id)
    query = (
        sa.select(
            M.c.id,
            M.c.role,
            M.c.content,
            M.c.name,
            json_as_text(M.c.tool_calls),
            expected.label("expected"),
        )
        .select_from(M.outerjoin(S, S.c.session_id == M.c.session_id))
        .where(_pending_filter(expected, recount))
    )
    if session_id is not None:
        query = query.where(M.c.session_id == session_id)
    return PendingCounts(pending, lowest, query)


def read_pending(conn: Connection, pending: PendingCounts, after: int, size: int) -> Sequence[Any]:
    """The next ``size`` messages to count after id ``after``. In id order (the order rows are
    stored in: a runtime's sessions interleave, and writing counts in session order then
    touched a page per message), from the lowest."""
    return conn.execute(pending.query.where(M.c.id > after).order_by(M.c.id).limit(size)).all()


def write_counts(conn: Connection, counted: list[tuple[str, list[int], list[int]]]) -> None:
    """Store one batch's counts (:func:`count_batch`), each encoding's group together."""
    for enc_name, ids, counts in counted:
        store_counts(conn, ids, counts, enc_name)


@dataclass(frozen=True)
class _Head:
    """A kind of head text: the table that keeps its count, how it is sent, and the statement
    that keeps a count (built once, its values bound for every row)."""

    role: str
    prefix: str
    update: sa.Update


_HEADS = (
    _Head(
        "system",
        "",
        # A count is no change of the session: its time stays.
        S.update()
        .where(S.c.session_id == sa.bindparam("head_key"))
        .values(
            details=sa.bindparam("head_details", type_=S.c.details.type),
            updated_at=S.c.updated_at,
        ),
    ),
    _Head(
        "user",
        SUMMARY_PREFIX,
        C.update()
        .where(C.c.id == sa.bindparam("head_key"))
        .values(details=sa.bindparam("head_details", type_=C.c.details.type)),
    ),
)


def head_queries(session_id: int | None = None) -> list[tuple[_Head, sa.Column, sa.Select]]:
    """Each kind of head text with its key and the query of its rows that have a text
    (``session_id``: that session's only), for ``Store.count_heads`` to page through."""
    sessions = sa.select(
        S.c.session_id.label("key"),
        S.c.model,
        S.c.system_prompt.label("text"),
        json_as_text(S.c.details),
    ).where(S.c.system_prompt.is_not(None), S.c.system_prompt != "")
    checkpoints = sa.select(
        C.c.id.label("key"), S.c.model, C.c.summary.label("text"), json_as_text(C.c.details)
    ).select_from(C.outerjoin(S, S.c.session_id == C.c.session_id))
    if session_id is not None:
        sessions = sessions.where(S.c.session_id == session_id)
        checkpoints = checkpoints.where(C.c.session_id == session_id)
    return list(zip(_HEADS, (S.c.session_id, C.c.id), (sessions, checkpoints)))


def head_counts(head: _Head, rows, encoding: str | None, recount: bool) -> list[dict[str, Any]]:
    """Count the texts of ``rows`` that have no usable count kept (every one: ``recount``);
    the details that keep each count, for :func:`keep_head_counts`."""
    todo: dict[str, list[tuple[int, Any, MessageText]]] = {}
    for row in rows:
        enc = encoding_for_model(row.model, encoding).name
        text, details = head.prefix + row.text, json_value(row.details)
        if recount or stored_head_count(details, enc, text) is None:
            todo.setdefault(enc, []).append((row.key, details, MessageText(head.role, text)))
    kept = []
    for enc, group in todo.items():
        counts = count_messages([m for *_, m in group], enc)
        for (key, details, message), n in zip(group, counts):
            with_count = with_head_count(details, enc, message.content or "", n)
            if with_count is not None:
                kept.append({"head_key": key, "head_details": with_count})
    return kept


def keep_head_counts(conn: Connection, head: _Head, kept: list[dict[str, Any]]) -> None:
    """Write the details :func:`head_counts` made for ``head``'s rows."""
    if kept:
        conn.execute(head.update, kept)


def count_batch(rows, result: CountResult) -> list[tuple[str, list[int], list[int]]]:
    """Encode one batch, grouped by the encoding each message's session calls for."""
    groups: dict[str, list] = {}
    for row in rows:
        groups.setdefault(row.expected, []).append(row)
    counted = []
    for enc_name, group in groups.items():
        counts = count_messages(
            [MessageText(r.role, r.content, r.name, json_value(r.tool_calls)) for r in group],
            enc_name,
        )
        counted.append((enc_name, [r.id for r in group], counts))
        result.by_encoding[enc_name] = result.by_encoding.get(enc_name, 0) + len(group)
        result.tokens += sum(counts)
        result.messages_counted += len(group)
    return counted


def store_counts(conn, ids: list[int], counts: list[int], encoding: str) -> None:
    """Write token counts for many messages in the fewest statements the database allows, and
    mark the kept sums of their sessions (``store.context_sums.forget``) in the same
    transaction: those sums were made with the counts being replaced."""
    if ids:
        dialect_of(conn).update_token_counts(conn, ids, counts, encoding)
        context_sums.forget(conn, ids)


def count_loaded_messages(conn: Connection, messages: list[Message], encoding: str) -> int:
    """Count the given messages that have no count under ``encoding``, store the counts and set
    them on the objects; return how many were counted. The caller commits."""
    counted = fill_missing_counts(messages, encoding)
    store_counts(conn, [m.id for m in counted], [m.token_count or 0 for m in counted], encoding)
    return len(counted)


def read_suffix(
    conn: Connection,
    session_id: int,
    encoding: str | None,
    store_counts: bool,
    *,
    texts: bool = True,
) -> tuple[Session, RestoredContext, str]:
    """(session, restored context, encoding): what every path that measures or compacts a
    session reads (never the whole history), with the counts the runtime left out filled in:
    written when ``store_counts`` (the caller commits), else in memory only.

    ``texts=False``: what planning needs, no more (a dry run): the text of user messages
    (where turns start), of roles resent as user messages and of messages without a usable
    count; the rest carry their counts. A result whose call is not in the suffix is resent as
    a user message: then every text is read. The session and its latest checkpoint carry
    what restoring and planning read, their other fields None (``session_head``'s
    ``planning``)."""
    head = session_head(conn, session_id, encoding, planning=True)
    session, enc, latest, cut = head.session, head.encoding, head.latest, head.cut
    texts_of = (
        None
        if texts
        else sa.or_(M.c.role == "user", ~has_chat_role(M.c.role), no_usable_count(enc))
    )
    suffix = session_messages(conn, session_id, cut, texts_of=texts_of)
    if texts_of is not None:
        pairing = pair_tool_calls(suffix)
        if pairing.orphans or pairing.duplicates:
            suffix = session_messages(conn, session_id, cut)
    if store_counts:
        count_loaded_messages(conn, suffix, enc)
    else:
        fill_missing_counts(suffix, enc)
    return session, restore_context(session_id, session.system_prompt, latest, suffix), enc


# The newest messages a dry run reads first (then twice as many, and so on): a 20k-token budget
# is a few hundred messages.
FIRST_TAIL_PAGE = 512


@dataclass
class SuffixTail:
    """The newest messages of a session's restored suffix, counts filled in memory; ``whole``:
    they are the whole suffix."""

    session: Session
    latest: Compaction | None
    encoding: str
    messages: list[Message]
    whole: bool


def read_tails(
    conn: Connection, session_id: int, encoding: str | None, head: SessionHead | None = None
) -> Iterator[SuffixTail]:
    """Ever longer tails of a session's restored suffix, newest first, each read from the end
    on the (session_id, id) index, until one is the whole suffix: a dry run stops at the first
    tail that settles its plan (``core.plan.plan_tail``). What planning and measuring
    the kept part need is read (``read_suffix``'s ``texts=False``, and the text of results);
    nothing is written. ``head``: the session's head, read already in this transaction with
    this ``encoding`` (else read here)."""
    head = head or session_head(conn, session_id, encoding)
    session, enc, latest, cut = head.session, head.encoding, head.latest, head.cut
    # Results too: one the kept part holds without its call is resent with its text. A tail
    # is a few hundred messages; the rows before it are never read.
    texts_of = sa.or_(
        M.c.role.in_(["user", "tool"]), ~has_chat_role(M.c.role), no_usable_count(enc)
    )
    tail: list[Message] = []
    page = FIRST_TAIL_PAGE
    while True:
        older = session_messages(
            conn,
            session_id,
            cut,
            tail[0].id if tail else None,
            texts_of=texts_of,
            newest=page,
        )
        fill_missing_counts(older, enc)
        tail = older + tail
        whole = len(older) < page
        yield SuffixTail(session, latest, enc, tail, whole)
        if whole:
            return
        page *= 2


def span_token_totals(
    conn: Connection,
    session_id: int,
    from_id: int | None,
    before_id: int,
    encoding: str,
) -> tuple[int, int]:
    """(messages, tokens as the planner counts them) of a session's messages in ``from_id <=
    id < before_id``: the usable stored counts summed by the server on the index, the rest
    counted now from the rows that have none (read, never written)."""
    tokens, uncounted = usable_count_sums(encoding)
    query = sa.select(sa.func.count(), tokens, uncounted).where(
        span_messages(session_id, from_id, before_id)
    )
    n, summed, missing = conn.execute(dialect_of(conn).through_session_index(query, M)).one()
    counted = 0
    if missing:
        rows = session_messages(
            conn, session_id, from_id, before_id, only=no_usable_count(encoding)
        )
        fill_missing_counts(rows, encoding)
        counted = sum(m.token_count or 0 for m in rows)
    return int(n or 0), int(summed or 0) + counted
