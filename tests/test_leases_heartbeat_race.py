"""A lease's heartbeat racing another compactor's take, on two real MariaDB connections.

The holder's heartbeat (leases.Heartbeat, its own thread and engine) renews the lease in a
transaction of its own; another compactor takes a lapsed lease with a conditional UPDATE
(leases.take, leases.claim). Each is held uncommitted, on its row lock, while the other
runs: the second waits on the lock, then judges the row as the first committed it. Whoever
commits first keeps the lease, the other gets nothing: never two holders, never a lease
renewed for an owner who lost it, never one taken from a holder whose renewal was in flight.
"""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from ctxtool.core.status import CompactionStatus
from ctxtool.store import leases

from .builders import add_session, coding_session
from .waiting import LOCK_WAITS_INTERVAL, lock_waits, wait_until


class CommitGate:
    """Holds the first commit made on the named thread, after its statements ran (its row
    locks taken), until :meth:`open`: a transaction left uncommitted, on a real connection."""

    def __init__(self, thread_name: str):
        self.thread_name = thread_name
        self.reached = threading.Event()
        self._open = threading.Event()
        self._used = False

    def _on_commit(self, conn) -> None:
        if threading.current_thread().name == self.thread_name and not self._used:
            self._used = True
            self.reached.set()
            assert self._open.wait(60), "the gate was never opened"

    def __enter__(self):
        event.listen(Engine, "commit", self._on_commit)
        return self

    def open(self) -> None:
        self._open.set()

    def __exit__(self, *exc):
        self._open.set()
        event.remove(Engine, "commit", self._on_commit)


def _lease(db) -> tuple[str | None, float | None]:
    """The session's lease owner and the seconds it still lasts on the server's clock."""
    row = db.rows(
        "SELECT lease_owner, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), lease_expires_at) / 1e6"
        " AS left_s FROM agent_session WHERE session_id = 1"
    )[0]
    return row["lease_owner"], None if row["left_s"] is None else float(row["left_s"])


def _lapsed_lease_of(db, owner: str) -> None:
    with db.engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE agent_session SET lease_owner = :o,"
                " lease_expires_at = UTC_TIMESTAMP() - INTERVAL 5 SECOND WHERE session_id = 1"
            ),
            {"o": owner},
        )


def _in_thread(name: str, work) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run():
        try:
            out["result"] = work()
        except BaseException as exc:  # the test reads it
            out["error"] = exc

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread, out


TAKES = {
    "take": lambda conn: leases.take(conn, 1, "taker", leases.LEASE_BEAT_S),
    "claim": lambda conn: leases.claim(conn, 1, "taker", leases.LEASE_BEAT_S, 0),
    "take_many": lambda conn: leases.take_many(
        conn, [1], "taker", leases.LEASE_BEAT_S, checkpoints_through=0
    ),
}
# What each answers when the lease is the holder's: not taken.
REFUSED = {
    "take": lambda r: r is False,
    "claim": lambda r: r == CompactionStatus.LEASE_HELD,
    "take_many": lambda r: r[1].holder is not None and r[1].holder.owner == "holder",
}


@pytest.mark.parametrize("how", list(TAKES))
def test_a_take_waits_for_an_uncommitted_heartbeat_and_then_finds_the_lease_renewed(mysql_db, how):
    db = mysql_db
    add_session(db, 1, coding_session(2), model="gpt-4o")
    _lapsed_lease_of(db, "holder")  # lapsed, not yet taken: free for another
    beat = leases.Heartbeat(db.engine, "holder", seconds=600, every=0.05)
    with CommitGate("lease-heartbeat-holder") as gate:
        beat.hold([1])
        assert gate.reached.wait(60), "the heartbeat's renewal never reached its commit"
        # The renewal is written and uncommitted: the row is locked by the heartbeat.
        other = sa.create_engine(db.engine.url)
        try:
            with other.connect() as conn:
                thread, out = _in_thread("taker", lambda: TAKES[how](conn))
                wait_until(
                    lambda: lock_waits(db, "UPDATE agent_session%"),
                    "the take to wait on the heartbeat's row lock",
                    interval=LOCK_WAITS_INTERVAL,
                )
                assert thread.is_alive()
                gate.open()
                thread.join(60)
        finally:
            other.dispose()
    beat.drop([1])
    assert "error" not in out, out.get("error")
    assert REFUSED[how](out["result"]), out["result"]  # the renewal committed first
    owner, left = _lease(db)
    assert owner == "holder" and left is not None and left > 500


def test_a_heartbeat_waits_for_an_uncommitted_claim_and_then_renews_nothing(mysql_db):
    db = mysql_db
    add_session(db, 1, coding_session(2), model="gpt-4o")
    _lapsed_lease_of(db, "holder")
    other = sa.create_engine(db.engine.url)
    beat = leases.Heartbeat(db.engine, "holder", seconds=600, every=0.05)
    try:
        with CommitGate("taker") as gate, other.connect() as conn:
            # The claim takes the lapsed lease and checks the parent, its commit held.
            thread, out = _in_thread(
                "taker", lambda: leases.claim(conn, 1, "taker", leases.LEASE_BEAT_S, 0)
            )
            assert gate.reached.wait(60), "the claim never reached its commit"
            beat.hold([1])  # the old holder, still working, renews meanwhile
            wait_until(
                lambda: lock_waits(db, "UPDATE agent_session%"),
                "the heartbeat to wait on the claim's row lock",
                interval=LOCK_WAITS_INTERVAL,
            )
            gate.open()
            thread.join(60)
            assert "error" not in out, out.get("error")
            assert out["result"] is None  # taken
            # Beats after the claim committed renew nothing of the taker's lease.
            sent = beat.beats
            wait_until(lambda: beat.beats >= sent + 3, "three more beats", timeout=60)
    finally:
        beat.drop([1])
        other.dispose()
    owner, left = _lease(db)
    assert owner == "taker" and left is not None and left <= leases.LEASE_BEAT_S + 1, left


def test_one_session_s_row_held_by_an_import_lets_no_other_lease_lapse(mysql_db):
    """A holder works on several sessions; an import appending to one of them holds that
    session's row for its whole transaction (it writes the row first, store.session_touch).
    The heartbeat renewed every session in one UPDATE, which waited on that row (InnoDB's
    lock wait, 50 s by default) with the others' renewals in it: each lease lapsed while its
    holder was alive and working, and a sibling took it and summarized the session again. A
    held row now delays its own session's renewal alone."""
    from ctxtool.store.session_touch import touch_session

    db = mysql_db
    for sid in (1, 2, 3):
        add_session(db, sid, coding_session(2, tag=str(sid)), model="gpt-4o")
    seconds = 10  # a lease as written: beats far apart on a busy machine must not lapse it
    with db.engine.connect() as conn:
        for sid in (1, 2, 3):
            assert leases.take(conn, sid, "holder", seconds)
    beat = leases.Heartbeat(db.engine, "holder", seconds=seconds, every=0.3)
    other = sa.create_engine(db.engine.url)
    try:
        with other.connect() as importing:
            importing.begin()
            assert touch_session(importing, 2)  # the import's first statement, uncommitted
            beat.hold([1, 2, 3])
            wait_until(
                lambda: lock_waits(db, "UPDATE agent_session%"),
                "a renewal to wait on the import's row",
                interval=LOCK_WAITS_INTERVAL,
            )
            # Past the leases as first written, twice over: the free sessions' stay renewed.
            deadline = db.scalar("SELECT MAX(lease_expires_at) FROM agent_session")
            wait_until(
                lambda: db.scalar(
                    "SELECT UTC_TIMESTAMP(6) > :d + INTERVAL :s SECOND", d=deadline, s=seconds
                ),
                "the first leases to be long over",
                timeout=60,
            )
            with db.engine.connect() as conn:
                live = {sid: leases.holder(conn, sid) for sid in (1, 2, 3)}
            assert live[1] is not None and live[3] is not None, live
            importing.commit()

        # The import done, its session's lease is renewed again too (each look a transaction
        # of its own: a repeatable read would see the first one's snapshot again).
        def renewed():
            with db.engine.connect() as conn:
                return leases.holder(conn, 2)

        assert wait_until(renewed, "session 2's renewal", timeout=60).owner == "holder"
    finally:
        beat.drop([1, 2, 3])
        other.dispose()
