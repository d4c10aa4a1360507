"""`context trace`, `context diff` and `tokens count` take the output options every command
that prints rows shares (issue #44): --json their whole document as before, --nl and --csv
their rows, --fmt their rows as a table; and their text for a person fits 80 columns. Through
the real entry point, on SQLite and MariaDB."""

from __future__ import annotations

import csv
import io
import json

from ctxtool.db.schema import agent_compaction as C

from .builders import add_session, coding_session

SUMMARY = (
    "## Goal\nFix the failing tests of src/mod0.py and src/mod1.py, one file after the other, "
    "without touching the public API of the package.\n\n## Done\n- read src/mod0.py"
)


def _store(db) -> list[int]:
    """A session of 4 turns, a runtime's checkpoint cut at the third turn's request."""
    ids = add_session(db, 1, coding_session(4), model="gpt-4o", system_prompt="Be careful.")
    with db.engine.begin() as conn:
        conn.execute(
            C.insert().values(
                session_id=1, summary=SUMMARY, first_kept_message_id=ids[8], parent_compaction_id=0
            )
        )
    return ids


def _csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_trace_prints_its_steps_as_rows(db, cli):
    ids = _store(db)
    args = ("--db", db.url, "context", "trace", "1", "ZeroDivisionError")
    doc = json.loads(cli(*args, "--json").stdout)
    assert [m["id"] for m in doc["appeared_in"]] == ids[2::4]  # the document as before
    rows = _csv(cli(*args, "--csv").stdout)
    assert [(r["step"], r["id"]) for r in rows] == [
        *(("appeared", str(i)) for i in ids[2::4]),
        ("checkpoint", str(doc["checkpoints"][0]["checkpoint_id"])),
    ]
    assert "holds it" in rows[-1]["says"]
    lines = cli(*args, "--nl").stdout.splitlines()
    assert [json.loads(line)["step"] for line in lines] == ["appeared"] * 4 + ["checkpoint"]
    table = cli(*args, "--fmt", "github", env={"COLUMNS": "80"}).stdout.splitlines()
    assert table[0].split("|")[1].strip() == "step" and len(table) == 2 + 5
    assert max(map(len, table)) <= 80
    human = cli(*args, env={"COLUMNS": "80"}).stdout.splitlines()
    assert human[0] == "session 1: ZeroDivisionError" and max(map(len, human)) <= 80


def test_a_trace_with_no_hit_is_a_header_and_exit_1(db, cli):
    _store(db)
    found = cli("--db", db.url, "context", "trace", "1", "no such words", "--csv")
    assert found.exit_code == 1 and found.stdout == "step,id,role,created_at,says\n"


def test_diff_prints_the_messages_it_summarized_as_rows(db, cli):
    ids = _store(db)
    args = ("--db", db.url, "context", "diff", "1")
    doc = json.loads(cli(*args, "--json").stdout)
    assert doc["cut_to"] == ids[8] and len(doc["summary_diff"]) > 3
    rows = _csv(cli(*args, "--csv").stdout)
    assert [int(r["id"]) for r in rows] == ids[:8]
    assert list(rows[0]) == ["id", "role", "created_at", "token_count"]
    nl = [json.loads(line) for line in cli(*args, "--nl").stdout.splitlines()]
    assert [r["role"] for r in nl] == ["user", "assistant", "tool", "assistant"] * 2
    human = cli(*args, env={"COLUMNS": "80"}).stdout.splitlines()
    assert "+## Goal" in human and max(map(len, human)) <= 80


def test_tokens_count_prints_its_encodings_as_rows(db, cli):
    _store(db)
    args = ("--db", db.url, "tokens", "count", "--all")
    assert _csv(cli(*args, "--csv").stdout) == [{"encoding": "o200k_base", "messages": "16"}]
    recounted = cli(*args, "--recount", "--nl").stdout.splitlines()
    assert [json.loads(line) for line in recounted] == [{"encoding": "o200k_base", "messages": 16}]
    doc = json.loads(cli(*args, "--recount", "--json").stdout)
    assert doc["messages_counted"] == 16 and doc["by_encoding"] == {"o200k_base": 16}


def test_one_output_format_at_a_time(sqlite_db, cli):
    for command in (["context", "trace", "1", "x"], ["context", "diff", "1"], ["tokens", "count"]):
        refused = cli("--db", sqlite_db.url, *command, "--json", "--csv")
        assert refused.exit_code == 2 and "choose one of --json, --nl, --csv" in refused.output
