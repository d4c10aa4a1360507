"""The session's row as the write that every message insert and every checkpoint touch.

A checkpoint proves its span with a locking read, which on one server waits for an insert into
the span that is still uncommitted. On a multi-primary cluster (Galera) that read waits on its
own node only, and on TiDB it takes no gap lock: a message whose insert began before the plan
and commits after the checkpoint could fall below the cut, in neither the summary nor the
restored context. What orders transactions across nodes is a write to the same row. A
transaction that inserts messages writes the session's row first; so do the lease claim and the
checkpoint (the lease lives there). One session's inserts then commit one after the other in id
order (on Galera a second node's write to the row aborts the open one with 1213, to be run
again with a higher id; on one server it waits), and an insert still in flight is above every
committed message, hence above any cut a compactor can plan.

ctxtool's importer does this in every transaction. A runtime does it with
:data:`RUNTIME_STATEMENT` at the start of each transaction that inserts messages, or, where it
cannot be changed, through the trigger ``ctxtool migrate up --touch-session-trigger`` installs
(not on TiDB, which has no triggers). See docs/distributed.md.

The trigger runs BEFORE INSERT: MySQL and MariaDB give the row its AUTO_INCREMENT id after
the BEFORE triggers, so the insert waits for the session's row before it has an id. An AFTER
trigger (ctxtool's first, ``agent_message_touches_session``) waited with its id already given:
a runtime's insert in flight could get an id below a later one that committed first, and a
kept sum written meanwhile (store.context_sums) stayed short of it (found by review).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from ..db import dialect_of
from ..db.dialects import Dialect
from ..db.schema import agent_session as S

# What a runtime runs first in each transaction that inserts messages into session ? (MySQL,
# MariaDB): in UTC, as ctxtool and the trigger write every time, whatever the connection's zone.
RUNTIME_STATEMENT = "UPDATE agent_session SET updated_at = UTC_TIMESTAMP(6) WHERE session_id = ?"

TRIGGER_NAME = "agent_message_touches_session_first"
# Triggers of earlier ctxtool releases, replaced by TRIGGER_NAME: the AFTER INSERT one.
EARLIER_TRIGGER_NAMES = ("agent_message_touches_session",)


def touch_session(conn: Connection, session_id: int) -> bool:
    """Inside the caller's transaction, before its inserts: write the session's row (its
    ``updated_at``), which also locks it for the transaction; False when there is no such row."""
    now = dialect_of(conn).server_now()
    done = conn.execute(S.update().where(S.c.session_id == session_id).values(updated_at=now))
    return done.rowcount == 1


def trigger_statement(dialect: Dialect) -> str:
    """The CREATE TRIGGER that makes every INSERT into agent_message touch its session's row
    (for a runtime that cannot add :data:`RUNTIME_STATEMENT` itself). One statement as MySQL,
    MariaDB and SQLite take it through a driver (no DELIMITER); IF NOT EXISTS needs MySQL
    8.0.29 or MariaDB 10.1.4."""
    now = dialect.server_now().text
    return (
        f"CREATE TRIGGER IF NOT EXISTS {TRIGGER_NAME} BEFORE INSERT ON agent_message "
        f"FOR EACH ROW BEGIN UPDATE agent_session SET updated_at = {now} "
        "WHERE session_id = NEW.session_id; END"
    )


def create_trigger(conn: Connection) -> None:
    """Create the trigger (a no-op when it exists), then drop an earlier release's, in the
    caller's transaction if any (on MySQL each statement commits by itself): the new one is in
    place before the old one goes, so no insert passes untouched meanwhile (both, for an
    instant, write the row twice)."""
    conn.exec_driver_sql(trigger_statement(dialect_of(conn)))
    for name in earlier_triggers(conn):
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")


def earlier_triggers(conn: Connection) -> list[str]:
    """The triggers of :data:`EARLIER_TRIGGER_NAMES` this database has (SHOW TRIGGERS, not
    information_schema.triggers, which waits behind any DROP DATABASE waiting for a lock)."""
    if dialect_of(conn).name == "sqlite":
        names = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")
    else:
        names = conn.exec_driver_sql("SHOW TRIGGERS")
    return [str(row[0]) for row in names if str(row[0]) in EARLIER_TRIGGER_NAMES]


def earlier_trigger_note(conn: Connection) -> str | None:
    """What `migrate status` says of an earlier release's trigger still in place, or None."""
    found = earlier_triggers(conn)
    if not found:
        return None
    return (
        f"trigger {', '.join(found)} runs AFTER INSERT: a runtime's message gets its id before "
        "it waits for its session's row, so ids may commit out of order and a kept sum can miss "
        f"one; `migrate up --touch-session-trigger` replaces it with {TRIGGER_NAME} (BEFORE INSERT)"
    )


def install_trigger(conn: Connection) -> None:
    """Create the trigger (a no-op when it exists) in a transaction of its own."""
    with conn.begin():
        create_trigger(conn)
