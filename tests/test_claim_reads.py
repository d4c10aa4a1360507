"""A batch's claim reads, of the sessions ahead, only those there is something to pass over
(store.leases.take_many): a live lease another holds, or a checkpoint appended since the
batch was found. A free one reads as its absence does (try it), so a claim in a batch nobody
else runs reads one row, its own, where it read 33. The claim's own sessions are always read.
SQLite and MariaDB."""

from __future__ import annotations

from ctxtool.compaction.batch import Claims
from ctxtool.store import leases

from .builders import add_session, coding_session


def _sessions(db, n: int) -> None:
    for sid in range(1, n + 1):
        add_session(db, sid, coding_session(2, tag=str(sid)), model="gpt-4o")


def _lease(db, sid: int, owner: str, seconds: int) -> None:
    with db.engine.connect() as conn:
        assert leases.take(conn, sid, owner, seconds)


def test_a_claim_reads_only_the_sessions_ahead_to_pass_over(db):
    _sessions(db, 6)
    _lease(db, 3, "sibling", 600)  # held: passed over
    _lease(db, 4, "lapsed", 1)  # expires at once below: free
    with db.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE agent_session SET lease_expires_at = '2000-01-01 00:00:00' WHERE session_id = 4"
        )
        checkpoints = leases.newest_checkpoint_id(conn)
    with db.engine.begin() as conn:
        first = conn.exec_driver_sql(
            "SELECT MIN(id) FROM agent_message WHERE session_id = 5"
        ).scalar()
        conn.exec_driver_sql(
            "INSERT INTO agent_compaction (session_id, summary, first_kept_message_id) "
            f"VALUES (5, 'by a sibling', {first})"
        )
    with db.engine.connect() as conn:
        states = leases.take_many(
            conn, [1], "me", 600, checkpoints_through=checkpoints, also=[2, 3, 4, 5, 6, 99]
        )
    assert sorted(states) == [1, 3, 5]  # its own, the held one, the one checkpointed since
    assert states[1].holder is not None and states[1].holder.owner == "me"
    assert states[3].holder is not None and states[3].holder.owner == "sibling"
    assert states[5].checkpointed and states[5].holder is None


def test_a_claim_always_reads_its_own_sessions(db):
    _sessions(db, 2)
    _lease(db, 1, "sibling", 600)
    with db.engine.connect() as conn:
        states = leases.take_many(conn, [1, 2, 99], "me", 600, checkpoints_through=0)
    assert sorted(states) == [1, 2]  # 99 is no session: the caller reports it gone
    assert states[1].holder is not None and states[1].holder.owner == "sibling"
    assert states[2].holder is not None and states[2].holder.owner == "me"


def test_a_session_seen_held_and_read_free_later_is_claimed(db):
    """A session one claim read as a sibling's, which the next claim reads ahead again once
    free (left out of that read), is tried when its turn comes: not passed over as the
    sibling's, as the first read said."""
    _sessions(db, 4)
    _lease(db, 3, "sibling", 600)
    with db.engine.connect() as conn:
        through = leases.newest_checkpoint_id(conn)

    def take(ids: list[int], ahead: list[int]) -> dict[int, leases.LeaseState]:
        with db.engine.connect() as conn:
            return leases.take_many(conn, ids, "me", 600, checkpoints_through=through, also=ahead)

    claims = Claims([1, 2, 3, 4], take, "me", str, lookahead=2)
    assert claims.claim(1) == ([1], [])  # read ahead: 2 free, 3 the sibling's
    with db.engine.connect() as conn:
        leases.release(conn, 3, "sibling")  # the sibling is done with it
    assert claims.claim(1) == ([2], [])  # read ahead: 3 free now, 4
    assert claims.claim(1) == ([3], [])
    assert claims.claim(1) == ([4], [])
