"""Applying migrations: the history table, the run lock, one file at a time.

Modelled on Flyway and dbmate: files apply in version order, each recorded with its checksum;
an applied file that changed is refused; a file that failed half-way is recorded as failed
(MySQL DDL is not transactional, so we cannot pretend it rolled back) and blocks later runs
until an operator repairs it. The dialect object supplies the lock and says whether a file can
roll back whole.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..core.errors import CtxtoolError, SchemaNotCurrent
from ..db import dialect_of, read_connection
from ..db.dialects import ServerVersion, parse_server_version
from ..db.schema import HISTORY_TABLE, STORE_TABLES, agent_compaction, agent_message
from ..store.session_touch import create_trigger, trigger_notes
from . import history as hist
from .apply import apply_file
from .server_versions import refusal
from .sql_files import Migration, load_migrations
from .states import (
    BASELINE,
    FAILED,
    RUNNING,
    HistoryRow,
    MigrationState,
    migration_states,
    not_current_message,
    pending_migrations,
    refuse_unsafe,
    with_note,
)

# The file that creates the store's tables, and those of them whose ids give their order.
SEED_VERSION = "0001"
ORDERED_ID_TABLES = (agent_message.name, agent_compaction.name)


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
        self.migrations = (
            migrations if migrations is not None else load_migrations(self.dialect.name)
        )

    # -- reading -------------------------------------------------------------------------------

    def history(self, conn: Connection | None = None) -> dict[str, HistoryRow]:
        """The history table as {version: row}; empty when ctxtool never ran here."""
        if conn is None:
            with read_connection(self.engine) as own:
                return hist.read_history(own)
        return hist.read_history(conn)

    def status(self, conn: Connection | None = None, *, notes: bool = True) -> list[MigrationState]:
        """Every known version with its state, in version order; on TiDB, the file that
        creates the tables says which of them hand out ids that may not follow write order,
        and an earlier release's session trigger (AFTER INSERT) is named there too."""
        if conn is None:
            with read_connection(self.engine) as own:
                return self.status(own, notes=notes)
        history = self.history(conn)
        states = migration_states(self.migrations, history)
        if not notes:
            return states
        unordered = self.dialect.tables_without_ordered_ids(conn, ORDERED_ID_TABLES)
        if unordered:
            states = with_note(
                states,
                SEED_VERSION,
                f"TiDB: {', '.join(unordered)} lack AUTO_ID_CACHE=1, so ids come from "
                "per-server caches and a message written later can get a lower id (restored "
                "out of order); TiDB sets it only at CREATE TABLE: see docs/distributed.md",
            )
        for note in trigger_notes(conn) if history else []:
            states = with_note(states, SEED_VERSION, note)
        return states

    def runtime_tables_without_history(self) -> bool:
        """The store's tables exist but ctxtool never recorded a migration here: a database an
        agent runtime created, to adopt with `baseline` rather than `up`."""
        with read_connection(self.engine) as conn:
            inspector = sa.inspect(conn)
            return not inspector.has_table(HISTORY_TABLE) and all(
                inspector.has_table(t.name) for t in STORE_TABLES
            )

    def require_current(self) -> None:
        """Raise SchemaNotCurrent unless every shipped migration is applied and unchanged."""
        # The states alone: the notes (a trigger listing, TiDB's table options) say nothing of
        # whether the schema is current, and every command but `migrate` comes through here.
        message = not_current_message(self.status(notes=False))
        if message:
            raise SchemaNotCurrent(message)

    def _known_version(self, version: str, what: str) -> str:
        """The shipped version ``version`` names: as written, or its number (``3`` is 0003).
        An unknown one is a usage error listing the versions there are."""
        versions = [m.version for m in self.migrations]
        if version not in versions and version.isdigit():
            version = next((v for v in versions if v.isdigit() and int(v) == int(version)), version)
        if version not in versions:
            raise CtxtoolError(
                f"{what} {version}: no such migration version (there are {', '.join(versions)})",
                exit_code=2,
            )
        return version

    # -- changing ------------------------------------------------------------------------------

    def up(
        self,
        to: str | None = None,
        dry_run: bool = False,
        on_applied: Callable[[Migration], None] | None = None,
        touch_session_trigger: bool = False,
    ) -> list[Migration]:
        """Apply pending migrations (up to and including ``to``); return those applied.

        With ``dry_run`` nothing is executed and the migrations that would run are returned.
        With ``touch_session_trigger`` the trigger that makes a runtime's message inserts
        write their session's row (store.session_touch) is created too, under the same lock.
        A server too old for a pending file (or the trigger) is refused before anything runs.
        """
        if to is not None:
            to = self._known_version(to, "--to")
        with self.dialect.migration_lock(self.engine) as conn:
            self._ensure_history(conn)
            history = self.history(conn)
            refuse_unsafe(self.migrations, history, self.folder)
            pending = pending_migrations(self.migrations, history, to)
            if dry_run:
                return pending
            server = self.server_version(conn)
            why_not = refusal(pending, server, trigger=touch_session_trigger)
            if why_not:
                raise CtxtoolError(why_not)
            for migration in pending:
                apply_file(
                    conn, self.dialect, self.folder, migration, history.get(migration.version)
                )
                if on_applied:
                    on_applied(migration)
            if touch_session_trigger:
                create_trigger(conn)
            return pending

    def server_version(self, conn: Connection | None = None) -> ServerVersion:
        """The product and version of the server this database is on."""
        if conn is None:
            with read_connection(self.engine) as own:
                return self.server_version(own)
        text = str(conn.exec_driver_sql(self.dialect.server_version_sql()).scalar_one())
        return parse_server_version(text)

    def baseline(self, version: str) -> list[Migration]:
        """Record every migration up to ``version`` as already present, without running it.

        For adopting a database whose seed tables an agent runtime created: baseline 0001, then
        `up` adds ctxtool's columns to the existing tables without touching their rows.
        """
        version = self._known_version(version, "baseline")
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
            now = hist.utc_now()
            with self.dialect.migration_step(conn):
                for m in marked:
                    hist.record(conn, m, BASELINE, now, applied_at=now, duration_ms=0)
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
                        hist.update(conn, v, status=RUNNING, error=None, failed_statement=None)
                        actions.append(
                            (
                                v,
                                f"cleared the failure; `up` resumes at statement "
                                f"{row.statements_done + 1}",
                            )
                        )
                    elif row.status == RUNNING and row.statements_done is not None:
                        actions.append(
                            (
                                v,
                                f"interrupted, nothing to clear; `up` resumes at "
                                f"statement {row.statements_done + 1}",
                            )
                        )
                    elif row.status in (FAILED, RUNNING):
                        hist.forget_migration(conn, v)
                        actions.append((v, f"removed {row.status} record; `up` will run it again"))
                    elif v in files and not files[v].recorded_as(row.checksum):
                        hist.update(conn, v, checksum=files[v].checksum)
                        actions.append((v, f"accepted new checksum {files[v].checksum[:12]}"))
        if version is not None and not actions:
            raise CtxtoolError(f"repair {version}: nothing to repair for that version")
        return actions

    # -- internals -----------------------------------------------------------------------------

    def _ensure_history(self, conn: Connection) -> None:
        with self.dialect.migration_step(conn):
            hist.ensure_history(conn)
