"""What a new operator met importing (issue #44): a folder's hidden folders (a .venv's JSON) are
not walked unless named; a file whose only line is text, not JSON, is refused (one being written, an unfinished JSON record, still waits)."""

from __future__ import annotations

import shutil
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "checkout-rounding.jsonl"


def test_hidden_folders_are_skipped_unless_named(db, cli, tmp_path):
    (tmp_path / "sessions").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "sessions" / "a.jsonl")
    hidden = tmp_path / ".venv" / "lib" / "pkg.dist-info"
    hidden.mkdir(parents=True)
    (hidden / "direct_url.json").write_text('{"url": "file:///x"}\n')
    walked = cli("--db", db.url, "import", tmp_path)
    assert walked.exit_code == 0, walked.output
    assert "direct_url.json" not in walked.output and "a.jsonl" in walked.output
    named = cli("--db", db.url, "import", tmp_path / ".venv")
    assert "direct_url.json" in named.output  # asked for by name: read (and refused)


def test_plain_text_is_refused(db, cli, tmp_path):
    (tmp_path / "plain.jsonl").write_text("plain text, no newline at its end")
    (tmp_path / "partial.jsonl").write_text('{"role": "user", "cont')
    result = cli("--db", db.url, "import", tmp_path / "plain.jsonl", tmp_path / "partial.jsonl")
    assert result.exit_code == 4, result.output
    assert "plain.jsonl:1: malformed JSON" in result.stderr
    assert "Error: 1 of 2 file(s) failed" in result.stderr
    assert "incomplete_last_line=1" in result.stdout  # the one being written waits
