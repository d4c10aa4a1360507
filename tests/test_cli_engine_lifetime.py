"""The CLI disposes its engine when a command ends: in-process runs (CliRunner, a caller's
script) left every pooled MariaDB connection open until the garbage collector ran, and a test
session reached "1040 Too many connections"."""

from __future__ import annotations

RUNS = 12


def _connections(db, name: str) -> int:
    return db.scalar(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = :name", name=name
    )


def test_in_process_runs_leave_no_connection_open(mysql_db, cli):
    name = mysql_db.scalar("SELECT DATABASE()")
    mysql_db.engine.dispose()
    before = _connections(mysql_db, name)
    for args in (["sessions", "list"], ["migrate", "status"], ["validate"]) * (RUNS // 3):
        result = cli("--db", mysql_db.url, *args)
        assert result.exit_code == 0, result.output
    # --db after the command replaces the engine before any is made; it is disposed too.
    assert cli("--db", mysql_db.url, "sessions", "list", "--db", mysql_db.url).exit_code == 0
    # A failing command disposes its engine too.
    assert cli("--db", mysql_db.url, "context", "show", "999").exit_code != 0
    mysql_db.engine.dispose()
    assert _connections(mysql_db, name) <= before
