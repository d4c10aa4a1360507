"""The session trigger (`migrate up --touch-session-trigger`) runs BEFORE INSERT: a runtime's
message gets its id only once it holds its session's row, so one session's ids commit in
order and a kept sum never passes a message still in flight (store.session_touch). An
earlier release's AFTER INSERT trigger is named by `migrate status` and replaced by
`migrate up --touch-session-trigger`."""

from __future__ import annotations

import json
import threading

from ctxtool.db import read_connection
from ctxtool.store import Store
from ctxtool.store.candidates import effective_contexts, summed_context_tokens
from ctxtool.store.counts import count_tokens
from ctxtool.store.session_touch import EARLIER_TRIGGER_NAMES, TRIGGER_NAME, earlier_triggers

from .builders import add_session
from .test_context_sums import _clean_turn, _keep
from .waiting import LOCK_WAITS_INTERVAL, lock_waits, wait_until

# A runtime's bare insert of a counted message into session 1.
INSERT = (
    "INSERT INTO agent_message (session_id, role, content, token_count, token_encoding)"
    " VALUES (1, 'user', %s, %s, 'o200k_base')"
)
# The trigger ctxtool created before (AFTER INSERT), as a store upgraded from it has it.
EARLIER_TRIGGER = (
    f"CREATE TRIGGER {EARLIER_TRIGGER_NAMES[0]} AFTER INSERT ON agent_message "
    "FOR EACH ROW BEGIN UPDATE agent_session SET updated_at = CURRENT_TIMESTAMP "
    "WHERE session_id = NEW.session_id; END"
)


def _triggers(db) -> set[str]:
    with db.engine.connect() as conn:
        if db.kind == "sqlite":
            rows = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        else:
            rows = conn.exec_driver_sql("SHOW TRIGGERS")
        return {str(r[0]) for r in rows}


def test_a_runtime_insert_in_flight_is_not_passed_by_a_kept_sum(mysql_db, cli):
    """Found by review, with two real connections: runtime B inserts (its trigger holds the
    session's row); runtime A inserts and waits in its trigger; B inserts again and commits; a
    cron run keeps the session's sums; then A commits. Under the AFTER trigger A's message had
    its id before it waited, below B's second: the kept row went past it, and the dry run and
    `compact --all` read 111 tokens where the context holds 611, until the next checkpoint.
    BEFORE INSERT, A's id comes after B's and the kept row is short of nothing."""
    db = mysql_db
    add_session(db, 1, [m for t in range(3) for m in _clean_turn(f"t{t}")], "gpt-4o")
    count_tokens(db.engine)
    done = cli("--db", db.url, "migrate", "up", "--touch-session-trigger")
    assert done.exit_code == 0, done.output
    _keep(db)
    a, b = db.engine.connect(), db.engine.connect()
    inserted = threading.Event()
    try:
        b.begin()
        b.exec_driver_sql(INSERT, ("b first", 11))  # B's trigger holds the session's row
        a.begin()

        def runtime_a() -> None:
            a.exec_driver_sql(INSERT, ("a in flight", 500))
            inserted.set()

        writer = threading.Thread(target=runtime_a)
        writer.start()
        wait_until(
            lambda: lock_waits(db, "UPDATE agent_session%"),
            "runtime A waiting in its trigger",
            interval=LOCK_WAITS_INTERVAL,
        )
        b.exec_driver_sql(INSERT, ("b second", 13))
        b.commit()
        assert inserted.wait(30)
        writer.join(30)
        _keep(db)  # a cron run while A has not committed
        a.commit()
    finally:
        b.close()
        a.close()
    with db.engine.connect() as conn:
        order = [
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT content FROM agent_message WHERE session_id = 1 ORDER BY id"
            )
        ]
    assert order[-3:] == ["b first", "b second", "a in flight"], order[-3:]
    store = Store(db.engine)
    with read_connection(db.engine) as conn:
        kept = [c.tokens for c in effective_contexts(conn)]
        rescanned = [c.tokens for c in effective_contexts(conn, rescan=True)]
        dry = summed_context_tokens(store, conn, 1, None).tokens
        real = store.context_tokens(1, conn=conn)
    assert dry == real, (dry, real)
    assert kept == rescanned


def test_an_earlier_after_insert_trigger_is_named_then_replaced(db, cli):
    """A store upgraded with the earlier AFTER INSERT trigger: `migrate status` names it and
    what to run; `migrate up --touch-session-trigger` puts the BEFORE INSERT one in place and
    drops the old, after which status says nothing of it and a bare insert still touches the
    session's row. Run again, it changes nothing."""
    with db.engine.begin() as conn:
        conn.exec_driver_sql(EARLIER_TRIGGER)
    status = cli("--db", db.url, "migrate", "status", "--json")
    assert status.exit_code == 0, status.output
    assert EARLIER_TRIGGER_NAMES[0] in status.stdout
    assert "--touch-session-trigger" in status.stdout
    human = cli("--db", db.url, "migrate", "status")
    assert f"trigger {EARLIER_TRIGGER_NAMES[0]} runs AFTER INSERT" in human.output
    for _ in range(2):
        up = cli("--db", db.url, "migrate", "up", "--touch-session-trigger", "--json")
        assert up.exit_code == 0, up.output
        assert json.loads(up.stdout)["trigger"] == TRIGGER_NAME
        assert _triggers(db) >= {TRIGGER_NAME}
        assert not _triggers(db) & set(EARLIER_TRIGGER_NAMES)
    with db.engine.connect() as conn:
        assert earlier_triggers(conn) == []
    status = cli("--db", db.url, "migrate", "status", "--json")
    assert EARLIER_TRIGGER_NAMES[0] not in status.stdout
    add_session(db, 2, [{"role": "user", "content": "hello"}])
    with db.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE agent_session SET updated_at = '2001-01-01 00:00:00' WHERE session_id = 2"
        )
        conn.exec_driver_sql(
            "INSERT INTO agent_message (session_id, role, content) VALUES (2, 'user', 'again')"
        )
    assert str(db.scalar("SELECT updated_at FROM agent_session WHERE session_id = 2")) > "2021"
