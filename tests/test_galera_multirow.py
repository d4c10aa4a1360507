"""A runtime's multi-row INSERT spanning sessions on a 3-node Galera cluster (issue #45 item 13):
through one node, its later row waits for its session's row with its id already given, as on
one server, and the order trigger refuses it when a higher id of that session committed
meanwhile (tests/test_session_trigger.py has the same race on one MariaDB). Across nodes the
session's row certifies it (tests/test_galera_late_commit.py)."""

from __future__ import annotations

import pytest

from ctxtool.db import read_connection
from ctxtool.store import Store
from ctxtool.store.candidates import effective_contexts, summed_context_tokens

from .builders import add_session
from .galera_cluster import galera  # noqa: F401 - the session fixture
from .test_context_sums import _clean_turn, _keep
from .test_galera import ctxtool
from .test_session_trigger import SPANNING, _contents, _race_a_spanning_insert


@pytest.fixture
def cluster_db(galera):  # noqa: F811 - the fixture above, by name
    """A fresh empty database on the cluster: {node number: Database}."""
    with galera.database() as dbs:
        yield dbs


@pytest.mark.galera
def test_a_spanning_insert_through_one_node_is_refused_rather_than_passed(cluster_db):
    """Two runtimes through node 1 (innodb_autoinc_lock_mode 2): A's INSERT into sessions 2 and
    1 waits for session 1's row behind B with both ids given; B inserts again and commits. The
    order trigger refuses A's statement (1644); run again, the kept sums read through node 2
    are the rescan's and `validate` is clean through node 3."""
    nodes = cluster_db
    done = ctxtool(nodes[1].url, "migrate", "up", "--touch-session-trigger")
    assert done.returncode == 0, done.stderr
    add_session(nodes[1], 1, [m for t in range(3) for m in _clean_turn(f"t{t}")], "gpt-4o")
    add_session(nodes[1], 2, [{"role": "user", "content": "hello"}], "gpt-4o")
    Store(nodes[1].engine).count_tokens()
    _keep(nodes[1])
    refused = _race_a_spanning_insert(nodes[1])
    assert refused is not None, _contents(nodes[1], 1)[-3:]
    assert refused.orig.args[0] == 1644, refused
    _keep(nodes[1])
    with nodes[1].engine.begin() as conn:
        conn.exec_driver_sql(SPANNING, ("a in flight", 500))
    assert _contents(nodes[2], 1)[-3:] == ["b first", "b second", "a in flight"]
    store = Store(nodes[2].engine)
    with read_connection(nodes[2].engine) as conn:
        kept = [c.tokens for c in effective_contexts(conn)]
        rescanned = [c.tokens for c in effective_contexts(conn, rescan=True)]
        assert summed_context_tokens(conn, 1, None).tokens == store.context_tokens(1, conn=conn)
    assert kept == rescanned
    check = ctxtool(nodes[3].url, "validate")
    assert check.returncode == 0, check.stdout + check.stderr
