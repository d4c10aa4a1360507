"""The one engine factory: connection URLs, credential masking, SQLite's server-like settings.

Everything that differs between MySQL/MariaDB and SQLite at the connection level lives in this
package (``ctxtool.db``), so the rest of ctxtool writes one SQLAlchemy Core query for both.
"""

from __future__ import annotations

import logging
import sqlite3
import ssl
import time
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..core.errors import CtxtoolError, MissingDatabase
from .urls import driver_booleans, mask_url, parse_url, resolve_url, scrub, sqlite_path

SQLITE_BUSY_TIMEOUT_MS = 30_000

# The pool logs a connection it could not reset when given back (the server killed it, a node
# went down) with its traceback, and with no logging set up Python prints that on stderr. The
# pool has already thrown the connection away and the next use of it says what failed, so the
# log is kept from stderr; an application that sets up logging still receives it.
logging.getLogger("sqlalchemy.pool").addHandler(logging.NullHandler())


def create_engine(
    url: str | None = None,
    *,
    must_exist: bool = False,
    timeout: float | None = None,
    **kwargs,
) -> Engine:
    """An engine for ``url`` with ctxtool's settings (utf8mb4, SQLite WAL + write locking).

    ``must_exist``: a SQLite file that is not there is an error naming it, instead of an empty
    database created as a side effect (every command but `migrate up` reads an existing store).
    ``timeout``: seconds to wait for a server to connect or answer, or for SQLite's lock (shell
    completion must not hang on a server that is down or a network that drops packets).
    """
    raw = resolve_url(url)
    parsed = parse_url(raw)
    if parsed.get_backend_name() in ("mysql", "mariadb"):
        if "charset" not in parsed.query:
            parsed = parsed.update_query_dict({"charset": "utf8mb4"})
        parsed, booleans = driver_booleans(parsed)
        connect_args = {**booleans, **kwargs.pop("connect_args", {})}
        if timeout is not None:
            seconds = max(1, round(timeout))  # PyMySQL takes whole seconds
            connect_args.update(connect_timeout=seconds, read_timeout=seconds)
        if parsed.get_driver_name() == "pymysql":
            connect_args.setdefault("conv", _pymysql_conversions())
        kwargs["connect_args"] = connect_args
        kwargs.setdefault("pool_pre_ping", True)
        kwargs.setdefault("pool_recycle", 3600)
        engine = _engine(parsed, raw, kwargs)
        _configure_mysql(engine)
        return engine
    path = sqlite_path(parsed)
    if path is not None:
        if path.is_dir():
            raise CtxtoolError(f"database {path} is a directory, not a SQLite file")
        if must_exist and not path.exists():
            raise MissingDatabase(
                f"database {path} does not exist; create it with "
                f"`ctxtool --db {mask_url(raw)} migrate up`",
                path,
            )
        if not path.parent.is_dir():
            raise CtxtoolError(f"database {path}: directory {path.parent} does not exist")
    busy = timeout if timeout is not None else SQLITE_BUSY_TIMEOUT_MS / 1000
    kwargs.setdefault("connect_args", {"timeout": busy})
    engine = _engine(parsed, raw, kwargs)
    _configure_sqlite(engine)
    return engine


def create_database(url: str | None = None) -> bool:
    """Create the MySQL/MariaDB database ``url`` names when it is missing (``migrate up
    --create-database``, as dbmate's ``up``), in utf8mb4; True when it was created. A SQLite
    file needs nothing: ``migrate up`` creates it.
    """
    return _database_to_create(url, create=True) is not None


def database_to_create(url: str | None = None) -> str | None:
    """The CREATE DATABASE statement ``create_database`` would run (``migrate up --dry-run
    --create-database``), or None when the database exists or is no MySQL/MariaDB one."""
    return _database_to_create(url, create=False)


def _database_to_create(url: str | None, create: bool) -> str | None:
    raw = resolve_url(url)
    parsed = parse_url(raw)
    if parsed.get_backend_name() not in ("mysql", "mariadb"):
        return None
    name = str(parsed.database)
    # The same connection settings (TLS, init_command, time zone), to the server alone.
    server = create_engine(raw, connect_args={"database": None}, poolclass=sa.pool.NullPool)
    try:
        with server.connect() as conn:
            exists = conn.execute(
                sa.text("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = :name"),
                {"name": name},
            ).first()
            if exists:
                return None
            quoted = server.dialect.identifier_preparer.quote_identifier(name)
            collation = parsed.query.get("collation")  # checked by parse_url: utf8mb4_<name>
            statement = f"CREATE DATABASE IF NOT EXISTS {quoted} CHARACTER SET utf8mb4" + (
                f" COLLATE {collation}" if collation else ""
            )
            if create:
                conn.exec_driver_sql(statement)
            return statement
    finally:
        server.dispose()


def _pymysql_conversions() -> dict:
    """PyMySQL's converters, with DATETIME/TIMESTAMP read by ``datetime.fromisoformat`` (C).

    PyMySQL parses every timestamp with a regular expression and a list of ints, a large part
    of loading a long history; fromisoformat is a C function (docs/benchmarks.md). Only the
    two shapes the server sends for DATETIME(0) and DATETIME(6) take the fast path;
    anything else (zero dates, fractions of other widths, invalid dates) goes to PyMySQL's own
    converter, so values come out exactly as PyMySQL alone gives them.
    """
    from pymysql.constants import FIELD_TYPE
    from pymysql.converters import conversions, convert_datetime

    def to_datetime(text):
        # "YYYY-MM-DD HH:MM:SS[.ffffff]" only: fromisoformat also takes shapes PyMySQL does
        # not (week dates, other separators, time zones), which must go PyMySQL's way.
        if (
            type(text) is str
            and len(text) in (19, 26)
            and text[:4] != "0000"
            and text[4] == text[7] == "-"
            and text[10] == " "
            and text[13] == text[16] == ":"
            and (len(text) == 19 or text[19] == ".")
        ):
            try:
                value = datetime.fromisoformat(text)
            except ValueError:
                pass
            else:
                if value.tzinfo is None:
                    return value
        return convert_datetime(text)

    conv = dict(conversions)
    conv[FIELD_TYPE.DATETIME] = conv[FIELD_TYPE.TIMESTAMP] = to_datetime
    return conv


def _engine(parsed, raw: str, kwargs: dict) -> Engine:
    try:
        return sa.create_engine(parsed, **kwargs)
    except ImportError as exc:
        raise CtxtoolError(
            f"database URL {mask_url(raw)!r}: its driver is not installed "
            f"({exc.name or exc}); use mysql+pymysql:// or sqlite:///"
        ) from None
    except (sa.exc.ArgumentError, TypeError, ValueError) as exc:
        # One line: SQLAlchemy's texts run over several.
        reason = " ".join(scrub(str(exc), raw).split())
        raise CtxtoolError(f"database URL {mask_url(raw)!r}: {reason}") from None


_READ_ONLY = "ctxtool_read_only"


def read_connection(engine: Engine) -> Connection:
    """A connection for reading only. On SQLite its transactions begin DEFERRED, so a report or
    `context show` runs while an import or a compaction holds the write lock."""
    return engine.connect().execution_options(**{_READ_ONLY: True})


def _switch_to_wal(cur) -> None:
    """Put the file in WAL mode (it persists in the file, so usually it already is).

    Switching takes an exclusive lock and SQLite answers "database is locked" at once, without
    the busy timeout, when another process holds a lock on the new file at that moment (two
    `ctxtool` runs starting together). Retry until the switch is done, by us or by the other.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cur.execute("PRAGMA journal_mode")
            if str(cur.fetchone()[0]).lower() == "wal":
                return
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _faulty_tls_file(query) -> str | None:
    """Which of a URL's TLS files is at fault, as ``ssl_cert /path``: OpenSSL's own error
    (``[SSL] PEM lib``) names none of them."""
    ca, cert, key = (query.get(k) for k in ("ssl_ca", "ssl_cert", "ssl_key"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca:
        try:
            context.load_verify_locations(cafile=ca)
        except (OSError, ValueError):
            return f"ssl_ca {ca}"
    for name, path, marker in (
        ("ssl_cert", cert, b"CERTIFICATE-----"),
        ("ssl_key", key, b"PRIVATE KEY-----"),
    ):
        if not path:
            continue
        try:
            with open(path, "rb") as handle:
                if marker not in handle.read(1 << 20):
                    return f"{name} {path} (no PEM {marker[:-5].decode().lower()} in it)"
        except OSError:
            return f"{name} {path}"
    if cert:
        try:
            context.load_cert_chain(cert, keyfile=key)
        except (OSError, ValueError):
            return f"ssl_cert {cert}" + (f" with ssl_key {key}" if key else "")
    return None


def _configure_mysql(engine: Engine) -> None:
    """Every DATETIME ctxtool writes or compares (timestamps, leases) is UTC. Set on each new
    connection after the user's own ``init_command`` (a URL's ``?init_command=`` is kept: as a
    connect argument of ctxtool's it replaced the user's, silently)."""

    collation = engine.url.query.get("collation")  # checked by parse_url: utf8mb4_<name>

    @sa.event.listens_for(engine, "do_connect")
    def _connect(dialect, _record, cargs, cparams):
        # PyMySQL reads the URL's ssl_ca / ssl_cert / ssl_key before it connects, and a file
        # that is not a certificate (or cannot be read) raises ssl.SSLError / OSError as they
        # are, not as a database error: say which URL's files, in one line.
        try:
            return dialect.loaded_dbapi.connect(*cargs, **cparams)
        except OSError as exc:
            if isinstance(exc, dialect.loaded_dbapi.Error):
                raise
            reason = getattr(exc, "reason", None) or exc.strerror or exc
            what = _faulty_tls_file(engine.url.query) or "files (ssl_ca, ssl_cert, ssl_key)"
            raise CtxtoolError(
                f"database URL {mask_url(engine.url)!r}: cannot use its TLS {what}: {reason}"
            ) from None

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        cur = dbapi_conn.cursor()
        if collation:
            # SQLAlchemy's own connect step has just run SET NAMES utf8mb4, which puts the
            # charset's default collation back over the one the driver asked for.
            cur.execute(f"SET NAMES utf8mb4 COLLATE {collation}")
        cur.execute("SET time_zone = '+00:00'")
        cur.close()


def _configure_sqlite(engine: Engine) -> None:
    """Make SQLite behave like a server for concurrent ctxtool processes.

    pysqlite's own transaction handling defers BEGIN until the first write and never wraps DDL;
    we take over and open every transaction with BEGIN IMMEDIATE, so two writers queue on the
    busy timeout instead of failing with "database is locked" when a read upgrades to a write.
    """

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if engine.url.database not in (None, "", ":memory:"):
            _switch_to_wal(cur)
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn):
        # Readers (see read_connection) take no write lock: with WAL they neither wait for a
        # writer nor block one.
        if conn.get_execution_options().get(_READ_ONLY):
            conn.exec_driver_sql("BEGIN")
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
