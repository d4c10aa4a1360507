"""The sums behind `compact --all` and `sessions list --over-window` read the message index
alone, never the rows: on a store whose rows do not fit in memory, a row read per message
was the whole cost (scripts/bench_bigstore.py). Checked with the database's own plan."""

from __future__ import annotations

from ctxtool.db import dialect_of
from ctxtool.db.schema import agent_message
from ctxtool.store.candidates import suffix_sums

from .builders import add_session, coding_session


def test_suffix_sums_read_the_index_alone(db):
    add_session(db, 1, coding_session(3), model="gpt-4o")
    add_session(db, 2, coding_session(2), model="gpt-4o")
    query = dialect_of(db.engine).through_session_index(
        suffix_sums({1: None, 2: 3}, "o200k_base"), agent_message
    )
    sql = str(query.compile(db.engine, compile_kwargs={"literal_binds": True}))
    if db.kind == "sqlite":
        # SQLite ORs the ranges (MULTI-INDEX OR): an index search for the sessions without a
        # cut and one for the other, each entry's row by its rowid (a local file, in the OS's
        # cache), never a scan.
        plan = " ".join(r["detail"] for r in db.rows("EXPLAIN QUERY PLAN " + sql))
        assert plan.count("SEARCH agent_message USING INDEX") == 2, plan
        assert "SCAN" not in plan, plan
    else:
        [row] = db.rows("EXPLAIN " + sql)
        assert row["key"] == "idx_message_session_id_tokens", row
        assert "Using index" in row["Extra"], row  # the index alone: no row is read


def test_call_ids_are_the_ids_of_the_calls_as_sent():
    """Message.call_ids reads the ids straight from the column (planning a 600k-message session
    asked for them a million times); they are exactly those of Message.calls()."""
    from ctxtool.core.records import Message

    odd = [
        None,
        42,
        {"a": 1},
        ["call_1"],
        [None],
        [],
        [{"id": "a"}, {"id": "a"}, {"id": 7}, {"id": None}, {}, "x", {"id": ""}, {"id": 0}],
        [{"id": "b", "function": {"name": "Read", "arguments": {"p": 1}}}],
    ]
    for tool_calls in odd:
        for role in ("assistant", "user", "tool"):
            m = Message(1, 1, role, tool_calls=tool_calls)  # type: ignore[arg-type]
            expected = (
                tuple(dict.fromkeys(c["id"] for c in m.calls())) if role == "assistant" else ()
            )
            assert m.call_ids == expected, (tool_calls, role)


def test_context_tokens_from_outlines_equal_the_full_measure(db):
    """The measure `sessions list` and the batch take (stored counts read without the text)
    gives what `Store.context_tokens` gives reading every message, whatever the pairing: an
    unanswered call, a result whose call was summarized, a role no API takes, no counts."""
    from ctxtool.db import read_connection
    from ctxtool.db.schema import agent_compaction
    from ctxtool.store import Store, candidates
    from ctxtool.store.candidates import exact_context_tokens

    call = [{"id": "c9", "type": "function", "function": {"name": "Read", "arguments": "{}"}}]
    add_session(db, 1, coding_session(4), model="gpt-4o", system_prompt="Be brief. " * 40)
    add_session(  # a turn in flight: its call has no result yet
        db, 2, [*coding_session(2), {"role": "assistant", "tool_calls": call}], model="gpt-4o"
    )
    ids = add_session(
        db,
        3,
        [*coding_session(2), {"role": "tool", "tool_call_id": "c1", "content": "late"}],
        model="gpt-4o",
    )
    add_session(db, 4, [*coding_session(1), {"role": "narrator", "content": "meanwhile"}])
    with db.engine.begin() as conn:  # session 3's cut leaves its last result an orphan
        conn.execute(
            agent_compaction.insert().values(
                session_id=3,
                summary="## Goal\nread",
                parent_compaction_id=0,
                first_kept_message_id=ids[-1],
            )
        )
    add_session(db, 5, coding_session(3), model="gpt-4o")  # left uncounted below
    Store(db.engine).count_tokens(session_id=None)
    with db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE agent_message SET token_count = NULL WHERE session_id = 5")
    store = Store(db.engine)
    full = {sid: store.context_tokens(sid) for sid in range(1, 6)}
    read_whole = []
    real = candidates.context_tokens

    def reading(conn, session_id, *args, **kwargs):
        read_whole.append(session_id)
        return real(conn, session_id, *args, **kwargs)

    candidates.context_tokens = reading  # type: ignore[assignment]
    try:
        with read_connection(db.engine) as conn:
            for sid in range(1, 6):
                assert exact_context_tokens(conn, sid, None) == full[sid], sid
    finally:
        candidates.context_tokens = real
    # Only what is resent as a user message (an orphan, a foreign role) or uncounted needs
    # the text; the unanswered call is a placeholder of known size.
    assert read_whole == [3, 4, 5]
    # With the batch's sums (which tell the whole story only without tool calls), the same.
    from ctxtool.store.candidates import effective_contexts

    with read_connection(db.engine) as conn:
        sums = {c.session_id: c.suffix for c in effective_contexts(conn)}
        assert sums[1].known and not sums[2].known
        for sid in range(1, 6):
            assert exact_context_tokens(conn, sid, None, sums[sid]) == full[sid], sid


def test_a_dry_run_plans_from_the_user_texts_alone_as_from_every_text(sqlite_db, cli):
    """A dry run reads the text of user messages (where turns start), of roles resent as user
    messages and of uncounted messages only: on the shared transcripts, counted, at four
    window sizes, the plan is the one every text gives (cut, sizes, split turn, notes, error)."""
    from ctxtool.core.plan import CompactionSettings
    from ctxtool.core.prepare import prepare
    from ctxtool.db import read_connection
    from ctxtool.store import Store
    from ctxtool.store.counts import read_suffix

    from .conftest import TRANSCRIPTS

    assert cli("--db", sqlite_db.url, "import", str(TRANSCRIPTS)).exit_code == 0

    def work(i: int) -> list[dict]:
        call = [
            {"id": f"c{i}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        ]
        return [
            {"role": "assistant", "tool_calls": call},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i} " * 40},
        ]

    # One long turn with a reminder the runtime stored as a user message in its middle: no
    # turn starts there, which only its text tells.
    add_session(
        sqlite_db,
        900,
        [{"role": "user", "content": "fix the parser"}]
        + [m for i in range(30) for m in work(i)]
        + [{"role": "user", "content": "<system-reminder>tests are slow</system-reminder>"}]
        + [m for i in range(30, 60) for m in work(i)]
        + [{"role": "assistant", "content": "done"}],
        model="gpt-4o",
    )
    store = Store(sqlite_db.engine)
    ids = store.session_ids()
    for sid in ids[1:]:  # the first left uncounted: its texts are read for counting
        Store(sqlite_db.engine).count_tokens(session_id=sid)
    planned = 0
    with read_connection(sqlite_db.engine) as conn:
        for window, keep in ((4_000, 300), (8_000, 900), (8_000, 3_900), (24_000, 3_000)):
            settings = CompactionSettings(
                context_window=window, reserve_tokens=window // 8, keep_recent_tokens=keep
            )
            for sid in ids:
                preps = []
                for texts in (True, False):
                    session, ctx, enc = read_suffix(conn, sid, None, False, texts=texts)
                    preps.append(prepare(ctx, session.model, settings, enc, max_summary_tokens=500))
                full, lean = preps
                assert (lean.status, lean.tokens_before, lean.error) == (
                    full.status,
                    full.tokens_before,
                    full.error,
                ), (sid, window)
                assert lean.plan == full.plan and lean.tokens_kept == full.tokens_kept, (
                    sid,
                    window,
                )
                planned += full.plan is not None
    assert planned >= 5


def test_a_dry_run_reads_a_role_that_is_a_chat_role_only_without_case(db):
    """A role like "ASSISTANT" or "assistant " is resent as a user message with a prefix, so
    its text decides what is sent: MySQL's collations call it a chat role, and the dry run left
    its text unread (found with tests/test_bounds.py's bug in the batch's sums)."""
    from ctxtool.db import read_connection
    from ctxtool.store import Store
    from ctxtool.store.counts import read_suffix

    add_session(
        db,
        1,
        [
            {"role": "user", "content": "fix the parser"},
            {"role": "ASSISTANT", "content": "looking at parser.py " * 20},
            {"role": "assistant ", "content": "patched parser.py " * 20},
            {"role": "assistant", "content": "done"},
        ],
        model="gpt-4o",
    )
    Store(db.engine).count_tokens(session_id=1)
    with read_connection(db.engine) as conn:
        full = read_suffix(conn, 1, None, False, texts=True)[1]
        lean = read_suffix(conn, 1, None, False, texts=False)[1]
    resent = [i for i, m in enumerate(full.messages) if m.role in ("ASSISTANT", "assistant ")]
    assert len(resent) == 2
    assert [lean.messages[i].content for i in resent] == [full.messages[i].content for i in resent]
    assert lean.messages[-1].content is None  # a counted chat-role message: its text unread


def test_every_sessions_sums_are_one_walk_of_the_index(db):
    """`compact --all` sums every session's suffix in one query: the sessions in key order,
    each joined to its messages from its latest cut on through the message index alone; the
    figures are those of the per-session query, for each encoding the sessions need."""
    from ctxtool.db import read_connection
    from ctxtool.db.schema import agent_compaction
    from ctxtool.store import Store
    from ctxtool.store.candidates import all_suffix_sums, effective_contexts

    ids = {}
    for sid, model in ((1, "gpt-4o"), (2, "gpt-4"), (3, "gpt-4o"), (4, None)):
        ids[sid] = add_session(db, sid, coding_session(3), model=model, system_prompt="hi")
    Store(db.engine).count_tokens(session_id=1)
    Store(db.engine).count_tokens(session_id=2)
    with db.engine.begin() as conn:
        parent = 0
        for first_kept in (ids[3][2], ids[3][5]):  # the latest of two checkpoints decides
            parent = conn.execute(
                agent_compaction.insert().values(
                    session_id=3,
                    summary="s",
                    first_kept_message_id=first_kept,
                    tokens_before=1,
                    parent_compaction_id=parent,
                )
            ).inserted_primary_key[0]
    query = dialect_of(db.engine).through_session_index(
        all_suffix_sums(["cl100k_base", "o200k_base"]), agent_message
    )
    sql = str(query.compile(db.engine, compile_kwargs={"literal_binds": True}))
    if db.kind == "sqlite":
        plan = " ".join(r["detail"] for r in db.rows("EXPLAIN QUERY PLAN " + sql))
        assert "SCAN agent_message" not in plan, plan
    else:
        rows = {r["table"]: r for r in db.rows("EXPLAIN " + sql)}
        assert rows["agent_message"]["key"] == "idx_message_session_id_tokens", rows
        assert "Using index" in rows["agent_message"]["Extra"], rows
        assert "filesort" not in " ".join(str(r["Extra"]) for r in rows.values()), rows
    with read_connection(db.engine) as conn:
        found = {c.session_id: c for c in effective_contexts(conn)}
        assert sorted(found) == [1, 2, 3, 4]
        assert found[3].first_kept_message_id == ids[3][5]
        for sid, c in found.items():
            enc = {2: "cl100k_base"}.get(sid, "o200k_base")
            (alone,) = conn.execute(suffix_sums({sid: c.first_kept_message_id}, enc)).all()
            assert (c.suffix.tokens, c.suffix.uncounted, c.last_message_id) == (
                alone.tokens,
                alone.uncounted,
                alone.last_message_id,
            ), sid
            assert c.suffix.unpaired == abs(alone.calls - alone.results)
        assert found[1].suffix.uncounted == 0 and found[2].suffix.uncounted == 0
        assert found[4].suffix.uncounted == len(ids[4]) and found[1].suffix.tokens > 0
        assert found[3].suffix.uncounted == len(ids[3]) - 5
