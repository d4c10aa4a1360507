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


def test_titles_of_imported_sessions_come_from_the_first_real_request(sqlite_db, cli):
    """#29 item 3 / #32: a transcript without a title of its own is titled by its first real
    request as ctxtool.core.span_facts reads it (a slash command as the user typed it; never an
    AGENTS.md block, an environment block, a command's expansion or a UI command such as
    /mode), and a Claude Code `summary` line names its session only when its leafUuid is a
    message of the file (fe5e1c67's first line summarizes another session)."""
    assert cli("--db", sqlite_db.url, "import", str(TRANSCRIPTS)).exit_code == 0
    titles = {
        r["source_id"]: r["title"]
        for r in sqlite_db.rows("SELECT source_id, title FROM agent_session")
    }
    assert titles["1af7fc5e-8455-4414-9ccd-011d40f70b2a"] == "/init"
    assert titles["a5c478e1-0d31-46d4-9fd6-3b6b203b3752"] == "/erk:plan-implement 8511"
    assert (
        titles["fe5e1c67-53e7-4862-81ae-d0e013e3270b"] == "/orchestrator create TODO app by Next.js"
    )
    assert titles["019c581e-8542-7bb1-b7e1-7e6221c3047c"].startswith(  # Codex, after AGENTS.md
        "i want to run this in the browser natively."
    )
    assert titles["d703a1a9-1b7b-4fb1-b512-c9738b1fe617"].startswith(  # Pi, after /mode
        "read packages/coding-agent/docs/theme.md in full"
    )
    assert titles["ses_stage0_small"] == "Stage0 small fixture"  # its custom-title record
    # Pi (paradocs): the first request opens with the heading "## Research Plan"
    assert titles["019f6dc0-804c-7dde-9ec1-e78ed4f4a0af"] == "Research Plan"
    assert all(titles.values())
    assert not any(t.startswith(("#", "<", "/mode")) for t in titles.values())
