"""`validate --errors-only`, `--rule R` and the per-rule totals (issue #31 item 6): many
warnings of one rule must not bury one error."""

from __future__ import annotations

import json

import sqlalchemy as sa

from .builders import add_session

WINDOW = ["--context-window", "4000", "--reserve-tokens", "500"]
CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}


def test_errors_only_rule_and_totals(db, cli):
    long = [{"role": "user", "content": "start"}, {"role": "assistant", "content": "word " * 6000}]
    add_session(db, 1, long, model="gpt-4o")
    waiting = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [CALL]},
        {"role": "user", "content": "and then?"},
    ]
    add_session(db, 2, waiting, model="gpt-4o")

    # An error: a checkpoint that keeps from a message that does not exist.
    add_session(db, 3, [{"role": "user", "content": "hi"}], model="gpt-4o")
    with db.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO agent_compaction (session_id, summary, first_kept_message_id) "
                "VALUES (3, 'gone', 99999)"
            )
        )
    everything = cli("--db", db.url, "validate", *WINDOW)
    assert everything.exit_code == 1
    lines = everything.stderr.splitlines()
    assert lines[:3] == [
        "  first_kept_missing: 1 error",
        "  over_window: 1 warning",
        "  unanswered_tool_call: 1 warning",
    ]
    assert "3 session(s) checked: 1 error(s), 2 warning(s)" in lines[3]

    errors = cli("--db", db.url, "validate", *WINDOW, "--errors-only", "--json")
    assert errors.exit_code == 1
    assert [i["rule"] for i in json.loads(errors.stdout)] == ["first_kept_missing"]

    rule = cli("--db", db.url, "validate", *WINDOW, "--rule", "unanswered_tool_call", "--json")
    assert rule.exit_code == 0  # the error is not among what was asked for
    assert [(i["session_id"], i["rule"]) for i in json.loads(rule.stdout)] == [
        (2, "unanswered_tool_call")
    ]


def test_summary_says_which_window_was_checked(db, cli):
    """Found by an adversarial run: after `compact --all --context-window 16000`, a plain
    `validate` said 0 errors for a session over that window (it checks each model's own,
    larger window) without saying so. The summary line now names the window it checked and
    how to check the one compaction was given."""
    long = [{"role": "user", "content": "start"}, {"role": "assistant", "content": "word " * 6000}]
    add_session(db, 1, long, model="gpt-4o")
    plain = cli("--db", db.url, "validate")
    assert plain.exit_code == 0
    assert "0 error(s)" in plain.stderr
    assert "its model's window" in plain.stderr
    assert "--context-window" in plain.stderr
    given = cli("--db", db.url, "validate", *WINDOW)
    assert given.exit_code == 0 and "1 warning(s)" in given.stderr
    assert "window: 4000 tokens" in given.stderr
