"""The late commit on a 3-node Galera cluster (issue #30): a message whose insert began before a
compaction planned and commits after its checkpoint, through another node, must end up in the
summary or the restored context, never below the cut in neither.

On one server the checkpoint's locking read waits for such an insert; on Galera it waits on its
own node only. What holds across nodes is the session's row, written first by every transaction
that inserts messages (the runtime's statement, or the trigger `migrate up
--touch-session-trigger` creates, or ctxtool's importer) and by the lease claim and the append
(store.session_touch, docs/distributed.md)."""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime

import pytest
from sqlalchemy.exc import OperationalError

from ctxtool.db import retry_transaction
from ctxtool.db.schema import agent_message, agent_session
from ctxtool.store.session_touch import RUNTIME_STATEMENT, TRIGGER_NAME

from .builders import LIMITS, add_session, coding_session
from .galera_cluster import caught_up, galera  # noqa: F401 - the session fixture
from .llm_server import FakeLLM
from .test_galera import ctxtool
from .waiting import LOCK_WAITS_INTERVAL, lock_waits, wait_until

SESSION = 7
LATE = "late message A"
INSERT = "INSERT INTO agent_message (session_id, role, content) VALUES (%s, %s, %s)"


@pytest.fixture
def cluster_db(galera):  # noqa: F811 - the fixture above, by name
    """A fresh empty database on the cluster: {node number: Database}."""
    with galera.database() as dbs:
        yield dbs


def _migrate(nodes, *extra: str) -> None:
    done = ctxtool(nodes[1].url, "migrate", "up", *extra)
    assert done.returncode == 0, done.stderr
    for db in nodes.values():
        caught_up(db)


def _runtime_insert(conn, sid: int, touch: bool, role: str, content: str) -> int:
    """What a runtime runs in its transaction: the documented statement first when ``touch``,
    then the bare INSERT; the new message's id."""
    if touch:
        conn.exec_driver_sql(RUNTIME_STATEMENT.replace("?", "%s"), (sid,))
    conn.exec_driver_sql(INSERT, (sid, role, content))
    return int(conn.exec_driver_sql("SELECT LAST_INSERT_ID()").scalar())


def _open_late_insert(db, sid: int, touch: bool):
    """Connection A: BEGIN, the runtime's insert of the late message, and no COMMIT yet."""
    conn = db.engine.connect()
    conn.begin()
    return conn, _runtime_insert(conn, sid, touch, "user", LATE)


def _commit_late_insert(db, conn, sid: int, touch: bool) -> int:
    """A commits; refused with 1213 (another node wrote the session's row meanwhile), the
    runtime runs its transaction again, as a runtime on Galera must. The late message's id."""
    try:
        conn.commit()
        return int(db.scalar("SELECT MAX(id) FROM agent_message WHERE content = :c", c=LATE))
    except OperationalError as exc:
        assert exc.orig.args[0] == 1213, exc
        conn.rollback()
    finally:
        conn.close()

    def again() -> int:
        with db.engine.begin() as retry:
            return _runtime_insert(retry, sid, touch, "user", LATE)

    return retry_transaction(db.engine, again)


def _compact(db, sid: int, llm) -> dict:
    done = ctxtool(
        db.url,
        "compact",
        str(sid),
        "--summarizer",
        "openai",
        "--base-url",
        llm.base_url,
        "--json",
        *LIMITS,
        env=dict(os.environ, OPENAI_API_KEY="sk-test"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    row = json.loads(done.stdout)
    assert row["status"] == "compacted", row
    return row


def _assert_late_message_kept(nodes, sid: int, late_id: int) -> None:
    """Stored once, at or above the cut of the newest checkpoint (so in the restored context),
    and `validate` through another node than the compactor's is clean."""
    assert nodes[2].scalar("SELECT COUNT(*) FROM agent_message WHERE content = :c", c=LATE) == 1
    cut = nodes[2].scalar(
        "SELECT first_kept_message_id FROM agent_compaction WHERE session_id = :s "
        "ORDER BY id DESC LIMIT 1",
        s=sid,
    )
    assert late_id >= cut, (late_id, cut)
    shown = ctxtool(nodes[2].url, "context", "show", str(sid), "--json")
    assert shown.returncode == 0, shown.stderr
    assert LATE in [m["content"] for m in json.loads(shown.stdout)["messages"]]
    check = ctxtool(nodes[2].url, "validate")
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.galera
@pytest.mark.parametrize("runtime", ["statement", "trigger"])
def test_a_late_commit_through_node_3_is_kept_when_node_1_compacts(cluster_db, runtime):
    """The issue's script: A on node 3 inserts a message and waits; B on node 3 writes later
    messages; `compact` through node 1; A commits. With bare INSERTs the checkpoint cut above
    A's id and A's message was lost. A runtime that runs the documented statement first, or a
    bare one under the trigger, writes the session's row: B queues behind A instead of
    committing above it, the compactor's lease claim aborts A on node 3 (1213), and A's retry
    lands above the cut."""
    nodes = cluster_db
    touch = runtime == "statement"
    _migrate(nodes, *(() if touch else ("--touch-session-trigger",)))
    add_session(nodes[1], SESSION, coding_session(12, tag="s7"), model="gpt-4o")
    wait_until(
        lambda: nodes[3].scalar("SELECT COUNT(*) FROM agent_session WHERE session_id = 7"),
        "the session on node 3",
    )
    conn, _ = _open_late_insert(nodes[3], SESSION, touch)
    later: list[int] = []

    def runtime_b() -> None:
        for i in range(6):

            def one(i=i) -> int:
                with nodes[3].engine.begin() as b:
                    text = f"later message B{i} about src/mod.py and its tests " * 40
                    role = "assistant" if i % 2 else "user"
                    return _runtime_insert(b, SESSION, touch, role, text)

            later.append(retry_transaction(nodes[3].engine, one))

    writer = threading.Thread(target=runtime_b)
    writer.start()
    try:
        # B either waits for A's row lock (the fix) or commits all six above A (the bug).
        wait_until(
            lambda: len(later) == 6 or lock_waits(nodes[3], "%agent_%"),
            "B to wait for A or to commit",
            interval=LOCK_WAITS_INTERVAL,
        )
        with FakeLLM(delay=0.2) as llm:
            _compact(nodes[1], SESSION, llm)
        late_id = _commit_late_insert(nodes[3], conn, SESSION, touch)
    finally:
        writer.join(120)
    assert len(later) == 6
    _assert_late_message_kept(nodes, SESSION, late_id)


def test_the_touch_session_trigger_on_one_server(empty_db, cli):
    """`migrate up --touch-session-trigger` on SQLite and MariaDB: a bare INSERT of a message
    then writes its session's row; run again it changes nothing; --dry-run prints it."""
    dry = cli("--db", empty_db.url, "migrate", "up", "--dry-run", "--touch-session-trigger")
    assert dry.exit_code == 0, dry.output
    assert f"CREATE TRIGGER IF NOT EXISTS {TRIGGER_NAME}" in dry.stdout
    for _ in range(2):
        done = cli("--db", empty_db.url, "migrate", "up", "--touch-session-trigger", "--json")
        assert done.exit_code == 0, done.output
        assert json.loads(done.stdout)["trigger"] == TRIGGER_NAME
    with empty_db.engine.begin() as conn:
        conn.execute(agent_session.insert().values(session_id=1, updated_at=datetime(2020, 1, 1)))
        conn.execute(agent_message.insert().values(session_id=1, role="user", content="hi"))
    assert str(empty_db.scalar("SELECT updated_at FROM agent_session")) > "2021"
