"""Versioned schema migrations from ``sql/<dialect>/NNNN_name.sql``, recorded in a history table.

``sql_files`` loads, checksums and splits the shipped files, ``states`` judges where a database
stands (pure), ``history`` reads and writes the history table, ``apply`` runs one file, and
``migrator`` (:class:`Migrator`) applies them under the dialect's lock. ``current`` is the check
every command but `migrate` makes before it runs.

The names below are loaded when first asked for: the check every command makes
(``migrate.current``) does not load the migrator, its history writes and the session triggers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "APPLIED": ".states",
    "BASELINE": ".states",
    "CHANGED": ".states",
    "FAILED": ".states",
    "HISTORY_TABLE": "..db.schema",
    "MISSING": ".states",
    "PENDING": ".states",
    "RUNNING": ".states",
    "HistoryRow": ".states",
    "Migration": ".sql_files",
    "MigrationState": ".states",
    "Migrator": ".migrator",
    "load_migrations": ".sql_files",
    "migration_states": ".states",
    "split_statements": ".sql_files",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)
