"""ctxtool on a 3-node multi-primary Galera cluster (issue #30), through the real entry points:
``ctxtool`` processes whose --db URLs point at different nodes, the cluster started by
``scripts/cluster.sh`` (tests/galera_cluster.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from ctxtool.db import retry_transaction
from ctxtool.store.leases import LEASE_BEAT_S

from .builders import add_session, coding_session
from .conftest import TRANSCRIPTS, Database
from .galera_cluster import caught_up, galera  # noqa: F401 - the session fixture
from .llm_server import FakeLLM
from .test_compact import _compact_all_cmd
from .waiting import wait_until

pytestmark = pytest.mark.galera


def ctxtool(url: str, *args: str, timeout: float = 300, env: dict | None = None):
    """``python -m ctxtool --db URL ARGS``: its CompletedProcess (text)."""
    return subprocess.run(
        [sys.executable, "-m", "ctxtool", "--db", url, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def runtime_write(db, session_id: int, role: str, content: str) -> int:
    """One message inserted as an agent runtime does, in a transaction of its own; its id.

    Writes of one session through different nodes in quick succession are refused now and
    then with 1213 (the applier of the other node's insert aborts the local one): a runtime
    on Galera retries them, as this does (db.retry_transaction)."""

    def insert() -> int:
        with db.engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO agent_message (session_id, role, content) VALUES (%s, %s, %s)",
                (session_id, role, content),
            )
            return conn.exec_driver_sql("SELECT LAST_INSERT_ID()").scalar()

    return retry_transaction(db.engine, insert)


@pytest.fixture
def nodes(galera):  # noqa: F811 - the fixture above, by name
    """A fresh database on the cluster, migrated through node 1 with `ctxtool migrate up`:
    {node number: Database talking to that node}."""
    with galera.database() as dbs:
        done = ctxtool(dbs[1].url, "migrate", "up")
        assert done.returncode == 0, done.stderr
        for db in dbs.values():
            caught_up(db)
        yield dbs


def test_messages_written_through_three_nodes_restore_in_the_order_written(nodes):
    """Galera hands out AUTO_INCREMENT ids in steps of three, each node from its own offset:
    a session written through nodes 1, 2, 3 in turn still has ids in the order written, so
    its restored context (ordered by id) is the conversation as it happened. Which offset a
    node gets follows its place in the cluster's membership, not its number: each node's ids
    are read against the offset it reports."""
    with nodes[1].engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO agent_session (session_id) VALUES (7)")
    written = []
    for i in range(30):
        node = 1 + i % 3
        role = "user" if i % 2 == 0 else "assistant"
        written.append((runtime_write(nodes[node], 7, role, f"message {i} via node {node}"), node))
    offsets = {}
    for node in (1, 2, 3):
        with nodes[node].engine.connect() as conn:
            step, offset = conn.exec_driver_sql(
                "SELECT @@auto_increment_increment, @@auto_increment_offset"
            ).one()
        assert step == 3, (node, step)
        offsets[node] = offset % 3
    assert sorted(offsets.values()) == [0, 1, 2], offsets  # three nodes, three offsets
    assert {node: {i % 3 for i, n in written if n == node} for node in (1, 2, 3)} == {
        node: {offsets[node]} for node in (1, 2, 3)
    }, (written, offsets)  # each node's ids from its own offset
    assert [i for i, _ in written] == sorted(i for i, _ in written)
    for node in (1, 2, 3):
        shown = ctxtool(nodes[node].url, "context", "show", "7", "--json")
        assert shown.returncode == 0, shown.stderr
        texts = [m["content"] for m in json.loads(shown.stdout)["messages"]]
        assert texts == [f"message {i} via node {1 + i % 3}" for i in range(30)]
    check = ctxtool(nodes[3].url, "validate", env=dict(os.environ))
    assert check.returncode == 0, check.stdout + check.stderr


def _message_counts(db) -> dict[str, int]:
    """{session source id: messages stored} — what an import stored, wherever it ran."""
    rows = db.rows(
        "SELECT s.source_id AS source, COUNT(m.id) AS n FROM agent_session s "
        "JOIN agent_message m ON m.session_id = s.session_id GROUP BY s.source_id"
    )
    return {r["source"]: r["n"] for r in rows}


def test_two_overlapping_imports_through_two_nodes_store_each_message_once(nodes, tmp_path):
    """Node 1 imports A and B while node 2 imports B and C: B's session and messages race
    through two nodes (certification decides, the loser finds them present). Every message
    is stored once: the same counts as one import of A, B and C into one SQLite file."""
    a = TRANSCRIPTS / "pi" / "large-session.jsonl"
    b = TRANSCRIPTS / "claude-code" / "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    c = TRANSCRIPTS / "codex" / "agent-sessions-codex-small.jsonl"
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "ctxtool", "--db", nodes[n].url, "import", *map(str, files)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, files in ((1, (a, b)), (2, (b, c)))
    ]
    outs = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], outs
    reference = Database("sqlite", f"sqlite:///{tmp_path / 'one.db'}").migrate()
    done = ctxtool(reference.url, "import", str(a), str(b), str(c))
    assert done.returncode == 0, done.stderr
    expected = _message_counts(reference)
    assert len(expected) == 3 and all(expected.values())
    for node in (1, 2, 3):
        assert _message_counts(nodes[node]) == expected
    again = ctxtool(nodes[3].url, "import", str(a), str(b), str(c), "--json")
    assert again.returncode == 0, again.stderr
    assert sum(r["added"] for r in json.loads(again.stdout)) == 0


def _compact_all(url: str, base_url: str, *extra: str) -> subprocess.Popen:
    """`compact --all --workers 4 --json` through ``url`` (test_compact's command), started."""
    return subprocess.Popen(
        _compact_all_cmd(url, base_url, *extra),
        env=dict(os.environ, OPENAI_API_KEY="sk-test"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _sessions(db, count: int, turns: int = 12) -> None:
    for sid in range(1, count + 1):
        add_session(db, sid, coding_session(turns, tag=f"s{sid}"), model="gpt-4o")


def _checkpoints_per_parent(db) -> list[tuple[int, int | None, int]]:
    """(session, parent, checkpoints) for every parent that has more than one child."""
    rows = db.rows(
        "SELECT session_id, parent_compaction_id AS parent, COUNT(*) AS n FROM agent_compaction "
        "GROUP BY session_id, parent_compaction_id HAVING COUNT(*) > 1"
    )
    return [(r["session_id"], r["parent"], r["n"]) for r in rows]


@pytest.mark.slow
def test_compact_all_from_four_processes_over_three_nodes_while_a_runtime_writes(nodes):
    """Four `compact --all` runs (nodes 1, 2, 3, 1) race for 24 sessions while a runtime
    appends to six of them through node 3. Certification conflicts (the counts, the leases, the
    appends) are retried per transaction: every process exits 0, every session is compacted
    once, nothing summarized is lost and `validate` is clean through every node."""
    _sessions(nodes[2], 24)
    stop = threading.Event()
    appended: list[int] = []

    def runtime() -> None:
        turn = 0
        while not stop.is_set():
            sid = 1 + turn % 6
            role = "user" if turn % 2 == 0 else "assistant"
            appended.append(runtime_write(nodes[3], sid, role, f"live message {turn}"))
            turn += 1

    writer = threading.Thread(target=runtime)
    with FakeLLM(delay=0.2) as llm:
        writer.start()
        try:
            runs = [_compact_all(nodes[n].url, llm.base_url) for n in (1, 2, 3, 1)]
            outs = [r.communicate(timeout=400) for r in runs]
        finally:
            stop.set()
            writer.join()
    assert [r.returncode for r in runs] == [0, 0, 0, 0], [err for _, err in outs]
    for _, err in outs:
        assert "Traceback" not in err
    statuses = [row["status"] for out, _ in outs for row in json.loads(out)]
    assert statuses.count("compacted") == 24, statuses
    assert set(statuses) <= {"compacted", "lease_held", "lost_race", "below_threshold"}
    assert _checkpoints_per_parent(nodes[1]) == []
    assert nodes[1].scalar("SELECT COUNT(DISTINCT session_id) FROM agent_compaction") == 24
    assert len(appended) > 0
    assert nodes[1].scalar("SELECT COUNT(*) FROM agent_session WHERE lease_owner IS NOT NULL") == 0
    for node in (1, 2, 3):
        check = ctxtool(nodes[node].url, "validate")
        assert check.returncode == 0, check.stdout + check.stderr


# The node-kill test's --outage-wait (the default, 30 s, is DEFAULT_POLICY's; the test only
# needs to see the run wait rather than fail its queue at once).
OUTAGE_WAIT = 8


@pytest.mark.slow
def test_a_node_killed_mid_batch_ends_its_run_with_one_line_per_session(nodes, galera):  # noqa: F811
    """Node 3 is killed with -9 while a run through it and a run through node 1 compact 10
    sessions. The node-1 run finishes. The node-3 run waits --outage-wait out once (it does not
    fail its queue in seconds), then says one line per session it could not do and exits 4,
    never with a traceback. The leases it could not give back lapse within LEASE_BEAT_S of
    the kill (issue #45 item 15: they were held ~11.5 minutes). Node 3 restarted, a rerun
    through it completes: every session compacted exactly once, no message lost."""
    _sessions(nodes[1], 10)
    before = nodes[1].scalar("SELECT COUNT(*) FROM agent_message")
    try:
        with FakeLLM(delay=0.5) as llm:
            doomed = _compact_all(nodes[3].url, llm.base_url, "--outage-wait", str(OUTAGE_WAIT))
            deadline = time.monotonic() + 120
            while len(llm.requests) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert llm.requests, "compaction never reached the LLM"
            survivor = _compact_all(nodes[1].url, llm.base_url)
            galera.kill(3)
            killed_at = time.monotonic()
            out, err = doomed.communicate(timeout=300)
            waited = time.monotonic() - killed_at
            # The leases the dead run could not give back: renewed by nobody since the kill.
            left = nodes[1].scalar(
                "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), MAX(lease_expires_at)) / 1e6"
                " FROM agent_session WHERE lease_owner LIKE :dead",
                dead=f"%:{doomed.pid}:%",
            )
            lapse = None if left is None else float(left) + time.monotonic() - killed_at
            survived = survivor.communicate(timeout=300)
    finally:
        galera.start(3)
    assert survivor.returncode == 0, survived[1]
    assert doomed.returncode == 4, err
    assert "Traceback" not in err and "Traceback" not in out
    assert waited >= OUTAGE_WAIT - 1  # backed off for --outage-wait, did not give up in seconds
    failed = [row for row in json.loads(out) if row["status"] == "failed"]
    assert failed and all(row["error"].startswith("database error") for row in failed)
    assert len({row["session_id"] for row in json.loads(out)}) == len(json.loads(out))
    held = nodes[1].scalar("SELECT COUNT(*) FROM agent_session WHERE lease_owner IS NOT NULL")
    assert held <= 4  # what the dead run had in hand (--workers 4); it released the rest
    # Written for LEASE_BEAT_S and renewed by a heartbeat that died with node 3: they lapse
    # within that of the kill (before: sized for the whole summary, ~11.5 minutes held).
    assert lapse is None or lapse <= LEASE_BEAT_S + 2, lapse
    wait_until(
        lambda: (
            not nodes[1].scalar(
                "SELECT COUNT(*) FROM agent_session WHERE lease_owner IS NOT NULL"
                " AND lease_expires_at >= UTC_TIMESTAMP(6)"
            )
        ),
        "the dead run's leases to lapse",
        timeout=LEASE_BEAT_S + 10,
    )
    with FakeLLM() as llm:
        rerun = _compact_all(nodes[3].url, llm.base_url)
        out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert nodes[3].scalar("SELECT COUNT(DISTINCT session_id) FROM agent_compaction") == 10
    assert _checkpoints_per_parent(nodes[3]) == []
    assert nodes[3].scalar("SELECT COUNT(*) FROM agent_message") == before
    for node in (1, 3):
        check = ctxtool(nodes[node].url, "validate")
        assert check.returncode == 0, check.stdout + check.stderr
