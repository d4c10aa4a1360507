"""A point-in-time recovery replays a statement-based binlog through the ``mariadb`` client. The
import's prepared INSERTs are written there by the server, as text it escapes itself; its text
INSERTs as sent. Both must replay into exactly the rows the import stored.

The suite's server has no binlog, so this starts a private MariaDB with one (MIXED, MariaDB's
default format, which logs a plain INSERT as a statement) on a socket of its own and a scratch
data directory. MariaDB only: MySQL 8.4 has neither mysql_install_db nor SHOW MASTER STATUS.
"""

from __future__ import annotations

import ctypes
import getpass
import json
import os
import shutil
import signal
import subprocess
import time

import pymysql
import pytest

from ctxtool.db import create_engine
from ctxtool.db.prepared import MIN_ROWS
from ctxtool.importer import Importer
from ctxtool.migrate import Migrator


def _tool(name: str) -> str:
    found = shutil.which(name) or (
        f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None
    )
    assert found, f"{name} is needed (scripts/test.sh installs it)"
    return found


def _dies_with_its_parent() -> None:
    """In the server's process before it starts: a test run killed with -9 takes it along
    (Linux's PR_SET_PDEATHSIG) instead of leaving a server running."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


@pytest.fixture(scope="module")
def binlog_server(tmp_path_factory):
    """A MariaDB server of our own with log_bin on, reached through its own socket only (no
    TCP port that another server could hold); yields the socket and the data directory."""
    base = tmp_path_factory.mktemp("binlog-server")
    data, sock = base / "data", base / "server.sock"
    done = subprocess.run(
        [
            _tool("mariadb-install-db"),
            "--no-defaults",
            f"--datadir={data}",
            f"--user={getpass.getuser()}",
            "--auth-root-authentication-method=normal",
        ],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, (done.stdout + done.stderr).decode(errors="replace")
    with open(base / "server.log", "wb") as log:
        server = subprocess.Popen(
            [
                _tool("mariadbd"),
                "--no-defaults",
                f"--datadir={data}",
                f"--socket={sock}",
                "--skip-networking",
                f"--user={getpass.getuser()}",
                f"--log-bin={data / 'bin'}",
                "--binlog-format=MIXED",
                "--server-id=1",
                f"--pid-file={base / 'server.pid'}",
                "--innodb-log-file-size=8M",
            ],  # not the default 96 MB, left in /tmp by each run
            stdout=subprocess.DEVNULL,
            stderr=log,
            preexec_fn=_dies_with_its_parent,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if sock.exists():  # before that, PyMySQL's failed attempt leaks its socket
                    pymysql.connect(unix_socket=str(sock), user="root").close()
                    break
            except pymysql.err.OperationalError:
                pass
            assert server.poll() is None, (base / "server.log").read_text(errors="replace")
            assert time.monotonic() < deadline, "the binlog server did not start"
            time.sleep(0.2)
        yield sock, data
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(data, ignore_errors=True)


def _client(sock, database: str, sql: bytes) -> None:
    done = subprocess.run(
        [
            _tool("mariadb"),
            "--no-defaults",
            f"--socket={sock}",
            "--user=root",
            "--default-character-set=utf8mb4",
            database,
        ],
        input=sql,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")


def test_an_imports_binlog_replays_through_the_mariadb_client(binlog_server, tmp_path):
    sock, data = binlog_server
    url = f"mysql+pymysql://root@localhost/pitr?unix_socket={sock}"
    _client(sock, "", b"CREATE DATABASE pitr CHARACTER SET utf8mb4")
    engine = create_engine(url)
    try:
        Migrator(engine).up()
        # Every character the client might mangle, in enough rows for prepared executions
        # (MIN_ROWS and more), and one row over 1 MB, which goes alone as text.
        texts = [
            f"nul\0 cr\r\n quote ' and \" back \\ ctrl-z \x1a é😀 {i}"
            for i in range(3 * MIN_ROWS + 5)
        ]
        texts.append('"\n\\\0' * 300_000)
        path = tmp_path / "pitr.jsonl"
        path.write_text("".join(json.dumps({"role": "user", "content": t}) + "\n" for t in texts))
        with engine.connect() as conn:
            log, position = conn.exec_driver_sql("SHOW MASTER STATUS").first()[:2]
            executed = int(
                conn.exec_driver_sql("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'").first()[1]
            )
        [res] = Importer(engine).import_paths([str(path)])
        assert res.error is None and res.messages_added == len(texts)
        with engine.connect() as conn:
            assert (
                int(conn.exec_driver_sql("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'").first()[1])
                > executed
            )  # prepared executions were used
            stored = [
                r[0] for r in conn.exec_driver_sql("SELECT content FROM agent_message ORDER BY id")
            ]
        assert stored == texts
        # Lose the import (without logging that), then recover it from the binlog.
        _client(
            sock,
            "pitr",
            b"SET sql_log_bin = 0; DELETE FROM agent_message; DELETE FROM agent_session; "
            b"DELETE FROM ctxtool_transcript_files;",
        )
        replay = subprocess.run(
            [
                _tool("mariadb-binlog"),
                "--no-defaults",
                f"--start-position={position}",
                str(data / log),
            ],
            capture_output=True,
            check=True,
            timeout=120,
        ).stdout
        _client(sock, "pitr", replay)
        with engine.connect() as conn:
            recovered = [
                r[0] for r in conn.exec_driver_sql("SELECT content FROM agent_message ORDER BY id")
            ]
        assert recovered == texts
    finally:
        engine.dispose()
