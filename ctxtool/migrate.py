"""Versioned schema migrations from ``sql/<dialect>/NNNN_name.sql``, recorded in a history table.

Modelled on Flyway and dbmate: files apply in version order, each recorded with its checksum;
an applied file that changed is refused; a file that failed half-way is recorded as failed (MySQL
DDL is not transactional, so we cannot pretend it rolled back) and blocks later runs until an
operator repairs it. Runs are serialised with GET_LOCK on MySQL and BEGIN IMMEDIATE on SQLite.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from .db import describe_db_error, dialect_family, read_connection
from .errors import CtxtoolError, SchemaNotCurrent

HISTORY_TABLE = "ctxtool_schema_history"
LOCK_TIMEOUT_S = 60

_FILE_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_HISTORY_DDL = {
    "mysql": f"""
        CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} (
            version          VARCHAR(32)  NOT NULL,
            name             VARCHAR(191) NOT NULL,
            checksum         CHAR(64)     NOT NULL,
            status           VARCHAR(16)  NOT NULL,
            started_at       DATETIME(6)  NOT NULL,
            applied_at       DATETIME(6)  NULL,
            duration_ms      INT          NULL,
            failed_statement MEDIUMTEXT   NULL,
            error            TEXT         NULL,
            PRIMARY KEY (version)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
    "sqlite": f"""
        CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} (
            version          TEXT    NOT NULL PRIMARY KEY,
            name             TEXT    NOT NULL,
            checksum         TEXT    NOT NULL,
            status           TEXT    NOT NULL,
            started_at       TEXT    NOT NULL,
            applied_at       TEXT    NULL,
            duration_ms      INTEGER NULL,
            failed_statement TEXT    NULL,
            error            TEXT    NULL
        )""",
}

# Statuses recorded in the history table.
APPLIED, BASELINE, RUNNING, FAILED = "applied", "baseline", "running", "failed"
# Further states shown by `status`.
PENDING, CHANGED, MISSING = "pending", "checksum changed", "file missing"


@dataclass(frozen=True)
class Migration:
    """One ``.sql`` file shipped with ctxtool."""

    version: str
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()

    @property
    def filename(self) -> str:
        return f"{self.version}_{self.name}.sql"

    def statements(self) -> list[str]:
        return split_statements(self.sql)


@dataclass(frozen=True)
class HistoryRow:
    version: str
    name: str
    checksum: str
    status: str
    started_at: object
    applied_at: object
    duration_ms: int | None
    failed_statement: str | None
    error: str | None


@dataclass(frozen=True)
class MigrationState:
    """What `status` reports for one version: the file, its history row, and the verdict."""

    version: str
    name: str
    state: str
    applied_at: object = None
    duration_ms: int | None = None
    checksum: str | None = None
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.state in (APPLIED, BASELINE)

    def as_dict(self) -> dict:
        return {
            "version": self.version,
            "name": self.name,
            "state": self.state,
            "applied_at": _fmt_time(self.applied_at),
            "duration_ms": self.duration_ms,
            "checksum": self.checksum[:12] if self.checksum else None,
            "detail": self.detail,
        }


def split_statements(sql: str) -> list[str]:
    """Split a migration file into statements at top-level semicolons.

    Quotes and ``--``/``/* */`` comments are respected, so a semicolon inside a string literal
    does not end a statement. Comment-only chunks are dropped.
    """
    statements: list[str] = []
    buf: list[str] = []
    i, n = 0, len(sql)
    quote: str | None = None
    while i < n:
        ch = sql[i]
        if quote:
            buf.append(ch)
            if ch == "\\" and quote != "`" and i + 1 < n:
                buf.append(sql[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in ("'", '"', "`"):
            quote = ch
            buf.append(ch)
        elif sql.startswith("--", i) or ch == "#":
            end = sql.find("\n", i)
            i = n if end == -1 else end
            continue
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end == -1 else end + 2
            continue
        elif ch == ";":
            _flush(buf, statements)
            buf = []
        else:
            buf.append(ch)
        i += 1
    _flush(buf, statements)
    return statements


def _flush(buf: list[str], out: list[str]) -> None:
    text = "".join(buf).strip()
    if text:
        out.append(text)


def load_migrations(dialect: str) -> list[Migration]:
    """The migrations shipped for ``dialect`` ("mysql" or "sqlite"), in version order."""
    folder = resources.files("ctxtool.sql").joinpath(dialect)
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE_RE.match(entry.name)
        if match:
            found.append(Migration(match.group(1), match.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise CtxtoolError(f"two migration files share a version in sql/{dialect}/")
    return found


def _fmt_time(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)[:19]


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Migrator:
    """Applies and inspects the migrations of one database.

    Example::

        migrator = Migrator(create_engine("sqlite:///ctx.db"))
        migrator.up()
        for state in migrator.status(): print(state.version, state.state)
    """

    def __init__(self, engine: Engine, migrations: list[Migration] | None = None):
        self.engine = engine
        self.dialect = dialect_family(engine)
        self.migrations = migrations if migrations is not None else load_migrations(self.dialect)

    # -- reading -------------------------------------------------------------------------------

    def history(self, conn: Connection | None = None) -> dict[str, HistoryRow]:
        """The history table as {version: row}; empty when ctxtool never ran here."""
        if conn is None:
            with read_connection(self.engine) as own:
                return self.history(own)
        if not sa.inspect(conn).has_table(HISTORY_TABLE):
            return {}
        rows = conn.execute(
            sa.text(
                f"SELECT version, name, checksum, status, started_at, applied_at, duration_ms, "
                f"failed_statement, error FROM {HISTORY_TABLE}"
            )
        )
        return {r.version: HistoryRow(*r) for r in rows}

    def status(self, conn: Connection | None = None) -> list[MigrationState]:
        """Every known version with its state, in version order."""
        history = self.history(conn)
        states: list[MigrationState] = []
        for m in self.migrations:
            row = history.get(m.version)
            if row is None:
                states.append(MigrationState(m.version, m.name, PENDING, checksum=m.checksum))
            elif row.status in (FAILED, RUNNING):
                detail = row.error or "interrupted before it finished"
                states.append(
                    MigrationState(m.version, m.name, FAILED if row.status == FAILED else RUNNING,
                                   row.started_at, None, row.checksum, detail)
                )
            elif row.checksum != m.checksum:
                states.append(
                    MigrationState(m.version, m.name, CHANGED, row.applied_at, row.duration_ms,
                                   m.checksum,
                                   f"recorded {row.checksum[:12]}, file now {m.checksum[:12]}")
                )
            else:
                states.append(
                    MigrationState(m.version, m.name, row.status, row.applied_at,
                                   row.duration_ms, row.checksum)
                )
        known = {m.version for m in self.migrations}
        for version, row in sorted(history.items()):
            if version not in known:
                states.append(
                    MigrationState(version, row.name, MISSING, row.applied_at, row.duration_ms,
                                   row.checksum, "recorded here but not shipped with this ctxtool")
                )
        states.sort(key=lambda s: s.version)
        return states

    def require_current(self) -> None:
        """Raise SchemaNotCurrent unless every shipped migration is applied and unchanged."""
        try:
            states = self.status()
        except SQLAlchemyError as exc:
            raise CtxtoolError(describe_db_error(exc, self.engine.url)) from None
        bad = [s for s in states if not s.ok]
        if bad:
            first = bad[0]
            raise SchemaNotCurrent(
                f"database schema is not current: {first.version}_{first.name} is {first.state}"
                f"{' (and ' + str(len(bad) - 1) + ' more)' if len(bad) > 1 else ''}; "
                "run `ctxtool migrate status`, then `ctxtool migrate up`"
            )

    # -- changing ------------------------------------------------------------------------------

    def up(self, to: str | None = None, dry_run: bool = False, on_applied=None) -> list[Migration]:
        """Apply pending migrations (up to and including ``to``); return those applied.

        With ``dry_run`` nothing is executed and the migrations that would run are returned.
        """
        if to is not None and to not in {m.version for m in self.migrations}:
            raise CtxtoolError(f"--to {to}: no such migration version")
        with self._locked() as conn:
            self._ensure_history(conn)
            history = self.history(conn)
            self._refuse_unsafe(history)
            pending = [
                m for m in self.migrations
                if m.version not in history and (to is None or m.version <= to)
            ]
            if dry_run:
                return pending
            for migration in pending:
                self._apply(conn, migration)
                if on_applied:
                    on_applied(migration)
            return pending

    def baseline(self, version: str) -> list[Migration]:
        """Record every migration up to ``version`` as already present, without running it.

        For adopting a database whose seed tables an agent runtime created: baseline 0001, then
        `up` adds ctxtool's columns to the existing tables without touching their rows.
        """
        if version not in {m.version for m in self.migrations}:
            raise CtxtoolError(f"baseline {version}: no such migration version")
        with self._locked() as conn:
            self._ensure_history(conn)
            history = self.history(conn)
            if history:
                raise CtxtoolError(
                    f"cannot baseline: {HISTORY_TABLE} already records "
                    f"{', '.join(sorted(history))}; baseline is for a database ctxtool never migrated"
                )
            inspector = sa.inspect(conn)
            missing = [t for t in ("agent_session", "agent_message", "agent_compaction")
                       if not inspector.has_table(t)]
            if missing:
                raise CtxtoolError(
                    f"cannot baseline: table {missing[0]} does not exist; on an empty database "
                    "run `ctxtool migrate up` instead"
                )
            marked = [m for m in self.migrations if m.version <= version]
            now = _now()
            with self._write(conn):
                for m in marked:
                    self._insert_history(conn, m, BASELINE, now, applied_at=now, duration_ms=0)
            return marked

    def repair(self, version: str | None = None) -> list[tuple[str, str]]:
        """Clear failed/interrupted records and accept changed checksums; return what was done.

        A failed MySQL migration may have run some of its statements: the operator reverts or
        completes them by hand first (the failed statement is in `status`), then repairs so the
        next `up` runs the file again from the top.
        """
        actions: list[tuple[str, str]] = []
        with self._locked() as conn:
            self._ensure_history(conn)
            history = self.history(conn)
            files = {m.version: m for m in self.migrations}
            with self._write(conn):
                for v, row in sorted(history.items()):
                    if version is not None and v != version:
                        continue
                    if row.status in (FAILED, RUNNING):
                        conn.execute(sa.text(f"DELETE FROM {HISTORY_TABLE} WHERE version = :v"),
                                     {"v": v})
                        actions.append((v, f"removed {row.status} record; `up` will run it again"))
                    elif v in files and files[v].checksum != row.checksum:
                        conn.execute(
                            sa.text(f"UPDATE {HISTORY_TABLE} SET checksum = :c WHERE version = :v"),
                            {"c": files[v].checksum, "v": v},
                        )
                        actions.append((v, f"accepted new checksum {files[v].checksum[:12]}"))
        if version is not None and not actions:
            raise CtxtoolError(f"repair {version}: nothing to repair for that version")
        return actions

    # -- internals -----------------------------------------------------------------------------

    def _refuse_unsafe(self, history: dict[str, HistoryRow]) -> None:
        files = {m.version: m for m in self.migrations}
        for v, row in sorted(history.items()):
            name = f"{v}_{row.name}.sql"
            if row.status in (FAILED, RUNNING):
                what = "failed" if row.status == FAILED else "was interrupted"
                stmt = (row.failed_statement or "").strip().splitlines()
                at = f" at statement: {stmt[0][:120]}" if stmt else ""
                raise CtxtoolError(
                    f"migration {name} {what}{at} ({row.error or 'no error recorded'}). "
                    f"Its earlier statements may have been applied: check the schema, revert or "
                    f"finish them by hand, then run `ctxtool migrate repair {v}` and `up` again"
                )
            if v in files and files[v].checksum != row.checksum:
                raise CtxtoolError(
                    f"migration sql/{self.dialect}/{name} changed after it was applied (checksum "
                    f"{row.checksum[:12]} recorded, {files[v].checksum[:12]} now); restore the "
                    f"file, or accept it deliberately with `ctxtool migrate repair {v}`"
                )

    def _apply(self, conn: Connection, migration: Migration) -> None:
        started = time.perf_counter()
        now = _now()
        if self.dialect == "sqlite":
            # SQLite DDL is transactional: the whole file and its record commit or vanish together.
            statement = None
            try:
                with conn.begin_nested():
                    for statement in migration.statements():
                        conn.exec_driver_sql(statement)
                    self._insert_history(conn, migration, APPLIED, now, applied_at=_now(),
                                         duration_ms=_ms_since(started))
            except SQLAlchemyError as exc:
                raise CtxtoolError(
                    f"migration sql/sqlite/{migration.filename} failed and was rolled back "
                    f"({describe_db_error(exc)}) at statement: {_first_line(statement)}"
                ) from None
            return
        # MySQL: DDL commits implicitly, so record the file as running before its first
        # statement; a crash or error leaves an honest trail.
        self._insert_history(conn, migration, RUNNING, now)
        for statement in migration.statements():
            try:
                conn.exec_driver_sql(statement)
            except SQLAlchemyError as exc:
                error = describe_db_error(exc)
                conn.execute(
                    sa.text(f"UPDATE {HISTORY_TABLE} SET status = :s, failed_statement = :st, "
                            "error = :e, duration_ms = :d WHERE version = :v"),
                    {"s": FAILED, "st": statement, "e": error[:2000],
                     "d": _ms_since(started), "v": migration.version},
                )
                raise CtxtoolError(
                    f"migration sql/mysql/{migration.filename} failed at statement: "
                    f"{_first_line(statement)} ({error}); it is recorded as failed — check which "
                    f"of its statements took effect, fix by hand, then "
                    f"`ctxtool migrate repair {migration.version}`"
                ) from None
        conn.execute(
            sa.text(f"UPDATE {HISTORY_TABLE} SET status = :s, applied_at = :a, duration_ms = :d "
                    "WHERE version = :v"),
            {"s": APPLIED, "a": _now(), "d": _ms_since(started), "v": migration.version},
        )

    def _insert_history(self, conn, m: Migration, status: str, started_at, applied_at=None,
                        duration_ms=None) -> None:
        conn.execute(
            sa.text(f"INSERT INTO {HISTORY_TABLE} (version, name, checksum, status, started_at, "
                    "applied_at, duration_ms) VALUES (:v, :n, :c, :s, :st, :a, :d)"),
            {"v": m.version, "n": m.name, "c": m.checksum, "s": status, "st": started_at,
             "a": applied_at, "d": duration_ms},
        )

    def _ensure_history(self, conn: Connection) -> None:
        with self._write(conn):
            conn.exec_driver_sql(_HISTORY_DDL[self.dialect])

    def _write(self, conn: Connection):
        """A savepoint on SQLite (inside the run's transaction); a no-op on MySQL, whose lock
        connection autocommits."""
        if self.dialect == "sqlite":
            return conn.begin_nested()
        return _NullContext()

    def _locked(self):
        return _MigrationLock(self.engine, self.dialect)


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _MigrationLock:
    """One dedicated connection that holds the migration lock for a whole run.

    MySQL: GET_LOCK, named after the database, held by this connection's session, which also runs
    every statement (autocommit, since DDL commits anyway). SQLite: the connection's own
    BEGIN IMMEDIATE transaction, open for the whole run, serialises writers (a second run waits
    on the busy timeout); each file runs in a savepoint, so a failed file rolls back alone.
    """

    def __init__(self, engine: Engine, dialect: str):
        self.engine = engine
        self.dialect = dialect
        self.conn: Connection | None = None
        self.tx = None
        self.name = ""

    def __enter__(self) -> Connection:
        try:
            if self.dialect == "mysql":
                self.conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
                database = self.conn.exec_driver_sql("SELECT DATABASE()").scalar() or ""
                self.name = f"ctxtool_migrate:{database}"[:64]
                got = self.conn.execute(sa.text("SELECT GET_LOCK(:n, :t)"),
                                        {"n": self.name, "t": LOCK_TIMEOUT_S}).scalar()
                if got != 1:
                    self.conn.close()
                    raise CtxtoolError(
                        f"another `ctxtool migrate` holds lock {self.name!r} (waited "
                        f"{LOCK_TIMEOUT_S}s); try again when it finishes"
                    )
            else:
                self.conn = self.engine.connect()
                self.tx = self.conn.begin()
            return self.conn
        except SQLAlchemyError as exc:
            raise CtxtoolError(describe_db_error(exc, self.engine.url)) from None

    def __exit__(self, exc_type, exc, tb):
        if self.conn is None:
            return False
        try:
            if self.dialect == "mysql":
                self.conn.execute(sa.text("SELECT RELEASE_LOCK(:n)"), {"n": self.name})
            elif exc_type is None or issubclass(exc_type, CtxtoolError):
                # A failed file already rolled back to its savepoint; keep the files before it.
                self.tx.commit()
            else:
                self.tx.rollback()
        finally:
            self.conn.close()
        return False


def _ms_since(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _first_line(statement: str | None) -> str:
    if not statement:
        return "(none)"
    return " ".join(statement.split())[:160]
