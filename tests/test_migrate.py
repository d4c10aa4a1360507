"""`ctxtool migrate` and ctxtool.migrate against real SQLite and MariaDB databases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import sqlalchemy as sa

from ctxtool.core.errors import CtxtoolError, SchemaNotCurrent
from ctxtool.db.schema import STORE_TABLES, counters, transcript_files
from ctxtool.migrate import HISTORY_TABLE, Migration, Migrator, load_migrations, split_statements

from .waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]


# The versions shipped (the same for both dialects, see the test below).
SHIPPED = [m.version for m in load_migrations("sqlite")]


def test_split_statements_respects_quotes_and_comments():
    sql = """
    -- a comment; with a semicolon
    CREATE TABLE t (a TEXT DEFAULT 'x;y');  /* block; comment */
    INSERT INTO t VALUES ('it''s; fine'), ("dq;"), ('back\\'slash;');
    # hash comment;
    UPDATE t SET a = 'z'
    """
    assert split_statements(sql) == [
        "CREATE TABLE t (a TEXT DEFAULT 'x;y')",
        "INSERT INTO t VALUES ('it''s; fine'), (\"dq;\"), ('back\\'slash;')",
        "UPDATE t SET a = 'z'",
    ]


def test_both_dialects_ship_the_same_versions():
    mysql = [(m.version, m.name) for m in load_migrations("mysql")]
    sqlite = [(m.version, m.name) for m in load_migrations("sqlite")]
    assert mysql == sqlite
    assert mysql[0] == ("0001", "seed_tables")


def test_up_creates_schema_matching_the_core_tables(db):
    inspector = sa.inspect(db.engine)
    for table in STORE_TABLES:
        columns = {c["name"] for c in inspector.get_columns(table.name)}
        assert columns == {c.name for c in table.columns}, table.name
    for table in (counters, transcript_files):
        columns = {c["name"] for c in inspector.get_columns(table.name)}
        assert columns == {c.name for c in table.columns}, table.name
    assert inspector.get_pk_constraint(transcript_files.name)["constrained_columns"] == [
        "device",
        "inode",
    ]
    indexes = {i["name"]: i["column_names"] for i in inspector.get_indexes("agent_message")}
    assert indexes == {
        "idx_message_session_id_tokens": [
            "session_id",
            "id",
            "token_count",
            "token_encoding",
            "role",
            "tool_call_count",
            "tool_call_id",
        ],
        "idx_message_call_id": ["session_id", "id", "call_id"],
        "uq_message_source": ["session_id", "source_id"],
    }
    states = Migrator(db.engine).status()
    assert [s.state for s in states] == ["applied"] * len(SHIPPED)


def test_0005_moves_the_encoding_into_the_counts_index_keeping_every_count(empty_db):
    """A store counted before 0005: the counts stay, the index that held the encoding alone
    goes, and the one holding the counts holds the encodings too."""
    empty_db.migrate(to="0004")
    with empty_db.engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO agent_session (session_id, model) VALUES (1, 'gpt-4o')")
        for i in range(1, 6):
            conn.exec_driver_sql(
                "INSERT INTO agent_message (session_id, role, content, token_count, token_encoding) "
                f"VALUES (1, 'user', 'm{i}', {i}, '{'o200k_base' if i % 2 else 'cl100k_base'}')"
            )
    before = empty_db.rows("SELECT id, token_count, token_encoding FROM agent_message ORDER BY id")
    assert "idx_message_token_encoding" in {
        i["name"] for i in sa.inspect(empty_db.engine).get_indexes("agent_message")
    }
    assert [m.version for m in Migrator(empty_db.engine).up(to="0005")] == ["0005"]
    assert (
        empty_db.rows("SELECT id, token_count, token_encoding FROM agent_message ORDER BY id")
        == before
    )
    indexes = {
        i["name"]: i["column_names"]
        for i in sa.inspect(empty_db.engine).get_indexes("agent_message")
    }
    assert "idx_message_token_encoding" not in indexes
    assert indexes["idx_message_session_id_tokens"][3] == "token_encoding"


def test_cli_up_status_and_second_up_is_a_no_op(empty_db, cli):
    result = cli("--db", empty_db.url, "migrate", "status")
    assert result.exit_code == 3
    assert "pending" in result.output

    result = cli("--db", empty_db.url, "migrate", "up")
    assert result.exit_code == 0, result.output
    assert "applied 0001_seed_tables.sql" in result.output
    assert "applied 0002_ctxtool_columns.sql" in result.output

    result = cli("--db", empty_db.url, "migrate", "up")
    assert result.exit_code == 0
    assert "nothing to apply" in result.output

    result = cli("--db", empty_db.url, "migrate", "status", "--json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert [(r["version"], r["state"]) for r in rows] == [(v, "applied") for v in SHIPPED]
    assert all(r["duration_ms"] is not None for r in rows)
    assert empty_db.scalar(f"SELECT COUNT(*) FROM {HISTORY_TABLE}") == len(SHIPPED)


def test_up_to_and_dry_run(empty_db, cli):
    result = cli("--db", empty_db.url, "migrate", "up", "--dry-run")
    assert result.exit_code == 0
    assert "CREATE TABLE IF NOT EXISTS agent_session" in result.output
    assert not sa.inspect(empty_db.engine).has_table("agent_session")

    result = cli("--db", empty_db.url, "migrate", "up", "--to", "0001")
    assert result.exit_code == 0
    assert "0002" not in result.output
    states = {s.version: s.state for s in Migrator(empty_db.engine).status()}
    assert states == {v: "applied" if v == "0001" else "pending" for v in SHIPPED}
    with pytest.raises(SchemaNotCurrent):
        Migrator(empty_db.engine).require_current()


def test_changed_file_is_refused_then_repaired(db, cli):
    shipped = load_migrations("mysql" if db.kind == "mysql" else "sqlite")
    edited = [
        shipped[0],
        Migration(shipped[1].version, shipped[1].name, shipped[1].sql + "\n-- edit"),
        *shipped[2:],
    ]
    migrator = Migrator(db.engine, edited)
    assert migrator.status()[1].state == "checksum changed"
    with pytest.raises(CtxtoolError, match="0002_ctxtool_columns.sql changed after it was applied"):
        migrator.up()
    actions = migrator.repair("0002")
    assert actions and "accepted new checksum" in actions[0][1]
    assert [s.state for s in migrator.status()] == ["applied"] * len(SHIPPED)


def test_a_history_date_no_parser_reads_is_shown_unreadable(db, cli):
    """A history row's date written by hand ('garbage' in SQLite's text, a zero date in
    MariaDB's DATETIME): `migrate status` shows it as unreadable, never an internal error,
    and other commands still say the schema is not current in one line."""
    bad = "0000-00-00 00:00:00" if db.kind == "mysql" else "garbage"
    with db.engine.begin() as conn:
        if db.kind == "mysql":
            mode = conn.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar()
            conn.exec_driver_sql("SET SESSION sql_mode = ''")  # lets a zero date in
        update = f"UPDATE {HISTORY_TABLE} SET started_at = :bad, applied_at = :bad"
        conn.execute(sa.text(update + " WHERE version = :v"), {"bad": bad, "v": SHIPPED[0]})
        conn.execute(
            sa.text(update + ", status = 'running' WHERE version = :v"),
            {"bad": bad, "v": SHIPPED[-1]},
        )
        if db.kind == "mysql":
            conn.exec_driver_sql("SET SESSION sql_mode = %s", (mode,))
    status = cli("--db", db.url, "migrate", "status", "--json")
    assert "internal error" not in status.output
    rows = {row["version"]: row for row in json.loads(status.stdout)}
    assert rows[SHIPPED[0]]["state"] == "applied"
    assert rows[SHIPPED[0]]["applied_at"] == "unreadable"
    assert rows[SHIPPED[-1]]["state"] == "running"
    assert rows[SHIPPED[-1]]["applied_at"] == "unreadable"
    assert rows[SHIPPED[1]]["applied_at"][:2] == "20"  # the others as they were
    listed = cli("--db", db.url, "sessions", "list")
    assert listed.exit_code != 0
    assert listed.output.strip().splitlines() == [
        f"Error: database schema is not current: {SHIPPED[-1]}_{load_migrations('sqlite')[-1].name}"
        " is running; run `ctxtool migrate status`, then `ctxtool migrate up`"
    ]


def test_failed_mysql_migration_is_recorded_and_blocks(db, cli):
    dialect = "mysql" if db.kind == "mysql" else "sqlite"
    broken = Migration(
        "0099", "broken", "CREATE TABLE zz_ok (a INT);\nCREATE TABLE zz_bad (a NOSUCHTYPE(;\n"
    )
    migrator = Migrator(db.engine, load_migrations(dialect) + [broken])
    with pytest.raises(CtxtoolError, match="0099_broken.sql"):
        migrator.up()
    state = migrator.status()[-1]
    if dialect == "mysql":
        # DDL is not transactional: the first statement stays, the file is recorded as failed.
        assert state.state == "failed"
        assert sa.inspect(db.engine).has_table("zz_ok")
        with pytest.raises(CtxtoolError, match="failed at statement: CREATE TABLE zz_bad"):
            migrator.up()
        assert migrator.repair("0099") == [
            ("0099", "cleared the failure; `up` resumes at statement 2")
        ]
        assert migrator.status()[-1].state == "running"
        repaired = cli("--db", db.url, "migrate", "repair", "--json")
        assert json.loads(repaired.stdout) == {
            "repaired": [
                {
                    "version": "0099",
                    "action": "interrupted, nothing to clear; `up` resumes at statement 2",
                }
            ]
        }
    else:
        # SQLite rolls the whole file back, leaving it pending and nothing half-made.
        assert state.state == "pending"
        assert not sa.inspect(db.engine).has_table("zz_ok")


def test_failed_statement_resumes_after_repair_without_rerunning_earlier_ones(mysql_db):
    """The cause is fixed by hand, `repair` clears the failure, `up` resumes at the failed
    statement: the first statement (already applied) is not run again."""
    db = mysql_db
    file = Migration(
        "0099",
        "two_steps",
        "CREATE TABLE zz_first (a INT);\nALTER TABLE zz_later ADD COLUMN b INT;\n",
    )
    migrator = Migrator(db.engine, load_migrations("mysql") + [file])
    with pytest.raises(CtxtoolError, match="failed at statement 2"):
        migrator.up()
    assert "1 of 2 statements done" in migrator.status()[-1].detail
    with db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE zz_later (a INT)")  # the operator fixes the cause
    migrator.repair("0099")
    assert [m.version for m in migrator.up()] == ["0099"]
    assert migrator.status()[-1].state == "applied"
    assert {c["name"] for c in sa.inspect(db.engine).get_columns("zz_later")} == {"a", "b"}


def test_a_migration_killed_after_a_statement_resumes_and_completes(mysql_empty_db, cli):
    """kill -9 between a statement and its progress record (the issue's loop: `repair 0002` +
    `up` failed on "Duplicate column name 'model'" forever). Simulated exactly: 0002's first
    statement took effect, its record says running with 0 statements done."""
    empty_db = mysql_empty_db
    migrator = Migrator(empty_db.engine)
    migrator.up(to="0001")
    second = migrator.migrations[1]
    with empty_db.engine.begin() as conn:
        conn.exec_driver_sql(
            second.statements()[0]
        )  # ALTER TABLE agent_session ADD COLUMN model ...
        conn.execute(
            sa.text(
                f"INSERT INTO {HISTORY_TABLE} (version, name, checksum, status, "
                "started_at, statements_done) VALUES (:v, :n, :c, 'running', "
                "UTC_TIMESTAMP(), 0)"
            ),
            {"v": second.version, "n": second.name, "c": second.checksum},
        )
    status = cli("--db", empty_db.url, "migrate", "status")
    assert status.exit_code == 3 and "running" in status.output and "resumes" in status.output
    result = cli("--db", empty_db.url, "migrate", "up")
    assert result.exit_code == 0, result.output
    assert [s.state for s in migrator.status()] == ["applied"] * len(SHIPPED)
    migrator.require_current()


def test_a_migration_killed_after_its_last_statement_is_marked_applied(mysql_empty_db):
    """Every statement ran, the process died before the file was marked applied: `up` sees the
    last statement's objects exist and records the file (before, no command could)."""
    empty_db = mysql_empty_db
    migrator = Migrator(empty_db.engine)
    migrator.up()
    second = migrator.migrations[1]
    with empty_db.engine.begin() as conn:
        conn.execute(
            sa.text(
                f"UPDATE {HISTORY_TABLE} SET status = 'running', applied_at = NULL, "
                "statements_done = :n WHERE version = :v"
            ),
            {"n": len(second.statements()) - 1, "v": second.version},
        )
    assert migrator.up() == [second]
    assert [s.state for s in migrator.status()] == ["applied"] * len(SHIPPED)


@pytest.mark.slow
def test_kill_9_during_a_migration_then_up_finishes_it(mysql_empty_db):
    """A real kill -9 of a `migrate up` process in the middle of a file (a statement that
    sleeps holds it there), then a plain `up` finishes the file. The sleep is short: the
    resumed run sleeps again."""
    empty_db = mysql_empty_db
    script = f"""
import sys
from ctxtool.db import create_engine
from ctxtool.migrate import Migration, Migrator, load_migrations
slow = Migration("0099", "slow", "CREATE TABLE zz_a (a INT);\\nSELECT SLEEP(3);\\nCREATE TABLE zz_b (b INT);\\n")
Migrator(create_engine({empty_db.url!r}), load_migrations("mysql") + [slow]).up()
"""
    proc = subprocess.Popen([sys.executable, "-c", script])
    wait_until(  # its first statement recorded done, its second (SLEEP) running
        lambda: empty_db.scalar(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
            "WHERE DB = DATABASE() AND STATE = 'User sleep'"
        ),
        "the migration's SELECT SLEEP(3)",
    )
    proc.kill()
    proc.wait()
    slow = Migration(
        "0099", "slow", "CREATE TABLE zz_a (a INT);\nSELECT SLEEP(3);\nCREATE TABLE zz_b (b INT);\n"
    )
    migrator = Migrator(empty_db.engine, load_migrations("mysql") + [slow])
    state = migrator.status()[-1]
    assert state.state == "running" and "1 of 3 statements done" in state.detail
    quick = Migration("0099", "slow", slow.sql.replace("SLEEP(3)", "SLEEP(0)"))
    assert quick.checksum != slow.checksum
    with pytest.raises(CtxtoolError, match="changed after it was applied"):
        Migrator(empty_db.engine, load_migrations("mysql") + [quick]).up()
    assert [m.version for m in migrator.up()] == ["0099"]  # resumes at SLEEP, then zz_b
    assert sa.inspect(empty_db.engine).has_table("zz_b")


def test_baseline_adopts_runtime_tables_without_touching_data(empty_db, cli):
    dialect = "mysql" if empty_db.kind == "mysql" else "sqlite"
    seed = load_migrations(dialect)[0]
    with empty_db.engine.begin() as conn:
        for statement in seed.statements():
            conn.exec_driver_sql(statement)
        conn.exec_driver_sql("INSERT INTO agent_session (session_id, title) VALUES (7, 'runtime')")
        conn.exec_driver_sql(
            "INSERT INTO agent_message (session_id, role, content) VALUES "
            "(7, 'user', 'hi'), (7, 'assistant', 'hello'), (7, 'user', 'more')"
        )
        conn.exec_driver_sql(
            "INSERT INTO agent_compaction (session_id, summary, first_kept_message_id) "
            "VALUES (7, 's1', 2), (7, 's2', 3)"
        )
    status = cli("--db", empty_db.url, "migrate", "status")
    assert status.exit_code == 3 and "migrate baseline --version 0001" in status.output
    result = cli("--db", empty_db.url, "migrate", "baseline", "--version", "0001", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"baselined": ["0001_seed_tables.sql"]}
    result = cli("--db", empty_db.url, "migrate", "up", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["applied"][0] == "0002_ctxtool_columns.sql"
    assert empty_db.rows("SELECT session_id, title FROM agent_session") == [
        {"session_id": 7, "title": "runtime"}
    ]
    assert empty_db.scalar("SELECT COUNT(*) FROM agent_message") == 3
    # The session-id counter (0004) starts at the runtime's ids.
    assert empty_db.rows("SELECT name, last_value FROM ctxtool_counters") == [
        {"name": "agent_session.session_id", "last_value": 7}
    ]
    # Existing checkpoints were chained so the parent unique key could be built.
    assert empty_db.rows(
        "SELECT summary, parent_compaction_id FROM agent_compaction ORDER BY id"
    ) == [
        {"summary": "s1", "parent_compaction_id": 0},
        {"summary": "s2", "parent_compaction_id": 1},
    ]
    result = cli("--db", empty_db.url, "migrate", "baseline")
    assert result.exit_code == 1
    assert "already records" in result.output
    # The runtime goes on writing checkpoints as it knows them, seed columns only (found by
    # review: the second one failed on uq_compaction_parent, every runtime row taking parent 0).
    with empty_db.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO agent_message (session_id, role, content) VALUES "
            "(7, 'assistant', 'done'), (7, 'user', 'next')"
        )
        for summary, cut in (("s3", 4), ("s4", 5)):
            conn.exec_driver_sql(
                "INSERT INTO agent_compaction (session_id, summary, "
                f"first_kept_message_id) VALUES (7, '{summary}', {cut})"
            )
    assert [
        r["parent_compaction_id"]
        for r in empty_db.rows("SELECT parent_compaction_id FROM agent_compaction ORDER BY id")
    ] == [0, 1, None, None]
    result = cli("--db", empty_db.url, "validate", "--json")
    assert (result.exit_code, json.loads(result.stdout)) == (0, [])
    result = cli("--db", empty_db.url, "context", "show", "7", "--json")
    doc = json.loads(result.stdout)
    assert doc["summary"] == "s4" and [m["content"] for m in doc["messages"]][-1:] == ["next"]
    assert doc["messages"][0]["content"].endswith("s4") and len(doc["messages"]) == 2


def test_0006_keeps_every_checkpoint_and_never_reuses_an_id(empty_db):
    """The checkpoints of a store migrated to 0005 keep their rows and parents through 0006
    (on SQLite a rebuilt table), and an id once taken (by a checkpoint since deleted) is not
    handed out again."""
    empty_db.migrate(to="0005")
    with empty_db.engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO agent_session (session_id) VALUES (1)")
        conn.exec_driver_sql(
            "INSERT INTO agent_message (session_id, role, content) VALUES "
            "(1, 'user', 'a'), (1, 'user', 'b'), (1, 'user', 'c')"
        )
        for parent, cut in ((0, 2), (1, 3), (2, 3)):
            conn.exec_driver_sql(
                "INSERT INTO agent_compaction (session_id, summary, first_kept_message_id, "
                f"parent_compaction_id, summarizer) VALUES (1, 's', {cut}, {parent}, 'x')"
            )
        conn.exec_driver_sql("DELETE FROM agent_compaction WHERE id = 3")
    before = empty_db.rows("SELECT * FROM agent_compaction ORDER BY id")
    assert [m.version for m in Migrator(empty_db.engine).up(to="0006")] == ["0006"]
    assert empty_db.rows("SELECT * FROM agent_compaction ORDER BY id") == before
    with empty_db.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO agent_compaction (session_id, summary, first_kept_message_id) "
            "VALUES (1, 'runtime', 3)"
        )
        with pytest.raises(sa.exc.IntegrityError):  # ctxtool's own siblings still refused
            with conn.begin_nested():
                conn.exec_driver_sql(
                    "INSERT INTO agent_compaction (session_id, summary, "
                    "first_kept_message_id, parent_compaction_id) VALUES (1, 's', 3, 1)"
                )
    assert empty_db.scalar("SELECT MAX(id) FROM agent_compaction") == 4
    indexes = {i["name"] for i in sa.inspect(empty_db.engine).get_indexes("agent_compaction")}
    assert indexes == {"uq_compaction_parent", "uq_compaction_source", "idx_compaction_session_id"}


def test_0006_on_sqlite_keeps_a_runtimes_table_as_it_made_it(tmp_path, cli):
    """Found by review: 0006 rebuilt SQLite's agent_compaction copying columns by position, so
    a runtime's table with its columns in another order came out scrambled (the summary in
    first_kept_message_id), and its own index and trigger were dropped; a view on it made the
    file fail. The table is now edited in place: order, extra columns, index, trigger, view
    and rows all stay, and a runtime's connection opened before the migration takes NULL."""
    import sqlite3

    from .conftest import Database

    path = str(tmp_path / "runtime.db")
    db = Database("sqlite", f"sqlite:///{path}")
    raw = sqlite3.connect(path, isolation_level=None)
    seed = load_migrations("sqlite")[0]
    for statement in seed.statements():
        if "agent_compaction" not in statement:
            raw.execute(statement)
    raw.executescript("""
        CREATE TABLE agent_compaction (id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL, first_kept_message_id INTEGER NOT NULL,
            summary TEXT NOT NULL, created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
            tokens_before INTEGER, runtime_note TEXT);
        CREATE INDEX idx_runtime_created ON agent_compaction (created_at);
        CREATE TABLE runtime_log (what TEXT);
        CREATE TRIGGER trg_runtime AFTER INSERT ON agent_compaction
            BEGIN INSERT INTO runtime_log VALUES ('checkpoint ' || NEW.id); END;
        CREATE VIEW v_latest AS SELECT session_id, MAX(id) AS id FROM agent_compaction GROUP BY session_id;
        INSERT INTO agent_session (session_id) VALUES (1);
        INSERT INTO agent_message (session_id, role, content) VALUES (1, 'user', 'a'), (1, 'user', 'b'), (1, 'user', 'c');
        INSERT INTO agent_compaction (session_id, first_kept_message_id, summary, tokens_before, runtime_note)
            VALUES (1, 3, 'runtime summary', 1234, 'mine');
    """)
    runtime = sqlite3.connect(path, isolation_level=None)  # open across the migration
    runtime.execute("SELECT * FROM agent_compaction").fetchall()
    assert cli("--db", db.url, "migrate", "baseline", "--version", "0001").exit_code == 0
    result = cli("--db", db.url, "migrate", "up")
    assert result.exit_code == 0, result.output
    row = db.rows(
        "SELECT session_id, first_kept_message_id, summary, tokens_before, runtime_note, "
        "parent_compaction_id FROM agent_compaction"
    )
    assert row == [
        {
            "session_id": 1,
            "first_kept_message_id": 3,
            "summary": "runtime summary",
            "tokens_before": 1234,
            "runtime_note": "mine",
            "parent_compaction_id": 0,
        }
    ]
    runtime.execute(
        "INSERT INTO agent_compaction (session_id, first_kept_message_id, summary) "
        "VALUES (1, 3, 'second')"
    )
    runtime.execute(
        "INSERT INTO agent_compaction (session_id, first_kept_message_id, summary) "
        "VALUES (1, 3, 'third')"
    )
    assert runtime.execute("SELECT what FROM runtime_log").fetchall() == [
        ("checkpoint 1",),
        ("checkpoint 2",),
        ("checkpoint 3",),
    ]
    assert runtime.execute("SELECT id FROM v_latest").fetchall() == [(3,)]
    names = {
        r[0]
        for r in runtime.execute(
            "SELECT name FROM sqlite_master WHERE tbl_name = 'agent_compaction' AND type = 'index'"
        )
    }
    assert {"idx_runtime_created", "uq_compaction_parent", "uq_compaction_source"} <= names
    assert runtime.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert cli("--db", db.url, "validate", "--json").stdout.strip() == "[]"
    runtime.close()
    raw.close()


def test_0005_killed_after_its_alter_took_effect_resumes(mysql_empty_db):
    """Found by review: 0005 is one ALTER ending in a DROP INDEX; run again after it took
    effect it fails with 1091, which resuming did not take for "already applied", so up
    failed on it forever."""
    migrator = Migrator(mysql_empty_db.engine)
    migrator.up(to="0004")
    fifth = next(m for m in migrator.migrations if m.version == "0005")
    with mysql_empty_db.engine.begin() as conn:
        conn.exec_driver_sql(fifth.statements()[0])
        conn.execute(
            sa.text(
                f"INSERT INTO {HISTORY_TABLE} (version, name, checksum, status, "
                "started_at, statements_done) VALUES (:v, :n, :c, 'running', "
                "UTC_TIMESTAMP(), 0)"
            ),
            {"v": fifth.version, "n": fifth.name, "c": fifth.checksum},
        )
    migrator.up()
    assert [s.state for s in migrator.status()] == ["applied"] * len(SHIPPED)


def test_baseline_refuses_an_empty_database(empty_db, cli):
    result = cli("--db", empty_db.url, "migrate", "baseline")
    if empty_db.kind == "sqlite":  # no file yet: named, and not created by the attempt
        assert result.exit_code == 3
        assert "does not exist" in result.output
        assert not os.path.exists(empty_db.url.removeprefix("sqlite:///"))
        return
    assert result.exit_code == 1
    assert "table agent_session does not exist" in result.output


def test_commands_refuse_an_old_schema(empty_db):
    Migrator(empty_db.engine).up(to="0001")
    with pytest.raises(SchemaNotCurrent, match="0002_ctxtool_columns is pending"):
        Migrator(empty_db.engine).require_current()


def test_concurrent_up_runs_leave_one_correct_history(empty_db):
    """Two real `ctxtool migrate up` processes at once: both succeed, each file applied once."""
    cmd = [sys.executable, "-m", "ctxtool", "--db", empty_db.url, "migrate", "up"]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    combined = "\n".join(outputs)
    assert combined.count("applied 0001_seed_tables.sql") == 1
    assert combined.count("applied 0002_ctxtool_columns.sql") == 1
    rows = empty_db.rows(f"SELECT version, status FROM {HISTORY_TABLE} ORDER BY version")
    assert rows == [{"version": v, "status": "applied"} for v in SHIPPED]


def test_password_never_printed(cli):
    url = "mysql+pymysql://root:s3cr3t-pw@127.0.0.1:1/nosuchdb"
    result = cli("--db", url, "migrate", "status")
    assert result.exit_code == 1
    assert "s3cr3t-pw" not in result.output
    assert "root:***@127.0.0.1:1" in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_wrong_database_name_is_one_line(cli):
    url = (
        sa.engine.make_url(
            os.environ.get("CTXTOOL_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/")
        )
        .set(database="ctxtool_no_such_db")
        .render_as_string(hide_password=False)
    )
    result = cli("--db", url, "migrate", "up")
    assert result.exit_code == 1
    assert "unknown database" in result.output.lower()


def test_wheel_ships_sql_and_vocabularies(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
    )
    wheel = next(tmp_path.glob("ctxtool-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for dialect in ("mysql", "sqlite"):
        for m in load_migrations(dialect):
            assert f"ctxtool/sql/{dialect}/{m.filename}" in names
    assert "ctxtool/vocab/o200k_base.tiktoken" in names
    assert "ctxtool/vocab/cl100k_base.tiktoken" in names


def test_the_computed_call_count_is_invisible_to_a_runtimes_bare_insert(mysql_db):
    """0009's column serves ctxtool's index only: a runtime that writes `INSERT INTO
    agent_message VALUES (...)` for the columns `SELECT *` shows keeps working (MySQL/MariaDB
    put a visible generated column in both, and the INSERT failed with 1136)."""
    given = {"session_id": 1, "role": "assistant", "content": "hi", "tool_calls": '[{"id": "a"}]'}
    with mysql_db.engine.begin() as conn:
        columns = list(conn.exec_driver_sql("SELECT * FROM agent_message LIMIT 0").keys())
        assert "tool_call_count" not in columns
        conn.exec_driver_sql(
            "INSERT INTO agent_message VALUES ("
            + ", ".join("%s" if c in given else "DEFAULT" for c in columns)
            + ")",
            tuple(given[c] for c in columns if c in given),
        )
        count = conn.exec_driver_sql("SELECT tool_call_count FROM agent_message").scalar()
    assert count == 1


@pytest.mark.parametrize("charset", ["utf8mb3", "latin1"])
def test_0012_on_a_runtime_table_of_another_charset(mysql_empty_db, cli, charset):
    """A runtime's tables made in another charset, adopted (baseline 0001) and upgraded: 0012's
    column is utf8mb4 whatever the table's, so its ALTER runs (latin1 failed on a mix of
    collations) and a runtime's INSERT of a call id the table's charset could hold before
    still goes in (a 4-byte character in a utf8mb3 table failed with 1366). Review finding."""
    collation = {"utf8mb3": "utf8mb3_general_ci", "latin1": "latin1_swedish_ci"}[charset]
    seed = load_migrations("mysql")[0]
    with mysql_empty_db.engine.begin() as conn:
        for statement in seed.statements():
            conn.exec_driver_sql(
                statement.replace("utf8mb4_unicode_ci", collation).replace("utf8mb4", charset)
            )
    assert (
        cli("--db", mysql_empty_db.url, "migrate", "baseline", "--version", "0001").exit_code == 0
    )
    result = cli("--db", mysql_empty_db.url, "migrate", "up")
    assert result.exit_code == 0, result.output
    call_id = "call_😀" if charset == "utf8mb3" else "call_é"
    with mysql_empty_db.engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO agent_session (session_id) VALUES (1)")
        conn.execute(
            sa.text(
                "INSERT INTO agent_message (session_id, role, content, tool_calls)"
                " VALUES (1, 'assistant', 'x', :calls)"
            ),
            {"calls": json.dumps([{"id": call_id}], ensure_ascii=False)},
        )
        assert conn.exec_driver_sql("SELECT call_id FROM agent_message").scalar() == call_id


def test_mysql_tests_run_under_mysql8_mode_per_connection(mysql_db, run_files):
    """Every MySQL test runs under MySQL 8's SQL mode, set on each connection by the URL the
    fixtures give (the library's engine, a connection of the CLI's process), never on the
    server: the fixtures set the server's global mode before, and a count in a state file put
    it back, which a killed worker or two runs sharing the server left changed."""
    from ctxtool.db import create_engine as ctx_engine

    from .conftest import MYSQL8_SQL_MODE

    for engine in (mysql_db.engine, ctx_engine(mysql_db.url)):
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar() == MYSQL8_SQL_MODE
    script = (
        "import sys; from ctxtool.db import create_engine; "
        "c = create_engine(sys.argv[1]).connect(); "
        "print(c.exec_driver_sql('SELECT @@SESSION.sql_mode').scalar())"
    )
    child = subprocess.run(
        [sys.executable, "-c", script, mysql_db.url], capture_output=True, text=True, check=True
    )
    assert child.stdout.strip() == MYSQL8_SQL_MODE
    assert not list(run_files.glob("sql_mode*"))  # no server-wide state to count or put back
