"""`ctxtool eval` through the real click entry point, and `evaluate_checkpoint` through the
library, on SQLite and MariaDB."""

from __future__ import annotations

import json

from ctxtool.db.schema import agent_compaction
from ctxtool.evaluation.stored import evaluate_checkpoint
from ctxtool.store import Store

from .builders import add_session
from .conftest import TRANSCRIPTS
from .llm_server import FakeLLM


def call(call_id: str, name: str, **arguments) -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


SESSION = [
    {"role": "user", "content": "# AGENTS.md instructions for /repo\n\nUse us-<id> prefixes."},
    {"role": "user", "content": "Port render_jsonl.py to JavaScript as codex_log_viewer.js"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("c1", "Write", file_path="/repo/codex_log_viewer.js", content="x")],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "File created"},
    {"role": "user", "content": "never commit the session dumps!"},
    {"role": "assistant", "content": "Understood, the dumps stay out of git."},
    {
        "role": "user",
        "content": "now extract the css of codex_log_viewer.js into viewer.css, and never "
        "commit the session dumps",
    },
    {"role": "assistant", "content": "Extracting the css."},
]
GOOD = (
    "## Goal\nPort render_jsonl.py to JavaScript as codex_log_viewer.js\n\n"
    "## Files changed\n- /repo/codex_log_viewer.js\n\n"
    "## Current work\nUnderstood that the dumps stay out of git; codex_log_viewer.js is written."
)
INVENTED = "## Goal\nMigrate the storage layer to PostgreSQL."


def add_checkpoints(db) -> list[int]:
    """Two checkpoints cutting before the latest request: a good summary, then an invented one."""
    ids = add_session(db, 1, SESSION)
    parent = 0
    with db.engine.begin() as conn:
        for summary in (GOOD, INVENTED):
            parent = conn.execute(
                agent_compaction.insert().values(
                    session_id=1,
                    summary=summary,
                    first_kept_message_id=ids[6],
                    parent_compaction_id=parent,
                    summarizer="test",
                )
            ).inserted_primary_key[0]
    return ids


def test_eval_prints_every_probe_with_its_verdict_and_where_it_was_found(db, cli):
    ids = add_checkpoints(db)
    result = cli("--db", db.url, "eval", "1", "--at", "-2")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("Session 1, checkpoint 1 (test): 6 messages summarized, 2 kept")
    assert "score 100% by kind" in out and "0 fabrications" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[4:] if line[:1].isalpha()}
    assert rows["goal"][1:4] == ["yes", "summary", "yes"]
    assert rows["current_work"][1:4] == ["yes", "summary", "yes"]
    # The instruction is restated in a kept message: found there, not scored.
    assert rows["instruction_1"][1:7] == ["yes", "message", str(ids[6]), "no,", "kept", "verbatim"]
    header = out.splitlines()[3]
    assert "in score" in header and "looked for" in header  # columns read without the docs
    assert "Summary tokens by section: Goal" in out

    latest = cli("--db", db.url, "eval", "1")
    assert latest.exit_code == 0
    assert "score 0% by kind" in latest.stdout
    assert "identifier: PostgreSQL" in latest.stdout


def test_eval_json_and_the_library_agree(db, cli):
    add_checkpoints(db)
    result = cli("--db", db.url, "eval", "1", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    library = evaluate_checkpoint(Store(db.engine), 1).as_dict()
    assert doc == json.loads(json.dumps(library))
    assert doc["checkpoint_id"] == 2 and doc["score"] == 0.0
    assert doc["fabrications"] == [{"kind": "identifier", "text": "PostgreSQL"}]
    assert {v["id"] for v in doc["verdicts"]} >= {"goal", "latest_request", "instruction_1"}
    assert doc["section_tokens"]["Goal"] > 0
    # The probes as rows, as every command that prints rows offers them.
    rows = [
        json.loads(line) for line in cli("--db", db.url, "eval", "1", "--nl").stdout.splitlines()
    ]
    assert {r["probe"] for r in rows} == {v["id"] for v in doc["verdicts"]}
    assert cli("--db", db.url, "eval", "1", "--csv").stdout.startswith("probe,held,where,in score")


def test_eval_of_a_session_without_checkpoints_or_a_wrong_one_is_one_line(db, cli):
    add_session(db, 1, SESSION)
    result = cli("--db", db.url, "eval", "1")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: session 1 has no checkpoint to evaluate; `ctxtool compact` writes one"
    )
    missing = cli("--db", db.url, "eval", "1", "--at", "7")
    assert missing.exit_code == 1 and len(missing.stderr.strip().splitlines()) == 1
    assert "checkpoint 7 is not one of its checkpoints" in missing.stderr


def test_eval_with_a_judge_reports_its_answers(db, cli):
    add_checkpoints(db)
    with FakeLLM() as llm:
        # Answers what the context holds about the goal; grades by the reference's file name.
        llm.summary_text = lambda body: (
            "CORRECT"
            if "Candidate answer: Port" in body["messages"][1]["content"]
            else "Port render_jsonl.py"
            if "render_jsonl.py" in body["messages"][1]["content"].split("</context>")[0]
            else "NOT IN CONTEXT"
        )
        good = cli(
            "--db",
            db.url,
            "eval",
            "1",
            "--at",
            "-2",
            "--judge",
            "test-model",
            "--base-url",
            llm.base_url,
        )
        invented = cli(
            "--db",
            db.url,
            "eval",
            "1",
            "--json",
            "--judge",
            "test-model",
            "--base-url",
            llm.base_url,
        )
    assert good.exit_code == 0, good.output
    assert "judge: 2/2 of those answered correctly" in good.stdout
    doc = json.loads(invented.stdout)
    assert doc["judge_score"] == 0.0
    goal = next(v for v in doc["verdicts"] if v["id"] == "goal")
    assert goal["judge"] == {"answer": "NOT IN CONTEXT", "correct": False}
    assert all(r["model"] == "test-model" for r in llm.requests)


def test_eval_judge_without_an_endpoint_is_a_usage_error(db, cli):
    add_checkpoints(db)
    result = cli(
        "--db",
        db.url,
        "eval",
        "1",
        "--judge",
        "m",
        env={"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None},
    )
    assert result.exit_code == 2
    assert "--judge needs an endpoint or a key" in result.stderr


def test_an_imported_runtime_checkpoint_is_evaluated(db, cli):
    """Claude Code's own compaction of a real session, imported, then evaluated by its id
    prefix: its summary answers the goal, and states nothing the history lacks."""
    transcript = TRANSCRIPTS / "claude-code" / "a5c478e1-0d31-46d4-9fd6-3b6b203b3752.jsonl"
    assert cli("--db", db.url, "import", transcript).exit_code == 0
    result = cli("--db", db.url, "eval", "a5c478e1", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["summarizer"] == "imported:claude-code"
    goal = next(v for v in doc["verdicts"] if v["id"] == "goal")
    assert goal["held"] and goal["where"] == ["summary"] and goal["summary_only"]
    assert doc["fabrications"] == []
    assert doc["score"] >= 0.6


def test_eval_table_fits_80_columns_and_json_keeps_where_whole(db, cli):
    """A real session compacted by the extractive summarizer finds a probe in several places
    (Codex log viewer's first fix: two kept messages and the summary): at 80 columns the
    "where" column is broken into lines like the others shrink, every line fits, and --json
    still says every place. (OpenClaw's goal, in several places until its runtime's notices
    stopped being read as requests, no longer is.)"""
    transcript = TRANSCRIPTS / "codex" / "codex_log_viewer-example.jsonl"
    for args in (
        ("import", transcript),
        ("tokens", "count", "--all"),
        ("compact", "--all", "--summarizer", "extractive", "--force"),
    ):
        result = cli("--db", db.url, *args)
        assert result.exit_code == 0, result.output
    doc = json.loads(cli("--db", db.url, "eval", "1", "--json").stdout)
    widest = max(doc["verdicts"], key=lambda v: len(", ".join(v["where"])))
    where = ", ".join(widest["where"])
    assert len(where) > 30 and where.count(",") >= 2  # wide enough to have to be broken
    result = cli("--db", db.url, "eval", "1", env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80, [line for line in lines if len(line) > 80]
    header = next(line for line in lines if line.startswith("probe"))
    assert "where" in header and "in score" in header and "looked for" in header
    # The widest "where" is read whole down its column, from the probe's row on.
    start, end = header.index("where"), header.index("in score")
    row = next(i for i, line in enumerate(lines) if line.split()[:1] == [widest["id"]])
    column = [lines[row][start:end].strip()]
    for line in lines[row + 1 :]:
        if line[:start].strip():  # the next probe
            break
        column.append(line[start:end].strip())
    assert " ".join(filter(None, column)) == where
