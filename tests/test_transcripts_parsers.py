"""The format parsers on plain lines: no file, no database (these run with no server)."""

from __future__ import annotations

import json

import pytest

from ctxtool.transcripts import (
    FORMATS,
    PARSERS,
    BranchedTranscript,
    Line,
    SourceCompaction,
    SourceMessage,
    TranscriptError,
    main_line_ids,
    parse_lines,
)


def lines(*objs) -> list[Line]:
    return [Line(i, o) for i, o in enumerate(objs, start=1)]


def records(fmt: str, *objs, skip_invalid=False, main=None):
    transcript = parse_lines(fmt, lines(*objs), "t.jsonl", skip_invalid, main)
    return list(transcript.records), transcript


def cc(uuid, parent, kind, content, **extra):
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message = {
            "id": extra.pop("api_id", f"msg-{uuid}"),
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": content,
        }
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s-1",
        "timestamp": "2026-01-01T00:00:00Z",
        "message": message,
        **extra,
    }


def test_registry_names_every_format_once():
    assert FORMATS == ("claude-code", "codex", "pi", "openai-chat", "openhands", "ctxtool-archive")
    assert all(PARSERS[f].name == f for f in FORMATS)


# -- Claude Code ---------------------------------------------------------------------------------


def test_claude_code_streamed_assistant_records_merge_and_results_become_tool_messages():
    out, t = records(
        "claude-code",
        cc("u1", None, "user", "list files"),
        cc("a1", "u1", "assistant", [{"type": "thinking", "thinking": "hmm"}], api_id="m1"),
        cc("a2", "a1", "assistant", [{"type": "text", "text": "Looking."}], api_id="m1"),
        cc(
            "a3",
            "a2",
            "assistant",
            [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
            api_id="m1",
        ),
        cc(
            "r1",
            "a3",
            "user",
            [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a.py"},
                {"type": "text", "text": "and?"},
            ],
        ),
        {"type": "summary", "summary": "Listing files", "leafUuid": "r1"},
    )
    assert [(m.source_id, m.role) for m in out] == [
        ("u1", "user"),
        ("a1", "assistant"),
        ("r1", "tool"),
        ("r1#text", "user"),
    ]
    assistant = out[1]
    assert assistant.content == "Looking."
    assert assistant.tool_calls[0]["function"] == {"name": "Bash", "arguments": '{"command":"ls"}'}
    assert assistant.details["thinking"] == "hmm"
    assert out[2].tool_call_id == "t1" and out[2].content == "a.py"
    assert (t.session.source_id, t.session.model, t.session.title) == (
        "s-1",
        "claude-sonnet-4-5",
        "Listing files",
    )
    assert t.skipped["summary"] == 1


def test_claude_code_boundary_and_summary_become_a_checkpoint():
    out, _ = records(
        "claude-code",
        cc("u1", None, "user", "hi"),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "b1",
            "parentUuid": None,
            "logicalParentUuid": "u1",
            "sessionId": "s-1",
            "timestamp": "2026-03-01T00:25:08.805Z",
            "compactMetadata": {"preTokens": 1234, "trigger": "auto"},
        },
        cc("s1", "b1", "user", "Summary of it", isCompactSummary=True),
        cc("u2", "s1", "user", "go on"),
    )
    comp = out[1]
    assert isinstance(comp, SourceCompaction)
    assert (comp.source_id, comp.summary, comp.tokens_before) == ("b1", "Summary of it", 1234)
    assert comp.first_kept_source_id is None  # "the next message"
    assert [m.source_id for m in out if isinstance(m, SourceMessage)] == ["u1", "u2"]
    # When the agent compacted, not when ctxtool imported it (context show --at bounds by it).
    assert str(comp.created_at) == "2026-03-01 00:25:08.805000"


def test_claude_code_sidechains_and_unknown_kinds_are_counted():
    out, t = records(
        "claude-code",
        cc("u1", None, "user", "hi"),
        {**cc("x1", "u1", "user", "sub-agent"), "isSidechain": True},
        {"type": "queue-operation", "sessionId": "s-1"},
        {"type": "system", "subtype": "api_error", "uuid": "e1", "parentUuid": "u1"},
    )
    assert [m.source_id for m in out] == ["u1"]
    assert t.skipped == {"sidechain": 1, "queue-operation": 1, "system:api_error": 1}


def test_claude_code_a_skipped_record_keeps_the_ids_it_took():
    """With --skip-invalid, a tool result refused for its call id has taken its message id
    already (as every version before did): a later record with the same uuid gets the
    suffixed id, so a re-import of a file stored by an earlier version finds it unchanged."""
    bad = cc(
        "u1",
        None,
        "user",
        [{"type": "tool_result", "tool_use_id": 5, "content": [{"type": "image"}]}],
    )
    again = cc("u1", "u1", "user", "hi")
    out, t = records("claude-code", bad, again, skip_invalid=True)
    assert [(m.source_id, m.content) for m in out] == [("u1@L2", "hi")]
    assert t.skipped == {"invalid_record": 1, "block:image": 1}
    with pytest.raises(TranscriptError, match="t.jsonl:1: .*'tool_use_id' must be a string"):
        records("claude-code", bad, again)


def test_claude_code_branch_is_detected_and_the_main_line_kept():
    objs = [
        cc("u1", None, "user", "q"),
        cc("a1", "u1", "assistant", [{"type": "text", "text": "A"}]),
        cc("u2", "a1", "user", "abandoned"),
        cc("u2b", "a1", "user", "edited"),
    ]
    with pytest.raises(BranchedTranscript):
        records("claude-code", *objs)
    main = main_line_ids(PARSERS["claude-code"], lines(*objs))
    out, t = records("claude-code", *objs, main=main)
    assert [m.content for m in out] == ["q", "A", "edited"]
    assert t.skipped["abandoned_branch:user"] == 1


def test_claude_code_record_whose_parent_is_missing_continues_the_line():
    """A trimmed log: the parent is not in the file. Every earlier record stays on the main
    line (it used to become an abandoned branch)."""
    objs = [
        cc("u1", None, "user", "one"),
        cc("a1", "u1", "assistant", [{"type": "text", "text": "two"}]),
        cc("u2", "gone", "user", "three"),
        cc("a2", "u2", "assistant", [{"type": "text", "text": "four"}]),
    ]
    main = main_line_ids(PARSERS["claude-code"], lines(*objs))
    assert main == {"u1", "a1", "u2", "a2"}
    out, _ = records("claude-code", *objs, main=main)
    assert [m.content for m in out] == ["one", "two", "three", "four"]


# -- Codex ---------------------------------------------------------------------------------------


def codex(kind, **payload):
    return {"timestamp": "2026-01-01T00:00:00Z", "type": kind, "payload": payload}


def test_codex_parallel_calls_are_one_message_and_outputs_are_tool_messages():
    out, t = records(
        "codex",
        codex("session_meta", id="cx", cwd="/w", base_instructions={"text": "be careful"}),
        codex("turn_context", model="gpt-5"),
        codex(
            "response_item",
            type="message",
            role="user",
            content=[{"type": "input_text", "text": "go"}],
        ),
        codex(
            "response_item",
            type="function_call",
            name="shell",
            arguments='{"cmd": "ls"}',
            call_id="c1",
        ),
        codex(
            "response_item",
            type="custom_tool_call",
            name="apply_patch",
            input="*** patch",
            call_id="c2",
        ),
        codex("response_item", type="function_call_output", call_id="c1", output="a.py"),
        codex("response_item", type="message", role="developer", content="rules"),
        codex("event_msg", type="token_count", info={"last_token_usage": {"input_tokens": 10}}),
    )
    assert [(m.role, m.source_id) for m in out] == [
        ("user", "L3"),
        ("assistant", "L4"),
        ("tool", "L6"),
        ("system", "L7"),
    ]
    assert [c["id"] for c in out[1].tool_calls] == ["c1", "c2"]
    assert out[3].details == {"source_role": "developer"}
    assert (t.session.source_id, t.session.model, t.session.system_prompt) == (
        "cx",
        "gpt-5",
        "be careful",
    )
    assert t.skipped["event_msg:token_count"] == 1


def test_codex_legacy_layout_without_payload_wrapper():
    out, t = records(
        "codex",
        {"id": "legacy-1", "timestamp": "2025-09-01T00:00:00Z", "instructions": "x"},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    )
    assert [m.content for m in out] == ["hi"]
    assert t.session.source_id == "legacy-1" and t.skipped["record_type:state"] == 1


# -- Pi ------------------------------------------------------------------------------------------


def pi(i, parent, role, content, **extra):
    return {
        "type": "message",
        "id": i,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": role, "content": content, **extra},
    }


def test_pi_messages_and_a_compaction_resolving_its_first_kept_entry():
    out, t = records(
        "pi",
        {
            "type": "session",
            "version": 3,
            "id": "pi-1",
            "timestamp": "2026-01-01T00:00:00Z",
            "cwd": "/w",
        },
        pi("e1", None, "user", "goal"),
        pi(
            "e2",
            "e1",
            "assistant",
            [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"p": 1}}],
        ),
        {"type": "thinking_level_change", "id": "e3", "parentId": "e2"},
        pi(
            "e4",
            "e3",
            "toolResult",
            [{"type": "text", "text": "data"}],
            toolCallId="c1",
            toolName="read",
        ),
        {
            "type": "compaction",
            "id": "e5",
            "parentId": "e4",
            "summary": "did things",
            "firstKeptEntryId": "e3",
            "tokensBefore": 900,
            "timestamp": "2026-01-01T00:05:00Z",
        },
    )
    assert [(m.source_id, m.role) for m in out[:3]] == [
        ("e1", "user"),
        ("e2", "assistant"),
        ("e4", "tool"),
    ]
    comp = out[3]
    # e3 is no message: the first message at or after it is e4.
    assert (comp.first_kept_source_id, comp.tokens_before) == ("e4", 900)
    assert str(comp.created_at) == "2026-01-01 00:05:00"
    assert t.session.source_id == "pi-1" and t.skipped["thinking_level_change"] == 1


def test_a_negative_or_odd_token_count_in_a_transcript_is_no_count():
    """Found by review: -5 was stored as tokens_before (and validate then said the checkpoint
    "did not shrink" from -5), while 1.5 or 10**30 became NULL."""
    for bad in (-5, -1, 1.5, 10**30, "900", True):
        out, _ = records(
            "claude-code",
            cc("u1", None, "user", "hi"),
            {
                "type": "system",
                "subtype": "compact_boundary",
                "uuid": "b1",
                "parentUuid": None,
                "logicalParentUuid": "u1",
                "sessionId": "s-1",
                "compactMetadata": {"preTokens": bad},
            },
            cc("s1", "b1", "user", "Summary", isCompactSummary=True),
            cc("u2", "s1", "user", "go"),
        )
        assert out[1].tokens_before is None, bad
        out, _ = records(
            "pi",
            {"type": "session", "version": 3, "id": "pi-1", "timestamp": "2026-01-01T00:00:00Z"},
            pi("e1", None, "user", "goal"),
            pi("e2", "e1", "user", "more"),
            {
                "type": "compaction",
                "id": "e3",
                "parentId": "e2",
                "summary": "s",
                "firstKeptEntryId": "e2",
                "tokensBefore": bad,
            },
        )
        assert out[2].tokens_before is None, bad
    usage = cc("a1", "u1", "assistant", [{"type": "text", "text": "x"}])
    usage["message"]["usage"] = {"input_tokens": -10, "output_tokens": 5}
    out, _ = records("claude-code", cc("u1", None, "user", "hi"), usage)
    assert (
        out[1].details["usage"]["input_tokens"] == 0
        and out[1].details["usage"]["output_tokens"] == 5
    )


def test_a_timestamp_that_is_no_time_is_counted_not_taken_silently():
    """Found by review: "yesterday", an offset of +99:00 or year 99999 became the import time
    without a word. Such a message takes the time of the one before, counted."""
    bad = ["2026-01-01T00:00:00+99:00", "yesterday", "99999-01-01T00:00:00Z", 1e30, -1e20, [1]]
    for value in bad:
        out, t = records(
            "claude-code",
            cc("u1", None, "user", "hi"),
            {**cc("u2", "u1", "user", "again"), "timestamp": value},
        )
        assert t.skipped["invalid_timestamp"] == 1, value
        assert out[1].created_at is None and str(out[0].created_at) == "2026-01-01 00:00:00"
    out, t = records(
        "claude-code",
        cc("u1", None, "user", "hi"),
        {**cc("u2", "u1", "user", "again"), "timestamp": None},
    )
    assert "invalid_timestamp" not in t.skipped  # absent is not invalid
    out, t = records(
        "pi",
        {"type": "session", "version": 3, "id": "pi-1", "timestamp": "2026-01-01T00:00:00Z"},
        {**pi("e1", None, "user", "goal"), "timestamp": "yesterday"},
    )
    assert t.skipped["invalid_timestamp"] == 1 and out[0].created_at is None


def test_pi_v1_first_kept_entry_index_counts_every_entry():
    out, _ = records(
        "pi",
        {"type": "session", "id": "v1", "timestamp": "2026-01-01T00:00:00Z"},
        {"type": "message", "message": {"role": "user", "content": "a"}},
        {"type": "message", "message": {"role": "user", "content": "b"}},
        {"type": "compaction", "summary": "s", "firstKeptEntryIndex": 2},
    )
    assert out[2].first_kept_source_id == out[1].source_id == "L3"


def test_pi_first_kept_that_names_no_earlier_entry_is_counted_not_silent():
    head = {"type": "session", "id": "v1", "timestamp": "2026-01-01T00:00:00Z"}
    msg = {"type": "message", "message": {"role": "user", "content": "a"}}
    for extra, shown in (
        ({"firstKeptEntryIndex": -5}, "#-5"),
        ({"firstKeptEntryIndex": 9}, "#9"),
        ({"firstKeptEntryIndex": 10**20}, repr(10**20)),
        ({"firstKeptEntryIndex": "2"}, "'2'"),
        ({}, None),
        ({"firstKeptEntryId": "nope"}, "nope"),
    ):
        out, t = records("pi", head, msg, {"type": "compaction", "summary": "s", **extra})
        assert t.skipped["unresolved_first_kept"] == 1, extra
        assert out[1].first_kept_source_id is None and out[1].details == {
            "unresolved_first_kept": shown
        }, (extra, out[1].details)
    out, t = records(
        "pi", head, msg, {"type": "compaction", "summary": "s", "firstKeptEntryIndex": 1}
    )
    assert "unresolved_first_kept" not in t.skipped and out[1].first_kept_source_id == "L2"


# -- OpenAI chat ---------------------------------------------------------------------------------


def test_openai_chat_system_prompt_calls_and_legacy_function_pair():
    out, t = records(
        "openai-chat",
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "function_call": {"name": "w", "arguments": "{}"}},
        {"role": "function", "name": "w", "content": "-3"},
        {"role": "tool", "tool_call_ids": ["x1"], "content": "r"},
        {"role": "robot", "content": "?"},
    )
    assert t.session.system_prompt == "be brief"
    assert [m.role for m in out] == ["user", "assistant", "tool", "tool"]
    assert out[2].tool_call_id == out[1].tool_calls[0]["id"] == "call_L3"
    assert out[3].tool_call_id == "x1"
    assert t.skipped == {"role:robot": 1}


# -- OpenHands -----------------------------------------------------------------------------------


def oh_response(response_id, text, *calls, model="claude-3-5-sonnet"):
    """An OpenAI chat completion as OpenHands keeps it in ``tool_call_metadata``."""
    tool_calls = [
        {"id": c, "type": "function", "function": {"name": n, "arguments": a}} for c, n, a in calls
    ]
    message = {"role": "assistant", "content": text, "tool_calls": tool_calls or None}
    return {
        "id": response_id,
        "model": model,
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 60},
        },
    }


def oh_action(event_id, action, call_id=None, response=None, **args):
    event = {"id": event_id, "source": "agent", "action": action, "args": args}
    if call_id:
        event["tool_call_metadata"] = {
            "function_name": "execute_bash",
            "tool_call_id": call_id,
            "model_response": response,
        }
    return event


def oh_observation(event_id, kind, call_id, content, **extras):
    return {
        "id": event_id,
        "source": "agent",
        "observation": kind,
        "content": content,
        "extras": extras,
        "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": call_id},
    }


def test_openhands_a_response_calling_two_tools_is_one_message_answered_by_its_observations():
    both = oh_response(
        "chatcmpl-1",
        "Two commands:",
        ("c1", "execute_bash", '{"command":"ls"}'),
        ("c2", "execute_bash", '{"command":"pwd"}'),
    )
    out, t = records(
        "openhands",
        {"id": 0, "source": "environment", "observation": "agent_state_changed", "content": ""},
        {"id": 1, "source": "agent", "action": "system", "args": {"content": "You are OpenHands."}},
        {"id": 2, "source": "user", "action": "message", "args": {"content": "list the files"}},
        oh_action(3, "run", "c1", both, command="ls", thought="Two commands:"),
        oh_action(4, "run", "c2", both, command="pwd", thought="Two commands:"),
        oh_observation(5, "run", "c1", "a.py", metadata={"prefix": "", "suffix": "\n[exit 0]"}),
        oh_observation(6, "error", "c2", "no such directory"),
        oh_observation(7, "run", "c9", "an answer to a call nobody made"),
        {"id": 8, "source": "agent", "action": "message", "args": {"content": "a.py is there"}},
        oh_action(9, "finish", "c3", oh_response("chatcmpl-2", "Done."), thought="All listed."),
    )
    assert t.session.system_prompt == "You are OpenHands."
    assert t.session.title == "list the files"
    assert t.session.model == "claude-3-5-sonnet"
    assert [(m.source_id, m.role) for m in out] == [
        ("2", "user"),
        ("3", "assistant"),
        ("5", "tool"),
        ("6", "tool"),
        ("8", "assistant"),
        ("9", "assistant"),
    ]
    call = out[1]
    assert call.content == "Two commands:"
    assert [c["id"] for c in call.tool_calls] == ["c1", "c2"]
    assert call.tool_calls[1]["function"] == {
        "name": "execute_bash",
        "arguments": '{"command":"pwd"}',
    }
    # prompt_tokens holds the 60 cached ones: 40 were read uncached.
    assert call.details["usage"]["input_tokens"] == 40
    assert call.details["usage"]["context_tokens"] == 100
    assert (out[2].tool_call_id, out[2].content, out[2].name) == (
        "c1",
        "a.py\n[exit 0]",
        "execute_bash",
    )
    assert (out[3].tool_call_id, out[3].details) == ("c2", {"is_error": True})
    # The finish call is never answered: OpenHands sends the model its text alone.
    assert (out[5].content, out[5].tool_calls) == ("All listed.\nDone.", None)
    assert t.skipped == {
        "observation:agent_state_changed": 1,
        "system": 1,
        "same_response": 1,
        "observation_without_call": 1,
    }


def test_openhands_an_action_without_its_model_response_is_the_call_the_metadata_names():
    out, _ = records(
        "openhands",
        {"id": 1, "source": "user", "action": "message", "message": "hi", "args": {}},
        oh_action(2, "run", "c1", None, command="ls", thought="Listing.", blocking=False),
        oh_observation(3, "run", "c1", "a.py"),
    )
    assert out[0].content == "hi"
    assert out[1].content == "Listing."
    assert out[1].tool_calls == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "execute_bash", "arguments": '{"command":"ls"}'},
        }
    ]
    assert out[2].tool_call_id == "c1"


def test_an_openhands_trajectory_is_detected_as_a_document_and_as_json_lines(tmp_path):
    from ctxtool.transcripts.lines import read_transcript

    events = [
        {"id": 1, "source": "user", "action": "message", "args": {"content": "hi"}},
        {"id": 2, "source": "agent", "action": "message", "args": {"content": "hello"}},
    ]
    document = json.dumps(events, indent=2).encode()
    jsonl = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    for raw in (document, jsonl):
        t = read_transcript("t.json", raw.splitlines(keepends=True), None)
        assert t.format == "openhands"
        assert [(m.role, m.content) for m in t.records] == [("user", "hi"), ("assistant", "hello")]
    # Read as OpenAI messages, the events are refused (they have no role), not imported empty.
    with pytest.raises(TranscriptError, match="use --format openhands"):
        read_transcript("t.json", document.splitlines(keepends=True), "openai-chat")


# -- every format: hostile records are file:line errors, or skipped -------------------------------

HOSTILE = {
    "claude-code": [
        cc("u1", None, "user", "hi", message=None) | {"uuid": ["not", "a", "string"]},
        {**cc("a1", None, "assistant", []), "message": {"model": ["a", "list"], "content": []}},
        {**cc("u1", None, "user", "x"), "message": "not an object"},
    ],
    "codex": [
        codex("session_meta", id={"an": "object"}),
        codex("response_item", type="function_call_output", call_id=["c"], output="x"),
        codex("compacted", message=42),
    ],
    "pi": [
        {"type": "message", "id": "e1", "message": "not an object"},
        {"type": "compaction", "id": "e2", "summary": ["a", "list"]},
        pi("e3", None, "toolResult", "x", toolCallId={"id": 1}),
    ],
    "openai-chat": [
        {"role": "tool", "tool_call_id": ["a", "list"], "content": "x"},
        {"role": "user", "content": "x", "name": "n" * 500},
        {"role": "tool", "tool_call_ids": [["nested"]], "content": "x"},
    ],
    "openhands": [
        {"id": 2, "source": "robot", "action": "message", "args": {"content": "x"}},
        oh_action(2, "run", ["a", "list"], oh_response("r", "x")),
        oh_action(2, "run", "c1", {"id": "r", "choices": []}),
        oh_action(2, "run", "c1", oh_response("r", "x", (None, "execute_bash", "{}"))),
        oh_observation(2, "run", "c1", {"an": "object"}),
        {"id": 2, "source": "agent", "action": "message", "args": "not an object"},
    ],
}


@pytest.mark.parametrize("fmt,bad", [(f, b) for f, bs in HOSTILE.items() for b in bs])
def test_a_record_that_does_not_fit_its_format_is_a_file_line_error_or_skipped(fmt, bad):
    good = {
        "claude-code": cc("g1", None, "user", "fine"),
        "codex": codex("response_item", type="message", role="user", content="fine"),
        "pi": pi("g1", None, "user", "fine"),
        "openai-chat": {"role": "user", "content": "fine"},
        "openhands": {"id": 1, "source": "user", "action": "message", "args": {"content": "fine"}},
    }[fmt]
    with pytest.raises(TranscriptError) as caught:
        records(fmt, good, bad)
    assert str(caught.value).startswith("t.jsonl:2: invalid ")
    assert "--skip-invalid" in str(caught.value)
    out, t = records(fmt, good, bad, skip_invalid=True)
    assert [m.content for m in out] == ["fine"]
    assert t.skipped["invalid_record"] == 1


def test_openhands_a_call_its_response_does_not_list_is_kept():
    """Two actions carrying one model_response whose tool_calls list only the first call (a
    response cut, or older OpenHands): the second call is a message of its own and its
    observation its result, neither dropped as the same response's."""
    response = oh_response("r1", "Two:", ("c1", "execute_bash", '{"command":"ls"}'))
    out, _ = records(
        "openhands",
        {"id": 1, "source": "user", "action": "message", "args": {"content": "go"}},
        oh_action(2, "run", "c1", response, command="ls"),
        oh_action(3, "run", "c2", response, command="pwd"),
        oh_observation(4, "run", "c1", "a.py"),
        oh_observation(5, "run", "c2", "/work"),
    )
    calls = [c["id"] for m in out for c in (m.tool_calls or [])]
    assert calls == ["c1", "c2"]
    assert [m.tool_call_id for m in out if m.role == "tool"] == ["c1", "c2"]


def test_openhands_a_duplicated_event_is_one_message():
    """A record written twice (two writers appending, the hostile corpus's 'duplicated record')
    gave two tool results for one call ('3' and '3@L4'): OpenHands event ids are unique in a
    stream, so the second copy is the same event, not another result."""
    response = oh_response("r1", "Listing:", ("c1", "execute_bash", '{"command":"ls"}'))
    observation = oh_observation(3, "run", "c1", "a.py")
    out, t = records(
        "openhands",
        {"id": 1, "source": "user", "action": "message", "args": {"content": "go"}},
        oh_action(2, "run", "c1", response, command="ls"),
        observation,
        dict(observation),
    )
    assert [m.role for m in out] == ["user", "assistant", "tool"], [m.source_id for m in out]
    assert t.skipped["duplicate_event"] == 1


def test_openhands_an_empty_system_event_adds_no_blank_lines():
    _, t = records(
        "openhands",
        {"id": 0, "source": "agent", "action": "system", "args": {}},
        {"id": 1, "source": "agent", "action": "system", "args": {"content": "S"}},
        {"id": 2, "source": "user", "action": "message", "args": {"content": "go"}},
    )
    assert t.session.system_prompt == "S"
