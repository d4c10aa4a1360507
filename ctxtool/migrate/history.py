"""ctxtool's migration history table: reading it, and the writes a run makes to it.

The table is described once (``ctxtool.db.schema.schema_history``) and created from that on
every dialect; an older ctxtool's table gets the columns it lacks on first use.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..db.schema import HISTORY_TABLE, schema_history
from ..db.stored_time import parse_stored_time
from .sql_files import Migration
from .states import HistoryRow

H = schema_history


def utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def read_history(conn: Connection) -> dict[str, HistoryRow]:
    """The history table as {version: row}; empty when ctxtool never ran here."""
    if not sa.inspect(conn).has_table(HISTORY_TABLE):
        return {}
    has_progress = any(
        c["name"] == "statements_done" for c in sa.inspect(conn).get_columns(HISTORY_TABLE)
    )
    progress = H.c.statements_done if has_progress else sa.null().label("statements_done")
    rows = conn.execute(
        sa.select(
            H.c.version,
            H.c.name,
            H.c.checksum,
            H.c.status,
            # As stored, not parsed by the column's type: a date no parser reads is shown so.
            sa.type_coerce(H.c.started_at, sa.String()).label("started_at"),
            sa.type_coerce(H.c.applied_at, sa.String()).label("applied_at"),
            H.c.duration_ms,
            progress,
            H.c.failed_statement,
            H.c.error,
        )
    )
    return {
        r.version: HistoryRow(
            **{  # columns named as its fields
                **r._asdict(),
                "started_at": history_date(r.started_at),
                "applied_at": history_date(r.applied_at),
            }
        )
        for r in rows
    }


UNREADABLE_DATE = "unreadable"


def history_date(value: object) -> datetime | str | None:
    """A history row's date as the store reads every stored time (``db.parse_stored_time``);
    ``"unreadable"`` for one it cannot read (a row written by hand, or by another tool),
    which `status` shows as it is."""
    if value is None:
        return None
    return parse_stored_time(value) or UNREADABLE_DATE


def ensure_history(conn: Connection) -> None:
    """Create the history table, or add what an older ctxtool's table lacks."""
    schema_history.create(conn, checkfirst=True)
    present = {c["name"] for c in sa.inspect(conn).get_columns(HISTORY_TABLE)}
    if "statements_done" not in present:
        conn.exec_driver_sql(f"ALTER TABLE {HISTORY_TABLE} ADD COLUMN statements_done INTEGER NULL")


def record(
    conn: Connection,
    m: Migration,
    status: str,
    started_at,
    applied_at=None,
    duration_ms=None,
    statements_done=None,
) -> None:
    conn.execute(
        H.insert().values(
            version=m.version,
            name=m.name,
            checksum=m.checksum,
            status=status,
            started_at=started_at,
            applied_at=applied_at,
            duration_ms=duration_ms,
            statements_done=statements_done,
        )
    )


def update(conn: Connection, version: str, **values) -> None:
    conn.execute(H.update().where(H.c.version == version).values(**values))


def forget_migration(conn: Connection, version: str) -> None:
    conn.execute(H.delete().where(H.c.version == version))
