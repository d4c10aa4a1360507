"""`ctxtool import` on the real transcripts in ../shared and on hand-made edge cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxtool.core.plan import CompactionSettings
from ctxtool.importer import Importer
from ctxtool.store import Store

from .builders import run_on_a_terminal
from .conftest import TRANSCRIPTS

ALL_FILES = sorted(p for p in TRANSCRIPTS.rglob("*") if p.suffix in (".jsonl", ".traj", ".json"))
# Checkpoints the agents made, per file (from the INDEX notes and the files themselves).
EXPECTED_COMPACTIONS = {
    "a5c478e1-0d31-46d4-9fd6-3b6b203b3752.jsonl": 1,
    "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl": 1,
    "agent-sessions-codex-small.jsonl": 6,
    "before-compaction.jsonl": 2,
    "agent-sessions-pi-small.jsonl": 2,
    # Three compaction entries (lines 173, 181 and 415), each keeping from the entry before it.
    "openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc.jsonl": 3,
}
# Files an agent ran past the window ctxtool takes for their model, and never compacted:
# validate says so (over_window) until ctxtool compacts them (test_compaction_transcripts).
# paradocs-session.jsonl: deepseek-v4-flash-free (128k in ctxtool's table), no compaction
# entry, and Pi's usage at its last turn reads 181,440 prompt tokens (64 + 181,376 cached).
OVER_WINDOW_AS_IMPORTED = {"paradocs-session.jsonl"}


def _import(db, *paths, fmt=None, skip_invalid=False):
    return Importer(db.engine, fmt, skip_invalid).import_paths([str(p) for p in paths])


def assert_tool_pairs_valid(store: Store, session_id: int) -> None:
    """Every tool result answers a call made earlier in the same session (OpenAI validity)."""
    calls: set[str] = set()
    for m in store.iter_messages(session_id):
        if m.role == "assistant" and m.tool_calls:
            calls.update(c["id"] for c in m.tool_calls)
        if m.role == "tool":
            assert m.tool_call_id in calls, f"orphan tool result {m.id} in session {session_id}"


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name[:40])
def test_real_transcripts_import_idempotently(db, path):
    [first] = _import(db, path)
    assert first.error is None, first.error
    assert first.messages_added > 0
    assert first.compactions_added == EXPECTED_COMPACTIONS.get(path.name, 0)
    [again] = _import(db, path)
    assert again.error is None
    assert again.session_id == first.session_id
    assert (again.messages_added, again.compactions_added) == (0, 0)
    assert again.messages_present == first.messages_added
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == first.messages_added
    store = Store(db.engine)
    assert_tool_pairs_valid(store, first.session_id)
    for comp in store.compactions(first.session_id):
        kept = db.scalar(
            "SELECT session_id FROM agent_message WHERE id = :i", i=comp.first_kept_message_id
        )
        assert kept == first.session_id
    ctx = store.restored_context(first.session_id)
    assert ctx.to_openai()
    issues, _ = Store(db.engine).validate(first.session_id)
    assert [i.rule for i in issues if i.severity == "error"] == [], issues
    waiting = [i.rule for i in issues if i.rule == "over_window"]
    assert waiting == (["over_window"] if path.name in OVER_WINDOW_AS_IMPORTED else []), issues


def test_paradocs_arrives_over_its_window_by_the_file_s_own_usage(db):
    """The one over_window expected on import, read from the file: the prompt Pi's provider
    last reported is over the threshold ctxtool takes for the model, and ctxtool's own count
    of the restored context is too."""
    path = TRANSCRIPTS / "pi" / "paradocs-session.jsonl"
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert not [e for e in entries if e["type"] == "compaction"]
    usages = [
        e["message"]["usage"]
        for e in entries
        if e["type"] == "message" and e["message"]["role"] == "assistant"
    ]
    reported = max(u["input"] + u["cacheRead"] for u in usages)
    threshold = CompactionSettings().threshold("deepseek-v4-flash-free")
    assert reported == 181_440 and threshold == 111_616
    [res] = _import(db, path)
    assert Store(db.engine).context_tokens(res.session_id) > threshold
    issues, _ = Store(db.engine).validate(res.session_id)
    # waiting for compaction: a warning of validate's deploy gate (#44), not a store error
    assert [(i.rule, i.severity) for i in issues] == [("over_window", "warning")]


def test_an_openhands_trajectory_is_read_as_a_conversation(db):
    """OpenHands-basic_gui_mode.json, an array of 18 events, imported 0 messages (19 skipped):
    now the user's request, each model response with its tool call, the observation answering
    it and the agent's last reply, in event order; every call answered; the restored context
    is a valid Chat Completions request. The expectations are read from the events."""
    from .test_inspect_cli import chat_completions_errors

    path = TRANSCRIPTS / "openai-chat" / "OpenHands-basic_gui_mode.json"
    events = json.loads(path.read_text(encoding="utf-8"))
    expected, responses = [], set()
    for e in events:
        meta = e.get("tool_call_metadata")
        if e.get("action") == "message":
            expected.append(({"user": "user", "agent": "assistant"}[e["source"]], None))
        elif "action" in e and meta and meta["model_response"]["id"] not in responses:
            responses.add(meta["model_response"]["id"])
            [choice] = meta["model_response"]["choices"]
            calls = tuple(c["id"] for c in choice["message"]["tool_calls"])
            expected.append(("assistant", calls))
        elif "observation" in e and meta:
            expected.append(("tool", meta["tool_call_id"]))
    assert len(expected) == 10  # 1 request, 4 calls, 4 results, 1 reply
    [res] = _import(db, path)
    assert res.error is None, res.error
    assert (res.format, res.layout) == ("openhands", "document")
    store = Store(db.engine)
    messages = store.messages(res.session_id)
    assert [
        (m.role, tuple(c["id"] for c in m.tool_calls) if m.tool_calls else m.tool_call_id)
        for m in messages
    ] == expected
    assert messages[0].content == events[4]["args"]["content"]
    # What the agent was shown of `mkdir`: no output, then the runtime's exit-code line.
    mkdir = events[8]
    assert messages[2].content == mkdir["content"] + mkdir["extras"]["metadata"]["suffix"]
    assert messages[-1].content == events[15]["args"]["content"]
    assert_tool_pairs_valid(store, res.session_id)
    assert chat_completions_errors(store.restored_context(res.session_id).to_openai()) == []
    issues, _ = Store(db.engine).validate(res.session_id)
    assert [i for i in issues if i.severity == "error"] == []


def test_an_openhands_history_object_is_detected_not_sent_to_codex(db, cli, tmp_path):
    """OpenHands' evaluation output holds the events under "history" ({"instance_id": ...,
    "history": [...]}): it is detected as OpenHands (10 messages), and read as openai-chat it
    is told to use --format openhands, never codex, a format a JSON document cannot be."""
    events = json.loads((TRANSCRIPTS / "openai-chat/OpenHands-basic_gui_mode.json").read_text())
    path = tmp_path / "output.json"
    path.write_text(json.dumps({"instance_id": "x", "history": events}))
    wrong = cli("--db", db.url, "import", "--format", "openai-chat", path)
    assert "use --format openhands" in wrong.output and "codex" not in wrong.output, wrong.output
    result = cli("--db", db.url, "import", "--json", path)
    assert "codex" not in result.output, result.output
    rows = json.loads(result.stdout)
    assert (rows[0]["format"], rows[0]["added"]) == ("openhands", 10), rows


def test_claude_code_compaction_maps_boundary_and_summary(db):
    path = TRANSCRIPTS / "claude-code" / "a5c478e1-0d31-46d4-9fd6-3b6b203b3752.jsonl"
    records = [json.loads(line) for line in path.open()]
    boundary = next(r for r in records if r.get("subtype") == "compact_boundary")
    summary_at = next(i for i, r in enumerate(records) if r.get("isCompactSummary"))
    summary_text = records[summary_at]["message"]["content"]
    next_uuid = next(
        r["uuid"]
        for r in records[summary_at + 1 :]
        if r.get("type") in ("user", "assistant") and not r.get("isSidechain")
    )
    [res] = _import(db, path)
    [comp] = Store(db.engine).compactions(res.session_id)
    assert comp.tokens_before == boundary["compactMetadata"]["preTokens"]
    assert comp.summary == summary_text
    assert comp.summarizer == "imported:claude-code"
    kept = db.rows(
        "SELECT source_id FROM agent_message WHERE id = :i", i=comp.first_kept_message_id
    )
    assert kept[0]["source_id"] == next_uuid
    # The summary itself is the checkpoint, not a message.
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE content = :c", c=summary_text) == 0
    assert db.scalar("SELECT model FROM agent_session WHERE session_id = :s", s=res.session_id)


def test_pi_v1_first_kept_entry_index(db):
    path = TRANSCRIPTS / "pi" / "before-compaction.jsonl"
    lines = path.read_text().splitlines()
    compactions = [json.loads(line) for line in lines if '"type":"compaction"' in line]
    [res] = _import(db, path)
    stored = Store(db.engine).compactions(res.session_id)
    assert [c.tokens_before for c in stored] == [c["tokensBefore"] for c in compactions]
    assert stored[1].parent_compaction_id == stored[0].id and stored[0].parent_compaction_id == 0
    for comp, src in zip(stored, compactions):
        target = json.loads(lines[src["firstKeptEntryIndex"]])["message"]["content"][0]["text"]
        content = db.scalar(
            "SELECT content FROM agent_message WHERE id = :i", i=comp.first_kept_message_id
        )
        assert content == target


def test_grown_transcript_adds_only_the_new_part(db, tmp_path):
    src = TRANSCRIPTS / "pi" / "large-session.jsonl"
    lines = src.read_bytes().splitlines(keepends=True)
    part = tmp_path / "large-session.jsonl"
    part.write_bytes(b"".join(lines[: len(lines) // 2]))
    [first] = _import(db, part)
    part.write_bytes(b"".join(lines))
    [second] = _import(db, part)
    assert second.session_id == first.session_id
    assert second.messages_present == first.messages_added
    total = first.messages_added + second.messages_added
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == total
    assert db.scalar("SELECT COUNT(DISTINCT source_id) FROM agent_message") == total
    # Same result as importing the whole file at once.
    other = tmp_path / "other" / "large-session.jsonl"
    other.parent.mkdir()
    other.write_bytes(b"".join(lines))
    assert _import(db, other)[0].messages_present == total


def _write(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


CHAT = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    {"role": "assistant", "content": "done"},
]


def _jsonl(records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def test_malformed_line_rejects_the_file_and_writes_nothing(db, cli, tmp_path):
    # Enough good lines before the bad one that several insert batches ran already.
    good = [{"role": "user", "content": f"m{i}"} for i in range(2500)]
    path = _write(tmp_path, "chat.jsonl", _jsonl(good) + b'{"role": "user", "content": \n')
    result = cli("--db", db.url, "import", path)
    assert result.exit_code == 1
    assert f"{path}:2501: malformed JSON" in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 0
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 0

    result = cli("--db", db.url, "import", "--skip-invalid", "--json", path)
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row["added"] == 2500 and row["skipped_by_kind"] == {"invalid_line": 1}


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("junk.jsonl", bytes(range(256)) * 4, "binary data"),
        (
            "latin1.jsonl",
            _jsonl(CHAT[:2]) + '{"role": "user", "content": "caf\xe9"}\n'.encode("latin-1"),
            ":3: invalid UTF-8",
        ),
        ("other.jsonl", b'{"foo": 1, "bar": 2}\n', "cannot tell the transcript format"),
        ("notjson.txt", b"hello world\n", ":1: malformed JSON"),
    ],
)
def test_bad_files_get_one_clear_error(db, cli, tmp_path, name, content, message):
    path = _write(tmp_path, name, content)
    result = cli("--db", db.url, "import", path)
    assert result.exit_code == 1
    assert message in result.output
    assert str(path) in result.output
    assert "Traceback" not in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 0


def test_huge_messages(db, tmp_path):
    big = "x" * (5 * 1024 * 1024)
    ok = _write(tmp_path, "big.jsonl", _jsonl([{"role": "user", "content": big}]))
    [res] = _import(db, ok)
    assert res.error is None and res.messages_added == 1
    assert db.scalar("SELECT LENGTH(content) FROM agent_message") == len(big)
    too_big = _write(
        tmp_path,
        "huge.jsonl",
        _jsonl(CHAT[:2] + [{"role": "user", "content": "y" * (17 * 1024 * 1024)}]),
    )
    [res] = _import(db, too_big)
    assert res.error and f"{too_big}:3: message of 17.0 MB is larger than" in res.error
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 1


def test_openai_chat_array_stdin_and_json_summary(db, cli, tmp_path):
    array = _write(tmp_path, "conv.json", json.dumps(CHAT, indent=2).encode())
    result = cli("--db", db.url, "import", "--json", array)
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert (row["format"], row["added"]) == ("openai-chat", 4)
    session = Store(db.engine).session(row["session_id"])
    assert session.system_prompt == "be brief"
    ctx = Store(db.engine).restored_context(row["session_id"]).to_openai()
    assert ctx[0] == {"role": "system", "content": "be brief"}
    assert ctx[2]["tool_calls"][0]["function"]["name"] == "ls"
    assert ctx[3] == {"role": "tool", "content": "a.py", "tool_call_id": "c1"}

    result = cli("--db", db.url, "import", "-", "--json", input=_jsonl(CHAT).decode())
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row["added"] == 4 and row["file"] == "-"
    result = cli("--db", db.url, "import", "-", "--json", input=_jsonl(CHAT).decode())
    assert json.loads(result.stdout)[0]["present"] == 4


def test_directory_import_with_one_bad_file_is_partial(db, cli, tmp_path):
    _write(tmp_path, "a.jsonl", _jsonl(CHAT))
    _write(tmp_path, "b.jsonl", b"{broken\n")
    result = cli("--db", db.url, "import", tmp_path)
    assert result.exit_code == 4
    assert "1 of 2 file(s) failed" in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 4
    result = cli("--db", db.url, "import", tmp_path / "missing.jsonl")
    assert result.exit_code == 1 and "no such file" in result.output


def _cc(uuid, parent, kind, text, **extra):
    message = {"role": kind, "content": text}
    if kind == "assistant":
        message = {
            "id": f"msg-{uuid}",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": text}],
        }
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "branchy",
        "isSidechain": False,
        "timestamp": "2026-01-01T00:00:00Z",
        "message": message,
        **extra,
    }


def test_abandoned_branches_are_not_part_of_the_main_line(db, tmp_path):
    """A rewind (the user edited a message): only the path to the newest record is imported."""
    records = [
        _cc("u1", None, "user", "first question"),
        _cc("a1", "u1", "assistant", "first answer"),
        _cc("u2", "a1", "user", "second question (abandoned)"),
        _cc("a2", "u2", "assistant", "answer to the abandoned question"),
        {"type": "progress", "uuid": "p1", "parentUuid": "a1", "sessionId": "branchy"},
        _cc("u2b", "a1", "user", "second question, edited"),
        _cc("a2b", "u2b", "assistant", "answer on the main line"),
    ]
    path = _write(tmp_path, "branchy.jsonl", _jsonl(records))
    reported = []  # the progress bar's bytes: a file read twice still counts once
    [res] = Importer(db.engine, on_bytes=reported.append).import_paths([str(path)])
    assert res.error is None, res.error
    assert sum(reported) == path.stat().st_size
    contents = [r["content"] for r in db.rows("SELECT content FROM agent_message ORDER BY id")]
    assert contents == [
        "first question",
        "first answer",
        "second question, edited",
        "answer on the main line",
    ]
    assert (
        res.skipped["abandoned_branch:user"] == 1 and res.skipped["abandoned_branch:assistant"] == 1
    )
    [again] = _import(db, path)
    assert (again.messages_added, again.messages_present) == (0, 4)


def test_pi_tree_branches(db, tmp_path):
    def entry(i, parent, role, text):
        return {
            "type": "message",
            "id": i,
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": role, "content": [{"type": "text", "text": text}]},
        }

    records = [
        {
            "type": "session",
            "version": 3,
            "id": "pi-tree",
            "timestamp": "2026-01-01T00:00:00Z",
            "cwd": "/w",
        },
        entry("e1", None, "user", "goal"),
        entry("e2", "e1", "assistant", "plan A"),
        entry("e3", "e2", "user", "no, plan B"),
        entry("e4", "e1", "assistant", "plan B"),
        entry("e5", "e4", "user", "thanks"),
    ]
    [res] = _import(db, _write(tmp_path, "tree.jsonl", _jsonl(records)))
    assert res.error is None, res.error
    contents = [r["content"] for r in db.rows("SELECT content FROM agent_message ORDER BY id")]
    assert contents == ["goal", "plan B", "thanks"]


def test_two_imports_of_one_file_at_once(db):
    """Concurrent imports of the same transcript: every message exactly once, no error."""
    import threading

    path = TRANSCRIPTS / "pi" / "large-session.jsonl"
    results = []
    threads = [threading.Thread(target=lambda: results.extend(_import(db, path))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.error for r in results] == [None, None]
    total = sum(r.messages_added for r in results)
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == total
    assert db.scalar("SELECT COUNT(DISTINCT session_id) FROM agent_message") == 1
    assert sorted(r.messages_present for r in results)[0] == 0


def test_progress_on_a_terminal_and_quiet_when_piped(db, cli):
    path = TRANSCRIPTS / "pi" / "before-compaction.jsonl"
    code, terminal = run_on_a_terminal(["--db", db.url, "import", str(path)], stream="stderr")
    assert code == 0, terminal
    assert "importing" in terminal and "100%" in terminal
    result = cli("--db", db.url, "import", path)
    assert result.exit_code == 0 and "importing" not in result.output


def test_bad_first_line_of_jsonl_is_named_and_skippable(db, tmp_path):
    path = _write(
        tmp_path, "first.jsonl", b'{"role": "user", "content": "unterminated}\n' + _jsonl(CHAT[1:])
    )
    [res] = _import(db, path)
    assert res.error and f"{path}:1: malformed JSON" in res.error
    [res] = _import(db, path, skip_invalid=True)
    assert res.error is None and res.messages_added == 4 and res.skipped["invalid_line"] == 1


def test_openai_legacy_function_call_becomes_a_paired_tool_call(db, tmp_path):
    legacy = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        },
        {"role": "function", "name": "get_weather", "content": "-3°C"},
        {"role": "assistant", "content": "It is -3°C in Oslo."},
    ]
    [res] = _import(db, _write(tmp_path, "legacy.jsonl", _jsonl(legacy)), fmt="openai-chat")
    assert res.error is None and not res.converted
    ctx = Store(db.engine).restored_context(res.session_id).to_openai()
    assert ctx[1]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert ctx[2] == {
        "role": "tool",
        "content": "-3°C",
        "tool_call_id": ctx[1]["tool_calls"][0]["id"],
    }


def test_invalid_database_url_is_one_line(cli):
    result = cli("--db", "postgresql://u:pw-secret@h/db", "tokens", "report")
    assert result.exit_code == 1 and "unsupported database URL" in result.output
    assert "pw-secret" not in result.output
    result = cli("--db", "::not a url::", "migrate", "status")
    assert result.exit_code == 1 and "invalid database URL" in result.output


def test_codex_compacted_keeps_message_and_replacement_history(db, tmp_path):
    def item(role, text):
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}

    records = [
        {
            "timestamp": "2026-01-01T00:00:00Z",
            "type": "session_meta",
            "payload": {"id": "cx-1", "cwd": "/w"},
        },
        {
            "timestamp": "2026-01-01T00:00:01Z",
            "type": "response_item",
            "payload": item("user", "build it"),
        },
        {
            "timestamp": "2026-01-01T00:00:02Z",
            "type": "compacted",
            "payload": {
                "message": "Summary: built half.",
                "replacement_history": [
                    item("user", "build it"),
                    item("user", "Summary: built half."),
                ],
            },
        },
        {
            "timestamp": "2026-01-01T00:00:03Z",
            "type": "response_item",
            "payload": item("user", "continue"),
        },
    ]
    [res] = _import(db, _write(tmp_path, "rollout.jsonl", _jsonl(records)))
    assert res.error is None and res.compactions_added == 1
    [cp] = Store(db.engine).compactions(res.session_id)
    assert cp.summary.startswith("Summary: built half.")
    assert "## Messages kept by Codex" in cp.summary and "[user] build it" in cp.summary
    assert cp.summary.count("Summary: built half.") == 1
    kept = db.scalar("SELECT content FROM agent_message WHERE id = :i", i=cp.first_kept_message_id)
    assert kept == "continue"


def test_pi_context_entries_and_session_name(db, tmp_path):
    def entry(i, parent, kind, **fields):
        return {
            "type": kind,
            "id": i,
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:00Z",
            **fields,
        }

    records = [
        {
            "type": "session",
            "version": 3,
            "id": "pi-ext",
            "timestamp": "2026-01-01T00:00:00Z",
            "cwd": "/w",
        },
        entry("e1", None, "message", message={"role": "user", "content": "start"}),
        entry(
            "e2",
            "e1",
            "custom_message",
            customType="todo",
            content="Injected: 3 todos open",
            display=True,
        ),
        entry("e3", "e2", "branch_summary", fromId="x", summary="Tried approach A, it failed."),
        entry(
            "e4",
            "e3",
            "message",
            message={
                "role": "bashExecution",
                "command": "ls",
                "output": "a",
                "excludeFromContext": True,
            },
        ),
        entry("e5", "e4", "custom", customType="state", data={"n": 1}),
        entry("e6", "e5", "session_info", name="Refactor auth"),
        entry("e7", "e6", "label", targetId="e1", label="start"),
    ]
    [res] = _import(db, _write(tmp_path, "ext.jsonl", _jsonl(records)))
    assert res.error is None
    rows = db.rows("SELECT role, content FROM agent_message ORDER BY id")
    assert [r["content"] for r in rows] == [
        "start",
        "Injected: 3 todos open",
        "The conversation came back from another branch, summarized here:\n\nTried approach A, it failed.",
    ]
    assert db.scalar("SELECT title FROM agent_session") == "Refactor auth"
    assert res.skipped["message:bashExecution"] == 1 and res.skipped["custom"] == 1


def test_live_transcript_with_an_unterminated_last_line(db, tmp_path):
    """An agent still writing its transcript: the partial last line waits for the next import."""
    full = _jsonl(CHAT)
    cut = full[: full.rindex(b"\n", 0, len(full) - 1) + 20]  # last record half written
    path = _write(tmp_path, "live.jsonl", cut)
    [first] = _import(db, path)
    assert first.error is None and first.skipped["incomplete_last_line"] == 1
    assert first.messages_added == 3
    path.write_bytes(full)
    [second] = _import(db, path)
    assert (second.messages_added, second.messages_present) == (1, 3)
    only_partial = _write(tmp_path, "starting.jsonl", b'{"role": "user", "con')
    [res] = _import(db, only_partial)
    assert res.error is None and res.session_id is None
    assert res.skipped == {"incomplete_last_line": 1, "no_messages": 1}


@pytest.mark.parametrize("content", [b"", b"\n\n", b"  \r\n\t\n"])
def test_a_file_with_nothing_written_yet_waits_for_the_next_import(db, cli, tmp_path, content):
    """A runtime creates its transcript before writing its first record: an import of its
    directory in between (a cron run) is no failure, and writes nothing; the next import
    reads what was written since."""
    folder = tmp_path / "live"
    folder.mkdir()
    _write(folder, "done.jsonl", _jsonl(CHAT[:2]))
    new = _write(folder, "new.jsonl", content)
    result = cli("--db", db.url, "import", "--json", str(folder))
    assert result.exit_code == 0, result.output
    rows = {Path(r["file"]).name: r for r in json.loads(result.stdout)}
    assert rows["new.jsonl"]["error"] is None and rows["new.jsonl"]["session_id"] is None
    assert rows["new.jsonl"]["skipped_by_kind"] == {"empty_file": 1, "no_messages": 1}
    assert rows["done.jsonl"]["added"] == 1  # the system prompt is the session's
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 1
    named = cli("--db", db.url, "import", str(new))  # named on its own: the same
    assert named.exit_code == 0, named.output
    assert "empty_file=1" in named.output and "Error" not in named.output
    new.write_bytes(content + _jsonl(CHAT))
    [later] = _import(db, new)
    assert later.error is None and later.messages_added == len(CHAT) - 1
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 2


def test_message_still_being_streamed_is_completed_on_the_next_import(db, tmp_path):
    """Claude Code writes one assistant message as several records; an import can fall between
    them. The next import completes the stored message, so its tool call pairs with the result."""

    def assistant(uuid, parent, block):
        rec = _cc(uuid, parent, "assistant", "")
        rec["message"]["id"] = "msg-1"
        rec["message"]["content"] = [block]
        return rec

    records = [
        _cc("u1", None, "user", "list the files"),
        assistant("a1", "u1", {"type": "text", "text": "Let me look."}),
        assistant(
            "a2", "a1", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
        ),
        {
            **_cc("r1", "a2", "user", ""),
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}],
            },
        },
    ]
    path = _write(tmp_path, "streaming.jsonl", _jsonl(records[:2]))
    [first] = _import(db, path)
    assert first.messages_added == 2
    path.write_bytes(_jsonl(records))
    [second] = _import(db, path)
    assert second.error is None and second.converted == {"completed_partial_message": 1}
    assert (second.messages_added, second.messages_present) == (1, 2)
    store = Store(db.engine)
    assert_tool_pairs_valid(store, second.session_id)
    assistant_row = db.rows(
        "SELECT content, tool_calls FROM agent_message WHERE role = 'assistant'"
    )[0]
    assert assistant_row["content"] == "Let me look."
    issues, _ = Store(db.engine).validate(second.session_id)
    assert issues == []


def test_the_thread_switch_interval_is_restored_after_imports(db, tmp_path):
    """The pipeline shortens the GIL switch interval while it runs (its writer thread gets
    server replies at once); a library caller's process gets its own setting back, also after
    a failed file and after imports running in two threads at once."""
    import sys
    import threading

    before = sys.getswitchinterval()
    good = _write(tmp_path, "good.jsonl", _jsonl(CHAT))
    bad = _write(tmp_path, "bad.jsonl", _jsonl(CHAT) + b"{broken\n")
    threads = [threading.Thread(target=_import, args=(db, p)) for p in (good, bad, good)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sys.getswitchinterval() == before


def test_skip_invalid_also_skips_bad_messages_of_a_single_json_document(db, tmp_path):
    """A pretty-printed message list is read as one document: --skip-invalid must skip its bad
    messages as it does a JSONL file's bad lines (it used to refuse the file all the same)."""
    doc = (
        b'[\n {"role": "user", "content": "hi"},\n {"role": "assistant", "content": "x", "name": [1]},\n'
        b' 5,\n {"role": "user", "content": "more"}\n]\n'
    )
    path = _write(tmp_path, "doc.json", doc)
    [strict] = _import(db, path)
    assert strict.error and "doc.json" in strict.error and "--skip-invalid" in strict.error
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 0
    [lenient] = _import(db, path, skip_invalid=True)
    assert lenient.error is None and lenient.messages_added == 2
    assert lenient.skipped["invalid_record"] == 2


def test_a_json_documents_bad_message_is_named_as_a_message(db, tmp_path):
    """In a pretty-printed message list the Nth record is the Nth message, not line N of the
    file: the error says "message #N" (the same bad message in JSONL names its line)."""
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "x", "name": [1]},
    ]
    path = _write(tmp_path, "doc.json", json.dumps(messages, indent=2).encode())
    [result] = _import(db, path)
    assert result.error.startswith(f"{path}: message #3: invalid openai-chat record"), result.error
    assert f"{path}:3" not in result.error
    jsonl = _write(
        tmp_path, "doc.jsonl", b"\n".join(json.dumps(m).encode() for m in messages) + b"\n"
    )
    [result] = _import(db, jsonl)
    assert result.error.startswith(f"{jsonl}:3: invalid openai-chat record"), result.error
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 0


def test_a_reimport_after_a_runtime_wrote_non_json_tool_calls(sqlite_db, cli):
    """The importer reads the session's last message (its tool calls) to check a re-import:
    text that is not JSON there (SQLite lets a runtime write it) is an odd value, not an
    'internal error' that fails the file."""
    import sqlalchemy as sa

    example = Path(__file__).parent.parent / "examples" / "checkout-rounding.jsonl"
    first = cli("--db", sqlite_db.url, "import", example)
    assert first.exit_code == 0, first.output
    with sqlite_db.engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE agent_message SET tool_calls = '[{bad' "
                "WHERE id = (SELECT MAX(id) FROM agent_message)"
            )
        )
    again = cli("--db", sqlite_db.url, "import", example, "--json")
    assert again.exit_code == 0, again.output
    [row] = json.loads(again.stdout)
    assert (row["added"], row["present"], row["error"]) == (0, 25, None), row


def _call_without(fmt: str, missing: str) -> list[dict]:
    """A transcript of each format: a question, then a tool call lacking its id or name."""
    call = {"id": "c1", "name": "Bash"}
    call.pop(missing)
    if fmt == "claude-code":
        base = {"sessionId": "s-call", "timestamp": "2026-01-01T00:00:00Z"}
        return [
            {
                **base,
                "type": "user",
                "uuid": "u1",
                "parentUuid": None,
                "message": {"role": "user", "content": "list files"},
            },
            {
                **base,
                "type": "assistant",
                "uuid": "a1",
                "parentUuid": "u1",
                "message": {
                    "id": "m1",
                    "role": "assistant",
                    "content": [{"type": "tool_use", "input": {"c": "ls"}, **call}],
                },
            },
        ]
    if fmt == "pi":
        return [
            {"type": "session", "version": 3, "id": "pi-call", "timestamp": "2026-01-01T00:00:00Z"},
            {
                "type": "message",
                "id": "e1",
                "parentId": None,
                "timestamp": "2026-01-01T00:00:00Z",
                "message": {"role": "user", "content": "list files"},
            },
            {
                "type": "message",
                "id": "e2",
                "parentId": "e1",
                "timestamp": "2026-01-01T00:00:01Z",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "toolCall", "arguments": {"c": "ls"}, **call}],
                },
            },
        ]
    if fmt == "codex":
        payload = {"type": "function_call", "arguments": "{}", "name": "shell"}
        if missing == "name":
            payload["call_id"] = "c1"  # Codex names a call without a name by its item type
        return [
            {
                "type": "session_meta",
                "timestamp": "2026-01-01T00:00:00Z",
                "payload": {"id": "cx-call", "cwd": "/w"},
            },
            {
                "type": "response_item",
                "timestamp": "2026-01-01T00:00:00Z",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "list files"}],
                },
            },
            {"type": "response_item", "timestamp": "2026-01-01T00:00:01Z", "payload": payload},
        ]
    fn = {"name": "Bash", "arguments": "{}"}
    if missing == "name":
        fn.pop("name")
    tool_call = {"type": "function", "function": fn, **({"id": "c1"} if missing != "id" else {})}
    return [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call]},
    ]


# A Codex call without a name is named by its item type: no such case there.
@pytest.mark.parametrize(
    "fmt, missing",
    [
        ("claude-code", "id"),
        ("claude-code", "name"),
        ("pi", "id"),
        ("pi", "name"),
        ("codex", "id"),
        ("openai-chat", "id"),
        ("openai-chat", "name"),
    ],
)
def test_a_tool_call_without_an_id_or_name_is_an_invalid_record(db, tmp_path, fmt, missing):
    """Found by review: it was stored as a call with id (or name) "", which validate then
    reported as malformed and `context show --openai` sent, with a synthetic result, to the API."""
    path = tmp_path / f"{fmt}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _call_without(fmt, missing)))
    [res] = Importer(db.engine).import_paths([str(path)])
    line = len(_call_without(fmt, missing))
    assert res.error is not None and res.error.startswith(f"{path}:{line}: "), res.error
    assert "a tool call has no" in res.error and missing in res.error.split("has no", 1)[1]
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 0
    [res] = Importer(db.engine, skip_invalid=True).import_paths([str(path)])
    assert res.error is None and res.skipped["invalid_record"] == 1, res
    assert db.rows("SELECT role, content FROM agent_message") == [
        {"role": "user", "content": "list files"}
    ]
    assert Store(db.engine).validate()[0] == []


def test_a_transcript_without_a_message_makes_no_session_and_is_no_error(db, cli, tmp_path):
    """Found by review: `[]` made an empty session row (exit 0), `{"messages": []}` on one line
    failed as 'not openai-chat records', and a file of a system message alone made an empty
    session too. Such files are in agents' folders (Claude Code keeps files of summaries
    alone): nothing is stored for them, and a cron import does not fail on them."""
    files = {
        "array.json": "[]\n",
        "wrapped.json": '{"messages": []}\n',
        "pretty.json": '{\n  "messages": []\n}\n',
        "system.jsonl": '{"role": "system", "content": "be brief"}\n',
        "summary.jsonl": json.dumps({"type": "summary", "summary": "Old chat", "leafUuid": "x"})
        + "\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = cli("--db", db.url, "import", "--json", *(tmp_path / n for n in files))
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["error"], r["session_id"], r["added"]) for r in rows] == [(None, None, 0)] * 5
    assert all(r["skipped_by_kind"].get("no_messages") == 1 for r in rows), rows
    result = cli("--db", db.url, "import", "-", "--format", "openai-chat", input="[]")
    assert result.exit_code == 0, result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 0
    assert db.scalar("SELECT last_value FROM ctxtool_counters") == 0  # no id taken for them


def test_a_one_line_message_document_imports_as_the_pretty_one_does(db, cli, tmp_path):
    doc = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
        ]
    }
    (tmp_path / "one.json").write_text(json.dumps(doc) + "\n")
    (tmp_path / "pretty.json").write_text(json.dumps(doc, indent=2) + "\n")
    result = cli(
        "--db", db.url, "import", "--json", tmp_path / "one.json", tmp_path / "pretty.json"
    )
    assert result.exit_code == 0, result.output
    assert [(r["format"], r["added"], r["error"]) for r in json.loads(result.stdout)] == [
        ("openai-chat", 2, None),
        ("openai-chat", 2, None),
    ]
    assert db.rows("SELECT system_prompt FROM agent_session") == [{"system_prompt": "be brief"}] * 2


def test_a_one_line_message_document_that_is_hostile_fails_as_the_pretty_one_does(db, tmp_path):
    """The one-line document path (865c4c9) with what a hostile file holds: a message that is
    no object, a role of the wrong type, a second document after it. Each one line naming the
    file, nothing written; --skip-invalid skips the bad message and keeps the rest."""
    cases = {
        "not_object.json": (
            {"messages": [1, {"role": "user", "content": "hi"}]},
            "message #1 is not a JSON object",
        ),
    }
    for name, (doc, error) in cases.items():
        path = tmp_path / name
        path.write_text(json.dumps(doc) + "\n")
        [res] = Importer(db.engine).import_paths([str(path)])
        assert res.error and res.error.startswith(str(path)) and error in res.error, res.error
        assert "\n" not in res.error
        assert db.scalar("SELECT COUNT(*) FROM agent_message") == 0
        [res] = Importer(db.engine, skip_invalid=True).import_paths([str(path)])
        assert res.error is None and res.messages_added == 1, res
    # A role of the wrong type is a kind of record the format skips, counted, as on many lines.
    path = tmp_path / "bad_role.json"
    path.write_text(
        json.dumps({"history": [{"role": 5, "content": "x"}, {"role": "user", "content": "hi"}]})
        + "\n"
    )
    [res] = Importer(db.engine).import_paths([str(path)])
    assert (res.error, res.messages_added, res.skipped["role:a number"]) == (None, 1, 1)
    two = tmp_path / "two_documents.json"
    two.write_text(
        json.dumps({"messages": [{"role": "user", "content": "a"}]})
        + "\n"
        + json.dumps({"messages": [{"role": "user", "content": "b"}]})
        + "\n"
    )
    before = db.scalar("SELECT COUNT(*) FROM agent_message")
    [res] = Importer(db.engine).import_paths([str(two)])
    assert res.error and res.error.startswith(f"{two}:") and "\n" not in res.error, res.error
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == before


@pytest.mark.parametrize("skip_invalid", [False, True])
def test_max_row_bytes_refuses_a_larger_message_naming_the_setting(db, cli, tmp_path, skip_invalid):
    """`import --max-row-bytes` (TiDB's txn-entry-size-limit, which the server does not
    announce): a message over it, counted in UTF-8 bytes, is one error naming file:line and the
    setting, and nothing of the file is written, with --skip-invalid too (the message is valid:
    skipping it would drop part of the conversation). Under the limit the file imports."""
    chat = [
        {"role": "user", "content": "short question"},
        {"role": "assistant", "content": "é" * 600},  # 600 characters, 1,200 bytes
        {"role": "user", "content": "thanks"},
    ]
    path = _write(tmp_path, "big.jsonl", _jsonl(chat))
    extra = ["--skip-invalid"] if skip_invalid else []
    refused = cli("--db", db.url, "import", str(path), "--max-row-bytes", "1000", *extra)
    assert refused.exit_code == 1
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith("Error: ") and ":2:" in x]
    assert f"{path}:2:" in line and "1,200 bytes" in line and "--max-row-bytes 1,000" in line
    assert "Traceback" not in refused.output
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 0
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 0
    done = cli("--db", db.url, "import", str(path), "--max-row-bytes", "1200", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)[0]["added"] == 3


def test_the_import_table_fits_80_columns_keeping_file_names(db, cli, tmp_path):
    """#31 item 5: at COLUMNS=80 the table is no wider than the terminal however deep the
    paths: a path is shortened from the left (its file name stays), a failed file's row says
    `failed` and its error is printed once, whole, on stderr (#44: it was said twice, in the
    row and on stderr), and --json keeps everything."""
    deep = tmp_path.joinpath(*[f"directory-{i}-of-a-deep-tree" for i in range(6)])
    deep.mkdir(parents=True)
    good = _write(deep, "rollout-session-kept-whole.jsonl", _jsonl(CHAT))
    bad = _write(deep, "broken-transcript.jsonl", b"not json\n")
    done = cli("--db", db.url, "import", str(deep), env={"COLUMNS": "80"})
    assert done.exit_code == 4
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0].split()[:4] == ["file", "format", "session", "added"]
    (bad_row,) = [x for x in lines if "-transcript.jsonl" in x]
    assert bad_row.split()[-1] == "failed" and str(tmp_path) not in bad_row
    assert "malformed" not in done.stdout
    assert any(x.startswith("…") and "kept-whole.jsonl" in x for x in lines), lines
    assert f"Error: {bad}:1: malformed JSON" in done.stderr
    assert done.stderr.count("malformed JSON") == 1
    again = cli("--db", db.url, "import", str(good), "--json", env={"COLUMNS": "80"})
    assert json.loads(again.stdout)[0]["file"] == str(good)


def test_progress_counts_compressed_input_in_the_bytes_its_total_counts(db, tmp_path):
    """#32: the import's progress bar totals the files' sizes on disk (discover.file_sizes);
    its progress counted a compressed file's or an archive's decompressed lines, and so ran
    past the total. Now a plain file counts its lines, a compressed one and an archive their
    size on disk, and the two agree."""
    import gzip
    import tarfile

    from ctxtool.transcripts.discover import expand_paths, file_sizes

    text = _jsonl([{"role": "user", "content": f"repeated question {i} " * 20} for i in range(200)])
    _write(tmp_path, "plain.jsonl", text)
    _write(tmp_path, "packed.jsonl.gz", gzip.compress(text.replace(b"question", b"answer")))
    (tmp_path / "src").mkdir()
    member = _write(tmp_path / "src", "inside.jsonl", text.replace(b"question", b"remark"))
    with tarfile.open(tmp_path / "bundle.tar.gz", "w:gz") as tar:
        tar.add(member, arcname="inside.jsonl")
    files = [f for f in expand_paths([str(tmp_path)]) if "/src/" not in f]
    assert len(files) == 3
    counted: list[int] = []
    results = Importer(db.engine, on_bytes=counted.append).import_files(files)
    assert [r.error for r in results] == [None, None, None]
    assert sum(r.messages_added for r in results) == 600
    assert sum(counted) == file_sizes(files) < 2 * len(text)


def test_the_first_session_of_a_fresh_store_is_session_1(db, cli, tmp_path):
    """Issue 45 item 8: apanloco's file starts with a progress line whose parent is null, so
    read as linear it turns out branched and is read again along its main line. The first
    pass had taken session id 1 from the counter and dropped it: a fresh store's first session
    was 2, and a newcomer's `context show 1` failed. A file that fails after taking its id
    leaves that id to the next new session too."""
    path = TRANSCRIPTS / "claude-code" / "apanloco-random-session.jsonl"
    out = json.loads(cli("--db", db.url, "import", path, "--json").stdout)
    rows = out["files"] if isinstance(out, dict) else out
    assert [r["session_id"] for r in rows] == [1]
    assert cli("--db", db.url, "context", "show", "1").exit_code == 0
    bad, good = tmp_path / "bad.jsonl", tmp_path / "good.jsonl"
    user = {"role": "user", "content": "hi"}
    bad.write_bytes(_jsonl([user, {"role": "tool", "tool_call_id": ["a"], "content": "x"}]))
    good.write_bytes(_jsonl([user, {"role": "assistant", "content": "hello"}]))
    out = json.loads(cli("--db", db.url, "import", bad, good, "--json").stdout)
    rows = out["files"] if isinstance(out, dict) else out
    assert rows[0]["error"] and rows[0]["session_id"] is None
    assert rows[1]["session_id"] == 2
    assert db.scalar("SELECT MAX(session_id) FROM agent_session") == 2


def _codex_lines(*texts: str) -> list[dict]:
    meta = {"type": "session_meta", "payload": {"id": "cx-glued", "cwd": "/w"}}
    return [meta] + [
        {
            "timestamp": "2026-01-01T00:00:00Z",
            "type": "response_item",
            "payload": {"type": "message", "role": role, "content": text},
        }
        for role, text in zip(("user", "assistant", "user"), texts)
    ]


@pytest.mark.parametrize(
    "fmt,separator",
    [("openai-chat", ""), ("openai-chat", "\r"), ("codex", "\r"), ("codex", "")],
    ids=["chat-glued", "chat-cr", "codex-cr", "codex-glued"],
)
def test_three_records_on_one_line_each_get_an_id_of_their_own(db, tmp_path, fmt, separator):
    """Issue 45 item 14: three records glued on one line (two writers appending at once), or
    CR-only line ends, are all numbered by that line; the third got the second's id
    (``L1@L1``), and the import failed after 7-8 s of retries on the store's unique key
    ('Duplicate entry ... uq_message_source'), for every later import of a live file too.
    Each record now has an id of its own, and importing the file again adds nothing."""
    if fmt == "openai-chat":
        records = [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "two"},
            {"role": "user", "content": "three"},
        ]
    else:
        records = _codex_lines("one", "two", "three")
    path = tmp_path / "glued.jsonl"
    path.write_text(separator.join(json.dumps(r) for r in records) + (separator or "\n"))
    [first] = _import(db, path)
    assert first.error is None, first.error
    assert first.messages_added == 3
    ids = [r["source_id"] for r in db.rows("SELECT source_id FROM agent_message ORDER BY id")]
    assert len(set(ids)) == 3, ids
    assert [r["content"] for r in db.rows("SELECT content FROM agent_message ORDER BY id")] == [
        "one",
        "two",
        "three",
    ]
    [again] = _import(db, path)
    assert (again.error, again.messages_added, again.messages_present) == (None, 0, 3)
