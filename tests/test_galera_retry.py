"""``db.retry_transaction``: what a lost race or a passing outage failed runs again, what is the
work's own fault is raised at once, and an unreachable server is waited for once per engine.
Real servers throughout: a deadlock between two connections of MariaDB, a certification
conflict between two Galera nodes, a port nothing listens on."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, OperationalError

from ctxtool.db import RetryPolicy, create_engine, retry_transaction, server_given_up
from ctxtool.db.error_text import error_code

from .galera_cluster import galera  # noqa: F401 - the session fixture

FAST = RetryPolicy(first_delay_s=0.01, max_delay_s=0.05, outage_s=0.5)


def _counter_table(db) -> None:
    with db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
        conn.exec_driver_sql("INSERT INTO t (k, v) VALUES (1, 0), (2, 0)")


def test_the_works_own_error_is_raised_at_once(db):
    _counter_table(db)
    tries = []

    def work():
        tries.append(1)
        with db.engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO t (k, v) VALUES (1, 5)")

    with pytest.raises(IntegrityError):
        retry_transaction(db.engine, work, policy=FAST)
    assert len(tries) == 1


def test_a_race_the_caller_names_runs_again_until_it_is_won(db):
    """``lost_race``: the caller's own lost race (here a duplicate key another writer inserted
    first, as a concurrent import meets) is run again with the same backoff, up to the same
    number of tries; any other error of the work is still raised at once."""
    _counter_table(db)
    tries = []

    def work():
        tries.append(1)
        with db.engine.begin() as conn:
            key = 1 if len(tries) < 3 else 3  # the third try no longer collides
            conn.exec_driver_sql(f"INSERT INTO t (k, v) VALUES ({key}, 5)")

    duplicate = lambda exc: isinstance(exc, IntegrityError)  # noqa: E731
    retry_transaction(db.engine, work, policy=FAST, lost_race=duplicate)
    assert len(tries) == 3
    assert db.scalar("SELECT v FROM t WHERE k = 3") == 5
    tries.clear()

    def never(conn_key=2):
        tries.append(1)
        with db.engine.begin() as conn:
            conn.exec_driver_sql(f"INSERT INTO t (k, v) VALUES ({conn_key}, 5)")

    with pytest.raises(IntegrityError):
        retry_transaction(db.engine, never, policy=FAST, lost_race=duplicate)
    assert len(tries) == FAST.attempts


def test_a_deadlock_loser_runs_again_and_both_transactions_count(mysql_db):
    """Two transactions take rows 1 and 2 in opposite orders: InnoDB kills one with 1213. Run
    through retry_transaction, the loser runs again and both increments are stored."""
    _counter_table(mysql_db)
    both_hold_one = threading.Barrier(2)
    errors: list[int | None] = []

    def transfer(first: int, second: int, conn) -> None:
        attempt = []

        def work():
            attempt.append(1)
            with conn.begin():
                conn.exec_driver_sql(f"UPDATE t SET v = v + 1 WHERE k = {first}")
                if len(attempt) == 1:
                    both_hold_one.wait(timeout=30)
                conn.exec_driver_sql(f"UPDATE t SET v = v + 1 WHERE k = {second}")

        def record(_delay):
            errors.append(1213)

        retry_transaction(conn, work, policy=FAST, sleep=record)

    with mysql_db.engine.connect() as a, mysql_db.engine.connect() as b:
        other = threading.Thread(target=transfer, args=(2, 1, b))
        other.start()
        transfer(1, 2, a)
        other.join(timeout=60)
    assert errors == [1213]  # exactly one loser, retried once
    assert mysql_db.rows("SELECT k, v FROM t ORDER BY k") == [{"k": 1, "v": 2}, {"k": 2, "v": 2}]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_server_is_waited_for_once_then_calls_fail_at_once():
    engine = create_engine(f"mysql+pymysql://root@127.0.0.1:{_closed_port()}/x")

    def work():
        with engine.begin() as conn:
            conn.exec_driver_sql("SELECT 1")

    started = time.monotonic()
    with pytest.raises(OperationalError) as first:
        retry_transaction(engine, work, policy=FAST)
    waited = time.monotonic() - started
    assert error_code(first.value) == 2003 and waited >= FAST.outage_s
    assert server_given_up(engine)
    tries = []

    def counted():
        tries.append(1)
        work()

    with pytest.raises(OperationalError):
        retry_transaction(engine, counted, policy=FAST)
    assert tries == [1]  # no second wait: the batch stops taking work
    engine.dispose()


def test_a_call_that_gets_through_clears_the_outage(mysql_db):
    """The mark is per engine and lifted by the first success: a node that came back is used."""
    engine = mysql_db.engine
    down = [True]

    def work():
        if down[0]:
            # A refused connection, as a killed node gives: a real one, to a closed port.
            with create_engine(f"mysql+pymysql://root@127.0.0.1:{_closed_port()}/x").connect():
                pass
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT 1").scalar()

    with pytest.raises(OperationalError):
        retry_transaction(engine, work, policy=FAST)
    assert server_given_up(engine)
    down[0] = False
    assert retry_transaction(engine, work, policy=FAST) == 1
    assert not server_given_up(engine)


@pytest.mark.galera
def test_a_certification_conflict_at_commit_runs_again(galera):  # noqa: F811
    """Node 1 and node 2 update one row at once: the one certified second is refused at COMMIT
    with 1213 (it read nothing stale on its own node). Run again, it goes through.

    How often it is refused is the cluster's to decide: a retry that starts before node 2's
    write is applied on node 1 is aborted by that applier too (seen as two refusals). What
    must hold: at least one refusal, fewer than the policy's tries, and both increments stored
    once each."""
    with galera.database() as nodes:
        _counter_table(nodes[1])
        refused = []
        with nodes[1].engine.connect() as conn:

            def work():
                with conn.begin():
                    conn.exec_driver_sql("UPDATE t SET v = v + 10 WHERE k = 1")
                    if not refused:
                        with nodes[2].engine.begin() as other:
                            other.exec_driver_sql("UPDATE t SET v = v + 1 WHERE k = 1")

            def record(_delay):
                refused.append(1)

            retry_transaction(conn, work, policy=FAST, sleep=record)
        assert 1 <= len(refused) < FAST.attempts, refused
        with nodes[3].engine.connect() as conn:
            conn.exec_driver_sql("SET SESSION wsrep_sync_wait = 1")
            assert conn.execute(sa.text("SELECT v FROM t WHERE k = 1")).scalar() == 11
