"""Fixtures: every store test runs against a real SQLite file and a real MariaDB/MySQL database.

The MySQL server comes from $CTXTOOL_TEST_MYSQL_URL (default root@127.0.0.1:3306, which
scripts/test.sh makes sure is up). Each test gets its own throw-away database, dropped after.
An unreachable server fails the tests; it never skips them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from ctxtool.db import create_engine
from ctxtool.migrate import Migrator

MYSQL_SERVER_URL = os.environ.get("CTXTOOL_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/")
# ../shared beside the checkout; CTXTOOL_SHARED_DIR points a checkout elsewhere (a git worktree)
# at the same read-only copy.
SHARED = Path(
    os.environ.get("CTXTOOL_SHARED_DIR") or Path(__file__).resolve().parents[1].parent / "shared"
)
TRANSCRIPTS = SHARED / "transcripts"
_counter = itertools.count()
# A slow run off a terminal prints a progress line every few seconds: tests that read stderr
# line by line must not meet one on a busy machine (tests/test_progress.py sets its own).
os.environ.setdefault("CTXTOOL_PROGRESS_INTERVAL", "0")


def _mysql_database_url(name: str) -> str:
    return (
        sa.engine.make_url(MYSQL_SERVER_URL)
        .set(database=name)
        .render_as_string(hide_password=False)
    )


# MySQL 8's default SQL mode. MariaDB's default is laxer (no ONLY_FULL_GROUP_BY): running the
# suite under MySQL's rules catches SQL that MariaDB would accept and MySQL 8 would refuse.
MYSQL8_SQL_MODE = (
    "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
)


@pytest.fixture(scope="session")
def mysql8_sql_mode():
    """Every MySQL test runs under MySQL 8's rules. Requested by the MySQL fixtures only, so the
    pure tests run with no server at all."""
    server = sa.create_engine(MYSQL_SERVER_URL, isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        previous = conn.exec_driver_sql("SELECT @@GLOBAL.sql_mode").scalar()
        conn.exec_driver_sql(f"SET GLOBAL sql_mode = '{MYSQL8_SQL_MODE}'")
    try:
        yield
    finally:
        with server.connect() as conn:
            conn.exec_driver_sql("SET GLOBAL sql_mode = %s", (previous,))
        server.dispose()


class Database:
    """A throw-away database: its URL (for the CLI) and an engine (for the library)."""

    def __init__(self, kind: str, url: str):
        self.kind = kind
        self.url = url
        self.engine = create_engine(url)

    def migrate(self, to: str | None = None) -> Database:
        Migrator(self.engine).up(to=to)
        return self

    def scalar(self, sql: str, **params):
        with self.engine.connect() as conn:
            return conn.execute(sa.text(sql), params).scalar()

    def rows(self, sql: str, **params):
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(sa.text(sql), params)]


@contextlib.contextmanager
def _mysql_database():
    name = f"ctxtest_{os.getpid()}_{next(_counter)}"
    server = sa.create_engine(MYSQL_SERVER_URL, isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        conn.exec_driver_sql(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    db = Database("mysql", _mysql_database_url(name))
    try:
        yield db
    finally:
        db.engine.dispose()
        with server.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        server.dispose()


@pytest.fixture(params=["sqlite", "mysql"])
def empty_db(request, tmp_path):
    """An empty database of each kind (no schema)."""
    if request.param == "sqlite":
        db = Database("sqlite", f"sqlite:///{tmp_path / 'ctx.db'}")
        yield db
        db.engine.dispose()
        return
    request.getfixturevalue("mysql8_sql_mode")
    with _mysql_database() as db:
        yield db


@pytest.fixture
def sqlite_db(tmp_path):
    """A SQLite store with the full schema, for what is the same on every database (one run
    is enough) — never a skipped MySQL twin."""
    db = Database("sqlite", f"sqlite:///{tmp_path / 'ctx.db'}").migrate()
    yield db
    db.engine.dispose()


@pytest.fixture
def mysql_empty_db(mysql8_sql_mode):
    """An empty MariaDB/MySQL database, for what only a server has (non-transactional DDL,
    InnoDB locking between two real connections)."""
    with _mysql_database() as db:
        yield db


@pytest.fixture
def mysql_db(mysql_empty_db):
    """A MariaDB/MySQL database with the full schema applied."""
    return mysql_empty_db.migrate()


@pytest.fixture
def db(empty_db):
    """A database of each kind with the full schema applied."""
    return empty_db.migrate()


@pytest.fixture
def cli():
    """Run the real `ctxtool` click entry point; returns the click Result."""
    from ctxtool.cli import main

    runner = CliRunner()

    def invoke(*args, input=None, env=None):
        return runner.invoke(
            main, [str(a) for a in args], input=input, env=env, catch_exceptions=False
        )

    return invoke
