"""The import rules (`ctxtool.core.import_rules`) over plain lists of records: no database."""

from __future__ import annotations

import pytest

from ctxtool.core.import_rules import (
    DRIVER_ESCAPES,
    CompleteMessage,
    NewCheckpoint,
    NewMessage,
    Reconciler,
    StoredMessage,
    StoredSession,
    escaped_bytes,
    fingerprint,
    size_problem,
)
from ctxtool.transcripts import SourceCompaction, SourceMessage, TranscriptError


def msg(sid, role, content="x", line=1, **kw):
    return SourceMessage(sid, role, content, line, **kw)


def call(cid):
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def run(records, stored=None):
    rec = Reconciler("t.jsonl", stored)
    return list(rec.run(records)), rec.counts


def test_new_messages_pass_through_in_order():
    actions, counts = run([msg("a", "user"), msg("b", "assistant")])
    assert [a.message.source_id for a in actions] == ["a", "b"]
    assert all(isinstance(a, NewMessage) for a in actions)
    assert counts.messages_present == 0


def test_orphan_tool_result_becomes_a_user_message():
    orphan = msg("r", "tool", tool_call_id="nobody")
    actions, counts = run([msg("u", "user"), orphan])
    assert (orphan.role, orphan.tool_call_id) == ("user", None)
    assert orphan.details == {"source_role": "tool", "orphan_tool_call_id": "nobody"}
    assert counts.converted == {"orphan_tool_result_to_user": 1}


def test_paired_tool_result_stays_a_tool_message():
    result = msg("r", "tool", tool_call_id="c1")
    run([msg("a", "assistant", tool_calls=[call("c1")]), result])
    assert result.role == "tool"


def test_a_checkpoint_keeping_the_next_message_moves_to_the_call_of_a_tool_result():
    comp = SourceCompaction("k", "summary", 3)
    actions, _ = run(
        [msg("a", "assistant", tool_calls=[call("c1")]), comp, msg("r", "tool", tool_call_id="c1")]
    )
    [checkpoint] = [a for a in actions if isinstance(a, NewCheckpoint)]
    assert checkpoint.first_kept_source_id == "a"
    assert comp.details == {"first_kept_moved_to_call_of": "r"}
    # The checkpoint comes after the message it needs in the store.
    assert isinstance(actions[-1], NewCheckpoint)


def test_a_checkpoint_naming_a_tool_result_moves_to_its_call_too():
    """Pi names its first kept entry explicitly; a tool result there moves like the others."""
    comp = SourceCompaction("k", "summary", 4, first_kept_source_id="r")
    actions, _ = run(
        [
            msg("u", "user"),
            msg("a", "assistant", tool_calls=[call("c1")]),
            msg("r", "tool", tool_call_id="c1"),
            comp,
        ]
    )
    assert actions[-1] == NewCheckpoint(comp, "a")


def test_a_checkpoint_with_nothing_after_it_keeps_nothing_yet():
    # Issue 45 item 7: the file's last record; its cut goes after the last message (the
    # writer's), it used to be skipped as compaction_without_kept_message.
    comp = SourceCompaction("k", "s", 2)
    actions, counts = run([msg("u", "user"), comp])
    assert actions[-1] == NewCheckpoint(comp, None)
    assert not counts.skipped


def test_present_messages_and_checkpoints_are_not_written_again():
    stored = StoredSession(messages={"u": fingerprint("user", 1, b"x")}, compactions={"k"})
    actions, counts = run(
        [
            msg("u", "user"),
            SourceCompaction("k", "s", 2, first_kept_source_id="u"),
            msg("v", "user"),
        ],
        stored,
    )
    assert [type(a) for a in actions] == [NewMessage]
    assert (counts.messages_present, counts.compactions_present) == (1, 1)


def test_the_last_stored_message_caught_mid_stream_is_completed():
    stored = StoredSession(
        messages={"a": fingerprint("assistant", 5, b"Look.")},
        last=StoredMessage(7, "a", "assistant", 5, b"Look.", 0),
    )
    grown = msg("a", "assistant", "Look. More", tool_calls=[call("c1")])
    actions, counts = run([grown], stored)
    assert actions == [CompleteMessage(7, grown)]
    assert counts.converted == {"completed_partial_message": 1}


@pytest.mark.parametrize(
    "stored_role,stored_bytes,stored_prefix",
    [("user", 99, b"x"), ("assistant", 1, b"x"), ("user", 1, b"y")],
)
def test_a_file_that_disagrees_with_what_it_claims_to_extend_is_refused(
    stored_role, stored_bytes, stored_prefix
):
    stored = StoredSession(
        messages={"L1": fingerprint(stored_role, stored_bytes, stored_prefix), "L2": 0},
        last=StoredMessage(2, "L2", "user", 0),
    )
    with pytest.raises(TranscriptError, match=r"t.jsonl:1: message 'L1' differs .* not merged"):
        run([msg("L1", "user", "x", line=1)], stored)


def test_a_shorter_last_message_is_a_disagreement_too():
    stored = StoredSession(
        messages={"a": fingerprint("user", 10, b"0123456789")},
        last=StoredMessage(1, "a", "user", 10, b"0123456789"),
    )
    with pytest.raises(TranscriptError):
        run([msg("a", "user", "short")], stored)


def test_escaped_bytes_count_what_mysql_sends():
    assert escaped_bytes("ab") == 2
    assert escaped_bytes("a'\\\r\x00\x1a") == 11
    assert escaped_bytes('a"\n') == 3  # sent as they are by the import's renderer
    assert escaped_bytes('a"\n', DRIVER_ESCAPES) == 5  # and escaped by the driver
    assert escaped_bytes("é") == 2


def test_size_problem_counts_escaping_and_tool_call_arguments():
    assert size_problem("x" * 100, [None], 1000, 1000) is None
    assert "MEDIUMTEXT" in size_problem("x" * 1001, [None], 1000, 5000)
    quotes = "'" * 600  # 600 characters, 1200 bytes once escaped
    assert "max_allowed_packet" in size_problem(quotes, [None], 1000, 1000)
    assert "tool-call arguments" in size_problem("", ["a" * 1100], 1000, 1000)


def test_present_messages_whose_fingerprint_was_not_read_are_taken_as_they_are():
    stored = StoredSession(
        messages={"a": None, "b": fingerprint("user", 1, b"x")},
        last=StoredMessage(2, "b", "user", 1, b"x"),
    )
    actions, counts = run(
        [msg("a", "assistant", "anything"), msg("b", "user"), msg("c", "user")], stored
    )
    assert [type(a) for a in actions] == [NewMessage] and counts.messages_present == 2


def test_a_size_just_over_its_limit_is_shown_in_bytes():
    """Rounded to 0.1 MB a message one byte over the packet would read "0.9 MB is larger than
    the 0.9 MB": then both are given in bytes."""
    limit = 943_718
    just_over = size_problem("x" * (limit + 1), (), 16 * 1024 * 1024, limit)
    assert "message of 943,719 bytes as sent" in just_over and "the 943,718 bytes" in just_over
    far_over = size_problem("x" * 2_000_000, (), 16 * 1024 * 1024, limit)
    assert "message of 1.9 MB as sent" in far_over and "the 0.9 MB the server accepts" in far_over


def test_a_file_numbered_by_line_that_lacks_a_stored_line_is_refused():
    """Pi v1, OpenAI chat, Codex without ids: a line removed shifts the ids after it onto
    stored ids (or the file ends before its stored end); every stored id must be in it."""
    stored = StoredSession(
        messages={"L1": None, "L2": None, "L3": None},
        last=StoredMessage(3, "L3", "user", 1, b"x"),
    )
    with pytest.raises(TranscriptError, match=r"t.jsonl:3: message 'L3' is stored, but .* no"):
        run([msg("L1", "user", line=1), msg("L2", "user", line=2)], stored)
    with pytest.raises(TranscriptError, match=r"t.jsonl:2: message 'L2' is stored"):
        run([msg("L1", "user", line=1), msg("L3", "user", line=3)], stored)
    actions, counts = run([msg(f"L{i}", "user", line=i) for i in (1, 2, 3, 4)], stored)
    assert [a.message.source_id for a in actions] == ["L4"] and counts.messages_present == 3


def test_a_file_with_ids_of_its_own_may_leave_a_stored_message_out():
    """A tree transcript (Claude Code, Pi v2) imports its main line: after a rewind the
    message stored last is on a branch the file still holds but no longer follows."""
    stored = StoredSession(
        messages={"u1": None, "a1": None}, last=StoredMessage(2, "a1", "assistant", 1, b"x")
    )
    actions, _ = run([msg("u1", "user"), msg("a2", "assistant")], stored)
    assert [a.message.source_id for a in actions] == ["a2"]


@pytest.mark.parametrize(
    "source_id,numbered",
    [
        ("L1", True),
        ("L1019", True),
        ("L12@L13", False),
        ("Lx", False),
        ("uuid", False),
        (None, False),
    ],
)
def test_ids_that_are_line_numbers(source_id, numbered):
    from ctxtool.core.import_rules import positional

    assert positional(source_id) is numbered


def test_two_messages_of_one_file_under_one_id_are_a_format_error_at_once():
    """Issue 45 item 14: the store's unique key refused the second one as if another import
    had written it, and the import was tried again for 7-8 s before failing with a database
    error. The file's own fault is said before anything is written, naming both lines."""
    from ctxtool.core.import_rules import DuplicateRecord

    rec = Reconciler("t.jsonl")
    assert rec.step(msg("L1", "user", line=1))
    with pytest.raises(DuplicateRecord, match=r"^t\.jsonl:3: message id 'L1' is taken already"):
        rec.step(msg("L1", "assistant", line=3))
    assert issubclass(DuplicateRecord, TranscriptError)
