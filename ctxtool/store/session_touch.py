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

The trigger runs BEFORE INSERT: MySQL and MariaDB give a single-row INSERT's row its
AUTO_INCREMENT id after the BEFORE triggers, so the insert waits for the session's row before it
has an id. An AFTER trigger (ctxtool's first, ``agent_message_touches_session``) waited with its
id already given: a runtime's insert in flight could get an id below a later one that committed
first, and a kept sum written meanwhile (store.context_sums) stayed short of it.

That holds for the first row of a statement only. A multi-row INSERT is given every row's id
when its first row is written (``innodb_autoinc_lock_mode`` 1 and 2 alike): a later row of
another session waits for that session's row with its id already given, as under the AFTER
trigger (``VALUES (2, ...), (1, ...)`` against two inserts into session 1: found by an
adversarial run, on one server and on Galera). On MySQL and MariaDB a second trigger,
:data:`ORDER_TRIGGER_NAME`, runs AFTER INSERT, once the row holds its session's row: it refuses
the statement (``SQLSTATE 45000``, error 1644) when a message of the session with a higher id is
already committed, so the runtime runs it again, with new ids above (on Galera the same
statement through another node is refused by certification, 1213). A locking read, so it sees
what committed while the insert waited whatever the transaction's snapshot; it holds the gap
after the session's newest message until the transaction ends (the first message of a session
created meanwhile waits for it). The rule for a runtime: a message's id above every committed
message of its session, which one INSERT per session, or the session's row written first
(:data:`RUNTIME_STATEMENT`), gives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from ..db import dialect_of
from ..db.dialects import Dialect
from ..db.schema import agent_session as S

# What a runtime runs first in each transaction that inserts messages into session ? (MySQL,
# MariaDB): in UTC, as ctxtool and the trigger write every time, whatever the connection's zone.
RUNTIME_STATEMENT = "UPDATE agent_session SET updated_at = UTC_TIMESTAMP(6) WHERE session_id = ?"

TRIGGER_NAME = "agent_message_touches_session_first"
# MySQL and MariaDB: refuses a row whose id is below one its session already committed.
ORDER_TRIGGER_NAME = "agent_message_keeps_session_order"
# Triggers of earlier ctxtool releases, replaced by TRIGGER_NAME: the AFTER INSERT one.
EARLIER_TRIGGER_NAMES = ("agent_message_touches_session",)
# What SIGNAL says when ORDER_TRIGGER_NAME refuses a row (MESSAGE_TEXT: at most 128 characters).
ORDER_REFUSAL = (
    "ctxtool: a message id below one its session committed meanwhile (a multi-row INSERT "
    "spanning sessions?); run it again"
)


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


def order_trigger_statement() -> str:
    """MySQL and MariaDB: the CREATE TRIGGER that refuses a message row given an id before it
    held its session's row (a later row of a multi-row INSERT), once a higher id of its
    session is committed. LOCK IN SHARE MODE: a trigger may read its own table, not lock it
    FOR UPDATE (1442)."""
    return (
        f"CREATE TRIGGER IF NOT EXISTS {ORDER_TRIGGER_NAME} AFTER INSERT ON agent_message "
        "FOR EACH ROW BEGIN IF EXISTS (SELECT 1 FROM agent_message "
        "WHERE session_id = NEW.session_id AND id > NEW.id LIMIT 1 LOCK IN SHARE MODE) "
        f"THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{ORDER_REFUSAL}'; END IF; END"
    )


def trigger_statements(dialect: Dialect) -> list[str]:
    """Every CREATE TRIGGER of ``migrate up --touch-session-trigger`` on this database: the
    touch, and on MySQL and MariaDB the order check (SQLite has one writer at a time: a row's
    id is given with the database locked)."""
    statements = [trigger_statement(dialect)]
    if not dialect.single_writer:
        statements.append(order_trigger_statement())
    return statements


def create_trigger(conn: Connection) -> None:
    """Create the triggers (a no-op for those that exist), then drop an earlier release's, in
    the caller's transaction if any (on MySQL each statement commits by itself): the new one is
    in place before the old one goes, so no insert passes untouched meanwhile (both, for an
    instant, write the row twice)."""
    for statement in trigger_statements(dialect_of(conn)):
        conn.exec_driver_sql(statement)
    for drop in drop_statements(conn):
        conn.exec_driver_sql(drop)


def drop_statements(conn: Connection) -> list[str]:
    """The DROP TRIGGERs :func:`create_trigger` runs after its CREATEs (the dry run prints
    them)."""
    return [f"DROP TRIGGER IF EXISTS {name}" for name in earlier_triggers(conn)]


@dataclass(frozen=True)
class Trigger:
    """A trigger as the database lists it: name, table, timing (BEFORE, AFTER), event, body."""

    name: str
    table: str
    timing: str
    event: str
    statement: str


def triggers(conn: Connection) -> list[Trigger]:
    """The triggers on agent_message this user can see, as the dialect lists them (without the
    TRIGGER privilege MySQL lists none, MariaDB each with an empty body)."""
    found = [Trigger(*row) for row in dialect_of(conn).message_triggers(conn)]
    return [t for t in found if t.table == "agent_message"]


# The body of ctxtool's earlier trigger, whatever its server time (UTC_TIMESTAMP(6),
# CURRENT_TIMESTAMP, SQLite's strftime) and spacing.
_EARLIER_BODY = re.compile(
    r"begin update agent_session set updated_at = [^;]+ where session_id = new\.session_id;? end",
)


def is_earlier_trigger(trigger: Trigger) -> bool:
    """Whether this is an earlier release's trigger (pure): its name, on agent_message, AFTER
    INSERT, with that release's body. A runtime's own trigger of the same name (another timing
    or body) is not ctxtool's: named by nothing, dropped by nothing."""
    body = " ".join(trigger.statement.split()).lower()
    return (
        trigger.name in EARLIER_TRIGGER_NAMES
        and trigger.table == "agent_message"
        and trigger.timing == "AFTER"
        and trigger.event == "INSERT"
        and _EARLIER_BODY.fullmatch(body) is not None
    )


def earlier_triggers(conn: Connection) -> list[str]:
    """The names of the earlier releases' triggers this database has (:func:`is_earlier_trigger`)."""
    return [t.name for t in triggers(conn) if is_earlier_trigger(t)]


def trigger_notes(conn: Connection) -> list[str]:
    """What `migrate status` says of the session triggers: an earlier release's still in place;
    the touch without the order check (a store that ran `--touch-session-trigger` before it
    existed); and a user who cannot read triggers (no TRIGGER privilege)."""
    notes = []
    found = triggers(conn)
    earlier = [t.name for t in found if is_earlier_trigger(t)]
    names = {t.name for t in found}
    if earlier:
        notes.append(
            f"trigger {', '.join(earlier)} runs AFTER INSERT: a runtime's message gets its id "
            "before it waits for its session's row, so ids may commit out of order and a kept "
            f"sum can miss one; `migrate up --touch-session-trigger` replaces it with "
            f"{TRIGGER_NAME} (BEFORE INSERT)"
        )
    if dialect_of(conn).single_writer:
        return notes
    if TRIGGER_NAME in names and ORDER_TRIGGER_NAME not in names:
        notes.append(
            f"trigger {TRIGGER_NAME} is in place without {ORDER_TRIGGER_NAME}: a multi-row "
            "INSERT spanning sessions can commit ids out of order; `migrate up "
            "--touch-session-trigger` adds it"
        )
    if not has_trigger_privilege(conn):
        notes.append(
            "this user lacks the TRIGGER privilege on agent_message, without which SHOW "
            "TRIGGERS lists none (MySQL) or none's body (MariaDB): whether ctxtool's session "
            "triggers (or an earlier release's) are in place cannot be read here"
        )
    return notes


def has_trigger_privilege(conn: Connection) -> bool:
    """MySQL, MariaDB: whether the connection's user holds the TRIGGER privilege on
    agent_message (granted globally, on this database by name or pattern, or on the table), as
    information_schema lists the user's own grants."""
    sql = (
        "SELECT 1 FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE = 'TRIGGER' "
        "UNION ALL SELECT 1 FROM information_schema.SCHEMA_PRIVILEGES "
        "WHERE PRIVILEGE_TYPE = 'TRIGGER' AND DATABASE() LIKE TABLE_SCHEMA "
        "UNION ALL SELECT 1 FROM information_schema.TABLE_PRIVILEGES "
        "WHERE PRIVILEGE_TYPE = 'TRIGGER' AND TABLE_SCHEMA = DATABASE() "
        "AND TABLE_NAME = 'agent_message' LIMIT 1"
    )
    return conn.exec_driver_sql(sql).first() is not None


def install_trigger(conn: Connection) -> None:
    """Create the triggers (a no-op for those that exist) in a transaction of its own."""
    with conn.begin():
        create_trigger(conn)
