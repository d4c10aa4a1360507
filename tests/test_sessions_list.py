"""`sessions list`: search, model, since, over-window and limit filters; the table fits the
terminal, --json keeps every value whole. MariaDB and SQLite, through the real CLI."""

from __future__ import annotations

import json

from .builders import add_session, coding_session
from .test_inspect_cli import run

NEWEST = "2030-01-02 03:04:05"
LONG_TITLE = "Refactor the payment module so that retries are idempotent " * 4


def three_sessions(db):
    add_session(db, 1, coding_session(2), model="gpt-4o")
    add_session(
        db,
        2,
        [
            {"role": "user", "content": "Please migrate the ORDERS_2024 table"},
            {"role": "assistant", "content": "Done."},
        ],
        model="claude-sonnet-4-5",
    )
    add_session(db, 3, coding_session(12), model="claude-opus-4-1")
    with db.engine.begin() as conn:
        conn.exec_driver_sql(
            f"UPDATE agent_session SET title = '{LONG_TITLE}', source_format = "
            "'claude-code', source_id = 'fe5e1c67-53e7-4862-81ae-d0e013e3270b' "
            "WHERE session_id = 3"
        )
        # Session 1: imported today from an old transcript (its messages are from 2025).
        # Session 2: created long ago, active last (its newest message is the newest of all).
        conn.exec_driver_sql(
            "UPDATE agent_message SET created_at = '2025-03-04 05:06:07' WHERE session_id = 1"
        )
        conn.exec_driver_sql(
            "UPDATE agent_session SET created_at = '2025-01-02 03:04:05' WHERE session_id = 2"
        )
        newest = conn.exec_driver_sql(
            "SELECT MAX(id) FROM agent_message WHERE session_id = 2"
        ).scalar()
        conn.exec_driver_sql(
            f"UPDATE agent_message SET created_at = '{NEWEST}' WHERE id = {newest}"
        )


def ids(cli, db, *args):
    return [
        r["session_id"]
        for r in json.loads(run(cli, db, "sessions", "list", *args, "--json").output)
    ]


def test_filters(db, cli):
    three_sessions(db)
    assert ids(cli, db) == [3, 2, 1]  # the newest first
    assert ids(cli, db, "--sort", "last-activity") == [2, 3, 1]  # the most recently active
    assert ids(cli, db, "--search", "orders_2024") == [2]  # first request, case-insensitive
    assert ids(cli, db, "--search", "IDEMPOTENT") == [3]  # title
    assert ids(cli, db, "--search", "fe5e1c67") == [3]  # source id
    assert ids(cli, db, "--search", "src/mod0.py") == [3, 1]
    assert ids(cli, db, "--search", "src/mod1.py") == []  # only the first request is searched
    assert ids(cli, db, "--search", "100%") == []  # LIKE wildcards are literal
    assert ids(cli, db, "--model", "claude") == [3, 2]
    assert ids(cli, db, "--model", "gpt-4o") == [1]
    # Active since (their newest message), not created or imported since.
    assert ids(cli, db, "--since", "2026-01-01") == [3, 2]
    assert ids(cli, db, "--since", "2026-01-01", "--sort", "last-activity") == [2, 3]
    assert ids(cli, db, "--since", "2029-12-31") == [2]
    assert ids(cli, db, "--since", "3650d") == [3, 2, 1]
    assert ids(cli, db, "--limit", "2") == [3, 2]
    assert ids(cli, db, "--limit", "2", "--sort", "last-activity") == [2, 3]
    assert ids(cli, db, "--sort", "id", "--limit", "2") == [3, 2]
    assert ids(cli, db, "--sort", "id", "--since", "2026-01-01") == [3, 2]
    result = run(cli, db, "sessions", "list", "--since", "yesterday", code=2)
    assert "neither a date/time" in result.output


def test_last_activity_and_sort_orders(db, cli):
    three_sessions(db)
    rows = json.loads(run(cli, db, "sessions", "list", "--json").output)
    by_id = {r["session_id"]: r for r in rows}
    assert by_id[2]["last_activity"].replace("T", " ").startswith("2030-01-02 03:04:05")
    assert by_id[1]["last_activity"].replace("T", " ").startswith("2025-03-04 05:06:07")
    assert by_id[2]["created_at"].replace("T", " ").startswith("2025-01-02 03:04:05")
    assert by_id[3]["last_message_id"] > by_id[2]["last_message_id"]  # ids are not times
    assert [by_id[i]["messages"] for i in (1, 2, 3)] == [8, 2, 48]
    assert ids(cli, db, "--sort", "messages") == [3, 1, 2]
    tokens = json.loads(run(cli, db, "sessions", "list", "--sort", "tokens", "--json").output)
    assert [r["session_id"] for r in tokens] == [3, 1, 2]
    shown = json.loads(run(cli, db, "context", "show", "3", "--json").output)
    assert tokens[0]["context_tokens"] == shown["context_tokens"]
    assert tokens[0]["context_tokens"] > tokens[1]["context_tokens"] > tokens[2]["context_tokens"]
    # A session without messages was last active when it was created.
    with db.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO agent_session (session_id, created_at) VALUES (9, '2028-05-06 07:08:09')"
        )
    assert ids(cli, db, "--sort", "last-activity") == [2, 9, 3, 1]
    table = run(cli, db, "sessions", "list", "--width", "0").output
    assert "last active" in table and "last msg" not in table
    assert "2030-01-02 03:04" in table and "2028-05-06 07:08" in table
    result = cli("--db", db.url, "sessions", "list", "--sort", "size")
    assert result.exit_code == 2 and "'size' is not one of" in result.output


def test_over_window(db, cli):
    three_sessions(db)
    rows = json.loads(
        run(
            cli,
            db,
            "sessions",
            "list",
            "--over-window",
            "--context-window",
            "3000",
            "--reserve-tokens",
            "500",
            "--json",
        ).output
    )
    assert [r["session_id"] for r in rows] == [3]
    assert rows[0]["context_tokens"] > rows[0]["threshold"] == 2500
    assert ids(cli, db, "--over-window") == []  # 128k/200k windows: nothing is over
    run(
        cli,
        db,
        "compact",
        "3",
        "--summarizer",
        "extractive",
        "--context-window",
        "3000",
        "--reserve-tokens",
        "500",
        "--keep-recent-tokens",
        "600",
    )
    assert (
        ids(cli, db, "--over-window", "--context-window", "3000", "--reserve-tokens", "500") == []
    )  # compacted: back under its threshold
    table = run(
        cli,
        db,
        "sessions",
        "list",
        "--over-window",
        "--context-window",
        "1200",
        "--reserve-tokens",
        "0",
    ).output
    assert "tokens" in table and "threshold" in table
    # The figure listed is the whole restored context, the summary and system prompt included,
    # as `context show` counts it: the batch's sums leave those out, and a session whose
    # counted messages alone are over is not measured further to be found.
    add_session(
        db,
        4,
        coding_session(12),
        model="gpt-4o",
        system_prompt="You are a careful coding agent. " * 60,
    )
    run(cli, db, "tokens", "count", "--all")
    [row] = [
        r
        for r in json.loads(
            run(
                cli,
                db,
                "sessions",
                "list",
                "--over-window",
                "--context-window",
                "1024",
                "--reserve-tokens",
                "0",
                "--json",
            ).output
        )
        if r["session_id"] == 4
    ]
    shown = json.loads(run(cli, db, "context", "show", "4", "--json").output)
    assert row["context_tokens"] == shown["context_tokens"] > 1024 + 300


def test_table_fits_the_terminal(db, cli):
    three_sessions(db)
    for columns, shown in (("80", "Refactor"), ("120", "Refactor the pay")):
        out = cli("--db", db.url, "sessions", "list", env={"COLUMNS": columns}).output
        assert max(len(line) for line in out.splitlines()) <= int(columns), out
        assert "…" in out and shown in out
        assert "last active" in out.splitlines()[0] or columns == "80"
    out = run(cli, db, "sessions", "list", "--width", "100").output
    assert max(len(line) for line in out.splitlines()) <= 100
    whole = run(cli, db, "sessions", "list", "--width", "0").output
    assert LONG_TITLE.strip() in whole
    [doc] = [
        r
        for r in json.loads(run(cli, db, "sessions", "list", "--json").output)
        if r["session_id"] == 3
    ]
    assert doc["title"] == LONG_TITLE.strip() or doc["title"] == LONG_TITLE
    assert doc["source"] == "claude-code:fe5e1c67-53e7-4862-81ae-d0e013e3270b"


def test_narrow_table_keeps_the_column_it_is_sorted_or_filtered_by(db, cli):
    """At 80 columns the optional time columns give way, but never the one the rows are
    sorted or filtered by: titles and sources are shortened instead."""
    three_sessions(db)
    for args in (["--sort", "last-activity"], ["--since", "2020-01-01"]):
        out = cli("--db", db.url, "sessions", "list", *args, env={"COLUMNS": "80"}).output
        assert "last active" in out.splitlines()[0], out
        assert max(len(line) for line in out.splitlines()) <= 80, out
        assert NEWEST[:16] in out


def test_context_table_fits_and_width_zero_is_whole(db, cli):
    add_session(db, 1, coding_session(2), model="gpt-4o")
    out = cli("--db", db.url, "context", "show", "1", env={"COLUMNS": "90"}).output
    table = out[out.index("id ") :].splitlines()
    assert max(len(line) for line in table[:-1]) <= 90
    whole = run(cli, db, "context", "show", "1", "--width", "0").output
    assert "line 39: value = compute(39)" in whole  # a 40-line tool result, whole, on one line
    assert "\\nline 1: value" in whole


def test_sessions_delete_needs_yes_and_removes_everything_in_one_go(db, cli):
    import json as _json

    from ctxtool.db.schema import agent_compaction

    from .builders import add_session

    ids = add_session(
        db, 1, [{"role": "user", "content": "wrong"}, {"role": "user", "content": "x"}]
    )
    add_session(db, 2, [{"role": "user", "content": "keep me"}])
    with db.engine.begin() as conn:
        conn.execute(
            agent_compaction.insert().values(
                session_id=1, summary="s", parent_compaction_id=0, first_kept_message_id=ids[1]
            )
        )
    result = cli("--db", db.url, "sessions", "delete", "1")
    assert result.exit_code == 2 and "add --yes" in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE session_id = 1") == 2
    result = cli("--db", db.url, "sessions", "delete", "1", "99", "--yes")
    assert result.exit_code == 1 and "99" in result.output  # unknown: nothing removed at all
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE session_id = 1") == 2
    result = cli("--db", db.url, "sessions", "delete", "1", "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert _json.loads(result.stdout) == [
        {"session_id": 1, "source": None, "messages": 2, "checkpoints": 1, "removed": True}
    ]
    assert db.scalar("SELECT COUNT(*) FROM agent_session WHERE session_id = 1") == 0
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE session_id = 1") == 0
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction WHERE session_id = 1") == 0
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE session_id = 2") == 1


def test_since_takes_the_same_ages_as_older_than_and_refuses_what_overflows(db, cli):
    from .builders import add_session

    add_session(db, 1, [{"role": "user", "content": "x"}])
    assert cli("--db", db.url, "sessions", "list", "--since", "2w").exit_code == 0
    for bad in ("5000000d", "１０m"):
        result = cli("--db", db.url, "sessions", "list", "--since", bad)
        assert result.exit_code == 2 and "invalid duration" in result.output, result.output
