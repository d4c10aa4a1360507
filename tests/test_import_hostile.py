"""Hostile input (issue 9 item 3): several hundred malformed transcripts of every format,
generated from small valid ones, imported as one directory through the real CLI (on MariaDB
the hundred or so of them that carry every kind of damage, see ``generate``).

Whatever the damage, the run ends with its summary: exit code 0, 1 or 4, no traceback, every
error one line naming its file (and line where there is one), and the row counts show nothing
half-written: the database holds exactly what the successful files report, and a second run
adds nothing."""

from __future__ import annotations

import copy
import json
import random
import re
from pathlib import Path

import pytest

FILES_PER_FORMAT = 100
HOSTILE_VALUES = [
    [],
    ["a", "list"],
    {"an": "object"},
    0,
    -1,
    10**30,
    3.5,
    True,
    None,
    "",
    "x" * 300,
    "\ud800",
    "lone \udc00 low",
    "\x00nul",
    "\x1b[2Jescape",
    "y" * 70_000,
    "__NAN__",
    "__INFINITY__",
    "__BIGINT__",
    "__DEEP__",
    "__DEEP40__",
    [{"type": "text", "text": ["nested"]}],
    [{"type": None}],
    [None, 1, "s"],
]
RAW = {
    '"__NAN__"': "NaN",
    '"__INFINITY__"': "-Infinity",
    '"__BIGINT__"': "9" * 5000,
    '"__DEEP__"': "[" * 3000 + "]" * 3000,
    '"__DEEP40__"': "[" * 40 + "1" + "]" * 40,
}


def _claude(n: str) -> list[dict]:
    def rec(uuid, parent, kind, message, **extra):
        return {
            "type": kind,
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": f"cc-{n}",
            "timestamp": "2026-01-01T00:00:00Z",
            "isSidechain": False,
            "message": message,
            **extra,
        }

    return [
        rec("u1", None, "user", {"role": "user", "content": "fix the bug"}),
        rec(
            "a1",
            "u1",
            "assistant",
            {
                "id": "m1",
                "role": "assistant",
                "model": "claude-x",
                "content": [
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a.py"}},
                ],
                "usage": {"input_tokens": 10, "output_tokens": 2},
            },
        ),
        rec(
            "r1",
            "a1",
            "user",
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "print(1)"}],
            },
        ),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "b1",
            "parentUuid": None,
            "logicalParentUuid": "r1",
            "sessionId": f"cc-{n}",
            "compactMetadata": {"preTokens": 900},
        },
        rec(
            "s1",
            "b1",
            "user",
            {"role": "user", "content": "Summary: read a.py"},
            isCompactSummary=True,
        ),
        rec("u2", "s1", "user", {"role": "user", "content": "now test it"}),
        rec(
            "a2",
            "u2",
            "assistant",
            {"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        ),
    ]


def _codex(n: str) -> list[dict]:
    def line(kind, **payload):
        return {"timestamp": "2026-01-01T00:00:00Z", "type": kind, "payload": payload}

    return [
        line("session_meta", id=f"cx-{n}", cwd="/w", base_instructions={"text": "be careful"}),
        line("turn_context", model="gpt-5"),
        line(
            "response_item",
            type="message",
            role="user",
            content=[{"type": "input_text", "text": "go"}],
        ),
        line(
            "response_item",
            type="function_call",
            name="shell",
            arguments='{"cmd": "ls"}',
            call_id="c1",
        ),
        line("response_item", type="function_call_output", call_id="c1", output={"output": "a.py"}),
        line(
            "compacted",
            message="Summary",
            replacement_history=[
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "go"}],
                }
            ],
        ),
        line("event_msg", type="token_count", info={"last_token_usage": {"input_tokens": 5}}),
        line(
            "response_item",
            type="message",
            role="assistant",
            content=[{"type": "output_text", "text": "done"}],
        ),
    ]


def _pi(n: str) -> list[dict]:
    def entry(i, parent, message):
        return {
            "type": "message",
            "id": i,
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:00Z",
            "message": message,
        }

    return [
        {
            "type": "session",
            "version": 3,
            "id": f"pi-{n}",
            "timestamp": "2026-01-01T00:00:00Z",
            "cwd": "/w",
        },
        entry("e1", None, {"role": "user", "content": "goal"}),
        entry(
            "e2",
            "e1",
            {
                "role": "assistant",
                "model": "m",
                "content": [
                    {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"p": 1}}
                ],
                "usage": {"input": 3, "output": 1},
            },
        ),
        entry(
            "e3",
            "e2",
            {"role": "toolResult", "toolCallId": "c1", "content": [{"type": "text", "text": "A"}]},
        ),
        {
            "type": "compaction",
            "id": "e4",
            "parentId": "e3",
            "summary": "s",
            "firstKeptEntryId": "e3",
            "tokensBefore": 10,
        },
        {"type": "model_change", "id": "e5", "parentId": "e4", "modelId": "gpt-5"},
        entry("e6", "e5", {"role": "user", "content": "next"}),
    ]


def _chat(n: str) -> list[dict]:
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": f"task {n}", "id": f"u-{n}"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": "done", "extra": {"k": [1, 2]}},
    ]


def _openhands(n: str) -> list[dict]:
    response = {
        "id": f"chatcmpl-{n}",
        "model": "claude-3-5-sonnet",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": "listing",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "execute_bash", "arguments": '{"command":"ls"}'},
                        }
                    ],
                }
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5},
    }
    metadata = {"function_name": "execute_bash", "tool_call_id": "c1"}
    return [
        {"id": 0, "source": "environment", "observation": "agent_state_changed", "extras": {}},
        {"id": 1, "source": "user", "action": "message", "args": {"content": f"task {n}"}},
        {
            "id": 2,
            "source": "agent",
            "action": "run",
            "args": {"command": "ls", "thought": "listing"},
            "tool_call_metadata": {**metadata, "model_response": response},
        },
        {
            "id": 3,
            "source": "agent",
            "observation": "run",
            "content": "a.py",
            "extras": {"metadata": {"prefix": "", "suffix": "\n[exit code 0]"}},
            "tool_call_metadata": metadata,
        },
        {"id": 4, "source": "agent", "action": "finish", "args": {"thought": "done"}},
    ]


BASES = {
    "claude-code": _claude,
    "codex": _codex,
    "pi": _pi,
    "openai-chat": _chat,
    "openhands": _openhands,
}


def _poke(rng: random.Random, rec: dict) -> tuple:
    """Replace a value somewhere inside ``rec`` (any depth) with a hostile one; returns which
    value went under which key, the damage a file carries (see ``generate``)."""
    node = rec
    for _ in range(rng.randint(0, 4)):
        children = [
            v
            for v in (node.values() if isinstance(node, dict) else node)
            if isinstance(v, (dict, list)) and v
        ]
        if not children:
            break
        node = rng.choice(children)
    chosen = rng.randrange(len(HOSTILE_VALUES))  # as rng.choice draws it
    value = copy.deepcopy(HOSTILE_VALUES[chosen])  # never shared: no cycles
    if isinstance(node, dict):
        key = rng.choice(list(node)) if node and rng.random() < 0.85 else "extra"
        node[key] = value
        return (("value", chosen), ("key", key))
    if node:
        node[rng.randrange(len(node))] = value
    return (("value", chosen), ("key", "[]"))


def _serialise(rec: dict) -> bytes:
    text = json.dumps(rec)
    for marker, raw in RAW.items():
        text = text.replace(marker, raw)
    return text.encode("utf-8", "surrogatepass") + b"\n"


def _raw_damage(rng: random.Random, lines: list[bytes]) -> tuple:
    i = rng.randrange(len(lines))
    kind = rng.randrange(9)
    _damage_lines(rng, lines, i, kind)
    return ("raw", kind)


def _damage_lines(rng: random.Random, lines: list[bytes], i: int, kind: int) -> None:
    if kind == 0:
        lines[i] = lines[i][: rng.randrange(1, len(lines[i]))] + b"\n"  # cut short
    elif kind == 1:
        lines[i] = lines[i][:5] + b"\xff\xfe" + lines[i][5:]  # invalid UTF-8
    elif kind == 2:
        lines[i] = rng.choice([b"[1, 2]\n", b'"a string"\n', b"null\n", b"42\n", b"{}\n"])
    elif kind == 3:
        lines.insert(i, bytes(rng.randrange(256) for _ in range(64)) + b"\n")  # binary
    elif kind == 4:
        lines[0] = b"\xef\xbb\xbf" + lines[0]  # byte order mark
    elif kind == 5:
        lines.insert(i, lines[i])  # a duplicated record
    elif kind == 6:
        del lines[0]  # the header is gone
    elif kind == 7:
        lines[-1] = lines[-1].rstrip(b"\n")  # still being written
    else:
        lines[:] = [b"\n", b"   \n"] if rng.random() < 0.5 else [b"\t\n"]  # empty


def generate(folder: Path, covering: bool = False) -> int:
    """FILES_PER_FORMAT damaged transcripts of each format. ``covering`` writes only the files
    that bring a damage not seen before in their format (a hostile value, a key poked, a kind
    of raw damage): every one still reaches the store, in fewer files (on a server, round
    trips are what the run costs)."""
    rng = random.Random(9)
    count = 0
    seen: set[tuple] = set()
    for fmt, base in BASES.items():
        for n in range(FILES_PER_FORMAT):
            records = base(f"{n}")
            damage = {
                (fmt, *part)
                for _ in range(rng.randint(1, 3))
                for part in _poke(rng, rng.choice(records))
            }
            lines = [_serialise(r) for r in records]
            if rng.random() < 0.3:
                damage.add((fmt, *_raw_damage(rng, lines)))
            if covering and damage <= seen:
                continue
            seen |= damage
            (folder / f"{fmt}-{n:03d}.jsonl").write_bytes(b"".join(lines))
            count += 1
    return count


def _counts(db) -> tuple[int, int, int]:
    return tuple(
        db.scalar(f"SELECT COUNT(*) FROM {t}")
        for t in ("agent_session", "agent_message", "agent_compaction")
    )


@pytest.mark.parametrize("skip_invalid", [False, True], ids=["strict", "skip-invalid"])
def test_hundreds_of_hostile_transcripts_end_in_a_summary_and_leave_nothing_half_written(
    db, cli, tmp_path, skip_invalid
):
    folder = tmp_path / "hostile"
    folder.mkdir()
    # Every file on SQLite; on the server the files that carry each damage first (the parsing
    # is the same code, what reaches the store is each damage at least once).
    covering = db.kind != "sqlite"
    total = generate(folder, covering)
    assert total >= (100 if covering else 400)
    options = ["--skip-invalid"] if skip_invalid else []
    result = cli("--db", db.url, "import", "--json", *options, folder)  # an exception fails here
    assert result.exit_code in (0, 1, 4), result.output
    assert "Traceback" not in result.output
    rows = json.loads(result.stdout)
    assert len(rows) == total
    failed = [r for r in rows if r["error"]]
    ok = [r for r in rows if not r["error"]]
    assert result.exit_code == (0 if not failed else 1 if not ok else 4)
    assert failed and ok  # the generator damages some files beyond use, and spares others
    for row in failed:
        assert re.match(re.escape(row["file"]) + r"(:\d+)?: \S", row["error"]), row["error"]
        assert "\n" not in row["error"] and len(row["error"]) < 600, row["error"]
        assert "internal error" not in row["error"], row["error"]
        assert f"Error: {row['error']}" in result.stderr
    # Nothing half-written: the store holds exactly what the successful files report.
    # (An emptied file is no failure and has no session: nothing was written in it yet.)
    sessions = {r["session_id"] for r in ok if r["session_id"] is not None}
    assert any(r["skipped_by_kind"].get("empty_file") for r in ok)
    assert _counts(db) == (
        len(sessions),
        sum(r["added"] for r in ok),
        sum(r["compactions"] for r in ok),
    )
    # And a second run adds nothing, failing the same files the same way.
    before = _counts(db)
    again = json.loads(cli("--db", db.url, "import", "--json", *options, folder).stdout)
    assert [r["error"] for r in again] == [r["error"] for r in rows]
    assert all(r["added"] == 0 and r["compactions"] == 0 for r in again)
    assert _counts(db) == before


def test_terminal_controls_leave_as_json_escapes_and_a_non_utf8_session_is_an_error(
    db, cli, tmp_path
):
    """Issue 32 item 0: C1 controls (U+009B is a CSI) and bidi overrides are valid JSON, but
    written raw a terminal runs or reorders them: every JSON output escapes them as \\u009b.
    A session argument that is not UTF-8 is one error line, never a traceback."""
    hostile = "title \x9b31m red \u202eevil\u202c \x85 end"
    path = tmp_path / "controls.jsonl"
    path.write_text(
        json.dumps({"role": "user", "content": hostile})
        + "\n"
        + json.dumps({"role": "assistant", "content": "ok \u2066x\u2069"})
        + "\n"
    )
    assert cli("--db", db.url, "import", path).exit_code == 0
    raw = re.compile("[\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
    outputs = {
        "show --json": cli("--db", db.url, "context", "show", "1", "--json").output,
        "show --openai": cli("--db", db.url, "context", "show", "1", "--openai").output,
        "list --nl": cli("--db", db.url, "sessions", "list", "--nl").output,
        "export jsonl": cli("--db", db.url, "context", "export", "1", "--format", "jsonl").output,
    }
    for name, text in outputs.items():
        assert not raw.search(text), name
        assert "\\u009b31m" in text, name
    messages = [json.loads(line) for line in outputs["export jsonl"].splitlines()]
    assert messages[0]["content"] == hostile  # the same text, escaped
    assert json.loads(outputs["list --nl"].splitlines()[0])["title"].startswith("title \x9b31m")

    for command in (("context", "show"), ("context", "export"), ("validate",), ("tokens", "count")):
        result = cli("--db", db.url, *command, b"\xff".decode("utf-8", "surrogateescape"))
        assert result.exit_code == 1, (command, result.output)
        assert "session \\udcff does not exist (not valid UTF-8)" in result.output, command
        assert "Traceback" not in result.output and "internal error" not in result.output


def test_a_pi_v1_file_whose_lines_shifted_is_refused_not_added_to(db, cli, tmp_path):
    """#32: Pi v1 message ids are line numbers. A line inserted in the middle of the file (past
    the first messages the store compares) shifts every id after it onto another message;
    when the last stored id then falls on a line that is no message (here: the file was
    imported while it ended after a model_change), nothing was compared and re-importing added
    the shifted messages again. A stored message after one the store lacks now refuses the
    file, naming both, and nothing is written."""
    from .conftest import TRANSCRIPTS

    source = (TRANSCRIPTS / "pi" / "before-compaction.jsonl").read_text().splitlines()
    assert '"model_change"' in source[714] and '"message"' in source[715]
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(source[:716]) + "\n")  # imported while it ended at line 716
    first = cli("--db", db.url, "import", path)
    assert first.exit_code == 0, first.output

    def rows():
        return db.scalar("SELECT COUNT(*) FROM agent_message"), db.scalar(
            "SELECT COUNT(*) FROM agent_compaction"
        )

    before = rows()
    grown = cli("--db", db.url, "import", path, "--json")  # unchanged: nothing to add
    assert grown.exit_code == 0 and json.loads(grown.stdout)[0]["added"] == 0
    setting = next(line for line in source if '"thinking_level_change"' in line)
    shifted = source[:500] + [setting] + source[500:]  # the whole file, one line inserted
    path.write_text("\n".join(shifted) + "\n")
    refused = cli("--db", db.url, "import", path)
    assert refused.exit_code == 1, refused.output
    assert f"{path}:" in refused.output and "is not a continuation" in refused.output
    assert "Traceback" not in refused.output
    assert rows() == before
