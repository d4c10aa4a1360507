"""The small things a new operator tripped on (issue #44), each through the real entry point."""

from __future__ import annotations

import json

import click

from ctxtool.cli.imports import import_cmd as import_command
from ctxtool.compaction.batch import BatchInterrupted
from ctxtool.compaction.outcome import CompactionOutcome
from ctxtool.compaction.status import CompactionStatus

from .builders import add_session, coding_session


def test_compact_refuses_a_session_and_all_saying_both_were_given(db, cli):
    result = cli("--db", db.url, "compact", "12", "--all")
    assert result.exit_code == 2
    assert "not both (SESSION 12 and --all)" in result.output


def test_compact_of_a_missing_session_says_only_that(db, cli):
    result = cli("--db", db.url, "compact", "999")
    assert result.exit_code == 1
    # One line, the error, with no "summarizer: extractive" before it.
    assert result.stderr.startswith("Error: session 999 does not exist")
    assert len(result.stderr.splitlines()) == 1


def test_window_sizes_as_people_write_them(db, cli):
    add_session(db, 1, coding_session(20), model="gpt-4o")
    planned = cli("--db", db.url, "compact", "1", "--dry-run", "--json", "--context-window", "6k")
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.stdout)["threshold"] == 4500  # 6000 less a quarter
    bad = cli("--db", db.url, "validate", "--context-window", "sixk")
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_the_interrupt_line_agrees_with_its_number():
    one = CompactionOutcome(1, CompactionStatus.COMPACTED)
    assert "the one running was allowed to finish" in str(BatchInterrupted([], [one], 3))
    two = [one, CompactionOutcome(2, CompactionStatus.COMPACTED)]
    assert "the 2 running were allowed to finish" in str(BatchInterrupted([], two, 3))


def test_import_paths_complete_as_files(tmp_path):
    (tmp_path / "session-a.jsonl").write_text("{}\n")
    ctx = click.Context(import_command)
    [param] = [p for p in import_command.params if p.name == "paths"]
    completions = param.shell_complete(ctx, str(tmp_path / "sess"))
    assert [c.type for c in completions] == ["file"]
