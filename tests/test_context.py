"""Restored context and consistency rules: pure functions, and `context show` / `validate`."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from ctxtool.core.errors import CtxtoolError
from ctxtool.core.records import SUMMARY_PREFIX, Compaction, Message, restore_context
from ctxtool.core.validation import MessageRef, validate_restored_messages, validate_session
from ctxtool.store import Store
from ctxtool.store.outline import stream_context

from .builders import LIMITS, add_session, coding_session


def msg(i, role="user", session=1, **kw):
    return Message(i, session, role, kw.pop("content", f"m{i}"), **kw)


def call(i, cid):
    return msg(
        i,
        "assistant",
        content=None,
        tool_calls=[{"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    )


def test_restore_context_takes_the_suffix_of_the_latest_checkpoint_only():
    history = [msg(5), msg(1), msg(3, "assistant"), msg(4, session=2), msg(7), msg(6, "assistant")]
    cp = Compaction(10, 1, "the summary", first_kept_message_id=5)
    ctx = restore_context(1, "sys", cp, history)
    assert [m.id for m in ctx.messages] == [5, 6, 7]
    out = ctx.to_openai()
    assert out[0] == {"role": "system", "content": "sys"}
    assert out[1] == {"role": "user", "content": SUMMARY_PREFIX + "the summary"}
    assert [m["content"] for m in out[2:]] == ["m5", "m6", "m7"]
    no_cp = restore_context(1, None, None, history)
    assert [m.id for m in no_cp.messages] == [1, 3, 5, 6, 7]
    assert no_cp.to_openai()[0]["content"] == "m1"


def test_tool_messages_round_trip_to_openai_shape():
    ctx = restore_context(
        1, None, None, [call(1, "c1"), msg(2, "tool", tool_call_id="c1", content="ok")]
    )
    assert ctx.to_openai() == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "content": "ok", "tool_call_id": "c1"},
    ]


def test_validation_rules():
    refs = {3: MessageRef(3, 1, "user"), 6: MessageRef(6, 1, "tool"), 9: MessageRef(9, 2, "user")}
    cps = [
        Compaction(1, 1, "s1", 3, tokens_before=100, tokens_after=50),
        Compaction(2, 1, "s2", 6, parent_compaction_id=1),
        Compaction(3, 1, "", 9, parent_compaction_id=1),
        Compaction(4, 1, "s4", 4, parent_compaction_id=3, tokens_before=10, tokens_after=20),
    ]
    rules = [(i.rule, i.compaction_id) for i in validate_session(1, cps, refs, [])]
    assert rules == [
        ("cut_orphans_tool_result", 2),
        ("first_kept_other_session", 3),
        ("chain_broken", 3),
        ("empty_summary", 3),
        ("first_kept_missing", 4),
        ("cut_moved_back", 4),
        ("not_smaller", 4),
    ]
    assert validate_session(1, cps[:1], refs, []) == []


def test_restored_messages_rules():
    ok = [msg(1), call(2, "a"), msg(3, "tool", tool_call_id="a"), call(4, "b")]
    assert validate_restored_messages(1, ok) == []  # a trailing call may still be waiting
    bad = [msg(3, "tool", tool_call_id="a"), call(4, "b"), msg(5)]
    assert [i.rule for i in validate_restored_messages(1, bad)] == [
        "orphan_tool_result",
        "unanswered_tool_call",
    ]


def test_cli_context_show_and_validate(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o", system_prompt="You are a coder.")
    assert cli("--db", db.url, "compact", "1", *LIMITS).exit_code == 0
    cp = db.rows("SELECT id, first_kept_message_id, summary FROM agent_compaction")[0]

    result = cli("--db", db.url, "context", "show", "1")
    assert result.exit_code == 0, result.output
    assert f"cut at message {cp['first_kept_message_id']}" in result.output
    assert "[summary of checkpoint" in result.output and "You are a coder." in result.output

    doc = json.loads(cli("--db", db.url, "context", "show", "1", "--json").stdout)
    kept = db.scalar(
        "SELECT COUNT(*) FROM agent_message WHERE session_id = 1 AND id >= :i",
        i=cp["first_kept_message_id"],
    )
    assert doc["messages_kept"] == kept and len(doc["messages"]) == kept + 2
    assert doc["messages"][1]["content"] == SUMMARY_PREFIX + cp["summary"]
    assert doc["summary"] == cp["summary"] and doc["system_prompt"] == "You are a coder."
    assert doc["context_tokens"] > 0
    listed = json.loads(cli("--db", db.url, "context", "show", "1", "--openai").stdout)
    assert listed == [
        {k: v for k, v in m.items() if k not in ("id", "created_at", "token_count", "kind")}
        for m in doc["messages"]
    ]

    result = cli("--db", db.url, "context", "show", "99")
    assert result.exit_code == 1 and "session 99 does not exist" in result.output

    result = cli("--db", db.url, "validate", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout) == []

    # Corrupt the checkpoint the way a buggy runtime would: cut at a tool result.
    tool_id = db.scalar(
        "SELECT MIN(id) FROM agent_message WHERE role = 'tool' AND id > :i",
        i=cp["first_kept_message_id"],
    )
    with db.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE agent_compaction SET first_kept_message_id = {tool_id}")
    result = cli("--db", db.url, "validate", "--session", "1", "--json")
    assert result.exit_code == 1
    rules = {i["rule"] for i in json.loads(result.stdout)}
    assert {"cut_orphans_tool_result", "orphan_tool_result"} <= rules


def test_cli_sessions_list(db, cli):
    add_session(db, 1, coding_session(2), model="gpt-4o")
    add_session(db, 2, coding_session(1), model="claude-sonnet-4-5")
    with db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE agent_session SET project_id = 'shop' WHERE session_id = 2")
    rows = json.loads(cli("--db", db.url, "sessions", "list", "--json").stdout)
    assert [(r["session_id"], r["messages"], r["compactions"]) for r in rows] == [
        (2, 4, 0),
        (1, 8, 0),
    ]
    rows = json.loads(cli("--db", db.url, "sessions", "list", "--project", "shop", "--json").stdout)
    assert [r["session_id"] for r in rows] == [2]
    result = cli("--db", db.url, "sessions", "list", "--limit", "1")
    assert (
        result.exit_code == 0
        and "claude-sonnet-4-5" in result.output
        and "gpt-4o" not in result.output
    )


def test_reads_do_not_wait_for_a_writer_on_sqlite(db, cli):
    """SQLite: `context show`, `sessions list`, `tokens report` and `validate` run while another
    connection holds the write lock (an import or a compaction in progress)."""
    import threading

    add_session(db, 1, coding_session(2), model="gpt-4o")
    writer = db.engine.connect()
    writer.begin()  # BEGIN IMMEDIATE on SQLite: the write lock, held until rollback
    writer.exec_driver_sql("UPDATE agent_session SET title = 'busy' WHERE session_id = 1")
    results = {}

    def read_all():
        for name, args in (
            ("show", ["context", "show", "1", "--json"]),
            ("list", ["sessions", "list"]),
            ("report", ["tokens", "report"]),
            ("validate", ["validate"]),
        ):
            results[name] = cli("--db", db.url, *args).exit_code

    reader = threading.Thread(target=read_all)
    reader.start()
    reader.join(timeout=20)  # a reader blocked by the lock would wait out the 30 s busy timeout
    finished = not reader.is_alive()
    writer.rollback()
    writer.close()
    reader.join()
    assert finished and results == {"show": 0, "list": 0, "report": 0, "validate": 0}


def _compacted_session_with_a_gap(db):
    """A session whose ids skip 11 (a writer that will commit late holds it), compacted once
    past it with the extractive summarizer; returns the checkpoint."""
    from ctxtool.compaction.compactor import Compactor
    from ctxtool.compaction.summarizers import ExtractiveSummarizer
    from ctxtool.core.plan import CompactionSettings
    from ctxtool.db.schema import agent_message, agent_session

    from .builders import coding_session

    rows = coding_session(12)
    with db.engine.begin() as conn:
        conn.execute(agent_session.insert().values(session_id=1, model="gpt-4o"))
        for i, row in enumerate(rows, start=1):
            conn.execute(
                agent_message.insert().values(
                    id=i if i < 11 else i + 1,
                    session_id=1,
                    **{"content": None, "tool_calls": None, "tool_call_id": None, **row},
                )
            )
    settings = CompactionSettings(context_window=6000, reserve_tokens=1000, keep_recent_tokens=1500)
    outcome = Compactor(db.engine, ExtractiveSummarizer(), settings).compact_session(1, force=True)
    assert outcome.status == "compacted", outcome
    [cp] = Store(db.engine).compactions(1)
    assert cp.first_kept_message_id > 11
    return cp


def test_validate_finds_a_message_committed_late_inside_a_summarized_range(db, cli):
    cp = _compacted_session_with_a_gap(db)
    assert cli("--db", db.url, "validate").exit_code == 0
    with db.engine.begin() as conn:  # the late writer commits id 11, below the cut
        conn.exec_driver_sql(
            "INSERT INTO agent_message (id, session_id, role, content, created_at) "
            "VALUES (11, 1, 'user', 'late', '2024-01-01 00:00:00')"
        )
    result = cli("--db", db.url, "validate", "--json")
    assert result.exit_code == 1, result.output
    [issue] = [i for i in json.loads(result.stdout) if i["rule"] == "message_outside_summary"]
    assert issue["compaction_id"] == cp.id and issue["message_id"] == 11


def test_validate_names_a_summarized_message_that_was_deleted(db, cli):
    """Found by review: a deleted summarized message made validate name other, summarized,
    messages as left out of the summary."""
    cp = _compacted_session_with_a_gap(db)
    with db.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM agent_message WHERE id = 5")
    result = cli("--db", db.url, "validate", "--json")
    assert result.exit_code == 1, result.output
    issues = json.loads(result.stdout)
    assert "message_outside_summary" not in {i["rule"] for i in issues}
    [issue] = [i for i in issues if i["rule"] == "summarised_message_deleted"]
    assert (issue["compaction_id"], issue["message_id"]) == (cp.id, 5)
    assert "message 5 is no longer stored: history was deleted" in issue["message"]


def test_validate_reports_a_restored_context_over_its_window(db, cli):
    add_session(
        db,
        1,
        [{"role": "user", "content": "start"}, {"role": "assistant", "content": "word " * 6000}],
        model="gpt-4o",
    )
    result = cli(
        "--db",
        db.url,
        "validate",
        "--context-window",
        "4000",
        "--reserve-tokens",
        "16384",
        "--json",
    )
    assert result.exit_code == 2 and "--reserve-tokens 16384 leaves nothing" in result.output
    found = []
    for _ in range(2):  # nothing counted yet (measured in memory, nothing written), then counted
        result = cli(
            "--db",
            db.url,
            "validate",
            "--context-window",
            "4000",
            "--reserve-tokens",
            "500",
            "--json",
        )
        assert result.exit_code == 0  # waiting for compaction: a warning
        [issue] = json.loads(result.stdout)
        assert issue["rule"] == "over_window" and "threshold of 3500" in issue["message"]
        assert issue["severity"] == "warning"
        found.append(issue)
        if db.scalar("SELECT COUNT(*) FROM agent_message WHERE token_count IS NOT NULL") == 0:
            assert cli("--db", db.url, "tokens", "count", "--all").exit_code == 0
    assert found[0] == found[1]
    assert cli("--db", db.url, "validate", "--json").exit_code == 0  # gpt-4o's 128k window


def test_validate_warns_when_a_summary_kept_little(db, cli):
    from ctxtool.db.schema import agent_compaction

    ids = add_session(db, 1, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    with db.engine.begin() as conn:
        conn.execute(
            agent_compaction.insert().values(
                session_id=1,
                summary="s",
                first_kept_message_id=ids[1],
                parent_compaction_id=0,
                details={"quality": {"retention": 0.2, "carry_over": 0.95}},
            )
        )
    result = cli("--db", db.url, "validate", "--json")
    assert result.exit_code == 0  # a warning only
    [issue] = json.loads(result.stdout)
    assert issue["rule"] == "low_quality" and "retention 20%" in issue["message"]


def test_loaded_messages_carry_every_column_as_written(db):
    """Store.messages reads the driver's own rows on MySQL (no SQLAlchemy row processing):
    every column must still arrive as the Python value that was written, on both databases."""
    from datetime import datetime

    when = datetime(2026, 3, 4, 5, 6, 7, 890123)
    calls = [
        {
            "id": "call_é",
            "type": "function",
            "function": {"name": "read", "arguments": '{"path": "日本/ü.py"}'},
        }
    ]
    written = [
        {
            "role": "user",
            "content": "Grüße 🚀 \x00 \\ ' \"",
            "created_at": when,
            "source_id": "rec-1",
            "name": "alice",
            "token_count": 12,
            "token_encoding": "o200k_base",
        },
        {"role": "assistant", "content": None, "tool_calls": calls, "details": {"k": [1, None]}},
        {"role": "tool", "content": "", "tool_call_id": "call_é"},
    ]
    ids = add_session(db, 1, written)
    loaded = Store(db.engine).messages(1)
    assert [m.id for m in loaded] == ids
    first, second, third = loaded
    assert (
        first.session_id,
        first.role,
        first.content,
        first.created_at,
        first.source_id,
        first.name,
        first.token_count,
        first.token_encoding,
    ) == (1, "user", "Grüße 🚀 \x00 \\ ' \"", when, "rec-1", "alice", 12, "o200k_base")
    assert type(first.id) is int and type(first.token_count) is int
    assert isinstance(second.created_at, datetime)
    assert (second.content, second.tool_calls, second.details) == (None, calls, {"k": [1, None]})
    assert (third.content, third.tool_call_id, third.details) == ("", "call_é", None)
    assert Store(db.engine).messages(1, from_id=ids[1], before_id=ids[2]) == [second]
    assert list(Store(db.engine).iter_messages(1, batch=2)) == loaded


def _outcome(convert, text):
    """What a converter makes of a text: its value, or the kind of error it raises."""
    try:
        return convert(text)
    except Exception as exc:  # noqa: BLE001 - PyMySQL's own converter overflows on some
        return type(exc)


def test_mysql_timestamps_read_as_pymysql_reads_them(mysql_db):
    """ctxtool's engines read DATETIME with a faster converter than PyMySQL's own: every shape
    the server sends must come out exactly as PyMySQL alone gives it (zero and invalid dates
    as text, fractions of every width)."""
    import pymysql
    from pymysql.converters import convert_datetime

    values = [
        "2026-03-04 05:06:07",
        "2026-03-04 05:06:07.890123",
        "2026-03-04 05:06:07.89",
        "1000-01-01 00:00:00",
        "9999-12-31 23:59:59.999999",
    ]
    selects = (
        [f"CAST('{v}' AS DATETIME(6))" for v in values]
        + [f"CAST('{v}' AS DATETIME)" for v in values]
        + [f"CAST('{v}' AS DATETIME(2))" for v in values]
        + ["CAST(NULL AS DATETIME)"]
    )
    query = "SELECT " + ", ".join(selects)
    with mysql_db.engine.connect() as conn:
        ours = tuple(conn.exec_driver_sql(query).one())
    url = mysql_db.engine.url
    bare = pymysql.connect(
        host=url.host,
        port=url.port or 3306,
        user=url.username,
        password=url.password or "",
        database=url.database,
    )
    try:
        cur = bare.cursor()
        cur.execute(query)
        theirs = cur.fetchone()
    finally:
        bare.close()
    assert ours == theirs
    assert ours[1].microsecond == 890123 and ours[2].microsecond == 890000
    # What no CAST produces but a zero-date sql_mode or a broken row can: text, as PyMySQL.
    from pymysql.constants import FIELD_TYPE

    from ctxtool.db.engine import _pymysql_conversions

    to_datetime = _pymysql_conversions()[FIELD_TYPE.DATETIME]
    with mysql_db.engine.connect() as conn:  # installed on ctxtool's connections
        assert (
            conn.connection.dbapi_connection.decoders[FIELD_TYPE.DATETIME] is not convert_datetime
        )
    for text in [
        "0000-00-00 00:00:00",
        "2007-02-31 23:06:20",
        "2026-03-04 05:06:07.1234567",
        "2026-03-04T05:06:07",
        "2026-03-04 05:06:07+01:00",
        b"2026-03-04 05:06:07",
        "2026-03-04x05:06:07",
        "2026-W10-3 05:06:07",
        "2026-03-04 05:06:07,890123",
        "2026-03-04 05:06:07.890+01",
        "2026-03-04 05:06:07.000000",
        " 2026-03-04 05:06:07",
    ]:
        assert to_datetime(text) == convert_datetime(text), text
    # Generated: the valid shape with characters swapped for others fromisoformat might take.
    import random

    rng = random.Random(13)
    alphabet = "0123456789-: T.,+Wx\u0663"
    for _ in range(20_000):
        chars = list("2026-03-04 05:06:07.890123"[: rng.choice((19, 26))])
        for _ in range(rng.randint(1, 3)):
            chars[rng.randrange(len(chars))] = rng.choice(alphabet)
        text = "".join(chars)
        assert _outcome(to_datetime, text) == _outcome(convert_datetime, text), text


def test_loading_through_a_streaming_connection_keeps_every_row(db):
    """A connection streaming its results (``stream_results``) has SQLAlchemy read ahead of the
    driver's cursor: the history must still come back whole, first message included."""
    ids = add_session(db, 1, [{"role": "user", "content": f"m{i}"} for i in range(5)])
    store = Store(db.engine)
    with db.engine.connect().execution_options(stream_results=True) as conn:
        assert [m.id for m in store.messages(1, conn=conn)] == ids
    with db.engine.connect().execution_options(yield_per=2) as conn:
        assert [m.id for m in store.messages(1, conn=conn)] == ids
        assert [m.id for m in store.iter_messages(1, batch=2, conn=conn)] == ids


def test_times_a_runtime_wrote_in_other_shapes_read_everywhere(sqlite_db, cli):
    """SQLite keeps whatever text a runtime wrote in created_at: epoch seconds or milliseconds
    (JavaScript), ISO 8601 with an offset, or junk. Every read command used to end in a
    traceback on the first of them."""
    from ctxtool.db.stored_time import parse_stored_time

    shapes = {
        "1700000005": "2023-11-14T22:13:25",
        "1700000005123": "2023-11-14T22:13:25.123000",
        "2026-03-01T10:00:00+02:00": "2026-03-01T08:00:00",
        "2026-03-01T10:00:00Z": "2026-03-01T10:00:00",
        "yesterday": None,
        "": None,
    }
    for text, expected in shapes.items():
        parsed = parse_stored_time(text)
        assert (parsed.isoformat() if parsed else None) == expected, text
    ids = add_session(sqlite_db, 1, coding_session(24), model="gpt-4o")
    with sqlite_db.engine.begin() as conn:
        for message_id, text in zip(ids, shapes):
            conn.exec_driver_sql(
                "UPDATE agent_message SET created_at = ? WHERE id = ?", (text, message_id)
            )
        conn.exec_driver_sql(
            "UPDATE agent_message SET created_at = 1700000099 WHERE id = ?", (ids[-1],)
        )  # an integer, as a driver binds Date.now() / 1000
    url = sqlite_db.url
    compacted = cli("--db", url, "compact", "--all", "--json", *LIMITS)
    assert compacted.exit_code == 0, compacted.output
    assert json.loads(compacted.stdout)[0]["status"] == "compacted"
    shown = cli("--db", url, "context", "show", "1", "--json")
    assert shown.exit_code == 0, shown.output
    by_id = {m["id"]: m["created_at"] for m in json.loads(shown.stdout)["messages"]}
    assert by_id[ids[-1]] == "2023-11-14 22:14:59"
    for args in (
        ["context", "export", "1", "--format", "html"],
        ["context", "checkpoints", "1"],
        ["tokens", "report"],
        ["sessions", "list", "--over-window", "--json"],
        ["sessions", "list", "--since", "30d"],
        ["validate", "--json"],
    ):
        result = cli("--db", url, *args)
        assert result.exit_code == 0, (args, result.output)
        assert "internal error" not in result.output


def test_zero_dates_mariadb_keeps_read_as_no_time(mysql_db, cli):
    """MariaDB's default sql_mode stores '0000-00-00' (and turns '2026-02-31' into it); the
    driver hands it over as text, which export and `sessions list` took for a datetime."""
    ids = add_session(mysql_db, 1, coding_session(24), model="gpt-4o")
    with mysql_db.engine.begin() as conn:
        conn.exec_driver_sql("SET SESSION sql_mode = ''")
        conn.exec_driver_sql("UPDATE agent_session SET created_at = '0000-00-00 00:00:00'")
        conn.exec_driver_sql(
            f"UPDATE agent_message SET created_at = '2026-02-31 10:00:00' "
            f"WHERE id IN ({ids[0]}, {ids[-1]})"
        )
    assert mysql_db.scalar("SELECT COUNT(*) FROM agent_message WHERE created_at = 0") == 2
    url = mysql_db.url
    assert cli("--db", url, "compact", "1", *LIMITS).exit_code == 0
    shown = cli("--db", url, "context", "show", "1", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["messages"][-1]["created_at"] is None
    for args in (
        ["context", "export", "1", "--format", "html"],
        ["context", "export", "1"],
        ["sessions", "list"],
        ["sessions", "list", "--since", "30d", "--json"],
        ["tokens", "report"],
        ["validate"],
    ):
        result = cli("--db", url, *args)
        assert result.exit_code == 0 and "internal error" not in result.output, (
            args,
            result.output,
        )


def _two_checkpoints(db, first_cut: int, second_cut: int) -> tuple[list[int], int, int]:
    """A call (id A) whose result a notice separates from it, then two more turns; checkpoints
    cut at the ``first_cut``-th and ``second_cut``-th message (0-based)."""
    from ctxtool.db.schema import agent_compaction

    ids = add_session(
        db,
        1,
        [
            {"role": "user", "content": "q1"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "A", "type": "function", "function": {"name": "read", "arguments": "{}"}}
                ],
            },
            {"role": "user", "content": "(a notice the runtime wrote)"},
            {"role": "tool", "tool_call_id": "A", "content": "the result"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"},
            {"role": "assistant", "content": "a2"},
        ],
        model="gpt-4o",
    )
    with db.engine.begin() as conn:
        first = conn.execute(
            agent_compaction.insert().values(
                session_id=1,
                summary="first",
                first_kept_message_id=ids[first_cut],
                parent_compaction_id=0,
            )
        ).inserted_primary_key[0]
        second = conn.execute(
            agent_compaction.insert().values(
                session_id=1,
                summary="second",
                first_kept_message_id=ids[second_cut],
                parent_compaction_id=first,
            )
        ).inserted_primary_key[0]
    return ids, first, second


def test_validate_finds_a_tool_result_orphaned_in_an_earlier_context(db, cli):
    """The first checkpoint cut at a user message between a call and its result: while it was
    the latest, its context held the result without the call (`context show --at` sends it as
    a user message). The second checkpoint's cut is fine, so the restored context is valid."""
    ids, first, second = _two_checkpoints(db, 2, 5)
    shown = json.loads(cli("--db", db.url, "context", "show", "1", "--at", first, "--json").stdout)
    assert [(m["id"], m["kind"]) for m in shown["messages"] if m["kind"] != "message"] == [
        (None, "summary"),
        (ids[3], "orphan_result"),
    ]
    result = cli("--db", db.url, "validate", "--json")
    assert result.exit_code == 1, result.output
    [issue] = json.loads(result.stdout)
    assert (issue["rule"], issue["compaction_id"], issue["message_id"]) == (
        "orphan_tool_result",
        first,
        ids[3],
    )
    assert f"context checkpoint {first} restored to (until checkpoint {second}" in issue["message"]

    def cut_at(checkpoint, message):
        with db.engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE agent_compaction SET first_kept_message_id = :m WHERE id = :c"),
                {"m": message, "c": checkpoint},
            )

    cut_at(first, ids[1])  # it keeps the call: nothing to report
    assert cli("--db", db.url, "validate", "--json").stdout.strip() == "[]"
    cut_at(first, ids[2])
    cut_at(second, ids[2])  # orphaned in both contexts: named once, by the restored one
    issues = json.loads(cli("--db", db.url, "validate", "--json").stdout)
    assert [
        (i["rule"], i["compaction_id"], i["message_id"]) for i in issues if i["severity"] == "error"
    ] == [("orphan_tool_result", None, ids[3])]


def test_a_message_of_no_chat_role_is_sent_as_a_user_message_and_reported(db, cli):
    """A runtime writes the role column itself: a legacy `function`, an empty or made-up role
    would make an API refuse the whole list. Every OpenAI-style output sends such a message as
    a user message saying what it was, counts it as sent (not by its stored count), and
    `validate` warns about it. Two calls of one id in one message are an error."""
    from ctxtool.core.records import FOREIGN_ROLE_PREFIX

    from .test_inspect_cli import chat_completions_errors

    ids = add_session(
        db,
        1,
        [
            {"role": "user", "content": "hi"},
            {"role": "function", "content": "legacy", "name": "bash"},
            {"role": "weirdrole", "content": "w"},
            {"role": "", "content": None},
            {"role": "assistant", "content": "done"},
            {"role": "developer", "content": "be brief"},
        ],
        model="gpt-4o",
    )
    sent = json.loads(cli("--db", db.url, "context", "show", "1", "--openai").stdout)
    assert chat_completions_errors(sent) == []
    assert [m["role"] for m in sent] == ["user"] * 4 + ["assistant", "developer"]
    assert [m["content"] for m in sent[1:4]] == [
        FOREIGN_ROLE_PREFIX.format(role="function") + "legacy",
        FOREIGN_ROLE_PREFIX.format(role="weirdrole") + "w",
        FOREIGN_ROLE_PREFIX.format(role=""),
    ]
    shown = json.loads(cli("--db", db.url, "context", "show", "1", "--json").stdout)
    assert [(m["id"], m["kind"]) for m in shown["messages"] if m["kind"] == "foreign_role"] == [
        (i, "foreign_role") for i in ids[1:4]
    ]
    human = cli("--db", db.url, "context", "show", "1", "--full").output
    assert (
        "stored with role 'weirdrole', which is not a chat role (sent as a user message)" in human
    )
    # Stored counts (made of the message as stored) do not apply to what is sent instead.
    before = shown["context_tokens"]
    assert cli("--db", db.url, "tokens", "count", "--all").exit_code == 0
    assert (
        json.loads(cli("--db", db.url, "context", "show", "1", "--json").stdout)["context_tokens"]
        == before
    )
    result = cli("--db", db.url, "validate", "--json")
    assert result.exit_code == 0, result.output  # warnings alone
    assert [(i["rule"], i["severity"], i["message_id"]) for i in json.loads(result.stdout)] == [
        ("unknown_role", "warning", i) for i in ids[1:4]
    ]

    call = {"id": "k", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    twice = add_session(
        db,
        2,
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call, call]},
            {"role": "tool", "content": "ok", "tool_call_id": "k"},
            {"role": "assistant", "content": "done"},
        ],
        model="gpt-4o",
    )
    result = cli("--db", db.url, "validate", "2", "--json")
    assert result.exit_code == 1, result.output
    [issue] = json.loads(result.stdout)
    assert (issue["rule"], issue["severity"], issue["message_id"]) == (
        "duplicate_tool_call_id",
        "error",
        twice[1],
    )
    assert "with id 'k'" in issue["message"]
    # A result stored without a call id is named as such, never "None".
    add_session(db, 3, [{"role": "user", "content": "go"}, {"role": "tool", "content": "out"}])
    human = cli("--db", db.url, "context", "show", "3", "--full").output
    assert "result of call with no recorded id, whose call is not in this context" in human
    assert "None" not in human


def test_validate_reports_checkpoints_of_a_session_that_does_not_exist(db, cli):
    from ctxtool.db.schema import agent_compaction

    ids = add_session(db, 1, [{"role": "user", "content": "q1"}, {"role": "user", "content": "q2"}])
    with db.engine.begin() as conn:
        ghost = conn.execute(
            agent_compaction.insert().values(
                session_id=99, summary="s", first_kept_message_id=ids[1], parent_compaction_id=0
            )
        ).inserted_primary_key[0]
    result = cli("--db", db.url, "validate", "--json")
    assert result.exit_code == 1, result.output
    [issue] = json.loads(result.stdout)
    assert (issue["session_id"], issue["rule"], issue["compaction_id"]) == (
        99,
        "session_missing",
        ghost,
    )
    assert "no agent_session row" in issue["message"]
    result = cli("--db", db.url, "validate")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "1 session(s) checked: 1 error(s), 0 warning(s)" in result.output
    # Asked for by its id, the session without a row is the same finding, not "does not exist".
    result = cli("--db", db.url, "validate", "99", "--json")
    assert result.exit_code == 1, result.output
    [issue] = json.loads(result.stdout)
    assert (issue["session_id"], issue["rule"], issue["compaction_id"]) == (
        99,
        "session_missing",
        ghost,
    )
    assert cli("--db", db.url, "validate", "1", "--json").stdout.strip() == "[]"
    for unknown in ("98", "nope"):  # no row and no checkpoint: still unknown
        result = cli("--db", db.url, "validate", unknown)
        assert result.exit_code == 1 and f"session {unknown} does not exist" in result.output
    # What the finding asks for: remove what outlived the session row, and only that.
    assert "remove them with `ctxtool sessions delete 99 --yes`" in issue["message"]
    result = cli("--db", db.url, "sessions", "delete", "99", "--json")
    assert result.exit_code == 2 and json.loads(result.stdout) == [
        {"session_id": 99, "source": None, "messages": 0, "checkpoints": 1}
    ]
    result = cli("--db", db.url, "sessions", "delete", "99", "--yes")
    assert result.exit_code == 0, result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction WHERE session_id = 99") == 0
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE session_id = 1") == 2
    assert cli("--db", db.url, "validate", "--json").stdout.strip() == "[]"
    result = cli("--db", db.url, "sessions", "delete", "99", "--yes")
    assert result.exit_code == 1 and "session 99 does not exist" in result.output


def _checkpoints_at_times(db, times: dict[int, str], second_at: str) -> None:
    """Session 1: ten messages; checkpoint 1 cuts at 3, checkpoint 2 (written at ``second_at``)
    at 5. ``times`` are the messages' created_at as a runtime wrote them."""
    import sqlalchemy as sa

    from ctxtool.db.schema import agent_compaction

    add_session(
        db,
        1,
        [{"role": ("user", "assistant")[i % 2], "content": f"m{i + 1}"} for i in range(10)],
        model="gpt-4o",
    )
    with db.engine.begin() as conn:
        for message_id, text in times.items():  # as written, not as ctxtool would write it
            conn.execute(
                sa.text("UPDATE agent_message SET created_at = :t WHERE id = :i"),
                {"t": text, "i": message_id},
            )
        for cid, cut in ((1, 3), (2, 5)):
            conn.execute(
                agent_compaction.insert().values(
                    id=cid,
                    session_id=1,
                    summary=f"s{cid}",
                    first_kept_message_id=cut,
                    parent_compaction_id=cid - 1,
                )
            )
        conn.execute(
            sa.text("UPDATE agent_compaction SET created_at = :t WHERE id = 2"), {"t": second_at}
        )


def _ids_at(cli, db, *args) -> list[int]:
    result = cli("--db", db.url, "context", "show", "1", *args, "--json")
    assert result.exit_code == 0, result.output
    return [m["id"] for m in json.loads(result.stdout)["messages"] if m["id"] is not None]


def test_context_at_a_checkpoint_reads_times_in_every_shape(sqlite_db, cli):
    """--at compared SQLite's created_at as text: a message a runtime stored as
    '2026-12-01T09:46…' sorted after the next checkpoint's '2026-12-01 10:42…', and an epoch
    or an offset was compared by its characters, so the view lost messages it held. Messages
    5-10 were kept by checkpoint 2 (10:42 UTC): those written by then belong to checkpoint 1's
    context, the rest do not."""
    _checkpoints_at_times(
        sqlite_db,
        {
            1: "2026-12-01 08:00:00",
            2: "2026-12-01 08:01:00",
            3: "2026-12-01 09:00:00",
            4: "2026-12-01 09:01:00",
            5: "2026-12-01T09:46:10.5",  # T: sorted after '2026-12-01 10:42' as text
            6: "2026-12-01T09:46:20Z",
            7: "1764582400",  # epoch seconds: 2025-12-01 09:46:40
            8: "2026-12-01T12:00:00+02:00",  # 10:00 UTC: sorted after 10:42 as text
            9: "2026-12-01T11:00:00",  # after checkpoint 2
            10: "1796122800000",  # epoch ms: 2026-12-01 11:00 UTC, after
        },
        "2026-12-01 10:42:00.000000",
    )
    assert _ids_at(cli, sqlite_db, "--at", "1") == [3, 4, 5, 6, 7, 8]
    assert _ids_at(cli, sqlite_db) == [5, 6, 7, 8, 9, 10]  # the latest: everything after its cut
    # sessions list --since compared the same way: the newest message's time in another shape.
    with sqlite_db.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE agent_message SET created_at = '2026-12-01T09:46:00Z' "
            "WHERE id = (SELECT MAX(id) FROM agent_message)"
        )
    for since, listed in (("2026-12-01T10:00", []), ("2026-12-01T09:00", [1])):
        result = cli("--db", sqlite_db.url, "sessions", "list", "--since", since, "--json")
        assert result.exit_code == 0, result.output
        assert [r["session_id"] for r in json.loads(result.stdout)] == listed, since


def test_context_at_a_checkpoint_whose_time_is_a_zero_date(mysql_db, cli):
    """A next checkpoint with no time (MariaDB's 0000-00-00) cannot bound what was written by
    then: its kept messages are in the context (the SQL compared with NULL and dropped them)."""
    with mysql_db.engine.begin() as conn:
        conn.exec_driver_sql("SET SESSION sql_mode = ''")
    _checkpoints_at_times(mysql_db, {}, "2026-12-01 10:42:00")
    with mysql_db.engine.begin() as conn:
        conn.exec_driver_sql("SET SESSION sql_mode = ''")
        conn.exec_driver_sql(
            "UPDATE agent_compaction SET created_at = '0000-00-00 00:00:00' WHERE id = 2"
        )
        conn.exec_driver_sql("UPDATE agent_message SET created_at = '2026-12-01 09:00:00'")
    assert _ids_at(cli, mysql_db, "--at", "1") == list(range(3, 11))


def test_a_tool_result_stored_without_a_call_id_never_says_none(db, cli):
    """Found by review: "Result of tool call None" went to the API, "answers call None" to validate."""
    add_session(
        db,
        1,
        [
            {"role": "user", "content": "go"},
            {"role": "tool", "content": "res", "tool_call_id": None},
        ],
    )
    result = cli("--db", db.url, "context", "show", "1", "--openai")
    assert result.exit_code == 0, result.output
    messages = (
        json.loads(result.stdout)["messages"]
        if result.stdout.lstrip().startswith("{")
        else json.loads(result.stdout)
    )
    resent = [m for m in messages if "res" in (m.get("content") or "")]
    assert resent[0]["role"] == "user" and "None" not in resent[0]["content"]
    assert resent[0]["content"].startswith("Result of tool call with no recorded id")
    result = cli("--db", db.url, "validate", "--json")
    [issue] = [i for i in json.loads(result.stdout) if i["rule"] == "orphan_tool_result"]
    assert "None" not in issue["message"] and "a call with no recorded id" in issue["message"]


def test_validate_pairs_reused_call_ids_as_the_restored_context_does(db, cli):
    """A runtime reusing a call id in a later turn: each result answers the latest earlier call
    of its id still without one, in validate as in what is sent (a result of an id already
    answered is resent as a user message, a later call of it without result is unanswered)."""

    def call(text):
        return {
            "role": "assistant",
            "content": text,
            "tool_calls": [
                {"id": "A", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        }

    def result(text):
        return {"role": "tool", "content": text, "tool_call_id": "A"}

    ids = add_session(
        db,
        1,
        [
            {"role": "user", "content": "go"},
            call("one"),
            result("r1"),
            call("two"),
            result("r2"),
            result("r2 again"),
            call("three"),
            {"role": "user", "content": "and now?"},
        ],
    )
    issues = json.loads(cli("--db", db.url, "validate", "--json").stdout)
    assert sorted((i["rule"], i["message_id"]) for i in issues) == [
        ("duplicate_tool_result", ids[5]),
        ("unanswered_tool_call", ids[6]),
    ]
    sent = json.loads(cli("--db", db.url, "context", "show", "1", "--openai").stdout)
    sent = sent["messages"] if isinstance(sent, dict) else sent
    resent = [m for m in sent if "r2 again" in (m.get("content") or "")]
    assert resent[0]["role"] == "user"  # what validate warned of
    assert (
        sum(
            1
            for m in sent
            if m["role"] == "tool" and m["content"] == "No result was recorded for this tool call."
        )
        == 1
    )  # call three's, what it warned of


# -- context show, streamed (#32: 10,000 tool calls took 8.2 s and 1.8 GB, 1M messages 45 s) --


def _shown_whole(view, widths, checkpoints):
    """What `context show` printed when it built the whole view: the reference the streamed
    output must equal (the table at each of ``widths``)."""
    from ctxtool.context_text import render_table, render_text
    from ctxtool.export import render_html, render_jsonl, render_markdown
    from ctxtool.output import dumps

    return {
        **{("table", w): render_table(view, w) for w in widths},
        "markdown": render_markdown(view),
        "jsonl": render_jsonl(view),
        "html": render_html(view, checkpoints),
        "full": render_text(view),
        "json": dumps(view.document()),
        "openai": dumps([i.openai for i in view.items]),
    }


def _shown_streamed(stream, widths, checkpoints):
    from ctxtool.context_text import json_lines, openai_lines, table_lines, text_lines
    from ctxtool.export import html_pieces, jsonl_lines, markdown_lines

    return {
        **{("table", w): "\n".join(table_lines(stream, w)) for w in widths},
        "markdown": "\n".join(markdown_lines(stream)) + "\n",
        "jsonl": "".join(jsonl_lines(stream)),
        "html": "".join(html_pieces(stream, checkpoints)),
        "full": "\n".join(text_lines(stream)),
        "json": "".join(json_lines(stream)),
        "openai": "".join(openai_lines(stream)),
    }


def test_streamed_context_show_equals_the_whole_view_on_every_shared_transcript(sqlite_db, cli):
    """Every session of the shared transcripts, at every checkpoint and before the first,
    through pages of 16 messages (results moved across a page, synthetic results, orphans):
    table (whole, narrow), --full, --json, --openai, Markdown and JSONL are the text they were."""
    from ctxtool.store.reads import SessionHistory

    from .conftest import TRANSCRIPTS

    assert cli("--db", sqlite_db.url, "import", str(TRANSCRIPTS)).exit_code == 0
    store = Store(sqlite_db.engine)
    points = 0
    for sid in store.session_ids():
        history = SessionHistory(store, sid)
        for at, before in [(None, False), (None, True)] + [
            (c.id, False) for c in history.compactions
        ]:
            view = history.view(at, before)
            stream = stream_context(history, at, before, page_entries=16)
            widths = (
                None,
                40,
            )  # the fitter at every width: test_streamed_table_fits_as_fit_table_does
            shown = _shown_streamed(stream, widths, history.compactions)
            assert shown == _shown_whole(view, widths, history.compactions), (sid, at)
            points += 1
    assert points > 20


def test_a_call_with_more_moved_results_than_a_page_streams_as_the_whole_view(sqlite_db):
    """One assistant message calling 7 tools, whose results are recorded after the agent's
    next message (so each is moved up to its call), read through pages of 2: the 7 moved
    results are fetched a page's worth of ids at a time, and the text is the whole view's."""
    from ctxtool.store.reads import SessionHistory

    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        for i in range(7)
    ]
    messages = [
        {"role": "user", "content": "list everything"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "assistant", "content": "waiting for the tools"},
    ] + [{"role": "tool", "content": f"out {i}", "tool_call_id": f"c{i}"} for i in range(7)]
    add_session(sqlite_db, 1, messages, model="gpt-4o")
    history = SessionHistory(Store(sqlite_db.engine), 1)
    stream = stream_context(history, None, False, page_entries=2)
    shown = _shown_streamed(stream, (None,), history.compactions)
    assert shown == _shown_whole(history.view(None, False), (None,), history.compactions)
    assert "out 6" in shown["full"]


def test_streamed_table_fits_as_fit_table_does():
    """The one-pass fitter against terminal.fit_table on cells whose ends hold whitespace
    (they change width when shortened), controls, long and empty cells, at many widths."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from ctxtool.context_text import StreamedTable
    from ctxtool.output import OutputFormat
    from ctxtool.terminal import fit_table

    headers = ["id", "role", "tokens", "tool", "content"]
    text = st.text(alphabet=" ab\t\n\x1b…é", max_size=40)
    row = st.fixed_dictionaries(
        {
            "id": st.none() | st.integers(0, 10**6),
            "role": st.sampled_from(["user", "assistant", "tool", " x "]),
            "tokens": st.integers(0, 10**5),
            "tool": st.none() | text,
            "content": text,
        }
    )

    @settings(max_examples=300, deadline=None)
    @given(st.lists(row, min_size=1, max_size=6), st.none() | st.integers(0, 120))
    def check(rows, width):
        table = StreamedTable(headers, ["content", "tool"])
        table.measure(rows)
        streamed = "\n".join(table.lines(rows, width))
        assert streamed == fit_table(rows, OutputFormat(), headers, width, ["content", "tool"])

    check()


def _long_session(db, messages: int, size: int) -> int:
    from ctxtool.db.schema import agent_message, agent_session

    with db.engine.begin() as conn:
        conn.execute(agent_session.insert().values(session_id=1, model="gpt-4o"))
        conn.execute(
            agent_message.insert(),
            [
                {"session_id": 1, "role": ("user", "assistant")[i % 2], "content": f"{i} " * size}
                for i in range(messages)
            ],
        )
    return 1


def test_context_show_holds_a_page_of_the_context_not_all_of_it(sqlite_db):
    """Each output of `context show` is written while its peak memory stays a fraction of
    the context's text: the whole view held it several times over (the table 2x, --json 4.7x),
    and fitted the table by rendering it at every width it tried."""
    import tracemalloc

    from ctxtool.context_text import json_lines, openai_lines, table_lines, text_lines
    from ctxtool.core.tokens import count_text
    from ctxtool.export import html_pieces, jsonl_lines, markdown_lines
    from ctxtool.store.reads import SessionHistory

    sid = _long_session(sqlite_db, 2000, 1000)
    with sqlite_db.engine.connect() as conn:
        text_bytes = conn.execute(
            sa.text("SELECT SUM(LENGTH(content)) FROM agent_message")
        ).scalar()
    assert text_bytes > 8_000_000
    history = SessionHistory(Store(sqlite_db.engine), sid)
    count_text(
        "loaded", stream_context(history).encoding
    )  # the encoding's tables are not the context's
    renders = (lambda s: table_lines(s, 160), text_lines, json_lines, openai_lines)
    for render in (*renders, markdown_lines, jsonl_lines, html_pieces):
        stream = stream_context(history, page_entries=100)
        written = 0
        tracemalloc.start()
        for piece in render(stream):
            written += len(piece)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert written > 2000 * 20
        assert peak < text_bytes / 3, (render, peak, text_bytes)


def test_show_header_lines_fit_the_terminal(db, cli):
    """Found by an adversarial run: at 80 columns `context show` printed a 99-character title
    line and a 137-character synthetic-results line. Header lines are wrapped to the width,
    under their value, and keep every word."""
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    title = "Refactor the payment module so that retries are idempotent and logged " * 2
    add_session(
        db,
        1,
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [call]},
            {"role": "user", "content": "and then?"},
        ],
        model="gpt-4o",
    )
    with db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE agent_session SET title = :t"), {"t": title.strip()})
    out = cli("--db", db.url, "context", "show", "1", env={"COLUMNS": "80"}).output
    header = out[: out.index("\n\n")].splitlines()
    assert max(len(line) for line in header) <= 80, out
    assert " ".join(w for line in header for w in line.split()).count("idempotent") == 2
    assert any(line.startswith("synthetic results:") for line in header), out
    continued = [line for line in header if line.startswith(" ")]
    assert len(continued) >= 2 and all(line.startswith(" " * 19) for line in continued)


def test_a_message_deleted_while_the_context_is_shown_is_one_error_line(sqlite_db):
    """context show reads its outline first and the text page by page: a session deleted in
    between (sessions delete, purge) ends the output with one line naming the session, never
    a KeyError (found in review)."""
    from ctxtool.context_text import text_lines
    from ctxtool.store.reads import SessionHistory

    sid = _long_session(sqlite_db, 40, 100)
    stream = stream_context(SessionHistory(Store(sqlite_db.engine), sid), page_entries=10)
    pieces = text_lines(stream)
    next(pieces)
    with sqlite_db.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM agent_message WHERE session_id = :s"), {"s": sid})
    with pytest.raises(CtxtoolError, match=f"session {sid} changed while it was shown"):
        list(pieces)


def test_show_wraps_the_system_prompt_and_the_summary_to_the_terminal(db, cli):
    """At 80 columns the system prompt and the summary under the header were printed as
    lines of 200 characters; they are wrapped to the width and keep every word, a list item's
    continuation under its text."""
    from ctxtool.db.schema import agent_compaction

    prompt = "You are a careful agent that explains what it changes and why. " * 3
    summary = "## Goal\n- " + "Make the payment retries idempotent and log each attempt. " * 3
    ids = add_session(
        db,
        1,
        [{"role": "user", "content": "go"}, {"role": "assistant", "content": "done"}],
        model="gpt-4o",
        system_prompt=prompt.strip(),
    )
    with db.engine.begin() as conn:
        conn.execute(
            agent_compaction.insert().values(
                session_id=1, summary=summary.strip(), first_kept_message_id=ids[1]
            )
        )
    out = cli("--db", db.url, "context", "show", "1", env={"COLUMNS": "80"}).output
    assert max(len(line) for line in out.splitlines()) <= 80, out
    head = out[: out.index("\nid ")]
    words = " ".join(w for line in head.splitlines() for w in line.split())
    assert " ".join(prompt.split()) in words
    assert " ".join(summary.split()) in words
    item = [line for line in head.splitlines() if "idempotent" in line]
    assert item[0].startswith("- ") and all(line.startswith("  ") for line in item[1:]), out
    piped = cli("--db", db.url, "context", "show", "1", "--width", "0").output
    assert summary.strip().splitlines()[1] in piped  # no width: as stored


def test_export_writes_every_format_a_page_at_a_time_and_whole_or_nothing(db, cli, tmp_path):
    """`context export` of Markdown, JSONL and HTML is streamed (the text of the whole view,
    read a page at a time); a file is written whole or not at all, with the mode a plain write
    gives."""
    import os

    from ctxtool.cli.context import write_whole
    from ctxtool.core.plan import CompactionSettings
    from ctxtool.export import render_html, render_jsonl, render_markdown
    from ctxtool.store.chart import session_chart
    from ctxtool.store.reads import SessionHistory

    sid = _long_session(db, 1200, 3)
    view = SessionHistory(Store(db.engine), sid).view()
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "s.md"
    result = cli("--db", db.url, "context", "export", str(sid), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8") == render_markdown(view)
    assert out.stat().st_mode & 0o777 == 0o666 & ~_umask()
    result = cli("--db", db.url, "context", "export", str(sid), "--format", "jsonl")
    assert result.stdout == render_jsonl(view)
    result = cli("--db", db.url, "context", "export", str(sid), "--format", "html")
    history = SessionHistory(Store(db.engine), sid)
    chart = session_chart(history, 128_000, CompactionSettings().threshold("gpt-4o"))
    assert result.stdout == render_html(view, history.compactions, chart)  # the chart on top
    result = cli("--db", db.url, "context", "export", str(sid), "--format", "html", "--no-chart")
    assert result.stdout == render_html(view, history.compactions)

    def broken():
        yield "half"
        raise CtxtoolError("session 1 changed while it was shown")

    with pytest.raises(CtxtoolError):
        write_whole(str(out), broken())
    assert out.read_text(encoding="utf-8") == render_markdown(view)  # the old file, whole
    assert os.listdir(out.parent) == ["s.md"]


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask
