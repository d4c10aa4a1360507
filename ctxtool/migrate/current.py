"""The check every command but `migrate` makes before it runs: is the schema current?

One read of the history table's versions, checksums and statuses against the shipped files
(:func:`~ctxtool.migrate.states.schema_is_current`). Only when that read fails or finds
something amiss need the caller read the whole status
(:meth:`~ctxtool.migrate.migrator.Migrator.require_current`), to say what.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from ..db import dialect_of
from ..db.schema import HISTORY_TABLE
from .sql_files import load_migrations
from .states import schema_is_current

# The three columns every release's history table has.
_CURRENT_QUERY = f"SELECT version, checksum, status FROM {HISTORY_TABLE}"


def history_is_current(conn: Connection) -> bool:
    """Whether the history table records every shipped migration applied and unchanged, and no
    other; False too when it cannot be read (no table: a new or a runtime's database)."""
    try:
        rows = conn.exec_driver_sql(_CURRENT_QUERY).all()
    except DBAPIError:
        return False
    return schema_is_current(load_migrations(dialect_of(conn).name), [tuple(r) for r in rows])
