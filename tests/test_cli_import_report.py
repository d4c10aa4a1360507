"""What `ctxtool import` reports (issue #44): Ctrl-C keeps the report of the files imported
before it and says how many there were (exit 130, one line, no traceback), and a file that
failed is said once: its whole error on stderr, its row in the table marked failed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from ctxtool.db.schema import agent_session

from .waiting import wait_until

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "checkout-rounding.jsonl"


def _transcripts(folder: Path, n: int) -> None:
    """``n`` OpenAI-chat transcripts, each its own session (a file's name is its id)."""
    text = EXAMPLE.read_text()
    folder.mkdir()
    for i in range(n):
        (folder / f"session-{i:03}.jsonl").write_text(text)


def _sessions(db) -> int:
    with db.engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(agent_session)).scalar()


def _interrupted_import(db, folder: Path) -> tuple[str, str]:
    """`ctxtool import FOLDER` in its own process, sent Ctrl-C once 5 sessions are stored:
    its stdout and stderr, after checking it exited 130."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxtool", "--db", db.url, "import", str(folder)],
        env={**os.environ, "CTXTOOL_PROGRESS_INTERVAL": "0", "COLUMNS": "80"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: _sessions(db) >= 5, "the first files to be imported")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    return out, err


def test_ctrl_c_keeps_the_report_of_what_was_imported(sqlite_db, tmp_path):
    db = sqlite_db
    _transcripts(tmp_path / "many", 400)
    out, err = _interrupted_import(db, tmp_path / "many")
    found = re.search(
        r"Error: interrupted: (\d+) transcript\(s\) of 400 file\(s\) were imported", err
    )
    assert found and "Traceback" not in err, err
    done = int(found[1])
    # Each file commits on its own: what the line says is what the store holds (the file
    # committed as the signal came may not be counted yet).
    assert 5 <= done <= _sessions(db) <= done + 1 < 400
    rows = [line for line in out.splitlines() if "session-" in line]
    assert len(rows) == done and max(map(len, out.splitlines())) <= 80


def test_a_failed_file_is_said_once(db, cli, tmp_path):
    _transcripts(tmp_path / "some", 2)
    (tmp_path / "some" / "broken.jsonl").write_text('{"role": "user", "content": "hi"}\n{oops\n')
    result = cli("--db", db.url, "import", str(tmp_path / "some"), env={"COLUMNS": "80"})
    assert result.exit_code == 4, result.output
    said = [line for line in result.stderr.splitlines() if "broken.jsonl" in line]
    assert (
        len(said) == 1
        and said[0].startswith("Error: ")
        and "broken.jsonl:2: malformed JSON" in said[0]
    )
    row = next(line for line in result.stdout.splitlines() if "broken.jsonl" in line)
    assert row.rstrip().endswith("failed") and "malformed" not in row
    machine = json.loads(cli("--db", db.url, "import", str(tmp_path / "some"), "--json").stdout)
    broken = next(r for r in machine if r["file"].endswith("broken.jsonl"))
    assert "broken.jsonl:2: malformed JSON" in broken["error"]  # --json keeps the whole error


def test_ctrl_c_after_a_failed_file_does_not_count_it_as_imported(sqlite_db, tmp_path):
    db = sqlite_db
    _transcripts(tmp_path / "many", 400)
    # Read first, and failing: said on its own line, and not among the transcripts imported.
    (tmp_path / "many" / "a-broken.jsonl").write_text('{"role": "user", "content": "hi"}\n{x\n')
    out, err = _interrupted_import(db, tmp_path / "many")
    found = re.search(
        r"Error: interrupted: (\d+) transcript\(s\) of 401 file\(s\) were imported before "
        r"it \(each committed\), 1 failed \(said above\);",
        err,
    )
    assert found and "Traceback" not in err, err
    assert "a-broken.jsonl:2: malformed JSON" in err
    done = int(found[1])
    assert 5 <= done <= _sessions(db) <= done + 1 < 400
    assert len([line for line in out.splitlines() if "session-" in line]) == done
