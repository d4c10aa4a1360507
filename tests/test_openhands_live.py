"""An OpenHands event stream imported while it is written, with an event written twice.

Two writers appending to one stream (or a writer retrying) give the same event, same numeric
id, twice. The real trajectory OpenHands-basic_gui_mode.json (18 events, 4 model responses
with their tool calls and observations) is written as a live file in increments, one event a
line or the whole array again each time, and one event of an earlier increment (the action
with its call, or the observation answering it) is written again in a later one, or in the
same increment as its first copy's last bytes. Every import runs through the CLI; the store
must end exactly as one import of the stream without the copy leaves it, the restored context
valid for Chat Completions (each tool message after the assistant message with its call).
SQLite and MariaDB.
"""

from __future__ import annotations

import json

import pytest

from ctxtool.store import Store

from .builders import assert_valid_context
from .conftest import TRANSCRIPTS, Database

EVENTS = json.loads((TRANSCRIPTS / "openai-chat" / "OpenHands-basic_gui_mode.json").read_text())


def _messages(db, session_id: int) -> list[tuple]:
    return [
        (r["source_id"], r["role"], r["content"], r["tool_calls"], r["tool_call_id"])
        for r in db.rows(
            "SELECT source_id, role, content, tool_calls, tool_call_id FROM agent_message"
            " WHERE session_id = :s ORDER BY id",
            s=session_id,
        )
    ]


def _write(path, events: list[dict], layout: str, tail: bytes = b"") -> None:
    if layout == "array":
        path.write_text(json.dumps(events, indent=1))
    else:
        path.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in events) + tail)


def _chat_ordered(messages: list[dict]) -> None:
    """Each tool message follows the assistant message making its call, with only the call's
    siblings' results between (what Chat Completions accepts)."""
    open_calls: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls, m
            open_calls.discard(m["tool_call_id"])
            continue
        assert not open_calls, f"calls {open_calls} unanswered before a {m['role']} message"
        open_calls = {c["id"] for c in m.get("tool_calls") or ()}


@pytest.fixture
def clean(cli, tmp_path):
    """The messages one import of the whole stream stores, in a store of its own."""
    path = tmp_path / "clean.jsonl"
    _write(path, EVENTS, "jsonl")
    other = Database("sqlite", f"sqlite:///{tmp_path / 'clean.db'}").migrate()
    result = cli("--db", other.url, "import", "--json", path)
    assert result.exit_code == 0, result.output
    messages = _messages(other, 1)
    other.engine.dispose()
    assert [m[1] for m in messages].count("tool") == 4
    return messages


# The event written again, where its copy goes in the stream, and how many events of that
# stream each import sees (the last one sees them all).
CASES = {
    "action_again_in_the_next_increment": (7, 9, [9]),
    "observation_again_in_the_next_increment": (8, 9, [9]),
    "action_again_before_its_observation": (7, 8, [8]),
    "copy_ending_an_increment": (9, 14, [12, 15]),
    "copy_after_the_last_event": (11, len(EVENTS), [14]),
}


@pytest.mark.parametrize("layout", ["jsonl", "array"])
@pytest.mark.parametrize("case", list(CASES))
def test_an_event_written_again_in_a_later_increment_is_read_once(
    db, cli, tmp_path, clean, layout, case
):
    again, at, sizes = CASES[case]
    stream = EVENTS[:at] + [EVENTS[again]] + EVENTS[at:]
    live = tmp_path / ("stream.jsonl" if layout == "jsonl" else "stream.json")
    store = Store(db.engine)
    for size in [*sizes, len(stream)]:
        assert size > again  # the first copy is in the first increment
        _write(live, stream[:size], layout)
        result = cli("--db", db.url, "import", "--json", live)
        assert result.exit_code == 0, result.output
        [row] = json.loads(result.stdout)
        assert row["session_id"] == 1 and row["error"] is None, row
        copies = 1 if size > at else 0
        assert row["skipped_by_kind"].get("duplicate_event", 0) == copies, row
        assert_valid_context(store, 1)
        _chat_ordered(store.restored_context(1).to_openai())
    assert _messages(db, 1) == clean
    again_run = cli("--db", db.url, "import", "--json", live)
    assert json.loads(again_run.stdout)[0]["added"] == 0


def test_a_copy_whose_first_bytes_end_an_increment_waits_then_is_read_once(
    db, cli, tmp_path, clean
):
    """The copy of event 8 half written at the end of one increment (a line being appended),
    finished in the next: the unfinished line waits, then the whole copy is skipped."""
    live = tmp_path / "stream.jsonl"
    copy = json.dumps(EVENTS[8]).encode() + b"\n"
    _write(live, EVENTS[:10], "jsonl", tail=copy[: len(copy) // 2])
    first = cli("--db", db.url, "import", "--json", live)
    assert first.exit_code == 0, first.output
    _write(live, EVENTS[:10] + [EVENTS[8]] + EVENTS[10:], "jsonl")
    second = cli("--db", db.url, "import", "--json", live)
    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout)[0]["skipped_by_kind"]["duplicate_event"] == 1
    assert _messages(db, 1) == clean
    _chat_ordered(Store(db.engine).restored_context(1).to_openai())
