"""The migration lock holds across a multi-primary cluster (a lock row, ``db.lock_row``), and
still on one server: two `migrate up` at once apply every file once."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
import sqlalchemy as sa

from ctxtool.core.errors import CtxtoolError
from ctxtool.db.dialects import dialect_of
from ctxtool.db.lock_row import LOCK_TABLE, held_lock_row
from ctxtool.migrate import Migrator, load_migrations

from .galera_cluster import galera  # noqa: F401 - the session fixture


def _autocommit(db):
    return db.engine.connect().execution_options(isolation_level="AUTOCOMMIT")


def test_a_held_lock_row_keeps_a_second_holder_out_and_names_the_first(mysql_empty_db):
    db = mysql_empty_db
    dialect = dialect_of(db.engine)
    with _autocommit(db) as first, _autocommit(db) as second:
        with held_lock_row(dialect, db.engine, first, "migrate", wait_s=0, owner="run-one"):
            with pytest.raises(CtxtoolError) as refused:
                with held_lock_row(dialect, db.engine, second, "migrate", wait_s=0.3):
                    pass
            assert "held by run-one since" in str(refused.value)
            assert LOCK_TABLE in str(refused.value)
        # Let go: the row is gone and the next holder gets it at once.
        assert db.scalar(f"SELECT COUNT(*) FROM {LOCK_TABLE}") == 0
        with held_lock_row(dialect, db.engine, second, "migrate", wait_s=0, owner="run-two"):
            assert db.scalar(f"SELECT owner FROM {LOCK_TABLE}") == "run-two"


def test_a_killed_runs_expired_lock_row_is_taken_over(mysql_empty_db):
    db = mysql_empty_db
    dialect = dialect_of(db.engine)
    with _autocommit(db) as conn:
        with held_lock_row(dialect, db.engine, conn, "migrate", wait_s=0, owner="dead"):
            pass
        conn.execute(
            sa.text(
                f"INSERT INTO {LOCK_TABLE} (name, owner, server, acquired_at, expires_at) "
                "VALUES ('migrate', 'dead', 'elsewhere:1', '2000-01-01', '2000-01-01 00:01:30')"
            )
        )
        with held_lock_row(dialect, db.engine, conn, "migrate", wait_s=0, owner="alive"):
            assert db.scalar(f"SELECT owner FROM {LOCK_TABLE}") == "alive"


def test_two_migrate_runs_at_once_on_one_server_apply_each_file_once(mysql_empty_db):
    db = mysql_empty_db
    errors = []

    def run():
        try:
            Migrator(db.engine).up()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    runs = [threading.Thread(target=run) for _ in range(2)]
    for r in runs:
        r.start()
    for r in runs:
        r.join(timeout=120)
    assert errors == []
    assert [s.state for s in Migrator(db.engine).status()] == ["applied"] * len(
        load_migrations("mysql")
    )


@pytest.mark.galera
def test_two_migrate_up_through_two_nodes_at_once_apply_each_file_once(galera):  # noqa: F811
    """GET_LOCK is each node's own: both runs got it, and both applied 0001 and recorded it
    (one of them failing on the other's history row). The lock row certifies cluster-wide."""
    with galera.database() as nodes:
        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "ctxtool", "--db", nodes[n].url, "migrate", "up"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in (1, 2)
        ]
        outs = [r.communicate(timeout=300) for r in runs]
        assert [r.returncode for r in runs] == [0, 0], outs
        applied = [
            line for out, _ in outs for line in out.splitlines() if line.startswith("applied")
        ]
        files = load_migrations("mysql")
        assert sorted(applied) == sorted(f"applied {m.filename}" for m in files)
        for n in (1, 2, 3):
            states = Migrator(nodes[n].engine).status()
            assert [s.state for s in states] == ["applied"] * len(files)
            assert nodes[n].scalar(f"SELECT COUNT(*) FROM {LOCK_TABLE}") == 0
