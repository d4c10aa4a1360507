"""A pooled connection the server killed is given back without a traceback on stderr: the
pool logs the failed reset with its traceback, and with no logging set up Python printed it
(a review's `compact --all --workers 3` with connections killed printed it 3 runs of 3)."""

from __future__ import annotations

import subprocess
import sys

_SCRIPT = """
import sys
from ctxtool.db.engine import create_engine
url = sys.argv[1]
engine, killer = create_engine(url), create_engine(url)
conn = engine.connect()
cid = conn.exec_driver_sql("SELECT CONNECTION_ID()").scalar()
conn.commit()
with killer.connect() as k:
    k.exec_driver_sql(f"KILL {cid}")
conn.close()  # the pool's reset on return (a ROLLBACK) meets the killed connection
with engine.connect() as again:  # the pool threw it away: the next checkout works
    print(again.exec_driver_sql("SELECT 1").scalar())
"""


def test_a_killed_connection_given_back_prints_no_traceback(mysql_db):
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, mysql_db.url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    assert "Traceback" not in done.stderr and "Exception during reset" not in done.stderr
