"""Issue 12 items 2 and 7 (import): a file whose records do not fit the given (or detected)
format is refused before anything is written, naming the format it looks like; a file that is
no JSONL at all is said to be so, without suggesting --skip-invalid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import TRANSCRIPTS

README = Path(__file__).resolve().parents[1] / "README.md"


def counts(db):
    return tuple(
        db.scalar(f"SELECT COUNT(*) FROM {t}")
        for t in ("agent_session", "agent_message", "agent_compaction")
    )


@pytest.mark.parametrize(
    "path,wrong,looks_like",
    [
        (TRANSCRIPTS / "pi" / "agent-sessions-pi-small.jsonl", "claude-code", "pi"),
        (TRANSCRIPTS / "pi" / "large-session.jsonl", "codex", "pi"),
        (TRANSCRIPTS / "codex" / "codex_log_viewer-example.jsonl", "openai-chat", "codex"),
        (
            TRANSCRIPTS
            / "codex"
            / "20260213134203_redacted_current_codex_session_jsonl_export.jsonl",
            "openai-chat",
            "codex",
        ),
        (
            TRANSCRIPTS / "claude-code" / "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
            "pi",
            "claude-code",
        ),
    ],
)
def test_a_wrong_format_is_refused_naming_the_one_it_looks_like(db, cli, path, wrong, looks_like):
    result = cli("--db", db.url, "import", "--format", wrong, path)
    assert result.exit_code == 1, result.output
    assert f"{path}: " in result.output
    assert f"records are not {wrong} records: they look like {looks_like}" in result.output
    assert f"use --format {looks_like}" in result.output
    assert counts(db) == (0, 0, 0)
    # The right one imports.
    assert cli("--db", db.url, "import", "--format", looks_like, path).exit_code == 0


def test_a_few_odd_records_in_a_fitting_file_are_counted_not_refused(db, cli, tmp_path):
    records = [{"role": "user", "content": f"m{i}"} for i in range(9)] + [{"note": "not a message"}]
    path = tmp_path / "mostly.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = cli("--db", db.url, "import", "--json", path)
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row["added"] == 9 and row["skipped_by_kind"] == {"role:None": 1}


@pytest.mark.parametrize("skip", [[], ["--skip-invalid"]])
def test_a_file_that_is_not_jsonl_is_said_to_be_so(db, cli, skip):
    result = cli("--db", db.url, "import", *skip, README)
    assert result.exit_code == 1
    assert f"{README}:1: malformed JSON" in result.output
    assert "not a JSONL transcript" in result.output
    assert "--skip-invalid" not in result.output
    assert counts(db) == (0, 0, 0)
