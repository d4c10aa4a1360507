"""Searching the store: messages and checkpoint summaries that say something, across sessions.

The match runs on the server (LIKE with its wildcards escaped, or REGEXP: MySQL's own, the one
SQLAlchemy registers on SQLite connections), so only hits come back, newest first. A FULLTEXT
index (``create_fulltext_index``, the operator's choice: it costs every insert of the runtime
that owns the table) narrows the scan on MySQL/MariaDB when present; the exact match is still
applied to what it finds. Where each hit stands in its session's restored context today is
``ctxtool.core.trace``'s rule over the session's checkpoints.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..core.errors import CtxtoolError
from ..core.records import Compaction, Message
from ..core.trace import FactTrace, TextMatch, trace_fact
from ..db import dialect_of
from ..db.schema import agent_compaction as C
from ..db.schema import agent_message as M
from .reads import _COMPACTION_COLUMNS, Store, compaction_from_row, json_as_text, json_value

# One FULLTEXT index per column: MariaDB's JSON is utf8mb4_bin, which cannot share an index
# with a _ci column (its index still folds case: lowered terms find "Light").
FULLTEXT_INDEXES = {"content": "ctxtool_message_text", "tool_calls": "ctxtool_message_calls"}
# Searched by a scan of the newest rows before the index is asked: a common word has its
# newest hits there, where the index would hand over every row that holds it.
NEWEST_ROWS_FIRST = 20_000
# InnoDB leaves out of a FULLTEXT index the words shorter than innodb_ft_min_token_size (3)
# and its default stopwords; a required term among them would match nothing.
_FULLTEXT_MIN_WORD = 3
_INNODB_STOPWORDS = frozenset(
    [
        "a",
        "about",
        "an",
        "are",
        "as",
        "at",
        "be",
        "by",
        "com",
        "de",
        "en",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "la",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "who",
        "will",
        "with",
        "und",
        "www",
    ]
)
SNIPPET_CHARS = 60  # either side of the match
SUMMARY_ROLE = "summary"  # what --role names for a checkpoint's summary


@dataclass(frozen=True)
class SearchHit:
    """A message or a checkpoint summary that says it, and where that stands today."""

    session_id: int
    kind: str  # "message" or "summary"
    id: int  # the message's id, or the checkpoint's
    role: str  # the message's role, or "summary"
    created_at: datetime | None
    snippet: str
    trace: FactTrace

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "kind": self.kind,
            "id": self.id,
            "role": self.role,
            "created_at": self.created_at,
            "snippet": self.snippet,
            "where": self.trace.describe(),
            **self.trace.as_dict(),
        }


def snippet(text: str, match: TextMatch, chars: int = SNIPPET_CHARS) -> str:
    """The match and ``chars`` characters either side, on one line."""
    found = match.found_in(text)
    if found is None:
        return ""
    start, end = max(0, found.start() - chars), min(len(text), found.end() + chars)
    inner = " ".join(text[start:end].split())
    return ("…" if start else "") + inner + ("…" if end < len(text) else "")


def searchable_text(message: Message) -> str:
    """What a message says for a search: its content, then each tool call as name(arguments)."""
    calls = [
        f"{c['function'].get('name', '')}({c['function'].get('arguments', '')})"
        for c in message.calls()
    ]
    return "\n".join(t for t in (message.content, *calls) if t)


def _raw_text(message: Message) -> str:
    """The text the database matched: the content and the stored tool calls as JSON text."""
    calls = message.tool_calls
    stored = calls if isinstance(calls, str) else (orjson.dumps(calls).decode() if calls else "")
    return "\n".join(t for t in (message.content, stored) if t)


# -- the FULLTEXT index -------------------------------------------------------------------------


def fulltext_index(conn: Connection) -> tuple[str, ...]:
    """The columns of agent_message that have ctxtool's FULLTEXT index (none on SQLite)."""
    found = dialect_of(conn).fulltext_indexes(
        conn, "agent_message", list(FULLTEXT_INDEXES.values())
    )
    return tuple(c for c in FULLTEXT_INDEXES if c in found)


def create_fulltext_index(conn: Connection) -> list[str]:
    """Add the FULLTEXT indexes on what messages say and on their tool calls; the columns
    indexed now (none when both were there already). ``conn``: a connection outside a
    transaction (each ALTER commits on its own).

    Reads go on while an index builds, the runtime's inserts wait for it. From then on every
    insert also writes the index (its cost: docs/search.md)."""
    added = []
    dialect = dialect_of(conn)
    if not dialect.fulltext:
        raise CtxtoolError(
            "a FULLTEXT index is a MySQL/MariaDB feature: on SQLite the search scans the messages"
        )
    present = fulltext_index(conn)
    types = dialect.column_types(conn, "agent_message")
    for column, name in FULLTEXT_INDEXES.items():
        if column in present or not can_fulltext_index(types.get(column, "")):
            continue
        # one at a time: InnoDB builds one FULLTEXT index per ALTER
        dialect.add_fulltext_index(conn, "agent_message", column, name)
        added.append(column)
    return added


def can_fulltext_index(data_type: str) -> bool:
    """Whether InnoDB takes a FULLTEXT index on a column of this ``DATA_TYPE``: MySQL 8's native
    JSON is no text (the ALTER fails), MariaDB's JSON is LONGTEXT. A column not indexed stays
    searched by the exact scan."""
    return data_type.lower() in {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}


def fulltext_terms(text: str) -> str | None:
    """A boolean-mode AGAINST for ``text``: every word the index holds is required, each as a
    prefix (the text may end inside a word). None when the index holds none of its words."""
    words = [
        w
        for w in re.findall(r"\w+", text.lower())
        if len(w) >= _FULLTEXT_MIN_WORD and w not in _INNODB_STOPWORDS
    ]
    return " ".join(f"+{w}*" for w in dict.fromkeys(words)) or None


# -- the queries --------------------------------------------------------------------------------


def _says(
    match: TextMatch,
    columns: Sequence[sa.ColumnElement[Any]],
    binary: Sequence[sa.ColumnElement[Any]] = (),
) -> sa.ColumnElement[bool]:
    """SQL: one of ``columns`` or ``binary`` says it, as :class:`TextMatch` decides in Python.
    ``binary`` columns may compare case-sensitively (MariaDB's JSON is utf8mb4_bin): they are
    lowered first, the others are left as their index has them."""
    if match.regex:
        return sa.or_(*(c.regexp_match("(?i)" + match.text) for c in (*columns, *binary)))
    lowered = match.text.lower()
    return sa.or_(
        *(c.contains(match.text, autoescape=True) for c in columns),
        *(sa.func.lower(c).contains(lowered, autoescape=True) for c in binary),
    )


_MESSAGE_COLUMNS = (
    M.c.id,
    M.c.session_id,
    M.c.role,
    M.c.content,
    json_as_text(M.c.tool_calls),
    M.c.tool_call_id,
    M.c.name,
    M.c.created_at,
)


def _message(row: Any) -> Message:
    return Message(
        id=row.id,
        session_id=row.session_id,
        role=row.role,
        content=row.content,
        tool_calls=json_value(row.tool_calls),
        tool_call_id=row.tool_call_id,
        name=row.name,
        created_at=row.created_at,
    )


def matching_messages(
    conn: Connection,
    match: TextMatch,
    *,
    session_id: int | None = None,
    role: str | None = None,
    since: datetime | None = None,
    limit: int | None = None,
    newest_first: bool = True,
) -> list[Message]:
    """The messages that say it (content, tool-call arguments, tool results).

    With the FULLTEXT indexes and a text they hold words of: the newest NEWEST_ROWS_FIRST rows
    scanned first (enough when they hold ``limit`` hits), then each column's index asked for
    its candidates, filtered exactly (an OR of the two MATCHes would scan every row)."""
    content, calls = M.c.content, sa.type_coerce(M.c.tool_calls, sa.Text)
    indexed = () if match.regex else fulltext_index(conn)
    terms = fulltext_terms(match.text) if indexed else None

    def query(condition: sa.ColumnElement[bool]) -> list[Message]:
        q = sa.select(*_MESSAGE_COLUMNS).where(condition)
        if session_id is not None:
            q = q.where(M.c.session_id == session_id)
        if role is not None:
            q = q.where(M.c.role == role)
        if since is not None:
            q = q.where(dialect_of(conn).time_compare(M.c.created_at, ">=", since, no_time=False))
        q = q.order_by(M.c.id.desc() if newest_first else M.c.id)
        return [_message(r) for r in conn.execute(q if limit is None else q.limit(limit))]

    says = _says(match, [content], [calls])
    if terms is None:
        return query(says)
    newest = int(conn.execute(sa.select(sa.func.max(M.c.id))).scalar() or 0)
    boundary = newest - NEWEST_ROWS_FIRST
    found = {m.id: m for m in query(sa.and_(M.c.id > boundary, says))}
    if newest_first and limit is not None and len(found) >= limit:
        return list(found.values())
    for column, exact in (
        (M.c.content, _says(match, [content])),
        (M.c.tool_calls, _says(match, [], [calls])),
    ):
        condition = sa.and_(M.c.id <= boundary, exact)
        if column.name in indexed:
            against = dialect_of(conn).fulltext_match(column, terms)
            condition = sa.and_(against, condition)
        found.update((m.id, m) for m in query(condition))
    ordered = sorted(found.values(), key=lambda m: m.id, reverse=newest_first)
    return ordered[:limit] if limit is not None else ordered


def matching_summaries(
    conn: Connection,
    match: TextMatch,
    *,
    session_id: int | None = None,
    since: datetime | None = None,
    limit: int | None = None,
) -> list[Compaction]:
    """The checkpoints whose summary says it, newest first."""
    query = sa.select(C).where(_says(match, [C.c.summary]))
    if session_id is not None:
        query = query.where(C.c.session_id == session_id)
    if since is not None:
        query = query.where(
            dialect_of(conn).time_compare(C.c.created_at, ">=", since, no_time=False)
        )
    query = query.order_by(C.c.id.desc())
    if limit is not None:
        query = query.limit(limit)
    rows = conn.execute(query.with_only_columns(*_COMPACTION_COLUMNS)).all()
    return [compaction_from_row(r) for r in rows]


def _checkpoints_of(conn: Connection, session_ids: set[int]) -> dict[int, list[Compaction]]:
    found: dict[int, list[Compaction]] = defaultdict(list)
    if session_ids:
        rows = conn.execute(
            sa.select(*_COMPACTION_COLUMNS)
            .where(C.c.session_id.in_(sorted(session_ids)))
            .order_by(C.c.id)
        )
        for row in rows:
            found[row.session_id].append(compaction_from_row(row))
    return found


def search(
    engine: Engine,
    match: TextMatch,
    *,
    session: str | int | None = None,
    role: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
) -> list[SearchHit]:
    """``Store(engine).search(match, ...)``, kept under the name docs/search.md showed."""
    return Store(engine).search(match, session=session, role=role, since=since, limit=limit)


def matching_hits(
    conn: Connection,
    match: TextMatch,
    *,
    session_id: int | None = None,
    role: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
) -> list[SearchHit]:
    """Messages and checkpoint summaries that say it, newest first, at most ``limit``, each
    with where it stands in its session's restored context today. ``role`` "summary" keeps
    the summaries only; any other role keeps that role's messages only."""
    messages = (
        []
        if role == SUMMARY_ROLE
        else matching_messages(
            conn, match, session_id=session_id, role=role, since=since, limit=limit
        )
    )
    summaries = (
        matching_summaries(conn, match, session_id=session_id, since=since, limit=limit)
        if role in (None, SUMMARY_ROLE)
        else []
    )
    checkpoints = _checkpoints_of(
        conn, {m.session_id for m in messages} | {c.session_id for c in summaries}
    )
    hits = [
        SearchHit(
            m.session_id,
            "message",
            m.id,
            m.role,
            m.created_at,
            snippet(searchable_text(m), match) or snippet(_raw_text(m), match),
            trace_fact([m], checkpoints[m.session_id], match.found_in),
        )
        for m in messages
    ]
    for cp in summaries:
        later = [c for c in checkpoints[cp.session_id] if c.id >= cp.id]
        hits.append(
            SearchHit(
                cp.session_id,
                "summary",
                cp.id,
                SUMMARY_ROLE,
                cp.created_at,
                snippet(cp.summary, match),
                trace_fact([], later, match.found_in),
            )
        )
    hits.sort(key=lambda h: (h.created_at or datetime.min, h.kind == "summary", h.id), reverse=True)
    return hits[:limit]


@dataclass(frozen=True)
class SessionTrace:
    """A fact through one session: the messages that say it, and the trace over checkpoints."""

    session_id: int
    match: TextMatch
    messages: list[Message]
    checkpoints: list[Compaction]
    trace: FactTrace

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "text": self.match.text,
            "regex": self.match.regex,
            "where": self.trace.describe() if self.trace.message_ids or self.trace.steps else None,
            "appeared_in": [
                {
                    "id": m.id,
                    "role": m.role,
                    "created_at": m.created_at,
                    "snippet": snippet(searchable_text(m), self.match)
                    or snippet(_raw_text(m), self.match),
                }
                for m in self.messages
            ],
            **self.trace.as_dict(),
        }


def trace_session(conn: Connection, session_id: int, match: TextMatch) -> SessionTrace:
    """Where ``match`` appeared in one session and what every checkpoint since did with it."""
    messages = matching_messages(conn, match, session_id=session_id, newest_first=False)
    checkpoints = _checkpoints_of(conn, {session_id})[session_id]
    return SessionTrace(
        session_id, match, messages, checkpoints, trace_fact(messages, checkpoints, match.found_in)
    )
