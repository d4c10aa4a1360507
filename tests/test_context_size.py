"""Which restored contexts are over their threshold, as `compact --all`, `sessions list
--over-window` and `validate` see them, when the stored counts are not the whole story: counts
made with another encoding than the model's, results the context adds for unanswered calls, a
summary whose stored count is wrong, messages nobody counted yet. MariaDB and SQLite, through
the real CLI; every figure is checked against the exact count of the restored context."""

from __future__ import annotations

import json

from ctxtool.db.schema import agent_compaction
from ctxtool.store import Store

from .builders import add_session, history_fingerprint

# A window of 32,000 less 3,000: a threshold of 29,000.
WINDOW = ["--context-window", "32000", "--reserve-tokens", "3000"]
THRESHOLD = 29_000
# Cyrillic text: about 1.5 times as many tokens under cl100k_base (gpt-4) as under o200k_base.
RUSSIAN = "Привет, как дела? Это тестовое сообщение о базе данных. " * 40


def conversation(n: int = 40) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": RUSSIAN} for i in range(n)]


def over(cli, db, *window) -> dict[str, object]:
    """What each command reports over threshold: {command: figure(s)} (writes nothing)."""
    compact = cli(
        "--db",
        db.url,
        "compact",
        "--all",
        "--dry-run",
        "--summarizer",
        "extractive",
        *window,
        "--json",
    )
    listed = cli("--db", db.url, "sessions", "list", "--over-window", *window, "--json")
    checked = cli("--db", db.url, "validate", *window, "--json")
    for result in (compact, listed, checked):
        assert "Traceback" not in result.output and result.exit_code in (0, 1), result.output
    return {
        "compact": {r["session_id"]: r["tokens_before"] for r in json.loads(compact.stdout)},
        "list": {r["session_id"]: r["context_tokens"] for r in json.loads(listed.stdout)},
        "validate": sorted(
            i["session_id"] for i in json.loads(checked.stdout) if i["rule"] == "over_window"
        ),
    }


def test_counts_made_with_another_encoding_are_not_taken_as_exact(db, cli):
    """`compact N --encoding o200k_base` on a gpt-4 session stores o200k counts; every later
    run without --encoding must count what gpt-4 reads (cl100k_base), both ways."""
    add_session(db, 1, conversation(), model="gpt-4")
    add_session(db, 2, conversation(), model="gpt-4o")
    assert (
        cli(
            "--db",
            db.url,
            "compact",
            "1",
            "--encoding",
            "o200k_base",
            "--summarizer",
            "extractive",
            *WINDOW,
        ).exit_code
        == 0
    )  # below threshold in o200k: counts stored
    assert cli("--db", db.url, "tokens", "count", "2", "--encoding", "cl100k_base").exit_code == 0
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE token_count IS NULL") == 0
    store = Store(db.engine)
    exact = {sid: store.context_tokens(sid) for sid in (1, 2)}
    stored = {
        sid: db.scalar("SELECT SUM(token_count) FROM agent_message WHERE session_id = :s", s=sid)
        for sid in (1, 2)
    }
    assert stored[1] < THRESHOLD < exact[1] and exact[2] < THRESHOLD < stored[2]

    before = (
        history_fingerprint(db),
        db.rows("SELECT id, token_count, token_encoding FROM agent_message ORDER BY id"),
    )
    assert over(cli, db, *WINDOW) == {
        "compact": {1: exact[1]},
        "list": {1: exact[1]},
        "validate": [1],
    }
    assert (
        history_fingerprint(db),
        db.rows("SELECT id, token_count, token_encoding FROM agent_message ORDER BY id"),
    ) == before

    result = cli(
        "--db",
        db.url,
        "compact",
        "--all",
        "--summarizer",
        "extractive",
        *WINDOW,
        "--keep-recent-tokens",
        "5000",
        "--json",
    )
    assert [(r["session_id"], r["status"]) for r in json.loads(result.stdout)] == [(1, "compacted")]
    # The real run stored counts in the encodings the models need.
    assert db.rows(
        "SELECT DISTINCT session_id, token_encoding FROM agent_message ORDER BY session_id"
    ) == [
        {"session_id": 1, "token_encoding": "cl100k_base"},
        {"session_id": 2, "token_encoding": "o200k_base"},
    ]


def test_results_added_for_unanswered_calls_count(db, cli):
    """A turn whose 150 tool calls never got results: the restored context answers each with a
    placeholder result, and those are sent too."""
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        for i in range(150)
    ]
    add_session(
        db,
        1,
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "user", "content": "never mind, stop"},
            {"role": "assistant", "content": "ok"},
        ],
        model="gpt-4o",
    )
    assert cli("--db", db.url, "tokens", "count", "--all").exit_code == 0
    window = ["--context-window", "2000", "--reserve-tokens", "290"]
    exact = Store(db.engine).context_tokens(1)
    assert db.scalar("SELECT SUM(token_count) FROM agent_message") < 1710 < exact
    assert over(cli, db, *window) == {"compact": {1: exact}, "list": {1: exact}, "validate": [1]}


def test_a_summary_whose_stored_count_is_wrong_is_measured(db, cli):
    """A runtime wrote its checkpoint with summary_tokens 0 (then 5) on a summary of 2,800
    tokens: the stored figure is no bound on what the summary costs."""
    ids = add_session(
        db,
        1,
        [
            {"role": "user", "content": "old"},
            {"role": "user", "content": "new request"},
            {"role": "assistant", "content": "ok"},
        ],
        model="gpt-4o",
    )
    with db.engine.begin() as conn:
        conn.execute(
            agent_compaction.insert().values(
                session_id=1,
                summary="The user asked for many things. " * 400,
                first_kept_message_id=ids[1],
                parent_compaction_id=0,
                summary_tokens=0,
            )
        )
    assert cli("--db", db.url, "tokens", "count", "--all").exit_code == 0
    window = ["--context-window", "2048", "--reserve-tokens", "500"]
    exact = Store(db.engine).context_tokens(1)
    assert exact > 1548
    assert over(cli, db, *window) == {"compact": {1: exact}, "list": {1: exact}, "validate": [1]}
    with db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE agent_compaction SET summary_tokens = 5")
    assert over(cli, db, *window) == {"compact": {1: exact}, "list": {1: exact}, "validate": [1]}


def test_validate_measures_messages_nobody_counted_yet(db, cli):
    """40 sessions as a runtime writes them (no token counts), 36 over a 3,500 threshold:
    validate finds the same 36 before `tokens count --all` as after, and writes nothing."""
    text = "word " * 2000
    for sid in range(1, 41):
        add_session(
            db,
            sid,
            [
                {"role": "user", "content": text},
                {"role": "assistant", "content": text if sid <= 36 else "ok"},
            ],
            model="gpt-4o",
        )
    window = ["--context-window", "4000", "--reserve-tokens", "500"]
    before = history_fingerprint(db)
    found = []
    for _ in range(2):
        result = cli("--db", db.url, "validate", *window, "--json")
        assert result.exit_code == 0, result.output  # warnings: waiting for compaction
        found.append(json.loads(result.stdout))
        assert (
            db.scalar("SELECT COUNT(*) FROM agent_message WHERE token_count IS NOT NULL") == 0
            or len(found) == 2
        )  # the first run wrote nothing
        assert cli("--db", db.url, "tokens", "count", "--all").exit_code == 0
    assert history_fingerprint(db) == before
    assert [i["session_id"] for i in found[0]] == list(range(1, 37))
    assert found[0] == found[1]
    exact = Store(db.engine).context_tokens(1)
    assert f"restored context of {exact} tokens" in found[0][0]["message"]


def test_calls_and_results_that_may_not_answer_each_other_are_measured(db, cli):
    """The finder's sums count calls and results since the cut, not which answers which. One
    unanswered call among answered ones (a placeholder no stored count holds) makes calls and
    results differ: measured exactly. Eight calls and eight results answering other ids are
    equal in number: the sums bound what mispaired pairs could add, so a session within that
    bound of its threshold is measured too (the restored context sends 8 placeholders and 8
    resend prefixes). validate names both faults."""
    call = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    add_session(
        db,
        1,
        [
            {"role": "user", "content": "x " * 3000},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "user", "content": "go on"},
        ],
        model="gpt-4o",
    )
    calls = [{**call, "id": f"call_{i}"} for i in range(8)]
    add_session(
        db,
        2,
        [
            {"role": "user", "content": " ".join(f"w{i}" for i in range(1500))},
            {"role": "assistant", "content": "x", "tool_calls": calls},
            *({"role": "tool", "tool_call_id": f"other_{i}", "content": "r"} for i in range(8)),
        ],
        model="gpt-4o",
    )
    assert cli("--db", db.url, "tokens", "count", "--all").exit_code == 0
    store = Store(db.engine)
    for sid in (1, 2):
        exact = store.context_tokens(sid)
        stored = db.scalar(
            "SELECT SUM(token_count) FROM agent_message WHERE session_id = :s", s=sid
        )
        middle = (stored + exact) // 2
        assert stored < middle < exact
        window = ["--context-window", str(middle), "--reserve-tokens", "0"]
        found = over(cli, db, *window)
        assert found["compact"].get(sid) == exact and found["list"].get(sid) == exact, found
        assert sid in found["validate"]
    checked = cli("--db", db.url, "validate", "--session", "2", "--json")
    assert {i["rule"] for i in json.loads(checked.stdout)} >= {
        "orphan_tool_result",
        "unanswered_tool_call",
    }
