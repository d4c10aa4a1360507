"""The small things a new operator tripped on (issue #44), each through the real entry point."""

from __future__ import annotations

import json

import click

from ctxtool.cli.imports import import_cmd as import_command
from ctxtool.compaction.batch import BatchInterrupted
from ctxtool.core.compaction_outcome import CompactionOutcome
from ctxtool.core.status import CompactionStatus
from ctxtool.db.schema import agent_session

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


def test_sessions_list_says_when_it_stopped_at_the_limit(db, cli):
    for sid in range(1, 4):
        add_session(db, sid, [{"role": "user", "content": f"hi {sid}"}])
    cut = cli("--db", db.url, "sessions", "list", "--limit", "2")
    assert cut.exit_code == 0
    assert "2 shown, more match: the first 2 in --sort id order (--limit 4 shows more)" in (
        cut.stderr
    )
    whole = cli("--db", db.url, "sessions", "list", "--limit", "3")
    assert "more match" not in whole.stderr
    assert (
        len(json.loads(cli("--db", db.url, "sessions", "list", "--limit", "2", "--json").stdout))
        == 2
    )


def test_at_80_columns_the_tables_keep_what_people_read(db, cli, monkeypatch):
    """sessions list gives up the mostly-empty acknowledgement column before titles and
    sources shorten further; config keeps the database URL whole (wrapped)."""
    monkeypatch.setenv("COLUMNS", "80")
    title = "The checkout total is off by a few cents for orders with a discount code"
    for sid in range(1, 4):
        add_session(db, sid, [{"role": "user", "content": "hi"}], model="claude-sonnet-4-5")
    with db.engine.begin() as conn:
        conn.execute(agent_session.update().values(title=title, source_id="pi:019f6dc0-804c-7dde"))
    assert cli("--db", db.url, "sessions", "mark", "3", "--over-window-ok").exit_code == 0
    listed = cli("--db", db.url, "sessions", "list")
    table = listed.stdout.splitlines()
    assert "over window" not in table[0]
    assert "over their window, acknowledged (sessions mark): 3" in listed.stderr
    assert all(len(line) <= 80 for line in table)
    url = "mysql+pymysql://root:secret@127.0.0.1:3306/a_rather_long_database_name"
    shown = cli("--db", url, "config").stdout
    assert all(len(line) <= 80 for line in shown.splitlines())
    lines = shown.splitlines()
    start, end = lines[0].index("value"), lines[0].index("source")
    first = next(i for i, line in enumerate(lines) if line.startswith("database.url"))
    value = lines[first][start:end].strip()
    for line in lines[first + 1 :]:
        if not line.startswith(" "):
            break
        value += line[start:end].strip()
    assert value == "mysql+pymysql://root:***@127.0.0.1:3306/a_rather_long_database_name"


def test_an_export_to_an_extension_that_names_no_format_is_refused(db, cli, tmp_path):
    add_session(db, 1, coding_session(2), model="gpt-4o")
    target = tmp_path / "out.pdf"
    refused = cli("--db", db.url, "context", "export", "1", "-o", target)
    assert refused.exit_code == 2 and not target.exists()
    assert ".pdf names no export format" in refused.stderr and "--format" in refused.stderr
    given = cli("--db", db.url, "context", "export", "1", "-o", target, "--format", "md")
    assert given.exit_code == 0 and target.read_text().startswith("# Session 1")


def test_an_export_where_no_temporary_file_can_be_made_says_so(db, cli):
    add_session(db, 1, coding_session(2), model="gpt-4o")
    failed = cli("--db", db.url, "context", "export", "1", "-o", "/proc/version", "--format", "md")
    assert failed.exit_code == 1
    assert "cannot write /proc/version: no temporary file can be made in /proc" in failed.stderr


def test_migrate_status_says_why_0007_is_absent(db, cli):
    status = cli("--db", db.url, "migrate", "status")
    assert status.exit_code == 0
    assert "0007: no migration of this number was ever shipped" in " ".join(status.stderr.split())
    assert "0007" not in status.stdout


def test_completion_without_a_shell_takes_the_one_shell_names(cli):
    zsh = cli("completion", env={"SHELL": "/usr/bin/zsh"})
    assert zsh.exit_code == 0 and "#compdef ctxtool" in zsh.stdout
    fish = cli("completion", env={"SHELL": "/usr/local/bin/fish"})
    assert fish.exit_code == 0 and "complete --no-files --command ctxtool" in fish.stdout
    unknown = cli("completion", env={"SHELL": "/bin/tcsh"})
    assert unknown.exit_code == 2
    assert "$SHELL is 'tcsh': give the shell, one of bash, zsh, fish" in unknown.output
