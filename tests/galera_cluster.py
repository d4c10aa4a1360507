"""A real 3-node MariaDB Galera cluster on loopback for the tests marked ``galera``, started
once per test run by ``scripts/cluster.sh`` in a data directory of its own and stopped after.

The first free block of ports from 3311 up is taken, so two test runs on one machine (or a
person's `scripts/cluster.sh up` on the default ports) do not collide. A cluster that cannot
start fails the tests that need it; it never skips them. A run killed before it could stop its
cluster leaves the nodes running: the next run stops them first (:func:`reap_orphans`).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
import sqlalchemy as sa

from ctxtool.db import create_engine

from .conftest import Database

CLUSTER_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "cluster.sh"
NODES = (1, 2, 3)
# What cluster.sh puts above a node's client port: group communication, IST, SST.
_PORT_OFFSETS = (0, 1000, 1100, 1200)
_counter = itertools.count()


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port_block() -> tuple[int, IO]:
    """The first block of ports from 3311 up that no other test run has claimed (a lock file
    held for the whole run: checking the ports alone races with a run starting beside us)
    and that nothing listens on; with the claim's open file."""
    for first in range(3311, 3911, 10):
        claim = open(Path(tempfile.gettempdir()) / f"ctxtool-galera-{first}.lock", "w")  # noqa: SIM115
        try:
            fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            claim.close()
            continue
        if all(_port_free(first + off + n - 1) for off in _PORT_OFFSETS for n in NODES):
            return first, claim
        claim.close()
    raise RuntimeError("no free block of ports for a Galera cluster between 3311 and 3911")


@dataclass
class GaleraCluster:
    """The running cluster: node URLs, and what a test does to a node (kill -9, start)."""

    directory: Path
    first_port: int
    claim: IO | None = None  # the lock file that keeps other test runs off these ports

    @property
    def env(self) -> dict[str, str]:
        return dict(
            os.environ,
            CTXTOOL_GALERA_DIR=str(self.directory),
            CTXTOOL_GALERA_PORT=str(self.first_port),
        )

    def script(self, *args: str, timeout: float = 180) -> str:
        done = subprocess.run(
            ["bash", str(CLUSTER_SCRIPT), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"scripts/cluster.sh {' '.join(args)} failed ({done.returncode}): "
                f"{done.stdout}{done.stderr}"
            )
        return done.stdout

    def port(self, node: int) -> int:
        return self.first_port + node - 1

    def url(self, node: int, database: str = "") -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port(node)}/{database}"

    def kill(self, node: int) -> None:
        """``kill -9`` the node, as a crash would."""
        self.script("kill", str(node))

    def start(self, node: int) -> None:
        """Start a stopped node; returns once it has rejoined and is Synced."""
        self.script("start", str(node))

    @contextlib.contextmanager
    def database(self):
        """A throw-away database on the cluster with the full schema (migrated through node
        1), as one :class:`Database` per node: ``dbs[n]`` talks to node n."""
        name = f"ctxgalera_{os.getpid()}_{next(_counter)}"
        server = sa.create_engine(self.url(1), isolation_level="AUTOCOMMIT")
        with server.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
        nodes = {n: Database("mysql", self.url(n, name)) for n in NODES}
        try:
            yield nodes
        finally:
            for db in nodes.values():
                db.engine.dispose()
            with server.connect() as conn:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
            server.dispose()


def caught_up(db) -> None:
    """Wait until the node behind ``db`` has applied every write set the cluster ordered so
    far (a causal read: wsrep_sync_wait). A migration's DDL returns once node 1 ran it; a node
    still applying it aborts a local transaction on those tables with 1213, which is how a
    test's first insert through node 2 once failed in CI."""
    with db.engine.connect() as conn:
        conn.exec_driver_sql("SET SESSION wsrep_sync_wait = 1")
        conn.exec_driver_sql("SELECT COUNT(*) FROM agent_message").scalar()
        conn.exec_driver_sql("SET SESSION wsrep_sync_wait = 0")


def synced(url: str) -> bool:
    """Whether the node behind ``url`` says it is Synced with the cluster."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            row = conn.exec_driver_sql("SHOW STATUS LIKE 'wsrep_local_state_comment'").first()
        return row is not None and row[1] == "Synced"
    finally:
        engine.dispose()


_running: list[GaleraCluster] = []  # the one cluster of this test run, once started
_users = [0]
CLUSTER_PREFIX = "ctxtool-galera-"
OWNER_FILE = "owner"  # in a cluster's directory: "<pid> <start time>" of the run that owns it


def _process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot), None when there is none:
    with the pid, it names one process even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _owner_line() -> str:
    return f"{os.getpid()} {_process_start(os.getpid())}"


def reap_orphans(tmp: Path) -> list[Path]:
    """Stop the clusters that test runs started under ``tmp`` and could not stop (pytest killed
    mid-run): those whose owning process is gone. A live run's cluster, and one a person
    started with ``scripts/cluster.sh up`` (no owner file), are left alone. The directories
    of the clusters stopped."""
    reaped = []
    for directory in sorted(tmp.glob(CLUSTER_PREFIX + "*")):
        try:
            pid, started = (directory / OWNER_FILE).read_text().split()
        except (OSError, ValueError):
            continue
        if _process_start(int(pid)) == started:
            continue
        env = dict(os.environ, CTXTOOL_GALERA_DIR=str(directory))
        subprocess.run(
            ["bash", str(CLUSTER_SCRIPT), "down"], env=env, capture_output=True, timeout=120
        )
        shutil.rmtree(directory, ignore_errors=True)
        reaped.append(directory)
    return reaped


def _start() -> GaleraCluster:
    tmp = Path(tempfile.gettempdir())
    reap_orphans(tmp)
    directory = Path(tempfile.mkdtemp(prefix=CLUSTER_PREFIX, dir=tmp))
    (directory / OWNER_FILE).write_text(_owner_line())
    cluster = GaleraCluster(directory, *_free_port_block())
    try:
        cluster.script("up")
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        with contextlib.suppress(Exception):
            cluster.script("down")
        shutil.rmtree(directory, ignore_errors=True)
        if cluster.claim is not None:
            cluster.claim.close()
        pytest.fail(f"the Galera cluster did not start: {exc}")
    return cluster


@pytest.fixture(scope="session")
def galera():
    """The cluster, up and Synced on all three nodes for the whole test run.

    Each test module imports this fixture, and pytest keeps one session-scoped instance per
    module that defines it: they share one cluster, stopped when the last of them ends."""
    if not _running:
        _running.append(_start())
    _users[0] += 1
    try:
        yield _running[0]
    finally:
        _users[0] -= 1
        if _users[0] == 0:
            cluster = _running.pop()
            cluster.script("down")
            shutil.rmtree(cluster.directory, ignore_errors=True)
            if cluster.claim is not None:
                cluster.claim.close()
