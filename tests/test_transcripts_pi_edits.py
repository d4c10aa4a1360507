"""A Pi v1 transcript (ids are line numbers) edited after its import, then imported again:
lines inserted, removed, or shifted onto stored ids with its last line unmoved, are refused
and nothing is written; a line appended is the continuation it is. Built from the real shared
transcript (read from ``$CTXTOOL_SHARED_DIR``, edited in a temporary directory)."""

from __future__ import annotations

import json

import pytest

from .conftest import TRANSCRIPTS

PI_V1 = TRANSCRIPTS / "pi" / "large-session.jsonl"


def _message_runs(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) indexes of each run of consecutive message lines."""
    runs, start = [], None
    for i, line in enumerate([*lines, "{}"]):
        is_message = json.loads(line).get("type") == "message"
        if is_message and start is None:
            start = i
        elif not is_message and start is not None:
            runs.append((start, i - 1))
            start = None
    return runs


def _edits(lines: list[str]) -> dict[str, tuple[list[str], str]]:
    """Each edit of the file and the line its refusal names (a run of message lines in the
    middle: every line of it is a stored id, so a shift inside it lands on stored ids)."""
    first, last = next((a, b) for a, b in _message_runs(lines) if a > 300 and b - a >= 5)
    a, b = first + 1, last - 1
    return {
        # Line a removed, a copy of line b-1 inserted before line b: a..b-2 shifted by one
        # onto stored ids, line b on and the last line where they were.
        "shifted onto stored ids": (
            lines[:a] + lines[a + 1 : b] + [lines[b - 1]] + lines[b:],
            f":{a + 1}: message 'L{a + 1}' differs",
        ),
        "line inserted": (
            lines[:a] + [lines[a + 2]] + lines[a:],
            f":{a + 1}: message 'L{a + 1}' differs",
        ),
        "line removed": (lines[:a] + lines[a + 1 :], f":{a + 1}: message 'L{a + 1}' differs"),
        "last line removed": (lines[:-1], f":{len(lines)}: message 'L{len(lines)}' is stored, but"),
    }


@pytest.fixture
def imported(db, cli, tmp_path):
    if not PI_V1.exists():
        pytest.fail(f"{PI_V1} is missing: set CTXTOOL_SHARED_DIR")
    lines = PI_V1.read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "session.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    result = cli("--db", db.url, "import", str(path))
    assert result.exit_code == 0, result.output
    return lines, path


def test_an_edited_pi_v1_file_is_refused_and_nothing_is_written(db, cli, imported):
    lines, path = imported
    stored = db.scalar("SELECT COUNT(*) FROM agent_message")
    checksum = db.scalar("SELECT SUM(id * LENGTH(content)) FROM agent_message")
    for name, (edited, where) in _edits(lines).items():
        path.write_text("".join(edited), encoding="utf-8")
        result = cli("--db", db.url, "import", str(path))
        assert result.exit_code == 1, (name, result.output)
        assert f"{path}{where}" in result.output, (name, result.output)
        assert "not a continuation" in result.output and "Traceback" not in result.output
        assert db.scalar("SELECT COUNT(*) FROM agent_message") == stored, name
        assert db.scalar("SELECT SUM(id * LENGTH(content)) FROM agent_message") == checksum


def test_a_line_appended_to_a_pi_v1_file_is_its_continuation(db, cli, imported):
    lines, path = imported
    stored = db.scalar("SELECT COUNT(*) FROM agent_message")
    appended = json.loads(lines[-1])
    appended["message"] = {"role": "user", "content": [{"type": "text", "text": "and now?"}]}
    path.write_text("".join(lines) + json.dumps(appended) + "\n", encoding="utf-8")
    result = cli("--db", db.url, "import", "--json", str(path))
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row["added"] == 1
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == stored + 1
