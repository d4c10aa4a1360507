"""`migrate up --create-database` creates a missing MySQL/MariaDB database (as dbmate's `up`
does); without the flag the error names it. Passwords never show."""

from __future__ import annotations

import json
import os

import pytest
import sqlalchemy as sa

from tests.conftest import MYSQL_SERVER_URL

SECRET = "s3cr3tPw"
# A user is the server's, not a database's: one a test process, as the database is.
USER = f"ctxcfg_user_{os.getpid()}"


@pytest.fixture
def server_user():
    """A user with a password who may create databases named ctxcfg_*; a fresh name for one."""
    name = f"ctxcfg_{os.getpid()}"
    server = sa.create_engine(MYSQL_SERVER_URL, isolation_level="AUTOCOMMIT")
    url = sa.engine.make_url(MYSQL_SERVER_URL)
    with server.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(sa.text(f"DROP USER IF EXISTS '{USER}'@'%'"))
        conn.execute(sa.text(f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{SECRET}'"))
        conn.execute(sa.text(f"GRANT ALL ON `ctxcfg\\_%`.* TO '{USER}'@'%'"))
    try:
        yield f"mysql://{USER}:{SECRET}@{url.host}:{url.port or 3306}/{name}", name, server
    finally:
        with server.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(sa.text(f"DROP USER IF EXISTS '{USER}'@'%'"))
        server.dispose()


def _exists(server, name: str) -> bool:
    with server.connect() as conn:
        found = conn.execute(
            sa.text(
                "SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA "
                "WHERE SCHEMA_NAME = :n"
            ),
            {"n": name},
        ).scalar()
    assert found in (None, "utf8mb4")
    return found is not None


def test_migrate_up_creates_a_missing_database_only_when_asked(server_user, cli):
    url, name, server = server_user
    missing = cli("--db", url, "migrate", "up")
    assert missing.exit_code == 1
    assert "unknown database" in missing.output and "--create-database" in missing.output
    assert SECRET not in missing.output and f"{USER}:***@" in missing.output
    assert not _exists(server, name)

    created = cli("--db", url, "migrate", "up", "--create-database")
    assert created.exit_code == 0, created.output
    assert SECRET not in created.output
    assert (
        created.output.splitlines()[0]
        == f"created database mysql://{USER}:***@" + url.split("@", 1)[1]
    )
    assert _exists(server, name)
    assert cli("--db", url, "migrate", "status").exit_code == 0

    again = cli("--db", url, "migrate", "up", "--create-database", "--json")
    assert again.exit_code == 0, again.output
    doc = json.loads(again.output)
    assert doc["created_database"] is False and doc["applied"] == []
    assert SECRET not in again.output


def test_a_database_the_user_may_not_create_is_one_line(server_user, cli):
    url, _name, _server = server_user
    forbidden = url.rsplit("/", 1)[0] + "/notallowed_ctxcfg"
    result = cli("--db", forbidden, "migrate", "up", "--create-database")
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "1044" in result.output and SECRET not in result.output


def test_created_and_applied_name_the_database_the_same_copy_pasteable_way(server_user, cli):
    url, name, server = server_user
    spaced = url + "%20sp"  # the database `ctxcfg_<pid> sp`
    try:
        result = cli("--db", spaced, "migrate", "up", "--create-database")
        assert result.exit_code == 0, result.output
        shown = f"mysql://{USER}:***@" + spaced.split("@", 1)[1]
        lines = result.output.splitlines()
        assert lines[0] == f"created database {shown}"
        assert lines[-1].endswith(f"applied to {shown}"), lines[-1]
    finally:
        with server.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name} sp`")


def test_a_database_the_user_may_not_create_names_the_create_privilege(server_user, cli):
    url, _name, _server = server_user
    forbidden = url.rsplit("/", 1)[0] + "/notallowed_ctxcfg"
    result = cli("--db", forbidden, "migrate", "up", "--create-database")
    assert result.exit_code == 1 and "CREATE privilege" in result.output, result.output


def test_a_dry_run_prints_the_create_and_every_file(server_user, cli):
    """`migrate up --dry-run --create-database` on a missing database recommended the flag it
    was given; it prints the CREATE and the DDL now (as alembic's --sql), creating nothing."""
    url, name, server = server_user
    shown = cli("--db", url, "migrate", "up", "--dry-run", "--create-database")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith(
        f"-- the database\nCREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4;\n"
    )
    assert "-- 0001_seed_tables.sql" in shown.stdout and "CREATE TABLE" in shown.stdout
    doc = json.loads(
        cli("--db", url, "migrate", "up", "--dry-run", "--create-database", "--json").stdout
    )
    assert doc["create_database"].startswith("CREATE DATABASE") and doc["pending"]
    assert not _exists(server, name)
    assert SECRET not in shown.output
