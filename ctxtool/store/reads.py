"""Reading the context store: sessions, messages, checkpoints and restored contexts.

The queries here follow the hot paths the indexes were built for: the latest checkpoint of a
session (``idx_compaction_session_id``) and the messages of a session from an id on
(``idx_message_session_id_tokens``). Nothing reads a whole history unless asked to.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from ..core.context_size import (
    context_token_counts,
    restored_context_tokens,
    stored_summary_count,
)
from ..core.errors import CtxtoolError
from ..core.records import (
    CHAT_ROLES,
    Compaction,
    Message,
    RestoredContext,
    Session,
    restore_context,
)
from ..core.tokens import count_text, encoding_for_model
from ..db import dialect_of, read_connection
from ..db.schema import BIGINT_MAX
from ..db.schema import agent_compaction as C
from ..db.schema import agent_message as M
from ..db.schema import agent_session as S
from ..db.stored_time import parse_stored_time

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from ..core.inspection import CheckpointDiff, ContextPoint, ContextView
    from ..core.trace import TextMatch
    from ..core.validation import Issue
    from ..core.windows import CompactionSettings
    from ..db.dialects import Dialect
    from .candidates import EffectiveContext
    from .context_sums import SumsToKeep
    from .counts import CountResult
    from .removal import SessionFootprint
    from .search import SearchHit, SessionTrace


def json_as_text(column: sa.Column) -> sa.ColumnElement:
    """A JSON column read as its text (decode it with :func:`json_value`): a runtime may have
    written what is not JSON (SQLite does not check), and SQLAlchemy's JSON type then fails the
    whole read instead of this one value."""
    return sa.type_coerce(column, sa.Text).label(column.name)


# A message row is read in the order of the Message record's fields (one source of truth for
# the columns: the record, named as in the schema). JSON columns arrive as text and are decoded
# with orjson only where they hold something: most rows have no tool calls or details, and
# SQLAlchemy's per-row json.loads plus building records by keyword cost far more than the
# fetch itself.
_MESSAGE_FIELDS = [f.name for f in dataclasses.fields(Message)]
_MESSAGE_JSON_AT = [
    i for i, name in enumerate(_MESSAGE_FIELDS) if isinstance(M.c[name].type, sa.JSON)
]
_FIRST_JSON, _SECOND_JSON = _MESSAGE_JSON_AT  # tool_calls, details
_CREATED_AT = _MESSAGE_FIELDS.index("created_at")  # text when MySQL holds a zero date
# A count a runtime wrote that no message can have is no count: it reads as NULL, so every
# reader recounts it rather than adding it up (and ``tokens count`` replaces it, see
# counts._pending_filter). Not one: below 1 (every message costs its chat framing, 4 tokens
# and more; a runtime may write 0 or -1 for "unknown"), or over MAX_MESSAGE_TOKENS.
# A token is at least one byte and no row holds more than 1 GB (MySQL's max_allowed_packet,
# SQLite's SQLITE_MAX_LENGTH at most): a larger count is a placeholder, not a measure.
MAX_MESSAGE_TOKENS = 1 << 30
TRUSTED_COUNT = sa.and_(M.c.token_count >= 1, M.c.token_count <= MAX_MESSAGE_TOKENS)
STORED_TOKEN_COUNT = sa.case((TRUSTED_COUNT, M.c.token_count), else_=None).label("token_count")


def usable_count(encoding) -> sa.ColumnElement[bool]:
    """SQL: the row's stored count is what the model reads under ``encoding`` (a literal or an
    expression): trusted, and made with it. ``context_size.has_usable_count`` in Python."""
    return sa.and_(TRUSTED_COUNT, _as_bytes(M.c.token_encoding) == _as_bytes(encoding))


def _as_bytes(value) -> sa.ColumnElement[Any]:
    """A text compared as bytes, as Python compares it: MySQL's collations would take
    ``O200K_BASE`` or ``'o200k_base '`` for ``o200k_base`` (see :func:`has_chat_role`)."""
    text = value if isinstance(value, sa.ColumnElement) else sa.literal(value, sa.String)
    return sa.cast(text, sa.LargeBinary)


def no_usable_count(encoding) -> sa.ColumnElement[bool]:
    """SQL: the complement of :func:`usable_count`, NULLs included (a NOT over its NULL would
    pass over the rows that have no count at all)."""
    return sa.or_(
        M.c.token_count.is_(None),
        sa.not_(TRUSTED_COUNT),
        M.c.token_encoding.is_(None),
        _as_bytes(M.c.token_encoding) != _as_bytes(encoding),
    )


def usable_count_sums(encoding) -> tuple[sa.Label[Any], sa.Label[Any]]:
    """SQL aggregates over message rows: ``tokens``, the sum of their usable counts under
    ``encoding``, and ``uncounted``, how many rows have none."""
    usable = usable_count(encoding)
    return (
        sa.func.sum(sa.case((usable, M.c.token_count), else_=0)).label("tokens"),
        sa.func.sum(sa.case((usable, 0), else_=1)).label("uncounted"),
    )


_MESSAGE_COLUMNS = [
    json_as_text(M.c[name])
    if isinstance(M.c[name].type, sa.JSON)
    else STORED_TOKEN_COUNT
    if name == "token_count"
    else M.c[name]
    for name in _MESSAGE_FIELDS
]
_SESSION_COLUMNS = [
    S.c.session_id,
    S.c.user_id,
    S.c.project_id,
    S.c.title,
    S.c.model,
    S.c.system_prompt,
    S.c.source_format,
    S.c.source_id,
    S.c.created_at,
    S.c.updated_at,
    json_as_text(S.c.details),
]
_COMPACTION_COLUMNS = [
    C.c.id,
    C.c.session_id,
    C.c.summary,
    C.c.first_kept_message_id,
    C.c.tokens_before,
    C.c.parent_compaction_id,
    C.c.summary_tokens,
    C.c.tokens_after,
    C.c.summarizer,
    C.c.summarizer_model,
    C.c.source_id,
    json_as_text(C.c.details),
    C.c.created_at,
]

# The reads every compaction makes, built once with their values bound at execution: a
# statement built for every call cost more CPU than its round trip (its construction and the
# walk that finds its compiled form in the cache).
_SESSION_QUERY = sa.select(*_SESSION_COLUMNS).where(S.c.session_id == sa.bindparam("sid"))
_LATEST_COMPACTION_QUERY = (
    sa.select(*_COMPACTION_COLUMNS)
    .where(C.c.session_id == sa.bindparam("sid"))
    .order_by(C.c.id.desc())
    .limit(1)
)
# The session and its latest checkpoint (the newest id of the session's, as
# _LATEST_COMPACTION_QUERY reads it), one row: what every read of a restored context starts from.
_NEWER = C.alias("newer")
_HEAD_QUERY = (
    sa.select(*_SESSION_COLUMNS, *(c.label(f"latest_{c.name}") for c in _COMPACTION_COLUMNS))
    .select_from(
        S.outerjoin(
            C,
            C.c.id
            == sa.select(sa.func.max(_NEWER.c.id))
            .where(_NEWER.c.session_id == S.c.session_id)
            .scalar_subquery(),
        )
    )
    .where(S.c.session_id == sa.bindparam("sid"))
)
_SESSION_NAMES = [c.name for c in _SESSION_COLUMNS]
_COMPACTION_NAMES = [c.name for c in _COMPACTION_COLUMNS]
# The head as a compaction reads it (read_suffix): of the session what restoring and planning
# read (its model, its system prompt and that prompt's stored count, the title a summarizer
# is given), of the checkpoint its summary, cut, parent and stored counts. The driver parses
# each column's description: the 24 columns of _HEAD_QUERY cost 1.5-2x these 12.
_PLANNED_SESSION = [
    c
    for c in _SESSION_COLUMNS
    if c.name in {"session_id", "title", "model", "system_prompt", "details"}
]
_PLANNED_COMPACTION = [
    c
    for c in _COMPACTION_COLUMNS
    if c.name
    in {
        "id",
        "session_id",
        "summary",
        "first_kept_message_id",
        "parent_compaction_id",
        "summary_tokens",
        "details",
    }
]
_PLANNED_HEAD_QUERY = _HEAD_QUERY.with_only_columns(
    *_PLANNED_SESSION, *(c.label(f"latest_{c.name}") for c in _PLANNED_COMPACTION)
)
_PLANNED_NAMES = ([c.name for c in _PLANNED_SESSION], [c.name for c in _PLANNED_COMPACTION])
_LATEST_COMPACTION_ID_QUERY = sa.select(sa.func.max(C.c.id)).where(
    C.c.session_id == sa.bindparam("sid")
)
_MESSAGES_QUERY = sa.select(*_MESSAGE_COLUMNS).where(M.c.session_id == sa.bindparam("sid"))
_MESSAGES_FROM_QUERY = _MESSAGES_QUERY.where(M.c.id >= sa.bindparam("from_id")).order_by(M.c.id)
_MESSAGES_QUERY = _MESSAGES_QUERY.order_by(M.c.id)


# An id in a statement: a value, or a parameter bound when a statement built once runs.
IdValue = int | sa.BindParameter[Any]


def span_messages(
    session_id: IdValue, from_id: IdValue | None, to_id: IdValue
) -> sa.ColumnElement[bool]:
    """SQL: a session's messages with ``from_id <= id < to_id`` (no lower bound for None): the
    range a checkpoint summarized, one range of the primary key."""
    condition = sa.and_(M.c.session_id == session_id, M.c.id < to_id)
    return condition if from_id is None else sa.and_(condition, M.c.id >= from_id)


def span_totals(session_id: IdValue, from_id: IdValue | None, to_id: IdValue) -> sa.Select[Any]:
    """SQL: ``n`` and ``id_sum`` of the messages in a span (:func:`span_messages`), what a
    checkpoint records of the span it summarized, read from the covering index."""
    return sa.select(
        sa.func.count().label("n"), sa.func.coalesce(sa.func.sum(M.c.id), 0).label("id_sum")
    ).where(span_messages(session_id, from_id, to_id))


def latest_compaction_id(conn: Connection, session_id: int) -> int:
    """Id of the session's latest checkpoint, 0 when it has none (the parent of its next): the
    check every writer of a checkpoint makes inside its transaction."""
    return int(conn.execute(_LATEST_COMPACTION_ID_QUERY, {"sid": session_id}).scalar() or 0)


def read_messages(
    conn: Connection, query: sa.Select, params: Mapping[str, Any] | None = None
) -> list[Message]:
    """The records of a query over ``_MESSAGE_COLUMNS`` (with its bound ``params``), as
    cheaply as the driver allows."""
    with _no_cycle_collection():
        return [message_from_row(r) for r in dialect_of(conn).plain_rows(conn, query, params)]


def message_from_row(row) -> Message:
    if (
        row[_FIRST_JSON] is None
        and row[_SECOND_JSON] is None
        and row[_CREATED_AT].__class__ is not str
    ):  # most rows: nothing to decode
        return Message(*row)
    values = list(row)
    for i in _MESSAGE_JSON_AT:
        if values[i] is not None:
            values[i] = json_value(values[i])
    if values[_CREATED_AT].__class__ is str:
        values[_CREATED_AT] = parse_stored_time(values[_CREATED_AT])
    return Message(*values)


@contextlib.contextmanager
def _no_cycle_collection():
    """Pause the cyclic garbage collector while a history is turned into records: the records
    form no cycles, yet each generation-0 collection walks every new container, which cost a
    100k-message load 15% (bench_restore.py). Reference counting still frees everything; the
    collector runs again as soon as the load is done (unless the caller had turned it off)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def json_value(text):
    """A JSON column's value from its text; what does not parse is kept as the text."""
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        # What the servers' JSON functions read and orjson refuses: a number out of a float's
        # range (1e400), nesting deeper than 1,024. Read as the server reads it, or the sums
        # see a call that the records do not (review finding).
        return json.loads(text)
    except (ValueError, RecursionError):  # a runtime wrote something odd: show it, do not fail
        return text


def compaction_from_row(row) -> Compaction:
    """A row of ``_COMPACTION_COLUMNS`` as its record."""
    return _record(Compaction, dict(row._mapping))


def _record(record, fields: dict[str, Any]):
    """The ``record`` (Session or Compaction) of a row's ``fields``, its details decoded."""
    fields["details"] = json_value(fields["details"])
    return record(**fields)


@dataclasses.dataclass(frozen=True)
class SessionHead:
    """Where every read of a session's restored context starts: the session, the encoding its
    counts are in, its latest checkpoint, and the cut (the first message kept after that
    checkpoint; None: the session's first message)."""

    session: Session
    encoding: str
    latest: Compaction | None

    @property
    def cut(self) -> int | None:
        return self.latest.first_kept_message_id if self.latest else None


class Store:
    """The context store behind one engine.

    Example::

        store = Store(create_engine("sqlite:///ctxtool.db"))
        ctx = store.restored_context(42)
        send_to_model(ctx.to_openai())
    """

    def __init__(self, engine: Engine):
        self.engine = engine

    # -- sessions ------------------------------------------------------------------------------

    def session(self, session_id: int, conn: Connection | None = None) -> Session:
        """The session, or CtxtoolError naming it when it does not exist."""
        with connection_for(self.engine, conn) as c:
            return read_session(c, session_id)

    def resolve_session(
        self, ref: str | int, conn: Connection | None = None, *, leftovers: bool = False
    ) -> int:
        """The ctxtool id of the session ``ref`` names: its id, its source id (the transcript's
        session id, e.g. a Claude Code UUID), ``format:source_id`` as `sessions list` shows it,
        or a unique prefix of a source id. An unknown or ambiguous reference is a CtxtoolError
        naming it (an ambiguous prefix lists its candidates).

        ``leftovers``: a plain id whose session row is gone but whose messages or checkpoints
        are left (``validate`` reports them, ``sessions delete`` removes them) is that id too."""
        try:
            return self._resolve_session(str(ref).strip(), conn)
        except CtxtoolError:
            plain = plain_session_id(ref) if leftovers else None
            if plain is None:
                raise
            with connection_for(self.engine, conn) as c:
                left = any(
                    c.execute(sa.select(t.c.id).where(t.c.session_id == plain).limit(1)).first()
                    for t in (M, C)
                )
            if not left:
                raise
            return plain

    def _resolve_session(self, text: str, conn: Connection | None) -> int:
        if not text.isascii() and not _encodable(text):  # a non-UTF-8 argument ($'\xff')
            shown = text.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
            raise CtxtoolError(f"session {shown} does not exist (not valid UTF-8)")
        with connection_for(self.engine, conn) as c:
            plain = plain_session_id(text)
            if plain is not None:
                found = c.execute(sa.select(S.c.session_id).where(S.c.session_id == plain)).scalar()
                if found is not None:
                    return int(found)
            if not text:
                raise CtxtoolError("no session given")
            query = sa.select(S.c.session_id, S.c.source_format, S.c.source_id, S.c.title)
            conditions = [S.c.source_id.startswith(text, autoescape=True)]
            fmt, _, rest = text.partition(":")
            if rest:
                conditions.append(
                    sa.and_(
                        S.c.source_format == fmt, S.c.source_id.startswith(rest, autoescape=True)
                    )
                )
            rows = c.execute(
                query.where(sa.or_(*conditions)).order_by(S.c.session_id).limit(51)
            ).all()

        # The database may compare case-insensitively: the exact spelling decides.
        def full(r) -> str:
            return f"{r.source_format}:{r.source_id}"

        exact = [r for r in rows if r.source_id == text or full(r) == text]
        prefixed = [
            r for r in rows if (r.source_id or "").startswith(text) or full(r).startswith(text)
        ] or rows
        candidates = exact or prefixed
        if len(candidates) == 1:
            return int(candidates[0].session_id)
        if not candidates:
            raise CtxtoolError(
                f"session {text} does not exist (no session id, source id or "
                "source id prefix matches it)"
            )
        shown = "; ".join(f"{r.session_id} ({full(r)})" for r in candidates[:10])
        more = f"; and {len(candidates) - 10} more" if len(candidates) > 10 else ""
        raise CtxtoolError(
            f"session {text} is ambiguous, it is a prefix of the source ids of "
            f"sessions {shown}{more}: give more characters or the id"
        )

    def delete_sessions(self, session_ids: list[int]) -> list[SessionFootprint]:
        """Remove the sessions with everything they hold, in one transaction; what was
        removed."""
        from .removal import remove_sessions

        with self.engine.begin() as conn:
            return remove_sessions(conn, session_ids)

    def mark_over_window_ok(self, session: str | int, ok: bool = True) -> int:
        """Record (``ok``) or clear the operator's acknowledgement that the session ``session``
        names stays over its window (``store.acknowledgement``); its id."""
        from .acknowledgement import set_over_window_ok

        with self.engine.begin() as conn:
            session_id = self.resolve_session(session, conn)
            set_over_window_ok(conn, session_id, ok)
        return session_id

    def session_ids(self, conn: Connection | None = None) -> list[int]:
        with connection_for(self.engine, conn) as c:
            return session_ids(c)

    def validate(
        self,
        session_id: int | None = None,
        settings: CompactionSettings | None = None,
        on_checked: Callable[[int, int], None] | None = None,
    ) -> tuple[list[Issue], int]:
        """Check the consistency rules for one session or all of them, in one read
        transaction; (issues, sessions checked). See ``checks.validate``."""
        from .checks import validate

        with read_connection(self.engine) as conn:
            return validate(conn, session_id, settings, on_checked)

    # -- checkpoints ---------------------------------------------------------------------------

    def latest_compaction(
        self, session_id: int, conn: Connection | None = None
    ) -> Compaction | None:
        with connection_for(self.engine, conn) as c:
            row = c.execute(_LATEST_COMPACTION_QUERY, {"sid": session_id}).first()
        return compaction_from_row(row) if row else None

    def latest_compaction_id(self, session_id: int, conn: Connection | None = None) -> int:
        """Id of the session's latest checkpoint, 0 when it has none (the parent of its next)."""
        with connection_for(self.engine, conn) as c:
            return latest_compaction_id(c, session_id)

    def compactions(self, session_id: int, conn: Connection | None = None) -> list[Compaction]:
        with connection_for(self.engine, conn) as c:
            rows = c.execute(
                sa.select(*_COMPACTION_COLUMNS).where(C.c.session_id == session_id).order_by(C.c.id)
            )
            return [compaction_from_row(r) for r in rows]

    # -- messages ------------------------------------------------------------------------------

    def messages(
        self,
        session_id: int,
        from_id: int | None = None,
        before_id: int | None = None,
        conn: Connection | None = None,
        *,
        texts_of: sa.ColumnElement[bool] | None = None,
        newest: int | None = None,
        only: sa.ColumnElement[bool] | None = None,
    ) -> list[Message]:
        """Messages of a session in id order (see :func:`session_messages`)."""
        with connection_for(self.engine, conn) as c:
            return session_messages(
                c, session_id, from_id, before_id, texts_of=texts_of, newest=newest, only=only
            )

    def iter_messages(
        self, session_id: int, batch: int = 1000, conn: Connection | None = None
    ) -> Iterator[Message]:
        """The whole history of a session, in id-keyed batches (flat memory)."""
        query = sa.select(*_MESSAGE_COLUMNS).where(M.c.session_id == session_id).order_by(M.c.id)
        for page in self.keyset_pages(query, batch, conn):
            yield from page

    def keyset_pages(
        self, query: sa.Select, size: int, conn: Connection | None = None
    ) -> Iterator[list[Message]]:
        """The messages of ``query`` (ordered by id) a page of ``size`` at a time, each page one
        query starting after the last id of the one before: flat memory, and no page costs
        more than the first (an ``OFFSET`` would rescan what it skips). A connection a page
        unless ``conn``: a reader held open for a whole pass would keep a writer's changes from
        being checkpointed on SQLite."""
        query = query.limit(size)
        last: int | None = None
        while True:
            with connection_for(self.engine, conn) as c:
                rows = read_messages(c, query if last is None else query.where(M.c.id > last))
            if not rows:
                return
            last = rows[-1].id
            yield rows
            if len(rows) < size:
                return

    # -- restored context ----------------------------------------------------------------------

    def head(
        self, session_id: int, encoding: str | None = None, conn: Connection | None = None
    ) -> SessionHead:
        """What every read of a session's restored context starts from (see
        :func:`session_head`)."""
        with connection_for(self.engine, conn) as c:
            return session_head(c, session_id, encoding)

    def restored_context(self, session_id: int, conn: Connection | None = None) -> RestoredContext:
        """System prompt + latest summary + messages from its cut on (reads only that suffix)."""
        with connection_for(self.engine, conn) as c:
            return restored_context(c, session_id)

    def token_report(
        self, session_id: int | None = None, encoding: str | None = None
    ) -> list[dict]:
        """Per session: history vs effective tokens (see ``store.reports.token_report``), read
        on a connection of its own."""
        from .reports import token_report

        with read_connection(self.engine) as conn:
            return token_report(conn, session_id, encoding)

    def context_tokens(
        self, session_id: int, encoding: str | None = None, conn: Connection | None = None
    ) -> int:
        """Current context tokens of a session (see :func:`context_tokens`)."""
        with connection_for(self.engine, conn) as c:
            return context_tokens(c, session_id, encoding)

    def list_sessions(
        self,
        user_id: str | None = None,
        project_id: str | None = None,
        source_format: str | None = None,
        limit: int = 50,
        *,
        search: str | None = None,
        model: str | None = None,
        since: datetime | None = None,
        over_window: CompactionSettings | None = None,
        sort: str = "id",
        rescan: bool = False,
    ) -> list[dict[str, Any]]:
        """Sessions with their last activity, message and checkpoint counts, in ``sort`` order
        (see ``session_list.list_sessions``). ``over_window`` (CompactionSettings) keeps only
        the sessions whose restored context is over their threshold, found as ``compact
        --all`` finds them (:meth:`over_threshold`)."""
        from .session_list import check_order, list_sessions

        check_order(sort, rescan, over_window is not None)
        with read_connection(self.engine) as conn:
            over = None if over_window is None else self.over_threshold(over_window, rescan=rescan)
            return list_sessions(
                conn,
                user_id,
                project_id,
                source_format,
                limit,
                search=search,
                model=model,
                since=since,
                over=over,
                sort=sort,
                rescan=rescan,
            )

    # -- token counts (store.counts) ----------------------------------------------------------

    def count_pending(
        self, session_id: int | None = None, encoding: str | None = None, recount: bool = False
    ) -> int:
        """How many messages a :meth:`count_tokens` run would (re)count."""
        from .counts import count_pending

        with read_connection(self.engine) as conn:
            return count_pending(conn, session_id, encoding, recount)

    def count_tokens(
        self,
        session_id: int | None = None,
        encoding: str | None = None,
        recount: bool = False,
        batch_size: int | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> CountResult:
        """Count and store tokens of messages that have none or were counted with another
        encoding, and of the heads (:meth:`count_heads`).

        ``encoding`` overrides the per-session choice; ``recount`` recounts everything in
        scope. ``batch_size`` messages are read a transaction (``counts.DEFAULT_BATCH``), the
        next batch read while this one is counted; each batch's counts are written in a
        transaction of their own, and ``on_batch(n)`` is called once a batch of n messages is
        committed."""
        from .counts import (
            DEFAULT_BATCH,
            CountResult,
            count_batch,
            pending_counts,
            read_pending,
            write_counts,
        )

        size = DEFAULT_BATCH if batch_size is None else batch_size
        result = CountResult()
        result.heads_counted = self.count_heads(session_id, encoding, recount)
        with read_connection(self.engine) as conn:
            todo = pending_counts(conn, session_id, encoding, recount)
        if not todo.pending or todo.lowest is None:  # lowest is None only when nothing is
            return result  # pending

        def fetch(after: int) -> Sequence[Any]:
            with read_connection(self.engine) as conn:
                return read_pending(conn, todo, after, size)

        def write(counted: list[tuple[str, list[int], list[int]]], n: int) -> None:
            with self.engine.begin() as conn:
                write_counts(conn, counted)
            result.batches += 1
            if on_batch:
                on_batch(n)

        with ThreadPoolExecutor(max_workers=1) as reader, ThreadPoolExecutor(1) as writer:
            rows = fetch(todo.lowest - 1)
            written = None
            while rows:
                upcoming = reader.submit(fetch, rows[-1].id)
                counted = count_batch(rows, result)
                if written is not None:
                    written.result()  # in order, and at most one batch waiting to be written
                written = writer.submit(write, counted, len(rows))
                rows = upcoming.result()
            if written is not None:
                written.result()
        return result

    def count_heads(
        self,
        session_id: int | None = None,
        encoding: str | None = None,
        recount: bool = False,
        batch_size: int | None = None,
    ) -> int:
        """Count the system prompts and the checkpoint summaries (as sent) that have no count
        kept in their details under the encoding their session calls for (``encoding``: this
        one), and keep it there (``core.context_size.HEAD_COUNTS_KEY``); ``recount``: every one
        in scope. Returns how many were counted. Showing a context whose messages are all
        counted then loads no vocabulary. A details value that is no JSON object (a runtime's)
        is left alone.

        The rows are read ``batch_size`` at a time in key order (keyset), each page's counts
        kept in one transaction: memory stays flat however many texts the store holds."""
        from .counts import DEFAULT_BATCH, head_counts, head_queries, keep_head_counts

        size = DEFAULT_BATCH if batch_size is None else batch_size
        counted = 0
        for head, key, query in head_queries(session_id):
            query = query.order_by(key).limit(size)
            rows: Sequence[Any] = ()
            while True:
                page = query.where(key > rows[-1].key) if rows else query
                with read_connection(self.engine) as conn:
                    rows = conn.execute(page).all()
                kept = head_counts(head, rows, encoding, recount)
                if kept:
                    with self.engine.begin() as conn:
                        keep_head_counts(conn, head, kept)
                counted += len(kept)
                if len(rows) < size:
                    break
        return counted

    # -- the sums kept between runs (store.context_sums) ---------------------------------------

    def remember_sums(self, rows: Sequence[SumsToKeep]) -> int:
        """Keep the given sums, each only where its row is still as the run read it (or still
        absent); how many were written. A chunk that meets a sibling writing the same rows (a
        certification conflict on a cluster, a lock wait) is left to a later run: this is a
        cache, and nothing waits for it."""
        from .context_sums import write_sums

        return sum(self._in_chunks(rows, write_sums))

    def remember_pairing(
        self, proved: Mapping[int, tuple[int, int]], versions: Mapping[int, int]
    ) -> int:
        """Note that the server proved each session's calls answered next from its cut
        through a message (``proved``: {session: (checkpoint id, message id)}), on the rows
        still kept for that checkpoint at the version in ``versions``
        (``context_sums.versions_after``). Best effort, as :meth:`remember_sums`; how many
        rows took a proof (see ``context_sums.mark_pairing``)."""
        from .context_sums import mark_pairing, pairing_marks

        return sum(self._in_chunks(pairing_marks(proved, versions), mark_pairing))

    def _in_chunks(
        self, items: Sequence[Any], write: Callable[[Connection, Sequence[Any]], int]
    ) -> Iterator[int]:
        """``write`` each chunk of ``items`` in a transaction of its own, yielding what each
        returns; a chunk a sibling contends (a transient error) is skipped: nothing waits for a
        cache, a later run writes it."""
        from .context_sums import ROWS_PER_TRANSACTION

        for i in range(0, len(items), ROWS_PER_TRANSACTION):
            try:
                with self.engine.begin() as conn:
                    yield write(conn, items[i : i + ROWS_PER_TRANSACTION])
            except SQLAlchemyError as exc:
                if dialect_of(self.engine).transient(exc) is None:
                    raise

    # -- searching -----------------------------------------------------------------------------

    def search(
        self,
        match: TextMatch,
        *,
        session: str | int | None = None,
        role: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
    ) -> list[SearchHit]:
        """Messages and checkpoint summaries that say ``match``, newest first, at most
        ``limit``, each with where it stands in its session's restored context today (see
        ``search.matching_hits``); ``session``: any reference :meth:`resolve_session` takes."""
        from .search import matching_hits

        with read_connection(self.engine) as conn:
            session_id = None if session is None else self.resolve_session(session, conn)
            return matching_hits(
                conn, match, session_id=session_id, role=role, since=since, limit=limit
            )

    def trace_session(self, session: str | int, match: TextMatch) -> SessionTrace:
        """Where ``match`` appeared in the session ``session`` names and what every checkpoint
        since did with it (see ``search.trace_session``)."""
        from .search import trace_session

        with read_connection(self.engine) as conn:
            return trace_session(conn, self.resolve_session(session, conn), match)

    def create_fulltext_index(self) -> list[str]:
        """Add the FULLTEXT indexes search uses on MySQL/MariaDB; the columns indexed now (see
        ``search.create_fulltext_index``)."""
        from .search import create_fulltext_index

        with self.engine.connect() as conn:
            return create_fulltext_index(conn)

    # -- finding sessions to compact -----------------------------------------------------------

    def measure_contexts(
        self,
        rows: list[EffectiveContext],
        settings: CompactionSettings,
        encoding: str | None,
        force: bool = False,
        proofs: dict[int, tuple[int, int]] | None = None,
    ) -> Iterator[tuple[EffectiveContext, int]]:
        """(row, context tokens) for each session: the stored counts' sum, measured exactly (in
        memory, on a connection of its own) only where the sum cannot decide: counts it cannot
        trust (none, made with another encoding, a message resent as a user message), or a
        threshold between the sum and the sum plus what it leaves out (at most its bytes; calls
        and results that do not answer each other, at most a placeholder or a prefix each).
        ``force``: every session is compacted whatever its size, so only counts the sum cannot
        trust are measured. Sessions whose calls and results differ in number are decided by
        those bounds like the rest: measuring each one read its whole suffix, row by row.
        ``proofs``: see ``candidates.exact_context_tokens``."""
        from ..core.context_size import context_bounds, needs_measuring
        from .candidates import exact_context_tokens

        for r in rows:
            estimate = context_bounds(r.suffix, r.head_bytes)[0]
            untrusted = bool(r.suffix.uncounted or r.suffix.resent)
            if untrusted or (
                not force and needs_measuring(r.suffix, r.head_bytes, settings.threshold(r.model))
            ):
                with read_connection(self.engine) as conn:
                    estimate = exact_context_tokens(
                        conn, r.session_id, encoding, r.suffix, context=r, proofs=proofs
                    )
            yield r, estimate

    def over_threshold(
        self,
        settings: CompactionSettings,
        encoding: str | None = None,
        *,
        rescan: bool = False,
    ) -> dict[int, tuple[int, int, EffectiveContext]]:
        """{session id: (context tokens, threshold, its effective context)} of every session
        whose restored context is over its threshold, found as the cron batch finds them
        (set-based sums, from the sums earlier runs kept unless ``rescan``). Reads only."""
        from .candidates import effective_contexts

        with read_connection(self.engine) as conn:
            rows = effective_contexts(conn, encoding, rescan=rescan)
        return {
            r.session_id: (estimate, settings.threshold(r.model), r)
            for r, estimate in self.measure_contexts(rows, settings, encoding)
            if estimate > settings.threshold(r.model)
        }


def session_messages(
    conn: Connection,
    session_id: int,
    from_id: int | None = None,
    before_id: int | None = None,
    *,
    texts_of: sa.ColumnElement[bool] | None = None,
    newest: int | None = None,
    only: sa.ColumnElement[bool] | None = None,
) -> list[Message]:
    """Messages of a session in id order, optionally only ``from_id <= id < before_id``.
    ``texts_of``: content and details only of the rows it holds for (None on the others):
    planning a 600k-message session reads the text of its user messages alone.
    ``newest``: only the last that many of them (a dry run reads a session from its end);
    ``only``: only the rows it holds for."""
    if texts_of is None and before_id is None and only is None and newest is None:
        # The read of every compaction, restore and count: its statement is built once.
        if from_id is None:
            return read_messages(conn, _MESSAGES_QUERY, {"sid": session_id})
        return read_messages(conn, _MESSAGES_FROM_QUERY, {"sid": session_id, "from_id": from_id})
    columns = _MESSAGE_COLUMNS
    if texts_of is not None:
        columns = [
            sa.case((texts_of, c.element if isinstance(c, sa.Label) else c)).label(c.name)
            if c.name in ("content", "details")
            else c
            for c in _MESSAGE_COLUMNS
        ]
    query = sa.select(*columns).where(M.c.session_id == session_id)
    if from_id is not None:
        query = query.where(M.c.id >= from_id)
    if before_id is not None:
        query = query.where(M.c.id < before_id)
    if only is not None:
        query = query.where(only)
    if newest is None:
        return read_messages(conn, query.order_by(M.c.id))
    return read_messages(conn, query.order_by(M.c.id.desc()).limit(newest))[::-1]


def session_ids(conn: Connection) -> list[int]:
    """Every session's id, in order."""
    return [r[0] for r in conn.execute(sa.select(S.c.session_id).order_by(S.c.session_id))]


def read_session(conn: Connection, session_id: int) -> Session:
    """The session, or CtxtoolError naming it when it does not exist."""
    row = conn.execute(_SESSION_QUERY, {"sid": session_id}).first()
    if row is None:
        raise CtxtoolError(f"session {session_id} does not exist")
    return _record(Session, dict(row._mapping))


def restored_context(conn: Connection, session_id: int) -> RestoredContext:
    """System prompt + latest summary + messages from its cut on (reads only that suffix)."""
    return _restored(conn, session_head(conn, session_id))


def _restored(conn: Connection, head: SessionHead) -> RestoredContext:
    """The restored context of the session ``head`` starts: its suffix read from the cut."""
    sid = head.session.session_id
    suffix = session_messages(conn, sid, head.cut)
    return restore_context(sid, head.session.system_prompt, head.latest, suffix)


def session_head(
    conn: Connection, session_id: int, encoding: str | None = None, *, planning: bool = False
) -> SessionHead:
    """The session, its encoding (``encoding`` wins over the model's), its latest checkpoint
    and the cut: what every read of its restored context starts from. ``planning``: only what
    restoring and planning read (``_PLANNED_HEAD_QUERY``, a compaction's read), the session's
    and the checkpoint's other fields None."""
    query, (session_names, compaction_names) = (
        (_PLANNED_HEAD_QUERY, _PLANNED_NAMES)
        if planning
        else (_HEAD_QUERY, (_SESSION_NAMES, _COMPACTION_NAMES))
    )
    row = conn.execute(query, {"sid": session_id}).first()
    if row is None:
        raise CtxtoolError(f"session {session_id} does not exist")
    n = len(session_names)
    session = _record(Session, dict(zip(session_names, row[:n])))
    latest = None
    if row[n] is not None:
        latest = _record(Compaction, dict(zip(compaction_names, row[n:])))
    return SessionHead(session, encoding_for_model(session.model, encoding).name, latest)


def context_tokens(conn: Connection, session_id: int, encoding: str | None = None) -> int:
    """Current context tokens of a session: what its restored context costs the model.

    Stored per-message counts are used where they match the encoding; the rest (messages
    the runtime wrote without a count, the system prompt, the summary) are counted now.
    """
    head = session_head(conn, session_id, encoding)
    return restored_context_tokens(_restored(conn, head), head.encoding)


def span_at(dialect: Dialect, session_id: int, point: ContextPoint, columns: list) -> sa.Select:
    """The rows, in id order, that may hold the context at ``point`` (``point.holds`` decides
    each): one id range from its first id, bounded by the checkpoint that replaced it. The one
    span query of a view read whole and of one read a page at a time, so they cannot drift."""
    query = sa.select(*columns).where(M.c.session_id == session_id)
    if point.first_id is not None:
        query = query.where(M.c.id >= point.first_id)
    nxt = point.replaced_by
    if nxt is not None and nxt.created_at is not None:
        # Every row point.holds may keep, in whatever shape a runtime wrote its time
        # (SQLite compared them as text); a millisecond of slack, as holds decides.
        written = dialect.time_compare(
            M.c.created_at, "<=", nxt.created_at, no_time=True, slack=0.001
        )
        query = query.where(sa.or_(M.c.id < nxt.first_kept_message_id, written))
    return query.order_by(M.c.id)


class SessionHistory:
    """Reads for looking back at one session: its checkpoints, its context at any of them,
    and what changed between two. The rules are ``ctxtool.core.inspection``, imported where
    they are applied: a command that reads no history (``sessions list``) need not load them."""

    def __init__(self, store: Store, ref: str | int):
        self.store = store
        self.session_id = store.resolve_session(ref)
        self.session = store.session(self.session_id)
        self.compactions = store.compactions(self.session_id)

    def point(self, checkpoint_id: int | None = None, before_first: bool = False) -> ContextPoint:
        from ..core.inspection import point_in_history

        return point_in_history(self.compactions, checkpoint_id, before_first, str(self.session_id))

    def messages_at(self, point: ContextPoint) -> list[Message]:
        """The messages of the context at ``point``: one id range, bounded by the next
        checkpoint where there is one (never the history after it)."""
        with connection_for(self.store.engine, None) as c:
            rows = read_messages(
                c, span_at(dialect_of(c), self.session_id, point, _MESSAGE_COLUMNS)
            )
        return [m for m in rows if point.holds(m)]

    def view(
        self,
        checkpoint_id: int | None = None,
        before_first: bool = False,
        encoding: str | None = None,
    ) -> ContextView:
        """The :class:`~ctxtool.core.inspection.ContextView` at a checkpoint (default: the latest)."""
        from ..core.inspection import build_view, context_at

        point = self.point(checkpoint_id, before_first)
        ctx = context_at(self.session, point, self.messages_at(point))
        choice = encoding_for_model(self.session.model, encoding)
        counts = context_token_counts(ctx, choice.name)
        return build_view(self.session, point, ctx, counts, choice.name, choice.estimate)

    def checkpoint_rows(self) -> list[dict]:
        """Every checkpoint in order with the stored messages each one summarized."""
        from ..core.inspection import checkpoint_rows

        encoding = encoding_for_model(self.session.model).name
        summarized = []
        with connection_for(self.store.engine, None) as c:
            previous: Compaction | None = None
            for cp in self.compactions:
                low = previous.first_kept_message_id if previous is not None else None
                query = span_totals(self.session_id, low, cp.first_kept_message_id)
                summarized.append(int(c.execute(query).one().n or 0))
                previous = cp
        summary_tokens = [
            cp.summary_tokens
            if cp.summary_tokens is not None
            else stored_summary_count(cp.details, encoding, cp.summary)
            or count_text(cp.summary, encoding)
            for cp in self.compactions
        ]
        return checkpoint_rows(self.compactions, summarized, summary_tokens)

    def diff(self, a: int | None = None, b: int | None = None) -> CheckpointDiff:
        """:class:`~ctxtool.core.inspection.CheckpointDiff` of two checkpoints (default: the last two)."""
        from ..core.inspection import diff_checkpoints, pick_pair

        first, second = pick_pair(self.compactions, a, b, str(self.session_id))
        between = self.store.messages(
            self.session_id,
            first.first_kept_message_id if first else None,
            second.first_kept_message_id,
        )
        return diff_checkpoints(first, second, between)


class connection_for:
    """Use the given connection, or open (and close) one of the engine's."""

    def __init__(self, engine: Engine, conn: Connection | None):
        self.engine, self.conn = engine, conn
        self.own: Connection | None = None

    def __enter__(self) -> Connection:
        if self.conn is not None:
            return self.conn
        own = self.own = read_connection(self.engine)
        return own

    def __exit__(self, *exc):
        if self.own is not None:
            self.own.close()
        return False


def per_session(
    conn: Connection, table: sa.Table, session_ids: list[int], *aggregates
) -> dict[int, tuple]:
    """{session id: (aggregate, ...)} over the rows ``table`` holds for the given sessions, in
    one grouped query on the session_id index; a session without rows is absent."""
    return {
        r[0]: tuple(r[1:])
        for r in conn.execute(
            sa.select(table.c.session_id, *aggregates)
            .where(table.c.session_id.in_(session_ids))
            .group_by(table.c.session_id)
        )
    }


# Sessions per query when reading many restored suffixes at once (see suffix_ranges).
SESSIONS_PER_RANGE_QUERY = 500


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def plain_session_id(ref: str | int) -> int | None:
    """``ref`` as a ctxtool session id when it is written as one (digits, no leading zero, at
    most BIGINT's largest), else None: it may still be a source id."""
    text = str(ref).strip()
    if text.isdigit() and str(int(text)) == text and int(text) <= BIGINT_MAX:
        return int(text)
    return None


def text_bytes(text_column):
    """SQL: a text's length in UTF-8 bytes, 0 for NULL (LENGTH of its bytes on both databases;
    SQLite's LENGTH of text counts characters). A byte-level BPE token is at least one byte,
    so this bounds a text's tokens without reading it back."""
    return sa.func.coalesce(sa.func.length(sa.cast(text_column, sa.LargeBinary)), 0)


def has_chat_role(role_column) -> sa.ColumnElement[bool]:
    """SQL: the role is exactly one of CHAT_ROLES, compared as bytes. MySQL's collations
    compare without case and trailing spaces, and a "User" or "assistant " is resent as a user
    message with a prefix: its stored count is not what is sent (tests/test_bounds.py)."""
    return sa.cast(role_column, sa.LargeBinary).in_(sorted(r.encode() for r in CHAT_ROLES))


def suffix_ranges(cuts: Mapping[int, int | None]):
    """SQL condition for the restored suffixes of many sessions: ``(session_id = s AND id >=
    cut) OR ...``, one range per session on idx_message_session_id_tokens.

    The range optimizer reads exactly those messages. A join (or correlated subquery) on
    ``id >= cp.first_kept_message_id`` is planned as a lookup on session_id alone and reads
    whole histories instead (MariaDB has no LATERAL), as EXPLAIN and the handler counters show.
    """
    # Rendered as text (integers only, through int()): building 500 expressions a query with
    # SQLAlchemy took longer than the server's walk of the index. The server checks the whole
    # condition again on every entry it reads, one term after the other: the sessions without a
    # cut go in one IN list (a binary search), and only the others take a term each.
    whole = [str(int(sid)) for sid, cut in cuts.items() if not cut]
    terms = [f"agent_message.session_id IN ({', '.join(whole)})"] if whole else []
    terms += [
        f"(agent_message.session_id = {int(sid)} AND agent_message.id >= {int(cut)})"
        for sid, cut in cuts.items()
        if cut
    ]
    return sa.text(" OR ".join(terms) or "1 = 0")


def suffix_outlines(
    conn: Connection, ranges, *, every_tool_calls: bool = False
) -> Iterator[tuple[int, list[Message]]]:
    """(session id, its messages in id order) for the id ranges ``ranges`` (a condition such as
    :func:`suffix_ranges`), read without their text: ids, roles, tool calls and links, stored
    counts and times. What measuring a restored context from its stored counts needs (which
    calls go unanswered, which results answer no call in it). The tool calls of assistant
    messages only, unless ``every_tool_calls`` (validate checks them on every row)."""
    tool_calls = json_as_text(M.c.tool_calls)
    if not every_tool_calls:
        tool_calls = sa.case((M.c.role == "assistant", tool_calls), else_=None).label("tool_calls")
    query = (
        sa.select(
            M.c.session_id,
            M.c.id,
            M.c.role,
            tool_calls,
            M.c.tool_call_id,
            STORED_TOKEN_COUNT,
            M.c.token_encoding,
            M.c.created_at,
        )
        .where(ranges)
        .order_by(M.c.session_id, M.c.id)
    )
    rows = conn.execute(dialect_of(conn).through_session_index(query, M))
    session_id = 0  # a first row of session 0 simply continues it
    messages: list[Message] = []
    for r in rows:
        if r.session_id != session_id:
            if messages:
                yield session_id, messages
            session_id, messages = int(r.session_id), []
        messages.append(
            Message(
                r.id,
                r.session_id,
                r.role,
                None,
                json_value(r.tool_calls),
                r.tool_call_id,
                token_count=r.token_count,
                token_encoding=r.token_encoding,
                created_at=r.created_at,
            )
        )
    if messages:
        yield session_id, messages


def calls_answered_next(conn: Connection, session_id: int, cut: int | None) -> bool:
    """Whether every tool call and result in a session's restored suffix from ``cut`` is a
    message of one call (its id a string) answered by the result of that id in the session's
    next message: the pairing rule (``records.ToolCallPairer``) then pairs each with the
    other, no call goes unanswered and no result answers nothing, so the suffix's stored counts
    are exactly what is sent. A runtime's usual turns. The next message, whatever its id: a
    Galera node hands out every third id, two sessions written at once interleave theirs.

    Decided by the server on indexes alone (``call_id``, 0012: the one call's id where the
    server and ``Message`` read it alike, else NULL): nothing comes back but two numbers and
    no row is read, where pairing in Python reads the rows of every call and result. False
    only says: read the pairing."""
    dialect = dialect_of(conn)
    binary = sa.LargeBinary
    # Each message of the suffix: 2 for a message with calls, 1 for a result (both a superset:
    # MySQL compares roles without case), 0 for the rest; and the id of the session's next
    # message. Numbers only: MariaDB's window copies each row it sees, and the ids as text
    # made that copy slower than two lookups of them on the index for each call.
    steps = dialect.through_session_index(
        sa.select(
            M.c.id,
            sa.case((M.c.role == "tool", 1), (M.c.tool_call_count > 0, 2), else_=0).label("kind"),
            dialect.next_message_id(M, session_id).label("next_id"),
        ).where(M.c.session_id == session_id, M.c.id >= (cut or 0)),
        M,
    ).subquery("steps")
    # A call's entry (idx_message_call_id) and its next message's, looked up for calls only (a
    # NULL key finds nothing): results and the rest cost nothing beyond their entry.
    calls, answer = M.alias("calls"), M.alias("answer")
    is_call = steps.c.kind == 2
    # A NULL on either side compares as no pair.
    answered = sa.and_(
        sa.cast(answer.c.role, binary) == b"tool",
        sa.cast(answer.c.tool_call_id, binary) == sa.cast(calls.c.call_id, binary),
    )
    query = (
        sa.select(sa.func.count(), sa.func.sum(sa.case((answered, 1), else_=0)))
        .select_from(
            steps.outerjoin(
                calls,
                sa.and_(
                    calls.c.session_id == session_id,
                    calls.c.id == sa.case((is_call, steps.c.id)),
                ),
            ).outerjoin(
                answer,
                sa.and_(
                    answer.c.session_id == session_id,
                    answer.c.id == sa.case((is_call, steps.c.next_id)),
                ),
            )
        )
        .where(steps.c.kind > 0)
    )
    query = dialect.through_session_index(
        dialect.through_index(query, calls, "idx_message_call_id"), answer
    )
    rows, pairs = conn.execute(query).one()
    # Each pair is a call and a result (2, 1), each result the next message of one call only.
    return int(rows) == 2 * int(pairs or 0)
