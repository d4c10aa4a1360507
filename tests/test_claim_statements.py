"""A batch's claim writes the session ids into its statements as integers (no parameter of
each, which SQLAlchemy and PyMySQL handle one by one), and reads the same lease states."""

from __future__ import annotations

from sqlalchemy import event

from ctxtool.db.schema import agent_compaction, agent_session
from ctxtool.store import leases


def test_a_claim_binds_no_session_id_and_reads_the_same_states(db):
    engine = db.engine
    with engine.begin() as conn:
        conn.execute(agent_session.insert(), [{"session_id": s} for s in range(1, 41)])
        conn.execute(
            agent_compaction.insert(),
            {
                "session_id": 7,
                "summary": "s",
                "first_kept_message_id": 1,
                "parent_compaction_id": 0,
            },
        )
    with engine.connect() as conn:
        assert leases.take_many(conn, [5], "sibling", 60, checkpoints_through=0) == {
            5: leases.LeaseState(leases.holder(conn, 5), False)
        }
    executed = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        if statement.startswith(("UPDATE", "SELECT")):  # not SQLite's BEGIN
            executed.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", seen)
    try:
        with engine.connect() as conn:
            ahead = list(range(3, 36))
            states = leases.take_many(conn, [1, 2], "me", 60, checkpoints_through=0, also=ahead)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    # Won: 1 and 2; of those ahead, the one a sibling holds and the one checkpointed since.
    assert sorted(states) == [1, 2, 5, 7]
    assert {s: (st.holder.owner if st.holder else None) for s, st in states.items()} == {
        1: "me",
        2: "me",
        5: "sibling",
        7: None,
    }
    assert [s for s, st in states.items() if st.checkpointed] == [7]
    assert len(executed) == 2
    for statement, parameters in executed:
        values = list(parameters.values() if isinstance(parameters, dict) else parameters)
        assert not set(values) & set(ahead), values  # no id bound: the ids are in the text
        assert "IN (1, 2)" in statement
    assert ", ".join(map(str, ahead)) in executed[1][0]  # the read of those ahead


def test_an_empty_list_of_ids_matches_no_session(db):
    """``(NULL)`` stands for an empty list (``_IdList``): no session is taken or read by it."""
    engine = db.engine
    with engine.begin() as conn:
        conn.execute(agent_session.insert(), [{"session_id": s} for s in range(1, 4)])
    with engine.connect() as conn:
        assert leases.take_many(conn, [], "me", 60, checkpoints_through=0, also=[2]) == {}
        states = leases.take_many(conn, [1], "me", 60, checkpoints_through=0, also=[])
        assert list(states) == [1] and states[1].holder is not None
        assert states[1].holder.owner == "me"
        assert leases.holder(conn, 2) is None and leases.holder(conn, 3) is None
