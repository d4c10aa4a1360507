"""scripts/bench_bigstore.py works: it builds its store (once), finds the candidates, lists the
sessions over their window and plans the giant session's compaction. A tiny size, no timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from .conftest import _mysql_database_url

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_bigstore.py"


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(SCRIPT.parent)},
    )


def test_bigstore_benchmark_builds_once_and_measures():
    url = _mysql_database_url(f"ctxtool_big_test_{os.getpid()}")
    size = ["--url", url, "--messages", "6000", "--sessions", "80", "--giant", "1200"]
    size += ["--context-window", "20000"]
    try:
        first = bench(*size, "--repeat", "1")
        assert first.returncode == 0, first.stderr
        assert "built in" in first.stdout
        cold, kept = [json.loads(line) for line in first.stdout.splitlines() if line[0] == "{"]
        assert not cold["kept_sums"] and kept["kept_sums"] and kept["keep_s"] > 0
        assert cold["messages"] == 6000 and kept["messages"] == 6004  # a turn in 1% (one)
        for report in (cold, kept):
            assert report["candidates"] >= 1 and report["listed"] >= 1  # the giant at least
            assert report["dry_run_status"] == "planned" and report["dry_run_summarised"] > 0
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            sizes = dict(
                conn.exec_driver_sql(
                    "SELECT session_id, COUNT(*) FROM agent_message GROUP BY session_id"
                ).all()
            )
            checkpoints = conn.exec_driver_sql("SELECT COUNT(*) FROM agent_compaction").scalar()
        engine.dispose()
        assert len(sizes) == 80 and sizes[1] == 1200 and sum(sizes.values()) == 6000
        assert checkpoints >= 1
        again = bench(*size, "--repeat", "1")
        assert again.returncode == 0, again.stderr
        assert "reusing" in again.stdout and "built in" not in again.stdout
    finally:
        dropped = bench("--url", url, "--drop")
        assert dropped.returncode == 0, dropped.stderr
