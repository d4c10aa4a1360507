#!/usr/bin/env python3
"""Benchmark what the session triggers cost a message INSERT (docs/distributed.md).

In a throw-away database with the full schema, times N single-row insert transactions and one
R-row INSERT into one session, without and with the triggers `ctxtool migrate up
--touch-session-trigger` creates (the touch, and on MySQL/MariaDB the order check), alternating
runs, and prints each with its ratio to the run without them just before it.

Example: .venv/bin/python scripts/bench_touch_trigger.py --url mysql+pymysql://root@127.0.0.1/bench_trigger
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import sqlalchemy as sa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchdb import fresh_database  # noqa: E402

from ctxtool.store.session_touch import (  # noqa: E402
    ORDER_TRIGGER_NAME,
    TRIGGER_NAME,
    install_trigger,
)

INSERT = "INSERT INTO agent_message (session_id, role, content) VALUES "


def timed(engine: sa.Engine, singles: int, rows: int, text: str) -> tuple[float, float]:
    """(seconds per single-row transaction, seconds for one ``rows``-row INSERT)."""
    with engine.connect() as conn:
        started = time.perf_counter()
        for _ in range(singles):
            conn.exec_driver_sql(INSERT + "(1, 'user', %s)", (text,))
            conn.commit()
        single = (time.perf_counter() - started) / singles
        started = time.perf_counter()
        conn.exec_driver_sql(INSERT + ", ".join(["(1, 'user', %s)"] * rows), (text,) * rows)
        conn.commit()
        return single, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="mysql+pymysql://root@127.0.0.1/bench_trigger")
    parser.add_argument("--singles", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--bytes", type=int, default=400, help="content bytes per message")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    engine = fresh_database(args.url)
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO agent_session (session_id) VALUES (1)")
    text = "x" * args.bytes
    ratios: list[tuple[float, float]] = []
    for _ in range(args.rounds):
        with engine.begin() as conn:
            for name in (TRIGGER_NAME, ORDER_TRIGGER_NAME):
                conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
        plain = timed(engine, args.singles, args.rows, text)
        with engine.connect() as conn:
            install_trigger(conn)
        touched = timed(engine, args.singles, args.rows, text)
        ratios.append((touched[0] / plain[0], touched[1] / plain[1]))
        print(
            f"single-row transaction: {plain[0] * 1e3:.2f} ms, with the triggers "
            f"{touched[0] * 1e3:.2f} ms ({touched[0] / plain[0]:.2f}x); "
            f"one {args.rows}-row INSERT: {plain[1] * 1e3:.0f} ms, with the triggers "
            f"{touched[1] * 1e3:.0f} ms ({touched[1] / plain[1]:.2f}x)"
        )
    print(
        f"median of {args.rounds}: single-row transaction "
        f"{statistics.median(r[0] for r in ratios):.2f}x, "
        f"{args.rows}-row INSERT {statistics.median(r[1] for r in ratios):.2f}x"
    )
    engine.dispose()


if __name__ == "__main__":
    main()
