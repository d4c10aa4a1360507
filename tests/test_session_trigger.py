"""The session trigger (`migrate up --touch-session-trigger`) runs BEFORE INSERT: a runtime's
message gets its id only once it holds its session's row, so one session's ids commit in
order and a kept sum never passes a message still in flight (store.session_touch). An
earlier release's AFTER INSERT trigger is named by `migrate status` and replaced by
`migrate up --touch-session-trigger`."""

from __future__ import annotations

import json
import threading

import pytest
import sqlalchemy as sa

from ctxtool.db import read_connection
from ctxtool.store import Store
from ctxtool.store.candidates import effective_contexts, summed_context_tokens
from ctxtool.store.context_sums import SUMMED_AGAIN_EVERY
from ctxtool.store.session_touch import (
    EARLIER_TRIGGER_NAMES,
    ORDER_TRIGGER_NAME,
    TRIGGER_NAME,
    earlier_triggers,
)

from .builders import add_session
from .conftest import MYSQL_SERVER_URL
from .test_context_sums import _clean_turn, _keep
from .waiting import LOCK_WAITS_INTERVAL, lock_waits, wait_until

# A runtime's bare insert of a counted message into session 1.
INSERT = (
    "INSERT INTO agent_message (session_id, role, content, token_count, token_encoding)"
    " VALUES (1, 'user', %s, %s, 'o200k_base')"
)
# A runtime's one INSERT of a message into session 2, then one into session 1 (MariaDB gives
# both rows their ids when it writes the first).
SPANNING = (
    "INSERT INTO agent_message (session_id, role, content, token_count, token_encoding)"
    " VALUES (2, 'user', 'a elsewhere', 3, 'o200k_base'), (1, 'user', %s, %s, 'o200k_base')"
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
    Store(db.engine).count_tokens()
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
        dry = summed_context_tokens(conn, 1, None).tokens
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


def _race_a_spanning_insert(db) -> BaseException | None:
    """Runtime B inserts into session 1 (holding its row); runtime A's INSERT spanning sessions
    2 and 1 waits for that row in its second row's trigger, with both ids given; B inserts
    again and commits; A goes on. What A's statement raised (None: it went through), A's
    transaction committed either way."""
    a, b = db.engine.connect(), db.engine.connect()
    raised: list[BaseException] = []
    try:
        b.begin()
        b.exec_driver_sql(INSERT, ("b first", 11))
        a.begin()

        def runtime_a() -> None:
            try:
                a.exec_driver_sql(SPANNING, ("a in flight", 500))
            except sa.exc.DBAPIError as exc:
                raised.append(exc)

        writer = threading.Thread(target=runtime_a)
        writer.start()
        wait_until(
            lambda: lock_waits(db, "%"),  # MariaDB shows the trigger's statement, or the INSERT
            "runtime A waiting in its second row's trigger",
            interval=LOCK_WAITS_INTERVAL,
        )
        b.exec_driver_sql(INSERT, ("b second", 13))
        b.commit()
        writer.join(60)
        assert not writer.is_alive()
        a.commit()
    finally:
        b.close()
        a.close()
    return raised[0] if raised else None


def _contents(db, session_id: int) -> list[str]:
    return [
        r["content"]
        for r in db.rows(
            "SELECT content FROM agent_message WHERE session_id = :s ORDER BY id", s=session_id
        )
    ]


def test_a_multi_row_insert_spanning_sessions_is_refused_rather_than_passed(mysql_db, cli):
    """Found by an adversarial run (10/10 on one server and on Galera): a runtime's one INSERT
    into sessions 2 and 1 got both ids when its first row was written, then waited for session
    1's row behind runtime B, whose later insert committed first. The BEFORE trigger could not
    order it; a `compact --all` before A's commit kept the sums past A's message (the dry run
    read 111 tokens where the context held 611). The order trigger refuses A's statement (1644,
    in one line saying to run it again); run again, its ids are above B's and the kept sums
    miss nothing. Fails without the order trigger: A's statement goes through, out of order."""
    db = mysql_db
    add_session(db, 1, [m for t in range(3) for m in _clean_turn(f"t{t}")], "gpt-4o")
    add_session(db, 2, [{"role": "user", "content": "hello"}], "gpt-4o")
    Store(db.engine).count_tokens()
    done = cli("--db", db.url, "migrate", "up", "--touch-session-trigger")
    assert done.exit_code == 0, done.output
    _keep(db)
    refused = _race_a_spanning_insert(db)
    assert refused is not None, _contents(db, 1)[-3:]
    assert refused.orig.args[0] == 1644, refused
    assert "run it again" in str(refused.orig.args[1])
    assert _contents(db, 1)[-2:] == ["b first", "b second"]  # A's statement left nothing
    _keep(db)
    with db.engine.begin() as conn:  # the runtime runs it again
        conn.exec_driver_sql(SPANNING, ("a in flight", 500))
    assert _contents(db, 1)[-3:] == ["b first", "b second", "a in flight"]
    store = Store(db.engine)
    with read_connection(db.engine) as conn:
        kept = [c.tokens for c in effective_contexts(conn)]
        rescanned = [c.tokens for c in effective_contexts(conn, rescan=True)]
        assert summed_context_tokens(conn, 1, None).tokens == store.context_tokens(1, conn=conn)
    assert kept == rescanned
    checked = cli("--db", db.url, "validate", "--json")
    assert "kept_sums_short" not in checked.output, checked.output


def test_sums_kept_past_a_message_in_flight_are_found_and_heal_when_the_session_grows(
    mysql_db, cli
):
    """A runtime with neither the session-row statement nor the triggers: A's bare insert
    into session 1 gets its id, B's later one commits first, a run keeps the sums through B's,
    then A commits below them. `validate` names the row short (kept_sums_short); within
    SUMMED_AGAIN_EVERY runs that find the session grown, one sums it from its cut again
    (before: short of A's 500 tokens until the session's next checkpoint, or --rescan)."""
    db = mysql_db
    add_session(db, 1, [m for t in range(3) for m in _clean_turn(f"t{t}")], "gpt-4o")
    Store(db.engine).count_tokens()
    _keep(db)
    a, b = db.engine.connect(), db.engine.connect()
    try:
        a.begin()
        a.exec_driver_sql(INSERT, ("a in flight", 500))
        with b.begin():
            b.exec_driver_sql(INSERT, ("b later", 13))
        _keep(db)  # a cron run while A has not committed
        a.commit()
    finally:
        a.close()
        b.close()
    checked = cli("--db", db.url, "validate", "--json")
    assert "kept_sums_short" in checked.output, checked.output
    store = Store(db.engine)
    for grown in range(1, SUMMED_AGAIN_EVERY + 1):  # a run finds the session grown each time
        with db.engine.begin() as conn:
            conn.exec_driver_sql(INSERT, (f"next {grown}", 7))
        with read_connection(db.engine) as conn:
            dry = summed_context_tokens(conn, 1, None).tokens
            real = store.context_tokens(1, conn=conn)
        if dry == real:
            break
        _keep(db)
    else:
        raise AssertionError(f"still short after {SUMMED_AGAIN_EVERY} runs: {dry} < {real}")
    with read_connection(db.engine) as conn:
        kept = [c.tokens for c in effective_contexts(conn)]
        rescanned = [c.tokens for c in effective_contexts(conn, rescan=True)]
    assert kept == rescanned
    _keep(db)
    checked = cli("--db", db.url, "validate", "--json")
    assert "kept_sums_short" not in checked.output, checked.output


# A runtime's own trigger under the earlier release's name: another timing, another body.
RUNTIME_OWN = (
    f"CREATE TRIGGER {EARLIER_TRIGGER_NAMES[0]} BEFORE INSERT ON agent_message "
    "FOR EACH ROW BEGIN UPDATE agent_session SET title = 'busy' "
    "WHERE session_id = NEW.session_id; END"
)


def test_a_runtime_trigger_under_the_earlier_name_is_not_ctxtools(db, cli):
    """`earlier_triggers` matched on the name alone: a runtime's own
    agent_message_touches_session (BEFORE INSERT, another body) was called AFTER INSERT by
    `migrate status` and dropped by `migrate up --touch-session-trigger`. Table, timing and
    statement must match ctxtool's earlier trigger now: the runtime's stays, unnamed."""
    with db.engine.begin() as conn:
        conn.exec_driver_sql(RUNTIME_OWN)
    status = cli("--db", db.url, "migrate", "status")
    assert "runs AFTER INSERT" not in status.output, status.output
    with db.engine.connect() as conn:
        assert earlier_triggers(conn) == []
    up = cli("--db", db.url, "migrate", "up", "--touch-session-trigger")
    assert up.exit_code == 0, up.output
    assert EARLIER_TRIGGER_NAMES[0] in _triggers(db)


def test_the_dry_run_prints_the_drop_the_real_run_does(db, cli):
    """`migrate up --dry-run --touch-session-trigger` printed the CREATE only; the real run
    also drops the earlier release's trigger. Both print it now (text and JSON), and the dry
    run changes nothing."""
    with db.engine.begin() as conn:
        conn.exec_driver_sql(EARLIER_TRIGGER)
    drop = f"DROP TRIGGER IF EXISTS {EARLIER_TRIGGER_NAMES[0]}"
    dry = cli("--db", db.url, "migrate", "up", "--dry-run", "--touch-session-trigger")
    assert dry.exit_code == 0, dry.output
    assert drop in dry.output and f"CREATE TRIGGER IF NOT EXISTS {TRIGGER_NAME}" in dry.output
    doc = cli("--db", db.url, "migrate", "up", "--dry-run", "--touch-session-trigger", "--json")
    assert drop in json.loads(doc.stdout)["triggers"]
    assert EARLIER_TRIGGER_NAMES[0] in _triggers(db) and TRIGGER_NAME not in _triggers(db)
    assert cli("--db", db.url, "migrate", "up", "--touch-session-trigger").exit_code == 0
    assert EARLIER_TRIGGER_NAMES[0] not in _triggers(db)
    again = cli("--db", db.url, "migrate", "up", "--dry-run", "--touch-session-trigger")
    assert "DROP TRIGGER" not in again.output


def test_a_touch_trigger_without_the_order_check_is_named(mysql_db, cli):
    """A store that ran --touch-session-trigger before the order check existed has the
    BEFORE trigger alone: `migrate status` says so, and the next run adds it."""
    from ctxtool.db.dialects import dialect_of_url
    from ctxtool.store.session_touch import trigger_statement

    with mysql_db.engine.begin() as conn:
        conn.exec_driver_sql(trigger_statement(dialect_of_url(mysql_db.url)))
    status = cli("--db", mysql_db.url, "migrate", "status")
    assert f"without {ORDER_TRIGGER_NAME}" in status.output, status.output
    assert cli("--db", mysql_db.url, "migrate", "up", "--touch-session-trigger").exit_code == 0
    assert _triggers(mysql_db) >= {TRIGGER_NAME, ORDER_TRIGGER_NAME}
    assert ORDER_TRIGGER_NAME not in cli("--db", mysql_db.url, "migrate", "status").output


@pytest.fixture
def reader_url(mysql_db):
    """A user who may read and write the store's tables but holds no TRIGGER privilege."""
    user = f"ctxreader_{mysql_db.engine.url.database[-20:]}"
    name = mysql_db.engine.url.database
    server = sa.create_engine(MYSQL_SERVER_URL, isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        conn.exec_driver_sql(f"DROP USER IF EXISTS '{user}'@'%%'")
        conn.exec_driver_sql(f"CREATE USER '{user}'@'%%' IDENTIFIED BY 'pw-reader'")
        conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{name}`.* TO '{user}'@'%%'")
    try:
        yield mysql_db.engine.url.set(username=user, password="pw-reader").render_as_string(
            hide_password=False
        )
    finally:
        with server.connect() as conn:
            conn.exec_driver_sql(f"DROP USER IF EXISTS '{user}'@'%%'")
        server.dispose()


def test_a_user_without_the_trigger_privilege_is_told_it_cannot_see_triggers(
    mysql_db, reader_url, cli
):
    """A user without the TRIGGER privilege on agent_message cannot read its triggers (MySQL 8
    lists none, MariaDB 10.11 lists them with no body): such a user's `migrate status` said
    nothing of an earlier release's trigger in place. It says now that it cannot tell; the
    root user, who reads the trigger, is told of it instead."""
    with mysql_db.engine.begin() as conn:
        conn.exec_driver_sql(EARLIER_TRIGGER)
    status = cli("--db", reader_url, "migrate", "status")
    assert "lacks the TRIGGER privilege" in status.output, status.output
    assert "pw-reader" not in status.output
    own = cli("--db", mysql_db.url, "migrate", "status")
    assert "lacks the TRIGGER privilege" not in own.output
    assert f"trigger {EARLIER_TRIGGER_NAMES[0]} runs AFTER INSERT" in own.output
