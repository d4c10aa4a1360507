"""`context checkpoints / show --at / diff / export` and session addressing through the real
CLI, on MariaDB and SQLite: sessions compacted twice by ctxtool, and every shared transcript."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ctxtool.core.records import NO_RESULT_TEXT

from .builders import add_session, coding_session
from .conftest import TRANSCRIPTS
from .waiting import wait_until

PROJECT = Path(__file__).resolve().parents[1]
WINDOW = ["--summarizer", "extractive", "--context-window", "6000", "--reserve-tokens", "1000"]


def add_messages(db, session_id: int, messages: list[dict]) -> None:
    """More messages written by a live agent after a compaction."""
    from ctxtool.db.schema import agent_message

    with db.engine.begin() as conn:
        for m in messages:
            conn.execute(agent_message.insert().values(session_id=session_id, **m))


def run(cli, db, *args, code=0):
    result = cli("--db", db.url, *args)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def body(text: str) -> list[str]:
    """A human `context show` without its `context:` line (it says which checkpoint replaced
    this one, the only line allowed to change once a later checkpoint exists), nor the lines
    it wraps onto (indented under its value)."""
    kept: list[str] = []
    skipping = False
    for line in text.splitlines():
        skipping = line.startswith("context:") or (skipping and line.startswith(" " * 19))
        if not skipping:
            kept.append(line)
    return kept


def compacted_twice(db, cli):
    add_session(db, 1, coding_session(14), model="gpt-4o", system_prompt="You are a coder.")
    run(cli, db, "compact", "1", "--force", *WINDOW, "--keep-recent-tokens", "2500")
    after_first = {
        args: run(cli, db, "context", "show", "1", *args).output
        for args in ((), ("--full",), ("--json",), ("--openai",), ("--width", "0"))
    }
    run(cli, db, "compact", "1", "--force", *WINDOW, "--keep-recent-tokens", "900")
    cps = db.rows("SELECT id, first_kept_message_id, summary FROM agent_compaction ORDER BY id")
    assert len(cps) == 2 and cps[0]["first_kept_message_id"] < cps[1]["first_kept_message_id"]
    now = "CURRENT_TIMESTAMP(6)" if db.kind == "mysql" else "strftime('%Y-%m-%d %H:%M:%f', 'now')"
    wait_until(
        lambda: db.scalar(f"SELECT MAX(created_at) < {now} FROM agent_compaction"),
        "the store's clock to pass the second checkpoint's time",
    )
    add_messages(db, 1, coding_session(1, tag=" after both"))  # the agent carries on
    return cps, after_first


def test_show_at_leaves_out_messages_imported_after_the_next_checkpoint_whatever_their_times(
    db, cli
):
    """Found by review: messages imported after ctxtool's second checkpoint, carrying their
    transcript's (earlier) times, showed up in `--at` of the first: its bound compared those
    times with the checkpoint's database time. ctxtool records the newest message stored when
    it appends a checkpoint, and `--at` and validate bound by it."""
    add_session(db, 1, coding_session(14), model="gpt-4o", system_prompt="You are a coder.")
    run(cli, db, "compact", "1", "--force", *WINDOW, "--keep-recent-tokens", "2500")
    add_messages(
        db,
        1,
        [
            {**m, "created_at": "2020-01-01 00:00:00"}
            for m in coding_session(2, tag=" imported late, before the second")
        ],
    )
    then = json.loads(run(cli, db, "context", "show", "1", "--json").output)
    run(cli, db, "compact", "1", "--force", *WINDOW, "--keep-recent-tokens", "900")
    add_messages(
        db,
        1,
        [
            {**m, "created_at": "2020-01-01 00:00:00"}
            for m in coding_session(2, tag=" imported late, after the second")
        ],
    )
    cps = db.rows("SELECT id FROM agent_compaction ORDER BY id")
    at = json.loads(
        run(cli, db, "context", "show", "1", "--at", str(cps[0]["id"]), "--json").output
    )
    assert at["messages"] == then["messages"] and at["summary"] == then["summary"]
    assert not any("after the second" in (m["content"] or "") for m in at["messages"])
    latest = json.loads(run(cli, db, "context", "show", "1", "--json").output)
    assert any("after the second" in (m["content"] or "") for m in latest["messages"])
    human = run(cli, db, "context", "show", "1", "--at", str(cps[0]["id"])).output
    assert "were stored by then (through message" in human


def test_show_at_first_checkpoint_equals_show_right_after_it(db, cli):
    cps, after_first = compacted_twice(db, cli)
    first = str(cps[0]["id"])
    for args, printed in after_first.items():
        now = run(cli, db, "context", "show", "1", "--at", first, *args).output
        if "--json" in args:
            then, now = json.loads(printed), json.loads(now)
            assert now["messages"] == then["messages"] and now["summary"] == then["summary"]
            assert now["context_tokens"] == then["context_tokens"]
            assert now["replaced_by_checkpoint_id"] == cps[1]["id"]
        elif "--openai" in args:
            assert now == printed
        else:
            assert body(now) == body(printed)
    exported = run(cli, db, "context", "export", "1", "--at", first, "--format", "jsonl").output
    assert [json.loads(line) for line in exported.splitlines()] == json.loads(
        after_first[("--openai",)]
    )
    markdown = run(cli, db, "context", "export", "1", "--at", first).output
    assert f"summary of checkpoint {first}" in markdown and "after both" not in markdown
    latest = json.loads(run(cli, db, "context", "show", "1", "--json").output)
    assert latest["checkpoint_id"] == cps[1]["id"]
    assert any("after both" in (m["content"] or "") for m in latest["messages"])


def test_checkpoints_diff_and_before_first(db, cli):
    cps, _ = compacted_twice(db, cli)
    rows = json.loads(run(cli, db, "context", "checkpoints", "1", "--json").output)
    assert [(r["checkpoint_id"], r["parent_id"], r["first_kept_message_id"]) for r in rows] == [
        (cps[0]["id"], None, cps[0]["first_kept_message_id"]),
        (cps[1]["id"], cps[0]["id"], cps[1]["first_kept_message_id"]),
    ]
    first_id = db.scalar("SELECT MIN(id) FROM agent_message WHERE session_id = 1")
    assert rows[0]["messages_summarised"] == db.scalar(
        "SELECT COUNT(*) FROM agent_message WHERE id < :c", c=cps[0]["first_kept_message_id"]
    )
    assert all(
        r["summarizer"] == "extractive" and r["summary_tokens"] > 0 and 0 < r["score"] <= 1
        for r in rows
    )
    assert rows[1]["carry_over"] is not None  # the second summary carried the first forward
    header = json.loads(run(cli, db, "context", "show", "1", "--json").output)
    assert "probes" in header["summary_quality"]
    table = run(cli, db, "context", "checkpoints", "1").output
    assert "summarized" in table and "extractive" in table and "%" in table

    d = json.loads(run(cli, db, "context", "diff", "1", "--json").output)
    assert (d["from_checkpoint_id"], d["to_checkpoint_id"]) == (cps[0]["id"], cps[1]["id"])
    assert [m["id"] for m in d["newly_summarised"]] == list(
        range(cps[0]["first_kept_message_id"], cps[1]["first_kept_message_id"])
    )
    assert d["summary_diff"][0].startswith("--- checkpoint")
    human = run(cli, db, "context", "diff", "1").output
    assert (
        f"cut: message {cps[0]['first_kept_message_id']} -> {cps[1]['first_kept_message_id']}"
        in human
        and "went from kept to summarized" in human
    )
    columns = run(cli, db, "context", "diff", "1", "--side-by-side").output
    assert f"checkpoint {cps[0]['id']}" in columns and " | " in columns
    d0 = json.loads(run(cli, db, "context", "diff", "1", "0", str(cps[0]["id"]), "--json").output)
    # Counting from the latest, as --at does; options before, between or after the numbers.
    for args in (
        ["-2", "-1", "--json"],
        ["--json", "-2", "-1"],
        ["-2", "--json", "-1"],
        ["-1", "--json"],
        ["-2", str(cps[1]["id"]), "--json"],
    ):
        assert json.loads(run(cli, db, "context", "diff", "1", *args).output) == d, args
    assert json.loads(run(cli, db, "context", "diff", "1", "0", "-2", "--json").output) == d0
    result = run(cli, db, "context", "diff", "1", "-3", "-1", code=1)
    assert "checkpoint -3 is not one of its checkpoints" in result.output
    assert d0["from_checkpoint_id"] is None and d0["newly_summarised"][0]["id"] == first_id
    for args in (["0"], [str(cps[0]["id"]), "0"]):  # 0 is A's alone: said so, with the way
        result = run(cli, db, "context", "diff", "1", *args, code=1)
        assert "0 (before the first checkpoint) can only be A" in result.output
        assert f"context diff 1 0 {cps[0]['id']}" in result.output
        assert "is not one of its checkpoints" not in result.output

    before = json.loads(run(cli, db, "context", "show", "1", "--before-first", "--json").output)
    assert before["summary"] is None and before["checkpoint_id"] is None
    assert before["messages"][1]["id"] == first_id  # after the system prompt, no summary
    added = db.scalar("SELECT MIN(id) FROM agent_message WHERE content LIKE '%after both%'")
    original = [
        r["id"] for r in db.rows("SELECT id FROM agent_message WHERE id < :a ORDER BY id", a=added)
    ]
    assert [m["id"] for m in before["messages"][1:]] == original  # not what came after
    assert (
        run(cli, db, "context", "show", "1", "--at", "-2", "--openai").output
        == run(cli, db, "context", "show", "1", "--at", str(cps[0]["id"]), "--openai").output
    )
    result = run(cli, db, "context", "show", "1", "--at", "999", code=1)
    assert "session 1: checkpoint 999 is not one of its checkpoints" in result.output
    run(cli, db, "context", "show", "1", "--at", str(cps[0]["id"]), "--before-first", code=2)


def test_full_view_json_fields_and_row_formats(db, cli):
    add_session(db, 1, coding_session(3), model="gpt-4o")
    add_messages(
        db,
        1,
        [
            {
                "role": "assistant",
                "content": "Checking.\nTwo lines.",
                "tool_calls": [
                    {
                        "id": "call_x",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": "ls"})},
                    }
                ],
            },
            {"role": "user", "content": "stop"},
        ],
    )
    full = run(cli, db, "context", "show", "1", "--full").output
    assert "result of read (call1)" in full
    assert '→ call read({"path": "src/mod1.py"})' in full
    assert "Checking.\nTwo lines." in full  # real newlines
    assert (
        "line 3: value = compute(3)"
        in full.splitlines()[
            full.splitlines().index(
                next(line for line in full.splitlines() if "result of read (call0)" in line)
            )
            + 4
        ]
    )
    assert "no result was recorded for bash (call_x)" in full
    table = run(cli, db, "context", "show", "1", "--width", "0").output
    assert "synthetic results:" in table and "⚠ no result bash" in table
    assert "← read" in table and "→ read" in table

    doc = json.loads(run(cli, db, "context", "show", "1", "--json").output)
    stored = db.rows("SELECT id, token_count FROM agent_message WHERE session_id = 1 ORDER BY id")
    msgs = [m for m in doc["messages"] if m["kind"] in ("message", "moved_result")]
    assert [m["id"] for m in msgs] == [r["id"] for r in stored]
    assert all(m["created_at"] and m["token_count"] > 0 for m in msgs)
    synthetic = [m for m in doc["messages"] if m["kind"] == "synthetic_result"]
    assert synthetic == [
        {
            "id": None,
            "created_at": None,
            "token_count": synthetic[0]["token_count"],
            "kind": "synthetic_result",
            "role": "tool",
            "content": NO_RESULT_TEXT,
            "tool_call_id": "call_x",
        }
    ]
    assert doc["context_tokens"] == 3 + sum(m["token_count"] for m in doc["messages"])
    openai = json.loads(run(cli, db, "context", "show", "1", "--openai").output)
    assert openai[-2] == {"role": "tool", "content": NO_RESULT_TEXT, "tool_call_id": "call_x"}
    assert openai[-1]["content"] == "stop"

    for option in ("--csv", "--nl", "--fmt"):
        assert cli("--db", db.url, "context", "show", "1", option).exit_code == 2


def test_stored_escape_sequences_never_reach_the_terminal(db, cli):
    evil = "\x1b]52;c;SGVsbG8=\x07\x1b[2Jcleared"
    add_session(
        db,
        1,
        [{"role": "user", "content": "hi " + evil}, {"role": "assistant", "content": "ok " + evil}],
        model="gpt-4o",
        system_prompt="sys " + evil,
    )
    with db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE agent_session SET title = 'T \x1b[2J'")
    for args in ((), ("--full",), ("--width", "0")):
        out = run(cli, db, "context", "show", "1", *args).output
        assert "\x1b" not in out and "\x07" not in out and "\\x1b]52" in out
    for fmt in ("markdown", "html"):
        out = run(cli, db, "context", "export", "1", "--format", fmt).output
        assert "\x1b" not in out and "\x07" not in out
    assert "\x1b" not in run(cli, db, "sessions", "list").output
    for fmt in ("--csv", "--nl"):  # a CSV read in a terminal must not drive it either
        assert "\x1b" not in run(cli, db, "sessions", "list", fmt).output.replace("\\u001b", "")
    doc = json.loads(run(cli, db, "context", "show", "1", "--json").output)
    assert doc["messages"][1]["content"] == "hi " + evil  # --json stays exact


def test_sessions_are_addressed_by_source_id_or_prefix(db, cli):
    for sid in (1, 2, 3):
        add_session(db, sid, coding_session(1), model="gpt-4o")
    with db.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE agent_session SET source_format = 'claude-code', source_id = "
            "'fe5e1c67-53e7-4862-81ae-d0e013e3270b' WHERE session_id = 2"
        )
        conn.exec_driver_sql(
            "UPDATE agent_session SET source_format = 'codex', source_id = "
            "'fe5e9999-0000-4000-8000-000000000000' WHERE session_id = 3"
        )
    for ref in (
        "2",
        "fe5e1c67-53e7-4862-81ae-d0e013e3270b",
        "fe5e1",
        "claude-code:fe5e",
        "claude-code:fe5e1c67-53e7-4862-81ae-d0e013e3270b",
    ):
        doc = json.loads(run(cli, db, "context", "show", ref, "--json").output)
        assert doc["session_id"] == 2, ref
    assert (
        json.loads(run(cli, db, "context", "show", "codex:fe5e", "--json").output)["session_id"]
        == 3
    )
    result = run(cli, db, "context", "show", "fe5e", code=1)
    assert "session fe5e is ambiguous" in result.output
    assert "2 (claude-code:fe5e1c67" in result.output and "3 (codex:fe5e9999" in result.output
    assert len(result.output.strip().splitlines()) == 1
    result = run(cli, db, "context", "checkpoints", "nope", code=1)
    assert (
        result.output.strip() == "Error: session nope does not exist (no session id, source "
        "id or source id prefix matches it)"
    )
    run(cli, db, "context", "diff", "fe5e1", code=1)  # no checkpoints: one clear line
    from ctxtool.store import Store

    assert Store(db.engine).resolve_session("fe5e9") == 3


def test_long_output_is_paged_on_a_terminal_only(sqlite_db, tmp_path):
    """The real entry point in a pseudo-terminal goes through $PAGER; piped, it does not.
    Where the output goes is the terminal's business, the same on every database."""
    import pty

    db = sqlite_db
    add_session(db, 1, coding_session(6), model="gpt-4o")
    paged = tmp_path / "paged.txt"
    pager = tmp_path / "pager.sh"
    pager.write_text(f"#!/bin/sh\ncat > {paged}\n")
    pager.chmod(0o755)
    env = {
        **os.environ,
        "PAGER": str(pager),
        "PYTHONPATH": str(PROJECT),
        "CTXTOOL_DATABASE_URL": db.url,
    }
    env.pop("COLUMNS", None)
    command = [sys.executable, "-m", "ctxtool", "context", "show", "1", "--full"]
    piped = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0 and "result of read (call5)" in piped.stdout
    assert not paged.exists()

    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin and stdout are the terminal
        os.execvpe(command[0], command, env)
    while True:
        try:
            if not os.read(fd, 65536):
                break
        except OSError:
            break
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert "result of read (call5)" in paged.read_text()


# -- every shared transcript -------------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def chat_completions_errors(messages: list[dict]) -> list[str]:
    """The Chat Completions message rules, strictly: roles and fields by role; every assistant
    `tool_calls` answered, each id exactly once, by `tool` messages before any other message;
    no `tool` message that does not answer the call just before it; call ids unique in a message;
    arguments are strings; a message `name` matches the API's pattern."""
    errors: list[str] = []
    pending: set[str] | None = None
    allowed = {
        "system": {"role", "content", "name"},
        "developer": {"role", "content", "name"},
        "user": {"role", "content", "name"},
        "assistant": {"role", "content", "name", "tool_calls"},
        "tool": {"role", "content", "tool_call_id"},
    }
    if not messages:
        return ["empty list"]
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in allowed:
            errors.append(f"{i}: role {role!r}")
            continue
        if set(m) - allowed[role]:
            errors.append(f"{i}: fields {sorted(set(m) - allowed[role])} not allowed for {role}")
        if "name" in m and not _NAME.match(str(m["name"])):
            errors.append(f"{i}: name {m['name']!r}")
        if role == "tool":
            if not isinstance(m.get("content"), str):
                errors.append(f"{i}: tool content must be a string")
            if pending is None or m.get("tool_call_id") not in pending:
                errors.append(
                    f"{i}: tool message {m.get('tool_call_id')!r} answers no pending call"
                )
            else:
                pending.discard(m["tool_call_id"])
            continue
        if pending:
            errors.append(f"{i}: {role} message before the results of {sorted(pending)}")
        pending = None
        if role in ("system", "developer", "user") and not isinstance(m.get("content"), str):
            errors.append(f"{i}: {role} content must be a string")
        if role == "assistant":
            calls = m.get("tool_calls")
            if m.get("content") is None and not calls:
                errors.append(f"{i}: assistant with neither content nor tool_calls")
            if m.get("content") is not None and not isinstance(m["content"], str):
                errors.append(f"{i}: assistant content must be a string or null")
            if calls is not None:
                if not isinstance(calls, list) or not calls:
                    errors.append(f"{i}: tool_calls must be a non-empty list")
                    continue
                pending = set()
                seen: set[str] = set()
                for c in calls:
                    fn = c.get("function") or {}
                    if set(c) != {"id", "type", "function"} or c.get("type") != "function":
                        errors.append(f"{i}: tool call shape {sorted(c)}")
                    if not isinstance(c.get("id"), str) or not c["id"] or c["id"] in seen:
                        errors.append(f"{i}: tool call id {c.get('id')!r} missing or repeated")
                    if not isinstance(fn.get("name"), str) or not fn["name"]:
                        errors.append(f"{i}: tool call without a function name")
                    if not isinstance(fn.get("arguments"), str):
                        errors.append(f"{i}: arguments must be a JSON string")
                    seen.add(c.get("id"))
                    pending.add(c.get("id"))
    if pending:
        errors.append(f"end: the list ends before the results of {sorted(pending)}")
    return errors


def test_the_checker_catches_what_the_api_rejects():
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    assert chat_completions_errors([{"role": "user", "content": "x"}, call])
    assert chat_completions_errors(
        [
            call,
            {"role": "user", "content": "x"},
            {"role": "tool", "content": "r", "tool_call_id": "a"},
        ]
    )
    assert chat_completions_errors([{"role": "tool", "content": "r", "tool_call_id": "a"}])
    assert not chat_completions_errors(
        [call, {"role": "tool", "content": "r", "tool_call_id": "a"}]
    )


def merge_leading_system(messages: list[dict]) -> list[dict]:
    """The openai-chat reader's one rule that changes a list: leading system messages become
    one system prompt, joined by blank lines (a Codex session starting with developer notes)."""
    lead = 0
    while lead < len(messages) and messages[lead]["role"] == "system":
        lead += 1
    if lead < 2:
        return messages
    joined = "\n\n".join(m["content"] for m in messages[:lead])
    return [{"role": "system", "content": joined}] + messages[lead:]


def test_every_shared_transcript(db, cli, tmp_path):
    imported = json.loads(run(cli, db, "import", str(TRANSCRIPTS), "--json").output)
    files = imported["files"] if isinstance(imported, dict) else imported
    ids = sorted({f["session_id"] for f in files if f.get("session_id")})
    assert len(ids) == len(list(TRANSCRIPTS.rglob("*.json*")) + list(TRANSCRIPTS.rglob("*.traj")))
    with_checkpoints = 0
    synthetic = 0
    for sid in ids:
        openai = json.loads(run(cli, db, "context", "show", sid, "--openai").output)
        assert chat_completions_errors(openai) == [], f"session {sid}"
        doc = json.loads(run(cli, db, "context", "show", sid, "--json").output)
        synthetic += doc["synthetic_results"]
        assert [
            {k: v for k, v in m.items() if k not in ("id", "created_at", "token_count", "kind")}
            for m in doc["messages"]
        ] == openai
        for args in ((), ("--full",)):
            run(cli, db, "context", "show", sid, *args)
        checkpoints = json.loads(run(cli, db, "context", "checkpoints", sid, "--json").output)
        if checkpoints:
            with_checkpoints += 1
            run(cli, db, "context", "diff", sid)
            at = json.loads(
                run(
                    cli,
                    db,
                    "context",
                    "show",
                    sid,
                    "--at",
                    checkpoints[0]["checkpoint_id"],
                    "--json",
                ).output
            )
            assert at["checkpoint_id"] == checkpoints[0]["checkpoint_id"]
            assert (
                chat_completions_errors(
                    json.loads(
                        run(
                            cli,
                            db,
                            "context",
                            "show",
                            sid,
                            "--at",
                            checkpoints[0]["checkpoint_id"],
                            "--openai",
                        ).output
                    )
                )
                == []
            )
            before = json.loads(
                run(cli, db, "context", "show", sid, "--before-first", "--openai").output
            )
            assert chat_completions_errors(before) == [] and before != openai
        for fmt in ("markdown", "html"):
            run(cli, db, "context", "export", sid, "--format", fmt, "-o", tmp_path / f"{sid}.{fmt}")
        # jsonl: ctxtool import reads it back to the same restored context.
        out = tmp_path / f"roundtrip-{sid}.jsonl"
        run(cli, db, "context", "export", sid, "--format", "jsonl", "-o", out)
        back = json.loads(run(cli, db, "import", out, "--format", "openai-chat", "--json").output)
        back_files = back["files"] if isinstance(back, dict) else back
        again = json.loads(
            run(cli, db, "context", "show", back_files[0]["session_id"], "--openai").output
        )
        assert again == merge_leading_system(openai), f"session {sid}"
    assert with_checkpoints >= 5 and synthetic >= 1
    rows = json.loads(run(cli, db, "sessions", "list", "--search", "fe5e1c67", "--json").output)
    assert [r["source"] for r in rows] == ["claude-code:fe5e1c67-53e7-4862-81ae-d0e013e3270b"]
    by_uuid = json.loads(
        run(cli, db, "context", "show", "fe5e1c67-53e7-4862-81ae-d0e013e3270b", "--json").output
    )
    assert by_uuid["session_id"] == rows[0]["session_id"]


def test_odd_tool_calls_a_runtime_wrote_are_shown_not_fatal(db, cli, tmp_path):
    add_session(db, 1, [{"role": "user", "content": "go"}], model="gpt-4o")
    odd = [
        {"a": 1},
        ["call_1"],
        [None],
        42,
        [{"id": "c9", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}],
    ]
    add_messages(
        db,
        1,
        [
            {"role": "assistant", "content": f"odd {i}", "tool_calls": calls}
            for i, calls in enumerate(odd)
        ],
    )
    for args in ((), ("--full",), ("--json",), ("--width", "0")):
        run(cli, db, "context", "show", "1", *args)
    for fmt in ("markdown", "html", "jsonl"):
        run(cli, db, "context", "export", "1", "--format", fmt, "-o", tmp_path / f"x.{fmt}")
    openai = json.loads(run(cli, db, "context", "show", "1", "--openai").output)
    assert chat_completions_errors(openai) == []
    assert openai[-2]["tool_calls"] == [
        {"id": "c9", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    ]
    assert openai[-1] == {"role": "tool", "content": NO_RESULT_TEXT, "tool_call_id": "c9"}


def test_text_a_runtime_wrote_into_json_columns_is_kept_not_fatal(sqlite_db, cli):
    """SQLite lets a runtime write anything into a JSON column. Such a value is one odd value,
    not a failed command: checkpoint and session details and message tool calls used to be
    read through SQLAlchemy's JSON type, whose decode error ended `validate`, `context show`,
    `tokens report` and `compact --all` (every other session left uncompacted) as an
    internal error. Broken tool calls are what `validate` reports instead."""
    import sqlalchemy as sa

    db = sqlite_db
    ids = add_session(
        db,
        1,
        [
            {"role": "user", "content": "do it"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "next"},
        ],
        model="gpt-4o",
    )
    add_session(db, 2, [{"role": "user", "content": "fine"}], model="gpt-4o")
    with db.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE agent_session SET details = 'not json {' WHERE session_id = 1")
        )
        conn.execute(
            sa.text(
                "INSERT INTO agent_compaction (session_id, summary, "
                "first_kept_message_id, details) VALUES (1, 'S1', :f, 'not json {')"
            ),
            {"f": ids[2]},
        )
        conn.execute(
            sa.text(
                "INSERT INTO agent_message (session_id, role, content, tool_calls, "
                "details) VALUES (1, 'assistant', 'x', '[{bad', '{also bad')"
            )
        )
    for args in (
        ("context", "show", "1"),
        ("context", "show", "1", "--json"),
        ("context", "checkpoints", "1", "--json"),
        ("tokens", "count", "--all"),
        ("tokens", "report", "--json"),
        ("sessions", "list", "--json"),
        ("compact", "--all", "--dry-run"),
    ):
        result = run(cli, db, *args)
        assert "internal error" not in result.output, (args, result.output)
    shown = json.loads(run(cli, db, "context", "checkpoints", "1", "--json").output)
    assert [c["first_kept_message_id"] for c in shown] == [ids[2]]
    found = json.loads(run(cli, db, "validate", "--json", code=1).stdout)
    assert {(f["session_id"], f["rule"]) for f in found} == {(1, "malformed_tool_calls")}
