"""A point-in-time recovery replays a statement-based binlog through the ``mariadb`` client. The
import's prepared INSERTs are written there by the server, as text it escapes itself; its text
INSERTs as sent. Both must replay into exactly the rows the import stored.

The suite's server has no binlog, so this starts a private MariaDB with one (MIXED, MariaDB's
default format, which logs a plain INSERT as a statement) on a free port and a scratch data
directory.
"""

from __future__ import annotations

import ctypes
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pymysql
import pytest

from ctxtool.db import create_engine
from ctxtool.db.prepared import MIN_ROWS
from ctxtool.importer import Importer
from ctxtool.migrate import Migrator


def _tool(*names: str) -> str:
    for name in names:
        found = shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None)
        if found:
            return found
    raise AssertionError(f"{names[0]} is needed (scripts/test.sh installs it)")


def _dies_with_its_parent() -> None:
    """In the server's process before it starts: a test run killed with -9 takes it along
    (Linux's PR_SET_PDEATHSIG) instead of leaving a server running on a random port."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


@pytest.fixture(scope="module")
def binlog_server(tmp_path_factory):
    """A MariaDB server of our own with log_bin on; its URL and a way to run its client."""
    base = tmp_path_factory.mktemp("binlog-server")
    data = base / "data"
    subprocess.run([_tool("mariadb-install-db", "mysql_install_db"), "--no-defaults",
                    f"--datadir={data}", f"--user={getpass.getuser()}",
                    "--auth-root-authentication-method=normal"],
                   check=True, capture_output=True, timeout=120)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [_tool("mariadbd", "mysqld"), "--no-defaults", f"--datadir={data}", f"--port={port}",
         f"--socket={base / 'server.sock'}", "--bind-address=127.0.0.1", f"--user={getpass.getuser()}",
         f"--log-bin={data / 'bin'}", "--binlog-format=MIXED", "--server-id=1",
         f"--pid-file={base / 'server.pid'}", "--skip-name-resolve"],
        stdout=subprocess.DEVNULL, stderr=open(base / "server.log", "wb"),
        preexec_fn=_dies_with_its_parent)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                pymysql.connect(host="127.0.0.1", port=port, user="root").close()
                break
            except pymysql.err.OperationalError:
                assert server.poll() is None, (base / "server.log").read_text()
                assert time.monotonic() < deadline, "the binlog server did not start"
                time.sleep(0.2)
        yield port, data
    finally:
        server.terminate()
        server.wait(timeout=60)


def _client(port: int, database: str, sql: bytes | None = None, *args: str) -> None:
    done = subprocess.run([_tool("mariadb", "mysql"), "--no-defaults", "--host=127.0.0.1",
                           f"--port={port}", "--user=root", "--default-character-set=utf8mb4",
                           *args, database], input=sql, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")


def test_an_imports_binlog_replays_through_the_mariadb_client(binlog_server, tmp_path):
    port, data = binlog_server
    url = f"mysql+pymysql://root@127.0.0.1:{port}/pitr"
    _client(port, "", b"CREATE DATABASE pitr CHARACTER SET utf8mb4")
    engine = create_engine(url)
    try:
        Migrator(engine).up()
        # Every character the client might mangle, in enough rows for prepared executions
        # (MIN_ROWS and more), and one row over 1 MB, which goes alone as text.
        texts = [f"nul\0 cr\r\n quote ' and \" back \\ ctrl-z \x1a é😀 {i}" for i in range(3 * MIN_ROWS + 5)]
        texts.append('"\n\\\0' * 300_000)
        path = tmp_path / "pitr.jsonl"
        path.write_text("".join(json.dumps({"role": "user", "content": t}) + "\n" for t in texts))
        with engine.connect() as conn:
            log, position = conn.exec_driver_sql("SHOW MASTER STATUS").first()[:2]
            executed = int(conn.exec_driver_sql("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'").first()[1])
        [res] = Importer(engine).import_paths([str(path)])
        assert res.error is None and res.messages_added == len(texts)
        with engine.connect() as conn:
            assert int(conn.exec_driver_sql("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'")
                       .first()[1]) > executed  # prepared executions were used
            stored = [r[0] for r in conn.exec_driver_sql("SELECT content FROM agent_message ORDER BY id")]
        assert stored == texts
        # Lose the import (without logging that), then recover it from the binlog.
        _client(port, "pitr", b"SET sql_log_bin = 0; DELETE FROM agent_message; DELETE FROM agent_session;")
        replay = subprocess.run([_tool("mariadb-binlog", "mysqlbinlog"), "--no-defaults",
                                 f"--start-position={position}", str(data / log)],
                                capture_output=True, check=True, timeout=120).stdout
        _client(port, "pitr", replay)
        with engine.connect() as conn:
            recovered = [r[0] for r in conn.exec_driver_sql("SELECT content FROM agent_message ORDER BY id")]
        assert recovered == texts
    finally:
        engine.dispose()
