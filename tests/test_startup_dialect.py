"""A command on a SQLite store does not load SQLAlchemy's MySQL dialect (issue #44: about 15 ms
of every start-up). The MySQL-only DDL of the tables ctxtool creates itself (its migration
history, its lock row) is said by compile rules and set at creation, and the DDL a server gets
is as before: DATETIME(6), MEDIUMTEXT, InnoDB, utf8mb4 and each table's collation."""

from __future__ import annotations

import os
import subprocess
import sys

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.schema import CreateTable

from ctxtool.db.lock_row import lock_table
from ctxtool.db.schema import schema_history

from .builders import add_session, coding_session

_LOADED = """
import sys
from ctxtool.cli import main
for args in (["sessions", "list"], ["migrate", "status"], ["context", "show", "1"]):
    try:
        main(["--db", sys.argv[1], *args], prog_name="ctxtool")
    except SystemExit as stop:
        assert not stop.code, (args, stop.code)
print(sorted(m for m in sys.modules if m.startswith("sqlalchemy.dialects.mysql")), file=sys.stderr)
"""


def test_a_sqlite_store_is_read_without_the_mysql_dialect(sqlite_db):
    add_session(sqlite_db, 1, coding_session(2), model="gpt-4o")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")}
    out = subprocess.run(
        [sys.executable, "-c", _LOADED, sqlite_db.url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "[]"


def test_the_tables_ctxtool_creates_keep_their_mysql_ddl(mysql_db):
    created = {}
    with mysql_db.engine.connect() as conn:
        for table in (schema_history, lock_table):
            table.create(conn, checkfirst=True)
            created[table.name] = conn.exec_driver_sql(f"SHOW CREATE TABLE {table.name}").one()[1]
    history, lock = created["ctxtool_schema_history"], created["ctxtool_lock"]
    assert "`started_at` datetime(6) NOT NULL" in history
    assert "`failed_statement` mediumtext" in history
    assert "ENGINE=InnoDB" in history and "utf8mb4_unicode_ci" in history
    assert "`expires_at` datetime(6) NOT NULL" in lock and "utf8mb4_bin" in lock
    mysql_ddl = str(CreateTable(lock_table).compile(dialect=mysql.dialect()))
    assert "DATETIME(6)" in mysql_ddl
    sqlite_ddl = str(CreateTable(schema_history).compile(dialect=sqlite.dialect()))
    assert "DATETIME(6)" not in sqlite_ddl and "MEDIUMTEXT" not in sqlite_ddl
    assert isinstance(schema_history.c.started_at.type, sa.DateTime)
