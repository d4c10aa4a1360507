"""Writing an imported session: its session row, its messages in batches, its checkpoints.

The import rules themselves are pure (``ctxtool.core.import_rules``); this module only
turns their actions into statements. Messages go in multi-row INSERT batches, bounded in rows
and bytes so memory stays flat. With a bound on a transaction's bytes (``import
--max-transaction-bytes``), the writer commits between batches and goes on in a new
transaction that writes the session's row first: every commit is a prefix of the session. On a server, parsing overlaps with the database: the caller's
thread parses and renders each batch while one writer thread sends the earlier ones (releasing
the GIL while the server works), in order, with at most ``IN_FLIGHT`` batches queued. SQLite is
written in line (see ``Dialect.overlap_writes``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..core.context_size import (
    HEAD_COUNTS_KEY,
    stored_head_count,
    stored_summary_count,
    with_head_count,
)
from ..core.errors import CtxtoolError
from ..core.import_rules import (
    DRIVER_ESCAPES,
    PREFIX_BYTES,
    RENDERED_ESCAPES,
    Action,
    CompleteMessage,
    NewCheckpoint,
    NewMessage,
    StoredMessage,
    StoredSession,
    fingerprint,
    positional,
    size_problem,
)
from ..core.records import KEPT_AFTER_MESSAGE, SUMMARY_PREFIX
from ..core.source_records import SourceMessage, SourceSession, TranscriptError
from ..core.tokens import MessageText, count_messages, count_text, encoding_for_model
from ..db import dialect_of
from ..db.dialects import MEDIUMTEXT_BYTES, STATEMENT_OVERHEAD
from ..db.schema import MESSAGE_ROW_COLUMNS, SESSION_ID_COUNTER
from ..db.schema import agent_compaction as C
from ..db.schema import agent_message as M
from ..db.schema import agent_session as S
from ..db.schema import counters as N
from . import context_sums
from .reads import json_as_text, json_value, latest_compaction_id, text_bytes
from .session_touch import touch_session

# Small batches keep the server busy from the first rows on and leave little to send once the
# file is parsed; below a few thousand rows the size hardly matters. 1024: a power of two, so
# a batch of short messages is one prepared execution (see db.prepared).
BATCH_ROWS = 1024
# Batches sent or waiting to be, at most: the parser goes on while the server takes its time.
IN_FLIGHT = 2
MAX_SESSION_ID = 2**63 - 1  # BIGINT's largest
CHECKED_MESSAGES = 64  # stored messages whose fingerprints a re-import compares
BATCH_BYTES = 4 * 1024 * 1024
# MariaDB refuses JSON nested 32 levels deep; MySQL 8 allows 100.
MAX_JSON_DEPTH = 30

# One agent_message row as the importer inserts it is a plain tuple of these columns, in this
# order (the schema's), after the session id its statements hold; MessageWriter.row builds it
# positionally (a namedtuple costs more, on every row).
assert MESSAGE_ROW_COLUMNS == (
    "role",
    "content",
    "created_at",
    "tool_calls",
    "tool_call_id",
    "name",
    "source_id",
    "details",
), MESSAGE_ROW_COLUMNS
_CONTENT, _TOOL_CALLS, _DETAILS = (
    MESSAGE_ROW_COLUMNS.index(c) for c in ("content", "tool_calls", "details")
)
# A message completed by a later import: its JSON texts as a new row has them (no re-encoding).
_COMPLETE = sa.text(
    "UPDATE agent_message SET content = :content, tool_calls = :tool_calls, "
    "details = :details, token_count = NULL, token_encoding = NULL WHERE id = :id"
)


# While a writer thread sends batches, the parsing thread should hand it the GIL as soon as a
# server reply arrives: at the default switch interval each statement's reply waited for the
# parser's slice.
_SWITCH_INTERVAL_S = 0.0005
_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved = 0.0


@contextlib.contextmanager
def _responsive_thread_switches() -> Iterator[None]:
    """A short GIL switch interval for as long as any import pipeline runs (restored after the
    last one, so concurrent imports in threads of one process do not undo each other)."""
    global _switch_users, _switch_saved
    with _switch_lock:
        if _switch_users == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, _SWITCH_INTERVAL_S))
        _switch_users += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_saved)


class SessionGone(Exception):
    """The session row this import found was removed (``sessions delete``, a runtime) before
    it was locked: look it up again."""


# Session ids left to a runtime above the highest it wrote, when it writes ids of its own.
RUNTIME_HEADROOM = 1000


class ImportedSessions:
    """The agent_session rows of imported transcripts, one per (source_format, source_id).

    A new transcript's row is inserted by the import's own transaction (:meth:`create`), so it
    commits with the messages or not at all: a failed, killed or disconnected import leaves no
    row behind. Only its id is taken before, from ``ctxtool_counters`` in a tiny transaction
    that commits at once (:meth:`find_or_allocate`)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def find_or_allocate(
        self,
        source_format: str,
        source_id: str,
        legacy_id: str | tuple[str, ...] | None = None,
        reserved: int | None = None,
    ) -> tuple[int, str]:
        """The session id for this source and how it was found: "found", "legacy" (stored under
        ``legacy_id``, or one of them, see ``transcripts.discover.source_ids``) or "new" (an id
        no session has had: the caller's transaction inserts the row with :meth:`create`).
        ``reserved``: a new id this import took before and never used, taken again instead of
        another one."""
        with self.engine.begin() as conn:
            existing = conn.execute(
                sa.select(S.c.session_id).where(
                    S.c.source_format == source_format, S.c.source_id == source_id
                )
            ).scalar()
            if existing is not None:
                return int(existing), "found"
            candidates = [
                c
                for c in ((legacy_id,) if isinstance(legacy_id, str) else legacy_id or ())
                if c != source_id
            ]
            if candidates:
                legacy = conn.execute(
                    sa.select(S.c.session_id)
                    .where(S.c.source_format == source_format, S.c.source_id.in_(candidates))
                    .order_by(S.c.session_id)
                    .limit(1)
                ).scalar()
                if legacy is not None:
                    return int(legacy), "legacy"
            return (reserved if reserved is not None else self._allocate(conn)), "new"

    @staticmethod
    def _allocate(conn: Connection) -> int:
        """The next session id: one more than both the last id handed out and the highest id
        stored (a runtime writes ids of its own), committed with the caller's short transaction.

        The highest id is a plain read (InnoDB: no locks, so it never waits for an import still
        writing its new row; that row's id came from the counter, which is above it). A
        runtime's row not yet committed may be missed: the INSERT of the row then fails on the
        primary key, never silently, and the import is retried with a new id. The counter's
        row is the only lock taken, for one statement's time: two allocations queue on it and
        never deadlock. In a store a runtime writes sessions to, the new id leaves it
        RUNTIME_HEADROOM ids above the highest first."""
        highest = int(
            conn.execute(sa.select(sa.func.coalesce(sa.func.max(S.c.session_id), 0))).scalar_one()
        )
        mine = N.c.name == SESSION_ID_COUNTER
        handed_out = int(conn.execute(sa.select(N.c.last_value).where(mine)).scalar() or 0)
        if max(highest, handed_out) >= MAX_SESSION_ID:
            # One more would overflow BIGINT (SQLite would store it as REAL, for good).
            raise CtxtoolError(
                f"no session id is left: the highest stored or handed out is "
                f"{max(highest, handed_out)}, BIGINT's largest"
            )
        if (
            highest > handed_out
            or conn.execute(
                sa.select(S.c.session_id).where(S.c.source_format.is_(None)).limit(1)
            ).first()
        ):
            # A runtime writes sessions here (ids above ours since the last one handed out, or
            # rows that are no transcript's): it takes MAX()+1 next, and the one after, while
            # this import's row is not committed yet. Leave it RUNTIME_HEADROOM of them, so it
            # never waits on (and then fails on) that row, nor makes the import start again.
            base = min(highest + RUNTIME_HEADROOM, MAX_SESSION_ID) - 1
        else:
            base = highest
        bumped = conn.execute(
            N.update()
            .where(mine)
            .values(last_value=sa.case((N.c.last_value > base, N.c.last_value), else_=base) + 1)
        )
        if bumped.rowcount == 0:
            # Its row was deleted by hand: put it back (a concurrent import doing the same
            # fails on its key, or deadlocks, and is retried).
            conn.execute(N.insert().values(name=SESSION_ID_COUNTER, last_value=base + 1))
            return base + 1
        return int(conn.execute(sa.select(N.c.last_value).where(mine)).scalar_one())

    @staticmethod
    def create(conn: Connection, session_id: int, source_format: str, source_id: str) -> None:
        """Insert a new session's row in the import's transaction (the first statement in it).
        A concurrent first import of the same transcript waits here, on the unique key, until
        the other commits (then fails on it, and is retried: it finds the session) or rolls
        back (then goes on)."""
        conn.execute(
            S.insert().values(
                session_id=session_id, source_format=source_format, source_id=source_id
            )
        )

    @staticmethod
    def lock(conn: Connection, session_id: int) -> None:
        """Hold a found session's row for this transaction (the first statement in it, so what
        is read next includes every import of the same transcript that committed before). Two
        imports of one transcript queue here instead of racing on its messages. It is a write,
        not a locking read: on a multi-primary cluster only a write certifies against another
        node's, a runtime's insert or a checkpoint (see store.session_touch)."""
        if not touch_session(conn, session_id):
            raise SessionGone(session_id)

    @staticmethod
    def hold(conn: Connection, session_id: int) -> bool:
        """Hold a found session's row for this transaction as :meth:`lock` does, leaving its
        ``updated_at`` as it is (a write that marks no activity); False when it is gone."""
        held = conn.execute(
            S.update().where(S.c.session_id == session_id).values(updated_at=S.c.updated_at)
        )
        return held.rowcount == 1

    @staticmethod
    def stored(conn: Connection, session_id: int) -> StoredSession:
        """What the store holds of this session, for the reconciler: every source id (from the
        index alone), and the fingerprints of the first CHECKED_MESSAGES messages and the last.
        Fingerprinting every message would read a long session's whole history on every
        re-import; a different transcript under the same id differs from its first messages.
        Where ids are line numbers (``import_rules.positional``), every message is fingerprinted."""
        mine = (M.c.session_id == session_id, M.c.source_id.is_not(None))
        out = StoredSession()
        out.messages = dict.fromkeys(
            r[0] for r in conn.execute(sa.select(M.c.source_id).where(*mine))
        )
        content = sa.cast(M.c.content, sa.LargeBinary)  # bytes: NUL characters and all
        columns = (
            M.c.id,
            M.c.source_id,
            M.c.role,
            text_bytes(M.c.content),
            sa.func.substr(content, 1, PREFIX_BYTES),
            json_as_text(M.c.tool_calls),
        )
        last = conn.execute(
            sa.select(*columns).where(*mine).order_by(M.c.id.desc()).limit(1)
        ).first()
        # Ids that are line numbers: every fingerprint (a shifted line lands on a stored id).
        checked = None if last is not None and positional(last[1]) else CHECKED_MESSAGES
        first = conn.execute(sa.select(*columns).where(*mine).order_by(M.c.id).limit(checked))
        for row in [*first, *([last] if last else [])]:
            out.messages[row[1]] = fingerprint(row[2], int(row[3]), bytes(row[4] or b""))
        if last is not None:
            calls = json_value(last[5])
            out.last = StoredMessage(
                int(last[0]),
                last[1],
                last[2],
                int(last[3]),
                bytes(last[4] or b""),
                len(calls) if isinstance(calls, list) else 0,
            )
        out.compactions = {
            r[0]
            for r in conn.execute(
                sa.select(C.c.source_id).where(
                    C.c.session_id == session_id, C.c.source_id.is_not(None)
                )
            )
        }
        return out

    @staticmethod
    def adopt(conn: Connection, session_id: int, source_id: str) -> None:
        """Store a session found under its legacy id under its current one from now on."""
        conn.execute(S.update().where(S.c.session_id == session_id).values(source_id=source_id))

    @staticmethod
    def update(
        conn: Connection,
        session_id: int,
        src: SourceSession,
        path: str,
        *,
        unless_stored: bool = False,
    ) -> bool:
        """What the transcript says about its session (title, model, prompt, start, details);
        False when there was nothing to write. With ``unless_stored``, values the row already
        holds are not written again: an import that adds nothing can then tell whether it
        changed the session at all (and, if not, roll back its touch of ``updated_at``)."""
        described = {k: v for k, v in src.details.items() if v is not None}
        # The prompt's kept counts stay, whoever wrote the prompt (a transcript without one
        # leaves the runtime's in place): count_heads checks their digest against it.
        stored_details = json_value(
            conn.execute(
                sa.select(json_as_text(S.c.details)).where(S.c.session_id == session_id)
            ).scalar()
        )
        if isinstance(stored_details, dict) and HEAD_COUNTS_KEY in stored_details:
            described[HEAD_COUNTS_KEY] = stored_details[HEAD_COUNTS_KEY]
        details_text = json_text(described, path, None)
        details = json_column(details_text)
        if src.system_prompt and len(src.system_prompt.encode("utf-8")) > MEDIUMTEXT_BYTES:
            raise TranscriptError(
                path, None, "system prompt larger than the 16 MB the store accepts"
            )
        values = {
            k: v
            for k, v in {
                "title": (src.title or "")[:512] or None,
                "model": src.model,
                "system_prompt": src.system_prompt,
                "created_at": src.created_at,
                "details": details,
                "user_id": src.user_id,
                "project_id": src.project_id,
            }.items()
            if v is not None
        }
        if values and unless_stored:
            row = conn.execute(
                sa.select(
                    *(json_as_text(S.c[k]) if k == "details" else S.c[k] for k in values)
                ).where(S.c.session_id == session_id)
            ).one()
            values = {
                k: v
                for (k, v), stored in zip(values.items(), row, strict=True)
                if not (
                    json_value(stored) == json_value(details_text)
                    if k == "details"
                    else stored == v
                )
            }
        if not values:
            return False
        conn.execute(S.update().where(S.c.session_id == session_id).values(**values))
        return True

    @staticmethod
    def count_heads(conn: Connection, session_id: int, model: str | None) -> int:
        """Count the session's system prompt and checkpoint summaries as sent, under the
        encoding its model calls for, where their details keep no count of them yet, and keep
        the counts there (``core.context_size.HEAD_COUNTS_KEY``, as ``tokens count`` does):
        showing the imported context then loads no vocabulary for them. A summary whose
        transcript gave no size (``summary_tokens`` NULL) gets its own count beside it
        (``SUMMARY_TOKENS_KEY``), the size `context checkpoints` shows under that encoding.
        Returns how many were counted; with none to count, no vocabulary is loaded."""
        encoding = encoding_for_model(model).name
        session = conn.execute(
            sa.select(S.c.system_prompt, json_as_text(S.c.details)).where(
                S.c.session_id == session_id
            )
        ).one()
        checkpoints = conn.execute(
            sa.select(C.c.id, C.c.summary, C.c.summary_tokens, json_as_text(C.c.details)).where(
                C.c.session_id == session_id
            )
        ).all()
        # (table, key, role, text as sent, the summary to size or None, details)
        no_size: str | None = None  # a prompt has no size of its own to keep
        heads = [(S, session_id, "system", session.system_prompt or "", no_size, session.details)]
        heads += [
            (C, c.id, "user", SUMMARY_PREFIX + c.summary, _unsized(c), c.details)
            for c in checkpoints
        ]
        todo = [
            (table, key, MessageText(role, text), unsized, json_value(details))
            for table, key, role, text, unsized, details in heads
            if text and not _counted(json_value(details), encoding, text, unsized)
        ]
        counts = count_messages([message for _, _, message, _, _ in todo], encoding)
        kept = 0
        for (table, key, message, unsized, details), tokens in zip(todo, counts, strict=True):
            size = count_text(unsized, encoding) if unsized is not None else None
            with_count = with_head_count(details, encoding, message.content or "", tokens, size)
            if with_count is None:  # a runtime's details that are no object: left alone
                continue
            column = table.c.session_id if table is S else table.c.id
            time = {"updated_at": S.c.updated_at} if table is S else {}  # a count is no change
            conn.execute(
                table.update()
                .where(column == key)
                .values(details=json_column(json_text(with_count, "", None)), **time)
            )
            kept += 1
        return kept


def _unsized(checkpoint: sa.Row) -> str | None:
    """The summary of a checkpoint whose transcript gave it no size (the one `context
    checkpoints` would count), else None."""
    return checkpoint.summary if checkpoint.summary_tokens is None and checkpoint.summary else None


def _counted(details: object, encoding: str, text: str, unsized: str | None) -> bool:
    """Whether ``details`` keep the count of ``text`` under ``encoding`` (and of the summary
    ``unsized`` alone, when there is one to size)."""
    if stored_head_count(details, encoding, text) is None:
        return False
    return unsized is None or stored_summary_count(details, encoding, unsized) is not None


def message_row_bytes(row: tuple) -> int:
    """What a message row weighs against ``--max-transaction-bytes``: the UTF-8 bytes of its
    texts (content, tool calls, details, ids, time) plus ``ROW_OVERHEAD`` for its numbers and
    the engine's own bookkeeping. Encoding is skipped for ASCII text (an O(1) check)."""
    total = ROW_OVERHEAD
    for value in row:
        if value:
            total += len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    return total


# A row's columns besides its texts (ids, session id, counts) and the engine's per-row framing.
ROW_OVERHEAD = 64


class MessageWriter:
    """The write pipeline of one session's import, inside the caller's transaction.

    ``transaction_bytes`` bounds the row bytes (:func:`message_row_bytes`) one transaction
    writes: before a message that would go past it, the batches so far are sent and
    ``next_transaction`` is called, which commits and opens the next transaction with the
    session's row written first. A message larger than the bound goes alone. A checkpoint goes
    in the transaction of the message before it, so it never commits before the messages it
    refers to. Nothing commits while ``may_commit`` says no (the file not yet shown to continue
    the stored session): that transaction grows past the bound instead.

    Use as a context manager: the writer thread never outlives the transaction."""

    def __init__(
        self,
        conn: Connection,
        session_id: int,
        fmt: str,
        path: str,
        created_at: datetime | None,
        row_limit: int | None = None,
        transaction_bytes: int | None = None,
        next_transaction: Callable[[], None] | None = None,
        may_commit: Callable[[], bool] | None = None,
    ):
        self.conn, self.session_id, self.fmt, self.path = conn, session_id, fmt, path
        # `import --max-row-bytes`: the engine's own bound on a row, which the server does not
        # announce (TiDB's txn-entry-size-limit, 6 MiB by default).
        self.row_limit = row_limit
        assert transaction_bytes is None or next_transaction is not None
        self.transaction_bytes = transaction_bytes
        self.next_transaction = next_transaction
        # Whether what is written so far may be committed yet (the importer's answer: only
        # once the file has shown it continues what the store holds). Until then the
        # transaction goes on past the bound: a refusal must leave nothing behind.
        self.may_commit = may_commit or (lambda: True)
        self._transaction_weight = 0  # row bytes written in the current transaction
        # What the transactions before the current one committed (see next_transaction).
        self.committed_messages = self.committed_compactions = 0
        self.completed = 0  # stored messages completed (CompleteMessage)
        dialect = dialect_of(conn)
        self.max_row_bytes = dialect.max_statement_bytes(conn) - STATEMENT_OVERHEAD
        self._fits_any_chars = min(MEDIUMTEXT_BYTES, self.max_row_bytes)
        self.inserts = dialect.message_inserts(
            conn, M, MESSAGE_ROW_COLUMNS, {"session_id": session_id}
        )
        # created_at is NOT NULL: a record without a usable time takes the last one seen.
        self.last_time = created_at or datetime.now(UTC).replace(tzinfo=None)
        self.last_time_text = self.last_time.isoformat(" ", "microseconds")
        self.messages_added = self.compactions_added = 0
        self.skipped: Counter = Counter()
        self._rows: list[tuple] = []
        self._bytes = 0
        self._completions: list[tuple[int, tuple]] = []  # (stored id, the fuller row)
        self._checkpoints: list[NewCheckpoint] = []
        # A writer thread only pays where the database works outside the GIL (a server).
        # SQLite works inside this process, mostly holding the GIL: handing it batches on
        # a thread makes an import slower than writing them in line (docs/benchmarks.md).
        self._thread = ThreadPoolExecutor(max_workers=1) if dialect.overlap_writes else None
        self._in_flight: deque[Future] = deque()
        self._failed = False

    def __enter__(self) -> MessageWriter:
        self._switches = (
            _responsive_thread_switches() if self._thread is not None else contextlib.nullcontext()
        )
        self._switches.__enter__()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        try:
            if self._thread is not None:
                if exc_type is not None:
                    self._failed = True  # the transaction is lost: queued batches are not sent
                self._thread.shutdown(wait=True, cancel_futures=True)
            self.inserts.close()  # its prepared statements, once nothing is being sent
        finally:
            self._switches.__exit__(None, None, None)

    def apply(self, actions: list[Action]) -> None:
        """Queue one record's actions; a batch goes out when full, or before anything that
        needs the rows before it in the database (a checkpoint's first kept id, a completion)."""
        for action in actions:
            if type(action) is NewMessage:
                row = self.row(action.message)
                if self.transaction_bytes is not None:
                    self._weigh(message_row_bytes(row))
                self._rows.append(row)
            elif isinstance(action, CompleteMessage):
                # The same checks as a new row, for the statement SQLAlchemy sends.
                self._completions.append(
                    (action.stored_id, self.row(action.message, DRIVER_ESCAPES))
                )
            elif isinstance(action, NewCheckpoint):
                # With the message before it, never split from it: counted, not weighed.
                self._transaction_weight += len(action.compaction.summary or "")
                self._checkpoints.append(action)
        if (
            len(self._rows) >= BATCH_ROWS
            or self._bytes >= BATCH_BYTES
            or self._checkpoints
            or self._completions
        ):
            self._flush()

    def close(self) -> None:
        """Send what is left and wait for it."""
        self._flush()
        while self._in_flight:
            self._in_flight.popleft().result()

    def _weigh(self, weight: int) -> None:
        """Count a message about to be queued against the transaction's bound; past it, what
        is queued before the message commits first (a transaction holds at least one)."""
        assert self.transaction_bytes is not None and self.next_transaction is not None
        if (
            self._transaction_weight
            and self._transaction_weight + weight > self.transaction_bytes
            and self.may_commit()
        ):
            self.close()  # everything before this message is sent: a prefix of the session
            self.next_transaction()
            self.committed_messages = self.messages_added
            self.committed_compactions = self.compactions_added
            self._transaction_weight = 0
        self._transaction_weight += weight

    def row(self, msg: SourceMessage, escaped: str = RENDERED_ESCAPES) -> tuple:
        """The message as a row of MESSAGE_ROW_COLUMNS, checked to fit; its characters are
        added to the pending batch's count (a completion's too: it sends the batch at once)."""
        tool_calls = json_text(msg.tool_calls, self.path, msg.line) if msg.tool_calls else None
        details = json_text(msg.details, self.path, msg.line) if msg.details else None
        content = msg.content
        # Sized as a text INSERT sends it (a row too large for a prepared execution goes as
        # one, see db.prepared); counted exactly only when 4 bytes a character might not fit.
        chars = (
            (len(content) if content else 0)
            + (len(tool_calls) if tool_calls else 0)
            + (len(details) if details else 0)
        )
        self._bytes += chars
        if self.row_limit is not None and 4 * chars > self.row_limit:
            stored = sum(len(t.encode("utf-8")) for t in (content, tool_calls, details) if t)
            if stored > self.row_limit:
                raise TranscriptError(
                    self.path,
                    msg.line,
                    f"message of {stored:,} bytes (text, tool calls and details) is larger "
                    f"than --max-row-bytes {self.row_limit:,}",
                )
        if 4 * chars > self._fits_any_chars:
            problem = size_problem(
                content, (tool_calls, details), MEDIUMTEXT_BYTES, self.max_row_bytes, escaped
            )
            if problem:
                raise TranscriptError(self.path, msg.line, problem)
        if msg.created_at is not None and msg.created_at != self.last_time:
            self.last_time = msg.created_at
            self.last_time_text = msg.created_at.isoformat(" ", "microseconds")
        # In MESSAGE_ROW_COLUMNS order (asserted at the top of this module).
        return (
            msg.role,
            content,
            self.last_time_text,
            tool_calls,
            msg.tool_call_id,
            msg.name,
            msg.source_id,
            details,
        )

    def _flush(self) -> None:
        payload = self.inserts.payload(self._rows)
        batch = (payload, len(self._rows), self._completions, self._checkpoints)
        self._rows, self._bytes, self._completions, self._checkpoints = [], 0, [], []
        if self._thread is None:
            self._send(*batch)
            return
        # A failed batch raises here, at the next flush or at close; the batches queued
        # behind it are not sent (see _send) and the caller's transaction rolls back.
        while self._in_flight and (self._in_flight[0].done() or len(self._in_flight) >= IN_FLIGHT):
            self._in_flight.popleft().result()
        self._in_flight.append(self._thread.submit(self._send, *batch))

    def _send(
        self,
        payload,
        count: int,
        completions: list[tuple[int, tuple]],
        checkpoints: list[NewCheckpoint],
    ) -> None:
        """On the writer thread: completions, the batch, then the checkpoints after it."""
        if self._failed:
            return  # an earlier batch failed: the transaction is lost, send nothing more
        try:
            self._send_batch(payload, count, completions, checkpoints)
        except BaseException:
            self._failed = True
            raise

    def _send_batch(
        self,
        payload,
        count: int,
        completions: list[tuple[int, tuple]],
        checkpoints: list[NewCheckpoint],
    ) -> None:
        if completions:  # rewritten messages: sums kept of them no longer hold
            context_sums.forget(
                self.conn, [stored_id for stored_id, _ in completions], rewritten=True
            )
        for stored_id, row in completions:
            self.completed += 1
            self.conn.execute(
                _COMPLETE,
                {
                    "id": stored_id,
                    "content": row[_CONTENT],
                    "tool_calls": row[_TOOL_CALLS],
                    "details": row[_DETAILS],
                },
            )
        self.inserts.send(payload)
        self.messages_added += count
        for checkpoint in checkpoints:
            self._write_checkpoint(checkpoint)

    def _write_checkpoint(self, checkpoint: NewCheckpoint) -> None:
        comp = checkpoint.compaction
        comp_details = comp.details
        first_kept: int | None
        if checkpoint.first_kept_source_id is None:
            # Nothing kept yet: the cut goes after the session's last message (see
            # KEPT_AFTER_MESSAGE), whose batch was sent before this checkpoint.
            last = self.conn.execute(
                sa.select(sa.func.max(M.c.id)).where(M.c.session_id == self.session_id)
            ).scalar()
            if last is None:  # no message at all: nothing for the summary to stand for
                self.skipped["compaction_without_kept_message"] += 1
                return
            first_kept = int(last) + 1
            comp_details = {**(comp_details or {}), KEPT_AFTER_MESSAGE: int(last)}
        else:
            first_kept = self.conn.execute(
                sa.select(M.c.id).where(
                    M.c.session_id == self.session_id,
                    M.c.source_id == checkpoint.first_kept_source_id,
                )
            ).scalar()
        if first_kept is None or not comp.summary.strip():
            self.skipped["compaction_unresolved" if first_kept is None else "compaction_empty"] += 1
            return
        details = json_column(json_text(comp_details, self.path, comp.line))
        self.conn.execute(
            C.insert().values(
                session_id=self.session_id,
                summary=comp.summary,
                first_kept_message_id=first_kept,
                tokens_before=comp.tokens_before,
                parent_compaction_id=latest_compaction_id(self.conn, self.session_id),
                summarizer=comp.summarizer or f"imported:{self.fmt}",
                summarizer_model=comp.summarizer_model,
                summary_tokens=comp.summary_tokens,
                tokens_after=comp.tokens_after,
                source_id=comp.source_id,
                details=details,
                # When the agent compacted (`context show --at` bounds a context by it); the import
                # time only when the transcript does not say.
                **({"created_at": comp.created_at} if comp.created_at else {}),
            )
        )
        self.compactions_added += 1


def json_column(text: str | None) -> sa.BindParameter[str] | None:
    """A JSON column's value from :func:`json_text`, sent as the text it is: the JSON type
    would serialize the document a second time."""
    return None if text is None else sa.literal(text, sa.Text)


def json_text(value, path: str, line: int | None) -> str | None:
    """A JSON column's text; a document nested deeper than every supported server stores is
    refused with the file and line."""
    if not value:
        return None
    try:
        raw = orjson.dumps(value)  # ten times json.dumps, the same document
    except orjson.JSONEncodeError as exc:
        raise TranscriptError(path, line, f"a value cannot be stored as JSON ({exc})") from None
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and _depth(value) > MAX_JSON_DEPTH:
        raise TranscriptError(
            path,
            line,
            f"a value is nested more than {MAX_JSON_DEPTH} levels "
            "deep; the database's JSON columns refuse it",
        )
    return raw.decode("utf-8")


def _depth(value) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest
