"""Applying migrations: the history table, the run lock, one file at a time.

Modelled on Flyway and dbmate: files apply in version order, each recorded with its checksum;
an applied file that changed is refused; a file that failed half-way is recorded as failed
(MySQL DDL is not transactional, so we cannot pretend it rolled back) and blocks later runs
until an operator repairs it. The dialect object supplies the lock and says whether a file can
roll back whole.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from ..db import describe_db_error, dialect_of, read_connection
from ..db.schema import HISTORY_TABLE, STORE_TABLES, schema_history
from ..errors import CtxtoolError, SchemaNotCurrent
from .files import Migration, load_migrations
from .states import (APPLIED, BASELINE, FAILED, RUNNING, HistoryRow, MigrationState,
                     migration_states, not_current_message, pending_migrations, refuse_unsafe)

H = schema_history


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _ms_since(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _first_line(statement: str | None) -> str:
    if not statement:
        return "(none)"
    return " ".join(statement.split())[:160]


class Migrator:
    """Applies and inspects the migrations of one database.

    Example::

        migrator = Migrator(create_engine("sqlite:///ctx.db"))
        migrator.up()
        for state in migrator.status(): print(state.version, state.state)
    """

    def __init__(self, engine: Engine, migrations: list[Migration] | None = None):
        self.engine = engine
        self.dialect = dialect_of(engine)
        self.folder = f"sql/{self.dialect.name}"
        self.migrations = (migrations if migrations is not None
                           else load_migrations(self.dialect.name))

    # -- reading -------------------------------------------------------------------------------

    def history(self, conn: Connection | None = None) -> dict[str, HistoryRow]:
        """The history table as {version: row}; empty when ctxtool never ran here."""
        if conn is None:
            with read_connection(self.engine) as own:
                return self.history(own)
        if not sa.inspect(conn).has_table(HISTORY_TABLE):
            return {}
        has_progress = any(c["name"] == "statements_done"
                           for c in sa.inspect(conn).get_columns(HISTORY_TABLE))
        progress = H.c.statements_done if has_progress else sa.null()
        rows = conn.execute(sa.select(H.c.version, H.c.name, H.c.checksum, H.c.status,
                                      H.c.started_at, H.c.applied_at, H.c.duration_ms,
                                      progress, H.c.failed_statement, H.c.error))
        return {r.version: HistoryRow(*r) for r in rows}

    def status(self, conn: Connection | None = None) -> list[MigrationState]:
        """Every known version with its state, in version order."""
        return migration_states(self.migrations, self.history(conn))

    def runtime_tables_without_history(self) -> bool:
        """The store's tables exist but ctxtool never recorded a migration here: a database an
        agent runtime created, to adopt with `baseline` rather than `up`."""
        with read_connection(self.engine) as conn:
            inspector = sa.inspect(conn)
            return (not inspector.has_table(HISTORY_TABLE)
                    and all(inspector.has_table(t.name) for t in STORE_TABLES))

    def require_current(self) -> None:
        """Raise SchemaNotCurrent unless every shipped migration is applied and unchanged."""
        try:
            states = self.status()
        except SQLAlchemyError as exc:
            raise CtxtoolError(describe_db_error(exc, self.engine.url)) from None
        message = not_current_message(states)
        if message:
            raise SchemaNotCurrent(message)

    # -- changing ------------------------------------------------------------------------------

    def up(self, to: str | None = None, dry_run: bool = False,
           on_applied: Callable[[Migration], None] | None = None) -> list[Migration]:
        """Apply pending migrations (up to and including ``to``); return those applied.

        With ``dry_run`` nothing is executed and the migrations that would run are returned.
        """
        if to is not None and to not in {m.version for m in self.migrations}:
            raise CtxtoolError(f"--to {to}: no such migration version")
        with self.dialect.migration_lock(self.engine) as conn:
            self._ensure_history(conn)
            history = self.history(conn)
            refuse_unsafe(self.migrations, history, self.folder)
            pending = pending_migrations(self.migrations, history, to)
            if dry_run:
                return pending
            for migration in pending:
                self._apply(conn, migration, history.get(migration.version))
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
        with self.dialect.migration_lock(self.engine) as conn:
            self._ensure_history(conn)
            history = self.history(conn)
            if history:
                raise CtxtoolError(
                    f"cannot baseline: {HISTORY_TABLE} already records "
                    f"{', '.join(sorted(history))}; baseline is for a database ctxtool never migrated"
                )
            inspector = sa.inspect(conn)
            missing = [t.name for t in STORE_TABLES if not inspector.has_table(t.name)]
            if missing:
                raise CtxtoolError(
                    f"cannot baseline: table {missing[0]} does not exist; on an empty database "
                    "run `ctxtool migrate up` instead"
                )
            marked = [m for m in self.migrations if m.version <= version]
            now = _now()
            with self.dialect.migration_step(conn):
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
        with self.dialect.migration_lock(self.engine) as conn:
            self._ensure_history(conn)
            history = self.history(conn)
            files = {m.version: m for m in self.migrations}
            with self.dialect.migration_step(conn):
                for v, row in sorted(history.items()):
                    if version is not None and v != version:
                        continue
                    if row.status == FAILED and row.statements_done is not None:
                        conn.execute(H.update().where(H.c.version == v).values(
                            status=RUNNING, error=None, failed_statement=None))
                        actions.append((v, f"cleared the failure; `up` resumes at statement "
                                           f"{row.statements_done + 1}"))
                    elif row.status == RUNNING and row.statements_done is not None:
                        actions.append((v, f"interrupted, nothing to clear; `up` resumes at "
                                           f"statement {row.statements_done + 1}"))
                    elif row.status in (FAILED, RUNNING):
                        conn.execute(H.delete().where(H.c.version == v))
                        actions.append((v, f"removed {row.status} record; `up` will run it again"))
                    elif v in files and files[v].checksum != row.checksum:
                        conn.execute(H.update().where(H.c.version == v)
                                     .values(checksum=files[v].checksum))
                        actions.append((v, f"accepted new checksum {files[v].checksum[:12]}"))
        if version is not None and not actions:
            raise CtxtoolError(f"repair {version}: nothing to repair for that version")
        return actions

    # -- internals -----------------------------------------------------------------------------

    def _apply(self, conn: Connection, migration: Migration,
               interrupted: HistoryRow | None = None) -> None:
        if self.dialect.transactional_ddl:
            self._apply_atomically(conn, migration)
        else:
            self._apply_step_by_step(conn, migration, interrupted)

    def _apply_atomically(self, conn: Connection, migration: Migration) -> None:
        """The whole file and its record commit or vanish together."""
        started, now = time.perf_counter(), _now()
        statement = None
        try:
            with self.dialect.migration_step(conn):
                for statement in migration.statements():
                    conn.exec_driver_sql(statement)
                self._insert_history(conn, migration, APPLIED, now, applied_at=_now(),
                                     duration_ms=_ms_since(started))
        except SQLAlchemyError as exc:
            raise CtxtoolError(
                f"migration {self.folder}/{migration.filename} failed and was rolled back "
                f"({describe_db_error(exc)}) at statement: {_first_line(statement)}"
            ) from None

    def _apply_step_by_step(self, conn: Connection, migration: Migration,
                            interrupted: HistoryRow | None) -> None:
        """DDL commits implicitly: the file is recorded as running before its first statement
        and its progress after each one, so a crash or an error leaves an honest trail and `up`
        resumes at the first statement not done. The one statement whose fate is unknown (it
        may have taken effect just before the crash) counts as done when the server says what
        it makes already exists."""
        started = time.perf_counter()
        statements = migration.statements()
        start = (interrupted.statements_done or 0) if interrupted else 0
        if interrupted is None:
            self._insert_history(conn, migration, RUNNING, _now(), statements_done=0)
        for index in range(start, len(statements)):
            statement = statements[index]
            try:
                conn.exec_driver_sql(statement)
            except SQLAlchemyError as exc:
                if not (interrupted and index == start and self.dialect.already_applied(exc)):
                    self._record_failure(conn, migration, index, statement, exc, started)
            conn.execute(H.update().where(H.c.version == migration.version)
                         .values(statements_done=index + 1))
        conn.execute(H.update().where(H.c.version == migration.version).values(
            status=APPLIED, applied_at=_now(), duration_ms=_ms_since(started),
            statements_done=len(statements)))

    def _record_failure(self, conn, migration: Migration, index: int, statement: str,
                        exc: SQLAlchemyError, started: float):
        error = describe_db_error(exc)
        conn.execute(H.update().where(H.c.version == migration.version).values(
            status=FAILED, failed_statement=statement, error=error[:2000],
            statements_done=index, duration_ms=_ms_since(started)))
        raise CtxtoolError(
            f"migration {self.folder}/{migration.filename} failed at statement {index + 1}: "
            f"{_first_line(statement)} ({error}); it is recorded as failed with {index} "
            f"statement(s) done — fix the cause, then `ctxtool migrate repair "
            f"{migration.version}` and `up` resumes there"
        ) from None

    def _insert_history(self, conn, m: Migration, status: str, started_at, applied_at=None,
                        duration_ms=None, statements_done=None) -> None:
        conn.execute(H.insert().values(version=m.version, name=m.name, checksum=m.checksum,
                                       status=status, started_at=started_at,
                                       applied_at=applied_at, duration_ms=duration_ms,
                                       statements_done=statements_done))

    def _ensure_history(self, conn: Connection) -> None:
        """Create the history table, or add what an older ctxtool's table lacks."""
        with self.dialect.migration_step(conn):
            schema_history.create(conn, checkfirst=True)
            present = {c["name"] for c in sa.inspect(conn).get_columns(HISTORY_TABLE)}
            if "statements_done" not in present:
                conn.exec_driver_sql(
                    f"ALTER TABLE {HISTORY_TABLE} ADD COLUMN statements_done INTEGER NULL")
