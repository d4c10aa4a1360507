"""A restored context read a page at a time, for ``context show`` of a context too long to hold.

Keyset pages over ``(session_id, id)``: each page is one query that starts after the last id of
the one before, so a million-message context is read in the memory of a page, and no page
costs more than the first (an ``OFFSET`` would rescan what it skips).
"""

from __future__ import annotations

from collections.abc import Iterator

import sqlalchemy as sa

from ..core.inspection import PAGE_ENTRIES, ContextPoint, ContextStream
from ..core.records import Message
from ..core.tokens import encoding_for_model
from ..db import dialect_of
from ..db.schema import agent_message as M
from .reads import (
    _MESSAGE_COLUMNS,
    SessionHistory,
    connection_for,
    read_messages,
    span_at,
)

# A message without its text: what decides the order sent and what each entry is.
_OUTLINE_COLUMNS = [
    sa.case((M.c.role == "assistant", sa.type_coerce(M.c.tool_calls, sa.Text)), else_=None).label(
        "tool_calls"
    )
    if column.name == "tool_calls"
    else sa.null().label(column.name)
    if column.name in ("content", "name", "token_count", "token_encoding", "source_id", "details")
    else column
    for column in _MESSAGE_COLUMNS
]
_OUTLINE_COLUMNS_UNTIMED = [
    sa.null().label("created_at") if c.name == "created_at" else c for c in _OUTLINE_COLUMNS
]


def stream_context(
    history: SessionHistory,
    checkpoint_id: int | None = None,
    before_first: bool = False,
    encoding: str | None = None,
    page_entries: int = PAGE_ENTRIES,
) -> ContextStream:
    """The same context as :meth:`SessionHistory.view`, as a
    :class:`~ctxtool.core.inspection.ContextStream`: nothing is read until it is printed, then
    pages of ``page_entries`` messages."""
    point = history.point(checkpoint_id, before_first)
    choice = encoding_for_model(history.session.model, encoding)
    pages = ContextPages(history, point, page_entries)
    return ContextStream(history.session, point, pages, pages.fetch, choice.name, choice.estimate)


class ContextPages:
    """The messages of the context at ``point``, page by page in id order."""

    def __init__(self, history: SessionHistory, point: ContextPoint, size: int):
        self.store, self.session_id = history.store, history.session_id
        self.engine = history.store.engine
        self.point, self.size = point, size

    def __call__(self, text: bool, through: int | None = None) -> Iterator[list[Message]]:
        """Pages of the context (``text``: whole rows; else the outline: ids, roles, tool-call
        links, and times where they decide what the context holds), ids up to ``through``."""
        point = self.point
        if text:
            columns = _MESSAGE_COLUMNS
        else:  # times only where they decide what the context holds (point.holds)
            columns = _OUTLINE_COLUMNS if point.replaced_by else _OUTLINE_COLUMNS_UNTIMED
        query = span_at(dialect_of(self.engine), self.session_id, point, columns)
        if through is not None:
            query = query.where(M.c.id <= through)
        for rows in self.store.keyset_pages(query, self.size):
            yield [m for m in rows if point.holds(m)]

    def fetch(self, ids: list[int]) -> dict[int, Message]:
        """This session's messages of the given ids, by id (the results moved up to a call)."""
        found: dict[int, Message] = {}
        with connection_for(self.engine, None) as c:
            # In lists of a page's length: SQLite takes at most 32,766 parameters a statement.
            for i in range(0, len(ids), self.size):
                query = sa.select(*_MESSAGE_COLUMNS).where(
                    M.c.session_id == self.session_id, M.c.id.in_(ids[i : i + self.size])
                )
                found.update((m.id, m) for m in read_messages(c, query))
        return found
