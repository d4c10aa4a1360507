"""A batch's workers each claim and compact on one connection of their own, kept for the batch
(compaction.batch.WorkerConnections): a checkout pings the server and a connection given back
pays a ROLLBACK, twice a session when each claim and each session checked out its own. A
connection is lent again only while known clean; one left in a transaction, invalidated or
failed is given back and replaced. And a lease heartbeat keeps its thread between a worker's
sessions instead of starting one per session. SQLite and MariaDB."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from ctxtool.compaction.batch import WorkerConnections
from ctxtool.compaction.compactor import Compactor
from ctxtool.compaction.summarizers import ExtractiveSummarizer
from ctxtool.store import Store, leases

from .builders import SETTINGS, add_session, assert_valid_context, coding_session
from .waiting import wait_until


def _pool_events(engine: sa.Engine) -> dict[str, int]:
    """How often the engine's pool checks a connection out and resets one given back."""
    seen = {"checkout": 0, "reset": 0}

    def note(name: str):
        def noted(*_args) -> None:
            seen[name] += 1

        return noted

    sa.event.listen(engine.pool, "checkout", note("checkout"))
    sa.event.listen(engine.pool, "reset", note("reset"))
    return seen


def test_a_batch_checks_out_one_connection_a_worker_not_two_a_session(db):
    for sid in range(1, 9):
        add_session(db, sid, coding_session(12, tag=str(sid)), model="gpt-4o")
    compactor = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="me")
    batch = compactor.batch()
    assert len(batch.candidates) == 8
    seen = _pool_events(db.engine)
    outcomes = compactor.run_batch(batch, workers=2)
    assert [o.status for o in outcomes] == ["compacted"] * 8
    # Before: a checkout and a reset for each claim and each session, 16 of each.
    assert 1 <= seen["checkout"] <= 2, seen
    assert seen["reset"] == seen["checkout"], seen  # every one given back at the end
    for sid in range(1, 9):
        assert_valid_context(Store(db.engine), sid)
    assert db.rows("SELECT session_id FROM agent_session WHERE lease_owner IS NOT NULL") == []


def _written(conn: sa.Connection, title: str) -> None:
    conn.execute(sa.text("UPDATE agent_session SET title = :title"), {"title": title})


def test_a_worker_connection_is_lent_again_only_while_clean(db):
    add_session(db, 1, coding_session(2), model="gpt-4o")
    connections = WorkerConnections(db.engine.connect)
    with connections.lend() as first:
        with first.begin():
            _written(first, "committed")
        first.execute(sa.text("SELECT 1"))
        first.commit()
    with connections.lend() as again:
        assert again is first and not first.closed  # committed: clean, lent again
    with connections.lend() as left_open:
        _written(left_open, "uncommitted")  # a transaction left open: not known clean
    assert left_open.closed  # given back, its transaction rolled back
    with connections.lend() as fresh:
        assert fresh is not left_open
        title = fresh.execute(sa.text("SELECT title FROM agent_session")).scalar()
        fresh.rollback()
    assert title == "committed"
    with pytest.raises(RuntimeError), connections.lend() as failed:
        raise RuntimeError("a step failed")
    assert failed.closed  # an exception: replaced too
    with connections.lend() as after:
        assert after is not failed
    connections.close()
    assert after.closed


def test_each_worker_thread_has_its_own_connection(db):
    connections = WorkerConnections(db.engine.connect)
    lent: dict[str, list[sa.Connection]] = {}

    def work(name: str) -> None:
        for _ in range(3):
            with connections.lend() as conn:
                conn.execute(sa.text("SELECT 1"))
                conn.rollback()
                lent.setdefault(name, []).append(conn)

    threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(map(id, lent["a"]))) == len(set(map(id, lent["b"]))) == 1
    assert lent["a"][0] is not lent["b"][0]
    connections.close()
    assert lent["a"][0].closed and lent["b"][0].closed


def test_the_heartbeat_keeps_its_thread_between_sessions_and_ends_when_idle(db):
    for sid in (1, 2):
        add_session(db, sid, coding_session(2, tag=str(sid)), model="gpt-4o")
    beat = leases.Heartbeat(db.engine, "me", seconds=600, every=3600)
    beat.hold([1])
    started = beat._thread
    assert started is not None
    beat.drop([1])  # the set is empty a moment, as between a worker's sessions
    beat.hold([2])
    assert beat._thread is started, "a new thread for the next session"
    assert started.is_alive()
    beat.drop([2])
    idle = leases.Heartbeat(db.engine, "me", seconds=600, every=0.05)
    idle.hold([1])
    idle.drop([1])
    # Nothing held at its next beat: the thread ends, and a later hold starts another.
    wait_until(lambda: idle._thread is None, "the idle heartbeat's thread to end", timeout=30)
    idle.hold([2])
    assert idle._thread is not None and idle._thread.is_alive()
    idle.drop([2])


def test_a_connection_killed_while_the_batch_is_found_is_found_again(mysql_db, monkeypatch):
    """A connection the server killed while `compact --all` was finding the sessions over
    their threshold ended the whole run with "Lost connection", exit 1 and no JSON (review,
    2026-12-07): the finding now runs again, as a session's transactions do."""
    from ctxtool.compaction import batch as batch_module
    from ctxtool.db.engine import create_engine

    for sid in range(1, 4):
        add_session(mysql_db, sid, coding_session(12, tag=str(sid)), model="gpt-4o")
    real, killed = batch_module.newest_checkpoint_id, []

    def killed_once(conn):
        if not killed:
            killed.append(conn.exec_driver_sql("SELECT CONNECTION_ID()").scalar())
            with create_engine(mysql_db.url).connect() as other:
                other.exec_driver_sql(f"KILL {killed[0]}")
        return real(conn)

    monkeypatch.setattr(batch_module, "newest_checkpoint_id", killed_once)
    compactor = Compactor(mysql_db.engine, ExtractiveSummarizer(), SETTINGS, owner="me")
    for dry_run in (True, False):
        killed.clear()
        batch = compactor.batch(dry_run=dry_run)
        assert killed, "the planted kill ran"
        assert sorted(c.session_id for c in batch.candidates) == [1, 2, 3], dry_run
