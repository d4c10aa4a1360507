"""Running one migration file: whole (transactional DDL) or statement by statement, recording
progress so an interrupted file resumes where it stopped."""

from __future__ import annotations

import time

from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from ..core.errors import CtxtoolError
from ..db import Dialect, describe_db_error
from . import history
from .sql_files import Migration
from .states import APPLIED, FAILED, RUNNING, HistoryRow


def _ms_since(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _first_line(statement: str | None) -> str:
    if not statement:
        return "(none)"
    return " ".join(statement.split())[:160]


def apply_file(
    conn: Connection,
    dialect: Dialect,
    folder: str,
    migration: Migration,
    interrupted: HistoryRow | None = None,
) -> None:
    """Apply one file in the way the dialect allows; raise CtxtoolError naming the file and
    the statement when it fails."""
    if dialect.transactional_ddl:
        _apply_atomically(conn, dialect, folder, migration)
    else:
        _apply_step_by_step(conn, dialect, folder, migration, interrupted)


def _apply_atomically(
    conn: Connection, dialect: Dialect, folder: str, migration: Migration
) -> None:
    """The whole file and its record commit or vanish together."""
    started, now = time.perf_counter(), history.utc_now()
    statement = None
    try:
        with dialect.migration_step(conn):
            for statement in migration.statements():
                conn.exec_driver_sql(statement)
            history.record(
                conn,
                migration,
                APPLIED,
                now,
                applied_at=history.utc_now(),
                duration_ms=_ms_since(started),
            )
    except SQLAlchemyError as exc:
        raise CtxtoolError(
            f"migration {folder}/{migration.filename} failed and was rolled back "
            f"({describe_db_error(exc)}) at statement: {_first_line(statement)}"
        ) from None


def _apply_step_by_step(
    conn: Connection,
    dialect: Dialect,
    folder: str,
    migration: Migration,
    interrupted: HistoryRow | None,
) -> None:
    """DDL commits implicitly: the file is recorded as running before its first statement
    and its progress after each one, so a crash or an error leaves an honest trail and `up`
    resumes at the first statement not done. The one statement whose fate is unknown (it
    may have taken effect just before the crash) counts as done when the server says what
    it makes already exists."""
    started = time.perf_counter()
    statements = migration.statements()
    start = (interrupted.statements_done or 0) if interrupted else 0
    if interrupted is None:
        history.record(conn, migration, RUNNING, history.utc_now(), statements_done=0)
    for index in range(start, len(statements)):
        statement = statements[index]
        try:
            conn.exec_driver_sql(statement)
        except SQLAlchemyError as exc:
            if not (interrupted and index == start and dialect.already_applied(exc)):
                _record_failure(conn, folder, migration, index, statement, exc, started)
        history.update(conn, migration.version, statements_done=index + 1)
    history.update(
        conn,
        migration.version,
        status=APPLIED,
        applied_at=history.utc_now(),
        duration_ms=_ms_since(started),
        statements_done=len(statements),
    )


def _record_failure(
    conn: Connection,
    folder: str,
    migration: Migration,
    index: int,
    statement: str,
    exc: SQLAlchemyError,
    started: float,
):
    error = describe_db_error(exc)
    history.update(
        conn,
        migration.version,
        status=FAILED,
        failed_statement=statement,
        error=error[:2000],
        statements_done=index,
        duration_ms=_ms_since(started),
    )
    raise CtxtoolError(
        f"migration {folder}/{migration.filename} failed at statement {index + 1}: "
        f"{_first_line(statement)} ({error}); it is recorded as failed with {index} "
        f"statement(s) done — fix the cause, then `ctxtool migrate repair "
        f"{migration.version}` and `up` resumes there"
    ) from None
