"""`validate`'s ``id_order`` rule: a message created well before one with a lower id got its id
out of write order (TiDB's per-server id caches without AUTO_ID_CACHE=1), so the restored
context, read in id order, puts it out of place."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from ctxtool.core.records import Message
from ctxtool.core.validation import ID_ORDER_TOLERANCE, id_order_issues

from .builders import add_session

T0 = datetime(2026, 12, 3, 8, 0, 0)


def _messages(*offsets: float | None) -> list[Message]:
    return [
        Message(
            id=10 + i,
            session_id=1,
            role="user",
            content=f"m{i}",
            created_at=None if s is None else T0 + timedelta(seconds=s),
        )
        for i, s in enumerate(offsets)
    ]


def test_a_message_created_before_a_lower_id_is_one_warning_naming_it():
    [issue] = id_order_issues(1, _messages(0, 10, 20, 5, 30, 4))
    assert (issue.rule, issue.severity, issue.message_id) == ("id_order", "warning", 13)
    assert "before message 12" in issue.message and "2 such message(s)" in issue.message
    assert "tolerance 1 s" in issue.message


def test_clocks_that_differ_within_the_tolerance_and_unknown_times_are_no_issue():
    assert timedelta(seconds=1) == ID_ORDER_TOLERANCE
    assert id_order_issues(1, _messages(0, 10, 9.5, None, 11, 10.2)) == []
    assert id_order_issues(1, _messages(0, 10, 8.9)) != []


def test_validate_reports_a_session_whose_ids_disagree_with_its_times(db, cli):
    add_session(
        db,
        1,
        [
            {"role": "user", "content": "first", "created_at": T0},
            {"role": "assistant", "content": "second", "created_at": T0 + timedelta(minutes=5)},
            # Written first through another server, whose cached id range is higher.
            {"role": "user", "content": "late id", "created_at": T0 + timedelta(minutes=1)},
        ],
    )
    result = cli("--db", db.url, "validate", "--json")
    assert result.exit_code == 0, result.output  # a warning
    [issue] = [i for i in json.loads(result.output) if i["rule"] == "id_order"]
    assert issue["session_id"] == 1 and issue["severity"] == "warning"
    assert "08:05:00" in issue["message"]
