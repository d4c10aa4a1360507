"""Versioned schema migrations from ``sql/<dialect>/NNNN_name.sql``, recorded in a history table.

``sql_files`` loads, checksums and splits the shipped files, ``states`` judges where a database
stands (pure), ``history`` reads and writes the history table, ``apply`` runs one file, and
``migrator`` (:class:`Migrator`) applies them under the dialect's lock.
"""

from ..db.schema import HISTORY_TABLE
from .migrator import Migrator
from .sql_files import Migration, load_migrations, split_statements
from .states import (
    APPLIED,
    BASELINE,
    CHANGED,
    FAILED,
    MISSING,
    PENDING,
    RUNNING,
    HistoryRow,
    MigrationState,
    migration_states,
)

__all__ = [
    "APPLIED",
    "BASELINE",
    "CHANGED",
    "FAILED",
    "HISTORY_TABLE",
    "MISSING",
    "PENDING",
    "RUNNING",
    "HistoryRow",
    "Migration",
    "MigrationState",
    "Migrator",
    "load_migrations",
    "migration_states",
    "split_statements",
]
