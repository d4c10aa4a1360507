"""Fixtures: every store test runs against a real SQLite file and a real MariaDB/MySQL database.

The MySQL server comes from $CTXTOOL_TEST_MYSQL_URL (default root@127.0.0.1:3306, which
scripts/test.sh makes sure is up). Each test gets its own throw-away database, dropped after.
An unreachable server fails the tests; it never skips them.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import shutil
import signal
import tempfile
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


# MySQL 8's default SQL mode. MariaDB's default is laxer (no ONLY_FULL_GROUP_BY): running the
# suite under MySQL's rules catches SQL that MariaDB would accept and MySQL 8 would refuse.
MYSQL8_SQL_MODE = (
    "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
)


def with_mysql8_mode(url: str) -> str:
    """``url`` whose every connection runs under MySQL 8's mode (PyMySQL's ``sql_mode``
    argument, which ctxtool's URLs take): set per connection, so a test changes no server-wide
    setting, and the CLI's processes a test starts with the URL get it too."""
    return (
        sa.engine.make_url(url)
        .update_query_dict({"sql_mode": MYSQL8_SQL_MODE})
        .render_as_string(hide_password=False)
    )


def _mysql_database_url(name: str) -> str:
    return with_mysql8_mode(
        sa.engine.make_url(MYSQL_SERVER_URL)
        .set(database=name)
        .render_as_string(hide_password=False)
    )


# -- one test run spread over processes (pytest-xdist: scripts/test.sh's -n) ---------------
#
# Each process gets its own databases (the pid is in their names), SQLite files and LLM
# servers. What the processes share is handled here: the terminal's size they inherit, the
# server's global state (below, with the fixtures), and what is costly to start, which one
# process starts once for the tests that need it (the groups).

ALONE_ON_THE_SERVER = "alone_on_the_server"
_TERMINAL_ENV = ("COLUMNS", "LINES")
_GROUPS = "ctxtool_groups"  # workerinput: the directory the workers write their groups in


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist's controller, for each worker: what it has of the terminal's size, and
    where the worker writes the groups it collected."""
    node.workerinput["ctxtool_terminal_env"] = {k: os.environ.get(k) for k in _TERMINAL_ENV}
    config = node.config
    if not hasattr(config, "_ctxtool_groups"):
        config._ctxtool_groups = tempfile.mkdtemp(prefix="ctxtool-xdist-groups-")
    node.workerinput[_GROUPS] = config._ctxtool_groups


def pytest_configure(config):
    # Run from a background job of a shell without job control (`cmd &` in a script, nohup),
    # pytest starts with SIGINT ignored, and every ctxtool the tests start inherits that: the
    # Ctrl-C tests would send signals no one hears. Ctrl-C is restored for what they start.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # A pytest-xdist worker comes up with COLUMNS=80 and LINES=24 exported (pytest imports
    # readline early, and GNU readline writes them in a worker): the commands would then fit
    # their tables in 80 columns where a run of one process has no width. A worker takes the
    # controller's values.
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        for key, value in workerinput.get("ctxtool_terminal_env", {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    config.addinivalue_line(
        "markers",
        f"{ALONE_ON_THE_SERVER}: sets a global server variable or reads server-wide counters"
        " (Prepared_stmt_count, Com_stmt_prepare); runs while no other test of the run does",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed real-model test says what became of the llama.cpp server (alive or dead, the
    end of its log): "cannot reach the summarizer" alone does not tell a crash from a
    refused connection."""
    report = yield
    if report.failed and item.get_closest_marker("real_llm") is not None:
        from .real_llm import servers_state

        report.sections.append(("llama.cpp server", servers_state() or "no server running"))
    return report


def pytest_unconfigure(config):
    groups = getattr(config, "_ctxtool_groups", None)
    if groups is not None:
        shutil.rmtree(groups, ignore_errors=True)


def _group(item) -> str | None:
    """The tests that must run in one process: all the Galera tests (one 3-node cluster for
    the run, not one per process), all the real-model tests (one llama.cpp server), and a module's tests that share a module-scoped fixture (a
    private server, a corpus built once); None for a test that can run anywhere."""
    if item.get_closest_marker("galera") is not None:
        return "galera"
    if item.get_closest_marker("real_llm") is not None:
        return "real_llm"  # one llama.cpp server for the run (tests/real_llm.py)
    fixtures = getattr(item, "_fixtureinfo", None)
    if fixtures is not None and any(
        d.scope in ("module", "class", "package")
        for defs in fixtures.name2fixturedefs.values()
        for d in defs
    ):
        return item.module.__name__
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """A worker tells the controller its groups (pytest-xdist's own xdist_group marker does
    not group under pytest 9.2, whose node ids it can no longer rename): a file of node id ->
    group, written whole before the collection is reported, so before the controller
    schedules."""
    directory = getattr(config, "workerinput", {}).get(_GROUPS)
    if directory is None:
        return
    groups = {item.nodeid: group for item in items if (group := _group(item)) is not None}
    worker = config.workerinput["workerid"]
    partial = Path(directory) / f"{worker}.partial"
    partial.write_text(json.dumps(groups))
    partial.rename(Path(directory) / f"{worker}.json")


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the groups the workers wrote: a group goes whole to one
    worker, every other test is a unit of its own (the largest units go first)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Groups(LoadGroupScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                written = sorted(Path(config._ctxtool_groups).glob("*.json"))
                self.groups = json.loads(written[0].read_text()) if written else {}
            group = self.groups.get(nodeid)
            return f"group {group}" if group is not None else nodeid

    return Groups(config, log)


@contextlib.contextmanager
def _locked(path: Path, how: int):
    with open(path, "a") as handle:
        fcntl.flock(handle, how)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def run_files(tmp_path_factory) -> Path:
    """A directory every process of this test run sees (pytest-xdist's workers share the
    parent of their base temp directories); a run of one process has its own."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return tmp_path_factory.getbasetemp().parent
    return tmp_path_factory.getbasetemp()


@pytest.fixture(autouse=True)
def _server_turn(request, run_files):
    """A test marked ``alone_on_the_server`` runs while no other test does: every test holds
    a shared lock, that one an exclusive one (a turnstile first, so a waiting exclusive test
    is not starved by shared ones that keep coming). In a run of one process, a no-op."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    alone = request.node.get_closest_marker(ALONE_ON_THE_SERVER) is not None
    turnstile, turn = run_files / "server-turnstile.lock", run_files / "server-turn.lock"
    if alone:
        with _locked(turnstile, fcntl.LOCK_EX), _locked(turn, fcntl.LOCK_EX):
            yield
        return
    with _locked(turnstile, fcntl.LOCK_EX):
        pass
    with _locked(turn, fcntl.LOCK_SH):
        yield


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


# What a table-by-table copy would miss: a migration that makes one must extend the copy.
_NOT_COPIED = {
    # SHOW TRIGGERS, not information_schema.triggers: the latter waits (minutes) behind any
    # DROP DATABASE on the server that waits for a metadata lock, another client's included.
    "trigger": "SHOW TRIGGERS FROM `{name}`",
    # A view, a sequence, a system-versioned table: anything but a plain table.
    "table": "SELECT CONCAT(table_name, ' (', table_type, ')') FROM information_schema.tables"
    " WHERE table_schema = %s AND table_type <> 'BASE TABLE'",
    "routine": "SELECT routine_name FROM information_schema.routines WHERE routine_schema = %s",
    "event": "SELECT event_name FROM information_schema.events WHERE event_schema = %s",
}


class MigratedTables:
    """The tables `migrate up` left in a database migrated once for the whole test run, copied
    into each MySQL test's database instead of migrating it again.

    On a server each migration's DDL commits on its own: migrating took 0.3-0.8 s of every MySQL
    test, and the store it leaves is the same in any database. The copy is exact: each table's
    own ``SHOW CREATE TABLE`` (columns, keys, foreign keys, options, AUTO_INCREMENT) and the rows
    migrations wrote (the history, the counters). Migrating itself is still tested on empty
    databases (tests/test_migrate*.py), in the template, and in every SQLite store."""

    def __init__(self, template: Database):
        self.server = sa.create_engine(MYSQL_SERVER_URL, isolation_level="AUTOCOMMIT")
        name = template.engine.url.database
        self.creates: list[str] = []
        self.copies: list[str] = []
        with self.server.connect() as conn:
            tables = conn.exec_driver_sql(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = %s AND table_type = 'BASE TABLE' ORDER BY table_name",
                (name,),
            ).scalars()
            for table in list(tables):
                create = conn.exec_driver_sql(f"SHOW CREATE TABLE `{name}`.`{table}`").first()
                self.creates.append(create[1])
                if not conn.exec_driver_sql(f"SELECT COUNT(*) FROM `{name}`.`{table}`").scalar():
                    continue
                columns = ", ".join(
                    f"`{column}`"
                    for column in conn.exec_driver_sql(
                        "SELECT column_name FROM information_schema.columns WHERE table_schema"
                        " = %s AND table_name = %s AND extra NOT LIKE '%%GENERATED%%'"
                        " ORDER BY ordinal_position",
                        (name, table),
                    ).scalars()
                )
                self.copies.append(
                    f"INSERT INTO `{table}` ({columns}) SELECT {columns} FROM `{name}`.`{table}`"
                )
            missed = [
                f"{kind} {found}"
                for kind, sql in _NOT_COPIED.items()
                for found in (
                    conn.exec_driver_sql(sql.format(name=name))
                    if "{name}" in sql
                    else conn.exec_driver_sql(sql, (name,))
                ).scalars()
            ]
        if not self.creates or not self.copies or missed:
            raise RuntimeError(
                f"the migrated template {name} is not tables and rows only: "
                f"{len(self.creates)} tables, {len(self.copies)} with rows, also {missed}"
            )

    def copy_into(self, db: Database) -> Database:
        """``db`` (an empty MySQL database) as `migrate up` leaves it."""
        with self.server.connect() as conn:
            conn.exec_driver_sql(f"USE `{db.engine.url.database}`")
            conn.exec_driver_sql("SET SESSION foreign_key_checks = 0")
            try:
                for statement in self.creates + self.copies:
                    conn.exec_driver_sql(statement.replace("%", "%%"))
            finally:
                conn.exec_driver_sql("SET SESSION foreign_key_checks = 1")
        return db

    def dispose(self) -> None:
        self.server.dispose()


@pytest.fixture(scope="session")
def mysql_migrated_tables():
    """:class:`MigratedTables` of a database `migrate up` ran in once for the test run."""
    with _mysql_database() as template:
        tables = MigratedTables(template.migrate())
        try:
            yield tables
        finally:
            tables.dispose()


@pytest.fixture(params=["sqlite", "mysql"])
def empty_db(request, tmp_path):
    """An empty database of each kind (no schema)."""
    if request.param == "sqlite":
        db = Database("sqlite", f"sqlite:///{tmp_path / 'ctx.db'}")
        yield db
        db.engine.dispose()
        return
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
def mysql_empty_db():
    """An empty MariaDB/MySQL database, for what only a server has (non-transactional DDL,
    InnoDB locking between two real connections)."""
    with _mysql_database() as db:
        yield db


@pytest.fixture
def mysql_db(mysql_empty_db, mysql_migrated_tables):
    """A MariaDB/MySQL database with the full schema applied."""
    return mysql_migrated_tables.copy_into(mysql_empty_db)


@pytest.fixture
def db(empty_db, request):
    """A database of each kind with the full schema applied."""
    if empty_db.kind == "mysql":
        return request.getfixturevalue("mysql_migrated_tables").copy_into(empty_db)
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
