"""`validate --errors-only`, `--rule R` and the per-rule totals (issue #31 item 6): many
warnings of one rule must not bury one error."""

from __future__ import annotations

import json

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

    everything = cli("--db", db.url, "validate", *WINDOW)
    assert everything.exit_code == 1
    lines = everything.stderr.splitlines()
    assert lines[:2] == ["  over_window: 1 error", "  unanswered_tool_call: 1 warning"]
    assert "2 session(s) checked: 1 error(s), 1 warning(s)" in lines[2]

    errors = cli("--db", db.url, "validate", *WINDOW, "--errors-only", "--json")
    assert errors.exit_code == 1
    assert [i["rule"] for i in json.loads(errors.stdout)] == ["over_window"]

    rule = cli("--db", db.url, "validate", *WINDOW, "--rule", "unanswered_tool_call", "--json")
    assert rule.exit_code == 0  # the error is not among what was asked for
    assert [(i["session_id"], i["rule"]) for i in json.loads(rule.stdout)] == [
        (2, "unanswered_tool_call")
    ]
