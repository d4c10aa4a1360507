"""One object per database family, chosen once per engine: everything that differs between
MySQL/MariaDB and SQLite beyond the connection (alembic's ``ddl/<dialect>.py`` shape).

No module outside ``ctxtool.db`` compares dialect names: it asks ``dialect_of(engine)`` for
server time, the migration lock, whether DDL is transactional, bulk message inserts, the size
of the largest statement, and whether an error was a write conflict with another writer.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from ..core.errors import CtxtoolError
from .error_text import error_code
from .lock_row import held_lock_row
from .prepared import CannotPrepare, Execution, PreparedInsert, pack_rows
from .stored_time import sqlite_time_compare

MIGRATION_LOCK_TIMEOUT_S = 60
# Why a failed transaction is worth running again (``Dialect.transient``, ``db.retry``): it
# lost a race with another writer, or the server was out of reach for a moment.
CONFLICT, UNREACHABLE = "conflict", "unreachable"
# A MEDIUMTEXT holds 16 MiB - 1 bytes: the largest message text the MySQL schema stores.
MEDIUMTEXT_BYTES = 16 * 1024 * 1024 - 1
STATEMENT_OVERHEAD = 64 * 1024  # room for the statement around one row's text


# SQLite keeps a trigger's CREATE as written: its timing and event, then FOR EACH ROW and body.
_SQLITE_TRIGGER_HEAD = re.compile(
    r"\b(?P<timing>BEFORE|AFTER|INSTEAD\s+OF)\s+INSERT\s+ON\s+[\"`\[]?agent_message[\"`\]]?"
    r"\s+(FOR\s+EACH\s+ROW\s+)?",
    re.IGNORECASE,
)


class Dialect:
    """What ctxtool needs to know of one database family."""

    name: str = ""
    transactional_ddl: bool = False
    # One writer at a time (SQLite): a row's id is given with the database locked, so ids
    # commit in order without the order trigger MySQL and MariaDB need.
    single_writer: bool = True
    # Whether an import gains from sending batches on a writer thread while it parses: only
    # where the database works outside this process's GIL.
    overlap_writes: bool = False
    # Whether a text column can have a FULLTEXT index (search's optional index).
    fulltext: bool = False

    def server_now(self) -> sa.TextClause:
        """SQL for the server's current UTC time (leases use server time, never ours)."""
        raise NotImplementedError

    def server_now_plus(self, seconds: int) -> sa.TextClause:
        """SQL for server time ``seconds`` from now (negative: ago)."""
        raise NotImplementedError

    def migration_lock(self, engine: Engine) -> contextlib.AbstractContextManager[Connection]:
        """One connection holding the migration lock for a whole run."""
        raise NotImplementedError

    def bound_lock_wait(self, conn: Connection, seconds: int) -> None:
        """Make a row lock held by another transaction fail this connection's statements after
        ``seconds`` (a lock wait timeout, ``transient``'s conflict) rather than the server's
        default wait. SQLite: nothing (one writer at a time, queued on the busy timeout)."""

    def through_session_index(self, query: sa.Select, table: sa.FromClause) -> sa.Select:
        """``query`` over ``table`` (agent_message) read through idx_message_session_id_tokens
        (session_id, id, token_count, token_encoding): the ranges of ``suffix_ranges``, a walk
        in session order, whatever else it reads of the rows."""
        return self.through_index(query, table, "idx_message_session_id_tokens")

    def through_index(self, query: sa.Select, table: sa.FromClause, index: str) -> sa.Select:
        """``query`` with ``table`` read through the index named ``index`` (SQLite chooses
        well by itself)."""
        return query

    def server_identity_sql(self) -> str:
        """SQL naming the server a connection is on (which node of a cluster)."""
        return "SELECT 'local'"

    def server_version_sql(self) -> str:
        """SQL giving the server's version text, its product first where the text does not
        say it (:func:`parse_server_version` reads it)."""
        return "SELECT 'SQLite ' || sqlite_version()"

    def message_triggers(self, conn: Connection) -> list[tuple[str, str, str, str, str]]:
        """The triggers on agent_message this user can see, as (name, table, timing, event,
        body): SQLite keeps each CREATE as written, read from sqlite_master."""
        found = []
        for name, table, sql in conn.exec_driver_sql(
            "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger'"
        ):
            head = _SQLITE_TRIGGER_HEAD.search(str(sql or ""))
            if head is not None:
                body = str(sql)[head.end() :]
                found.append((str(name), str(table), head["timing"].upper(), "INSERT", body))
        return found

    def tables_without_ordered_ids(self, conn: Connection, tables: Sequence[str]) -> list[str]:
        """Those of ``tables`` whose AUTO_INCREMENT ids the server hands out from caches of
        its own per server, so a row written later can get a lower id: TiDB without
        ``AUTO_ID_CACHE=1``. Empty on every other server."""
        return []

    def migration_step(self, conn: Connection) -> contextlib.AbstractContextManager:
        """A unit that rolls back alone where DDL is transactional; nothing where it is not."""
        return contextlib.nullcontext()

    def message_inserts(
        self,
        conn: Connection,
        table: sa.Table,
        columns: Sequence[str],
        fixed: Mapping[str, int] | None = None,
    ) -> BulkInsert:
        return BulkInsert(conn, table, columns, fixed)

    def max_statement_bytes(self, conn: Connection) -> int:
        """The largest statement the server accepts, in bytes."""
        raise NotImplementedError

    def next_message_id(self, table: sa.Table, session_id: int) -> sa.ColumnElement:
        """SQL, in a select of ``table`` (agent_message) that reads every message of session
        ``session_id`` from some id on: the id of the session's next message after the row's
        (NULL after its last), whatever the ids between. Here the first id above it, one seek
        on idx_message_session_id_tokens per row that asks."""
        after = table.alias("after")
        return (
            sa.select(sa.func.min(after.c.id))
            .where(after.c.session_id == session_id, after.c.id > table.c.id)
            .scalar_subquery()
        )

    def plain_rows(
        self, conn: Connection, query: sa.Executable, params: Mapping[str, Any] | None = None
    ) -> Sequence[Sequence]:
        """All rows of ``query`` (with its bound ``params``) as sequences, their values as
        Python types. Here through SQLAlchemy's result processing (SQLite hands back timestamps
        as text)."""
        return conn.execute(query, params).all()

    def update_token_counts(
        self, conn: Connection, ids: Sequence[int], counts: Sequence[int], encoding: str
    ) -> None:
        """Set ``token_count`` (one per id) and ``token_encoding`` on many messages.

        Here: one prepared UPDATE per row, which costs nothing where there is no round trip
        (SQLite). A CASE with a branch per id would be compared branch by branch for every row.
        """
        if ids:
            conn.execute(
                _COUNT_UPDATE,
                [{"n": int(n), "enc": encoding, "i": int(i)} for i, n in zip(ids, counts)],
            )

    def is_write_conflict(self, exc: SQLAlchemyError) -> bool:
        """A duplicate key or a deadlock with a concurrent writer: worth a retry."""
        return isinstance(exc, IntegrityError)

    def transient(self, exc: SQLAlchemyError) -> str | None:
        """CONFLICT, UNREACHABLE, or None when running the transaction again would fail the
        same way. SQLite: None (its writers already queue on the busy timeout)."""
        return None

    def time_compare(
        self,
        column: sa.ColumnElement,
        op: str,
        when: datetime,
        *,
        no_time: bool,
        slack: float = 0.0,
    ) -> sa.ColumnElement:
        """SQL for the stored time ``column`` ``<=`` or ``>=`` (``op``) ``when``, a naive UTC
        datetime, as ``db.stored_time`` reads it; a row with no time matches as ``no_time``.
        Here a DATETIME column compared as such (a zero date sorts before every time)."""
        match = column <= when if op == "<=" else column >= when
        return sa.or_(match, column.is_(None)) if no_time else match

    def already_applied(self, exc: SQLAlchemyError) -> bool:
        """The DDL statement failed because what it makes is already there (a table, column
        or index of that name): re-running an interrupted migration's last statement."""
        return False

    def fulltext_indexes(self, conn: Connection, table: str, names: Sequence[str]) -> set[str]:
        """The columns of ``table`` (lower case) that hold a FULLTEXT index named one of
        ``names``: none where the database has no FULLTEXT index (:attr:`fulltext`)."""
        return set()

    def column_types(self, conn: Connection, table: str) -> dict[str, str]:
        """{column (lower case): its type as the server names it} for ``table``; asked only
        where :attr:`fulltext` (which column types an index takes)."""
        raise NotImplementedError

    def add_fulltext_index(self, conn: Connection, table: str, column: str, name: str) -> None:
        """Add the FULLTEXT index ``name`` on ``table.column``; only where :attr:`fulltext`."""
        raise NotImplementedError

    def fulltext_match(self, column: sa.ColumnElement, terms: str) -> sa.ColumnElement[bool]:
        """SQL matching boolean-mode ``terms`` through ``column``'s FULLTEXT index; only where
        :attr:`fulltext`."""
        raise NotImplementedError


def _fixed_part(fixed: Mapping[str, int] | None) -> tuple[list[str], str]:
    """The fixed columns' names and their values as the start of a row's SQL tuple ("42,")."""
    fixed = fixed or {}
    return list(fixed), "".join(f"{int(v)}," for v in fixed.values())


_COUNT_UPDATE = sa.text(
    "UPDATE agent_message SET token_count = :n, token_encoding = :enc WHERE id = :i"
)


class BulkInsert:
    """Multi-row INSERTs, rendered apart from sending them, so a parsing thread can render the
    next batch while a writer thread sends this one. The default sends rows with the driver's
    ``executemany`` as they are.

    ``fixed`` columns hold the same integer in every row (an import's session id): written
    into the statement once, so a row carries only ``columns``' values."""

    def __init__(
        self,
        conn: Connection,
        table: sa.Table,
        columns: Sequence[str],
        fixed: Mapping[str, int] | None = None,
    ):
        self.conn = conn
        self.columns = list(columns)
        names, lead = _fixed_part(fixed)
        marks = ",".join(["?"] * len(self.columns))
        self.sql = (
            f"INSERT INTO {table.name} ({', '.join(names + self.columns)}) VALUES ({lead}{marks})"
        )

    def payload(self, rows: list[tuple]):
        return rows

    def send(self, payload) -> None:
        if payload:
            self.conn.exec_driver_sql(self.sql, payload)

    def close(self) -> None:
        """Release what the inserts hold on the connection (called once they are all sent)."""


class _MySQLBulkInsert(BulkInsert):
    """The rows packed into executions of prepared multi-row INSERTs of about 1 MB (the CPU-heavy
    part, done by the caller's thread); ``send`` only ships them (see ``db.prepared``).

    A connection that cannot prepare (a server at its max_prepared_stmt_count, a proxy without
    the binary protocol) gets text INSERTs instead, rendered here: each value a SQL literal."""

    STATEMENT_BYTES = 1_000_000

    def __init__(
        self,
        conn: Connection,
        table: sa.Table,
        columns: Sequence[str],
        max_statement_bytes: int,
        prepared: bool = True,
        fixed: Mapping[str, int] | None = None,
    ):
        self.conn = conn
        # A prepared execution's values, at most. In a statement-based binlog the server
        # writes it as text, each value quoted and escaped (up to twice its bytes):
        # a fifth of the packet keeps that text within max_allowed_packet with room for other
        # servers' spelling, so a replay through the mariadb client takes it. A row larger
        # than this goes alone, as text, sized by what it sends (store.import_writes).
        self.statement_bytes = max(
            1, min(self.STATEMENT_BYTES, (max_statement_bytes - STATEMENT_OVERHEAD) // 5)
        )
        # Text rows are grouped by characters; at up to 4 bytes a character a statement of
        # several rows must stay within the server's packet (a single larger row goes alone:
        # its size was checked exactly).
        self.statement_chars = max(
            1, min(self.STATEMENT_BYTES, (max_statement_bytes - STATEMENT_OVERHEAD) // 4)
        )
        self.columns = list(columns)
        names, self.lead = _fixed_part(fixed)
        self.head = f"INSERT INTO {table.name} ({', '.join(names + self.columns)}) VALUES "
        self.row = "(" + self.lead + ",".join(["%s"] * len(self.columns)) + ")"
        dbapi_connection = conn.connection.dbapi_connection
        assert dbapi_connection is not None, "a connection in use has its driver's"
        self.cursor = dbapi_connection.cursor()
        self.prepared = (
            PreparedInsert(
                dbapi_connection,
                self.head,
                "(" + self.lead + ",".join(["?"] * len(self.columns)) + ")",
            )
            if prepared and PreparedInsert.usable(dbapi_connection)
            else None
        )

    def payload(self, rows: list[tuple]) -> list:
        if self.prepared is not None:
            executions = pack_rows(rows, len(self.columns), self.statement_bytes)
            if executions is not None:
                # Rows that go as text are rendered here too, on the parsing thread, while the
                # server works on the batch before.
                out: list = []
                for item in executions:
                    if item.body is None:
                        out.extend(self.text_statements(item.rows))
                    else:
                        out.append(item)
                return out
        return self.text_statements(rows)

    def text_statements(self, rows: Sequence[tuple]) -> list[str]:
        """The rows as text INSERT statements."""
        statements: list[str] = []
        parts: list[str] = []
        size = 0
        no_backslash = self.cursor.connection.server_status & _NO_BACKSLASH_ESCAPES
        for row in rows:
            literal = None if no_backslash else _row_literal(row, self.lead)
            if literal is None:
                literal = self.cursor.mogrify(self.row, row)
            if parts and size + len(literal) > self.statement_chars:
                statements.append(self._statement(parts, no_backslash))
                parts, size = [], 0
            parts.append(literal)
            size += len(literal) + 1
        if parts:
            statements.append(self._statement(parts, no_backslash))
        return statements

    def _statement(self, literals: list[str], no_backslash: int) -> str:
        # Under NO_BACKSLASH_ESCAPES a backslash sequence would be read as two characters, so
        # NUL and CR stay raw, as the driver sends them: such a statement replayed through
        # the mariadb client needs its --binary-mode.
        statement = self.head + ",".join(literals)
        return statement if no_backslash else _escape_rare(statement)

    def send(self, payload) -> None:
        for item in payload or ():
            if type(item) is not Execution:
                self._run(item, self.cursor.execute, item)
            elif item.body is not None and self.prepared is not None:
                try:
                    self._run(
                        f"{self.head}... (prepared, {item.count} rows)", self.prepared.execute, item
                    )
                except CannotPrepare:
                    # Text from now on, this execution's rows included. On the writer thread:
                    # MessageWriter closes the inserts only once that thread is done.
                    self.close()
                    self.prepared = None
                    self.send(self.text_statements(item.rows))
            else:
                self.send(self.text_statements(item.rows))

    def _run(self, statement: str, run, arg) -> None:
        dbapi_error = self.conn.dialect.loaded_dbapi.Error
        try:
            run(arg)
        except dbapi_error as exc:
            # Raw-cursor errors get SQLAlchemy's types, like every other statement's; a lost
            # connection is invalidated, so the rollback after it does not hide the cause.
            error = sa.exc.DBAPIError.instance(statement[:200], None, exc, dbapi_error)
            dbapi_connection = self.conn.connection.dbapi_connection
            if dbapi_connection is None or not dbapi_connection.open:
                error.connection_invalidated = True
                self.conn.invalidate(exc)
            raise error from exc

    def close(self) -> None:
        if self.prepared is not None:
            self.prepared.close()


_NO_BACKSLASH_ESCAPES = 512  # pymysql.constants.SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES


def _row_literal(row: tuple, lead: str = "") -> str | None:
    """A row of str/int/None as a SQL tuple after ``lead`` (the fixed columns' values), or None
    for any other value (the caller mogrifies).

    Escapes the backslash and the single quote, which the server requires ("strictly speaking,
    MySQL requires only that backslash and the quote character used to quote the string in the
    query be escaped", MySQL manual, mysql_real_escape_string); the statement's NUL, CR and
    Ctrl-Z are escaped once it is whole (:func:`_escape_rare`). Newlines and double quotes go as
    they are: checking every text for five more characters was half of rendering an import's
    batches. ``reconcile.RENDERED_ESCAPES`` counts the same characters. Only for connections
    where the backslash escapes (not NO_BACKSLASH_ESCAPES, checked by the caller)."""
    parts = []
    for v in row:
        if v is None:
            parts.append("NULL")
        elif type(v) is str:
            if "\\" in v:
                v = v.replace("\\", "\\\\")
            if "'" in v:
                v = v.replace("'", "\\'")
            parts.append("'" + v + "'")
        elif type(v) is int:
            parts.append(str(v))
        else:
            return None
    return "(" + lead + ",".join(parts) + ")"


def _escape_rare(statement: str) -> str:
    """Escape NUL, CR and Ctrl-Z in a statement of rendered rows. The server takes them raw, but
    the ``mysql``/``mariadb`` client does not: a statement-based binlog (MariaDB's default MIXED
    format logs a plain INSERT as text) replayed through it for a point-in-time recovery has a
    raw NUL refused and CR LF turned into LF. Outside the rows' quoted texts a statement holds
    none of them, and every backslash inside is already doubled, so replacing them across the
    whole statement escapes exactly those in the texts, in three scans of it instead of three
    checks of every text."""
    for char, escaped in _RARE_ESCAPES:
        if char in statement:
            statement = statement.replace(char, escaped)
    return statement


_RARE_ESCAPES = (("\0", "\\0"), ("\r", "\\r"), ("\x1a", "\\Z"))


class MySQL(Dialect):
    """MySQL 8, MariaDB 10.11 and wire-compatible engines."""

    name = "mysql"
    single_writer = False
    transactional_ddl = False
    overlap_writes = True
    fulltext = True
    DEADLOCK = 1213
    # A deadlock, or (MariaDB 11.6+ with innodb_snapshot_isolation) a row changed since this
    # transaction's snapshot was taken: both are lost races, worth a retry.
    CONFLICTS = {DEADLOCK, 1020}
    # 1050 table exists, 1060 duplicate column, 1061 duplicate key name, 1826 duplicate
    # foreign key, 1091 nothing of that name to drop (0005's index). A single ALTER TABLE is
    # atomic on MySQL 8 and MariaDB 10.11, so a duplicate first column, or an index already
    # gone, means the whole statement took effect.
    EXISTS = {1050, 1060, 1061, 1091, 1826}
    COUNTS_PER_STATEMENT = 5000
    # Lost races, worth the same transaction again: a deadlock, or on Galera a write set that
    # failed certification against another node's (1213 at COMMIT), a lock wait timeout
    # (1205), a row changed since the snapshot (1020), a statement killed to let a replicated
    # write through ("Query execution was interrupted", 1317, when a brute-force abort lands
    # outside the COMMIT).
    # TiDB's own: a write conflict (9007) and a schema changed under the transaction (8028).
    TRANSIENT_CONFLICTS = {DEADLOCK, 1205, 1020, 1317, 9007, 8028}
    # The server out of reach: refused (2003) or dropped (2006, 2013) connections, a
    # connection killed on the server (1927), a Galera node not in the primary component or
    # still joining (1047 "WSREP has not yet prepared node for application use").
    UNREACHABLE_CODES = {2002, 2003, 2006, 2013, 2055, 1927, 1047, 1053}

    def server_now(self):
        return sa.text("UTC_TIMESTAMP(6)")

    def bound_lock_wait(self, conn: Connection, seconds: int) -> None:
        conn.exec_driver_sql(f"SET SESSION innodb_lock_wait_timeout = {max(1, int(seconds))}")

    def server_now_plus(self, seconds: int):
        return sa.text(f"UTC_TIMESTAMP(6) + INTERVAL {int(seconds)} SECOND")

    def through_session_index(self, query, table):
        # A query that reads more of the rows than idx_message_session_id_tokens holds is
        # planned as one primary-key range from the lowest cut to the end of the table, read
        # once for every 500 sessions, where the index holds all the query reads.
        return super().through_session_index(query, table)

    def through_index(self, query, table, index):
        return query.with_hint(table, f"FORCE INDEX ({index})")

    @contextlib.contextmanager
    def migration_lock(self, engine: Engine) -> Iterator[Connection]:
        """One autocommit connection that runs every statement (MySQL DDL commits anyway),
        holding two locks named after the database: GET_LOCK (a plain ``SELECT GET_LOCK``,
        as Vitess takes it), which queues runs through one server, and a lock row
        (``db.lock_row``), which holds across the nodes of a multi-primary cluster, where
        GET_LOCK is each node's own."""
        conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            database = conn.exec_driver_sql("SELECT DATABASE()").scalar() or ""
            name = f"ctxtool_migrate:{database}"[:64]
            got = conn.execute(
                sa.text("SELECT GET_LOCK(:n, :t)"), {"n": name, "t": MIGRATION_LOCK_TIMEOUT_S}
            ).scalar()
            if got != 1:
                raise CtxtoolError(
                    f"another `ctxtool migrate` holds lock {name!r} (waited "
                    f"{MIGRATION_LOCK_TIMEOUT_S}s); try again when it finishes"
                )
            try:
                with held_lock_row(
                    self,
                    engine,
                    conn,
                    "migrate",
                    wait_s=MIGRATION_LOCK_TIMEOUT_S,
                    server_lock_held=True,
                ):
                    yield conn
            finally:
                conn.execute(sa.text("SELECT RELEASE_LOCK(:n)"), {"n": name})
        finally:
            conn.close()

    def server_identity_sql(self) -> str:
        return "SELECT CONCAT(@@hostname, ':', @@port)"

    def server_version_sql(self) -> str:
        return "SELECT VERSION()"

    def message_triggers(self, conn: Connection) -> list[tuple[str, str, str, str, str]]:
        # SHOW TRIGGERS, not information_schema.triggers, which waits behind any DROP DATABASE
        # waiting for a lock. Without the TRIGGER privilege MySQL lists none, MariaDB each with
        # an empty body.
        rows = conn.exec_driver_sql("SHOW TRIGGERS LIKE 'agent_message'").mappings()
        return [
            (
                str(r["Trigger"]),
                str(r["Table"]),
                str(r["Timing"]).upper(),
                str(r["Event"]).upper(),
                str(r["Statement"] or ""),  # MariaDB: NULL without the TRIGGER privilege
            )
            for r in rows
        ]

    def tables_without_ordered_ids(self, conn, tables):
        if not is_tidb(conn.exec_driver_sql("SELECT VERSION()").scalar() or ""):
            return []
        inspector = sa.inspect(conn)
        return [
            t
            for t in tables
            if inspector.has_table(t)
            and lacks_auto_id_cache(conn.exec_driver_sql(f"SHOW CREATE TABLE {t}").first()[1])
        ]

    def message_inserts(self, conn, table, columns, fixed=None):
        return _MySQLBulkInsert(conn, table, columns, self.max_statement_bytes(conn), fixed=fixed)

    def next_message_id(self, table, session_id):
        # MySQL and MariaDB plan the first id above a correlated one as a walk of the session's
        # entries from its first (a ref on session_id alone), per row: quadratic in a session's
        # messages. LEAD over the select's own rows, the session's in id order.
        return sa.func.lead(table.c.id).over(order_by=table.c.id)

    def plain_rows(self, conn, query, params=None):
        """The driver's own tuples: MySQL drivers return ints, strings and datetimes already, so
        SQLAlchemy's row objects are pure overhead on a large read (docs/benchmarks.md). Only
        for queries whose columns have no result processor: JSON columns must be read as text
        (``type_coerce(col, Text)``).

        A streaming connection (``stream_results``, ``yield_per``) has SQLAlchemy read ahead
        into its own buffer, so the cursor no longer holds every row: it goes the usual way."""
        options = conn.get_execution_options()
        if options.get("stream_results") or options.get("yield_per"):
            return super().plain_rows(conn, query, params)
        result = conn.execute(query, params)
        try:
            return result.cursor.fetchall()
        finally:
            result.close()

    def max_statement_bytes(self, conn: Connection) -> int:
        cached = conn.info.get("ctxtool_max_allowed_packet")
        if cached is None:
            cached = int(conn.exec_driver_sql("SELECT @@max_allowed_packet").scalar_one())
            conn.info["ctxtool_max_allowed_packet"] = cached
        return cached

    def update_token_counts(self, conn, ids, counts, encoding) -> None:
        """One statement per batch (a round trip per row would dominate): the messages joined,
        on their primary key, with a derived table of (id, count) that MySQL 8 and MariaDB
        both accept. The values are integers, rendered by ``int()``. A long list (a whole
        history counted at once) goes in statements of at most COUNTS_PER_STATEMENT rows."""
        for start in range(0, len(ids), self.COUNTS_PER_STATEMENT):
            pairs = zip(
                ids[start : start + self.COUNTS_PER_STATEMENT],
                counts[start : start + self.COUNTS_PER_STATEMENT],
            )
            i, n = next(pairs)
            rows = " ".join(
                [f"SELECT {int(i)} AS id, {int(n)} AS n"]
                + [f"UNION ALL SELECT {int(i)}, {int(n)}" for i, n in pairs]
            )
            conn.execute(
                sa.text(
                    f"UPDATE agent_message m JOIN ({rows}) c ON m.id = c.id "
                    "SET m.token_count = c.n, m.token_encoding = :enc"
                ),
                {"enc": encoding},
            )

    def is_write_conflict(self, exc: SQLAlchemyError) -> bool:
        if isinstance(exc, IntegrityError):
            return True
        return isinstance(exc, OperationalError) and error_code(exc) in self.CONFLICTS

    def transient(self, exc: SQLAlchemyError) -> str | None:
        code = error_code(exc)
        if code in self.TRANSIENT_CONFLICTS:
            return CONFLICT
        if code in self.UNREACHABLE_CODES or getattr(exc, "connection_invalidated", False):
            return UNREACHABLE
        return None

    def already_applied(self, exc: SQLAlchemyError) -> bool:
        return error_code(exc) in self.EXISTS

    def fulltext_indexes(self, conn, table, names):
        rows = conn.execute(
            sa.text(
                "SELECT column_name FROM information_schema.statistics WHERE table_schema = "
                "DATABASE() AND table_name = :table AND index_type = 'FULLTEXT' AND "
                "index_name IN :names"
            ).bindparams(sa.bindparam("names", expanding=True)),
            {"table": table, "names": list(names)},
        ).all()
        return {str(r[0]).lower() for r in rows}

    def column_types(self, conn, table):
        rows = conn.execute(
            sa.text(
                "SELECT column_name, data_type FROM information_schema.columns WHERE "
                "table_schema = DATABASE() AND table_name = :table"
            ),
            {"table": table},
        ).all()
        return {str(r[0]).lower(): str(r[1]) for r in rows}

    def add_fulltext_index(self, conn, table, column, name):
        # In place (no table copy) and with LOCK=SHARED, the least InnoDB allows for a
        # FULLTEXT index: reads go on while it builds, inserts wait for it.
        conn.exec_driver_sql(
            f"ALTER TABLE {table} ADD FULLTEXT INDEX {name} ({column}), "
            "ALGORITHM=INPLACE, LOCK=SHARED"
        )

    def fulltext_match(self, column, terms):
        from sqlalchemy.dialects.mysql import match  # loaded with the dialect where it runs

        return match(column, against=terms).in_boolean_mode()


def is_tidb(version: str) -> bool:
    """Whether ``SELECT VERSION()`` is a TiDB server's (``8.0.11-TiDB-v7.5.0``)."""
    return "-tidb-" in version.lower()


# The server products a version text names, as their makers spell them.
SQLITE, MYSQL, MARIADB, TIDB = "SQLite", "MySQL", "MariaDB", "TiDB"

Version = tuple[int, ...]


@dataclass(frozen=True)
class ServerVersion:
    product: str
    version: Version
    text: str

    def __str__(self) -> str:
        return f"{self.product} {'.'.join(map(str, self.version))}"


def parse_server_version(text: str) -> ServerVersion:
    """The product and version a server reports (``Dialect.server_version_sql``): "SQLite
    3.40.1", or MySQL's ``VERSION()`` ("10.11.6-MariaDB-0+deb12u1", "8.0.36",
    "8.0.11-TiDB-v7.5.1"). Text with no version in it gives an empty one, which no
    requirement is checked against (the server then says what it cannot run)."""
    if text.startswith(f"{SQLITE} "):
        return ServerVersion(SQLITE, _numbers(text.removeprefix(f"{SQLITE} ")), text)
    # MariaDB's handshake may prefix "5.5.5-" for old clients; VERSION() does not, but a
    # proxy can pass the handshake's text on.
    numbers = _numbers(text.removeprefix("5.5.5-"))
    if is_tidb(text):
        return ServerVersion(TIDB, numbers, text)
    return ServerVersion(MARIADB if "mariadb" in text.lower() else MYSQL, numbers, text)


def _numbers(text: str) -> Version:
    return tuple(int(n) for n in re.findall(r"\d+", text.split("-", 1)[0])[:3])


_AUTO_ID_CACHE_1 = re.compile(r"AUTO_ID_CACHE\s*=\s*1(?!\d)", re.IGNORECASE)


def lacks_auto_id_cache(create_table: str) -> bool:
    """Whether a ``SHOW CREATE TABLE`` of TiDB's has an AUTO_INCREMENT column whose ids come
    from per-server caches (30,000 ids each by default): no ``AUTO_ID_CACHE=1``."""
    return "AUTO_INCREMENT" in create_table.upper() and not _AUTO_ID_CACHE_1.search(create_table)


class SQLite(Dialect):
    """The embedded default: one file, WAL, writers serialised by BEGIN IMMEDIATE."""

    name = "sqlite"
    transactional_ddl = True
    MAX_STATEMENT_BYTES = 1_000_000_000  # SQLITE_MAX_LENGTH

    def server_now(self):
        return sa.text("strftime('%Y-%m-%d %H:%M:%f', 'now')")

    def server_now_plus(self, seconds: int):
        return sa.text(f"strftime('%Y-%m-%d %H:%M:%f', 'now', '{int(seconds):+d} seconds')")

    @contextlib.contextmanager
    def migration_lock(self, engine: Engine) -> Iterator[Connection]:
        """The connection's own BEGIN IMMEDIATE transaction, open for the whole run, serialises
        writers (a second run waits on the busy timeout). A file that failed already rolled back
        to its savepoint (see migration_step): the files before it are kept."""
        conn = engine.connect()
        tx = conn.begin()
        try:
            yield conn
        except CtxtoolError:
            tx.commit()
            raise
        except BaseException:
            tx.rollback()
            raise
        else:
            tx.commit()
        finally:
            conn.close()

    def migration_step(self, conn: Connection):
        return conn.begin_nested()

    def max_statement_bytes(self, conn: Connection) -> int:
        return self.MAX_STATEMENT_BYTES

    def time_compare(self, column, op, when, *, no_time, slack=0.0):
        """A TEXT column holds any shape a runtime wrote: compared by what each value means,
        not as text (see ``stored_time.sqlite_time_compare``)."""
        return sqlite_time_compare(column, op, when, no_time=no_time, slack=slack)


_DIALECTS = {"mysql": MySQL(), "mariadb": MySQL(), "sqlite": SQLite()}


def insert_or_ignore(table: sa.Table) -> sa.Insert:
    """An INSERT into ``table`` that leaves out a row whose key is taken, in each dialect's
    words: INSERT IGNORE (MySQL, and MariaDB under either of SQLAlchemy's names), INSERT OR
    IGNORE (SQLite)."""
    insert = table.insert()
    for name in ("mysql", "mariadb"):
        insert = insert.prefix_with("IGNORE", dialect=name)
    return insert.prefix_with("OR IGNORE", dialect="sqlite")


def dialect_of(engine_or_conn: Engine | Connection) -> Dialect:
    """The dialect object for an engine or connection."""
    name = engine_or_conn.dialect.name
    try:
        return _DIALECTS[name]
    except KeyError:
        raise CtxtoolError(
            f"unsupported database dialect {name!r}: use mysql+pymysql:// or sqlite://"
        ) from None


def dialect_of_url(url: str | None) -> Dialect:
    """The dialect object a URL will use, without connecting."""
    from .urls import parse_url, resolve_url

    return _DIALECTS[parse_url(resolve_url(url)).get_backend_name()]
