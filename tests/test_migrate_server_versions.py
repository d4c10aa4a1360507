"""`migrate up` on a server too old for a pending file, or for the session trigger: one line
naming the file, the feature and the version that has it, and nothing applied."""

from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy as sa

from ctxtool.db.dialects import MARIADB, MYSQL, SQLITE, TIDB, parse_server_version
from ctxtool.migrate import HISTORY_TABLE, Migrator, load_migrations
from ctxtool.migrate import server_versions as sv
from ctxtool.migrate.server_versions import Requirement, refusal

SHIPPED = {m.version: m for m in load_migrations("sqlite")}


@pytest.mark.parametrize(
    ("dialect", "text", "product", "version"),
    [
        ("sqlite", "SQLite 3.40.1", SQLITE, (3, 40, 1)),
        ("mysql", "10.11.6-MariaDB-0+deb12u1", MARIADB, (10, 11, 6)),
        ("mysql", "5.5.5-10.11.6-MariaDB", MARIADB, (10, 11, 6)),
        ("mysql", "8.0.36", MYSQL, (8, 0, 36)),
        ("mysql", "8.0.22-log", MYSQL, (8, 0, 22)),
        ("mysql", "8.0.11-TiDB-v7.5.1", TIDB, (8, 0, 11)),
    ],
)
def test_the_product_and_version_are_read_from_the_servers_text(dialect, text, product, version):
    server = parse_server_version(text)
    assert (server.product, server.version) == (product, version)


@pytest.mark.parametrize(
    ("dialect", "old", "new"),
    [
        ("sqlite", "SQLite 3.30.1", "SQLite 3.31.0"),
        ("mysql", "8.0.22", "8.0.23"),
        ("mysql", "10.3.2-MariaDB", "10.3.3-MariaDB"),
    ],
)
def test_0009_is_refused_below_the_version_that_has_its_features(dialect, old, new):
    pending = [SHIPPED["0008"], SHIPPED["0009"]]
    line = refusal(pending, parse_server_version(old))
    assert line is not None and "\n" not in line
    assert line.startswith("0009_suffix_sums_index.sql needs ")
    assert new.split("-")[0].removeprefix("SQLite ") in line and "nothing applied" in line
    assert refusal(pending, parse_server_version(new)) is None
    # Files that need nothing new run anywhere.
    assert refusal([SHIPPED["0008"]], parse_server_version(old)) is None


@pytest.mark.parametrize("text", ["", "garbage", "-MariaDB", "SQLite "])
def test_a_version_that_cannot_be_read_is_checked_against_nothing(text):
    """No requirement is held against a version text with no version in it: the server says
    what it cannot run, rather than every file being refused as needing a newer "MySQL "."""
    server = parse_server_version(text)
    assert server.version == ()
    assert refusal([SHIPPED["0009"]], server, trigger=True) is None


def test_tidb_is_refused_0009_which_no_version_of_it_can_run():
    tidb = parse_server_version("8.0.11-TiDB-v7.5.1")
    line = refusal([SHIPPED["0009"]], tidb)
    assert line is not None and "INVISIBLE columns (pingcap/tidb#7968)" in line
    assert "which TiDB does not have" in line
    assert refusal([SHIPPED["0008"]], tidb) is None


def test_the_trigger_is_refused_where_create_trigger_if_not_exists_is_missing_and_on_tidb():
    assert "8.0.29" in refusal([], parse_server_version("8.0.28"), trigger=True)
    assert refusal([], parse_server_version("8.0.29"), trigger=True) is None
    assert refusal([], parse_server_version("10.11.6-MariaDB"), trigger=True) is None
    tidb = refusal([], parse_server_version("8.0.11-TiDB-v7.5.1"), trigger=True)
    assert tidb is not None and "has no triggers" in tidb
    # Without the flag, TiDB is not asked about triggers.
    assert refusal([], parse_server_version("8.0.11-TiDB-v7.5.1")) is None


def test_the_real_servers_version_is_read_and_accepted(empty_db):
    migrator = Migrator(empty_db.engine)
    server = migrator.server_version()
    if empty_db.kind == "sqlite":
        assert (server.product, server.version) == (SQLITE, sqlite3.sqlite_version_info)
    else:
        assert server.product in (MARIADB, MYSQL) and server.version >= (8, 0)
    assert refusal(migrator.migrations, server, trigger=True) is None


def test_up_refuses_before_applying_anything_on_a_server_older_than_a_file_needs(
    empty_db, cli, monkeypatch
):
    """The real server, and a requirement of 0003 it cannot meet: the CLI says so in one line,
    exits non-zero, and neither 0001 nor 0002 (which it could run) is applied."""
    server = Migrator(empty_db.engine).server_version()
    too_new = tuple(n + 1 for n in server.version)
    monkeypatch.setitem(
        sv.FILE_REQUIREMENTS, "0003", (Requirement(server.product, too_new, "a future feature"),)
    )
    result = cli("--db", empty_db.url, "migrate", "up")
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "0003_binary_source_ids.sql needs a future feature" in lines[0]
    assert f"this server is {server}" in lines[0]
    with empty_db.engine.connect() as conn:
        tables = sa.inspect(conn).get_table_names()
        assert "agent_message" not in tables
        if HISTORY_TABLE in tables:
            applied = conn.execute(sa.text(f"SELECT COUNT(*) FROM {HISTORY_TABLE}")).scalar_one()
            assert applied == 0
    # Without that requirement the same run applies everything.
    monkeypatch.delitem(sv.FILE_REQUIREMENTS, "0003")
    assert cli("--db", empty_db.url, "migrate", "up").exit_code == 0


@pytest.mark.parametrize(
    ("dialect", "old", "new"),
    [
        ("sqlite", "SQLite 3.30.1", "SQLite 3.31.0"),
        ("mysql", "8.0.22", "8.0.23"),
        ("mysql", "8.0.11-TiDB-v7.5.1", None),
    ],
)
def test_0012_needs_what_0009_needs(dialect, old, new):
    """A store upgraded past 0009 by hand (or a server downgraded) is still refused 0012's
    generated INVISIBLE column with a line that names it, not a server error."""
    line = refusal([SHIPPED["0012"]], parse_server_version(old))
    assert line is not None and line.startswith("0012_call_id_index.sql needs ")
    if new is not None:
        assert refusal([SHIPPED["0012"]], parse_server_version(new)) is None
