"""The benchmarks' throw-away database: dropped, created and migrated afresh for each run."""

from __future__ import annotations

import time

import sqlalchemy as sa

from ctxtool.db import create_engine
from ctxtool.migrate import Migrator


def fresh_database(url: str, **engine_options) -> sa.Engine:
    """Drop and recreate the database named in ``url``, apply every migration, return an engine."""
    parsed = sa.engine.make_url(url)
    server = sa.create_engine(parsed.set(database=""), isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {parsed.database}")
        conn.exec_driver_sql(f"CREATE DATABASE {parsed.database} CHARACTER SET utf8mb4")
    server.dispose()
    engine = create_engine(url, **engine_options)
    Migrator(engine).up()
    return engine


def bare_fetch(engine: sa.Engine, where: str = "", params: tuple = ()) -> tuple[int, float]:
    """The baseline for reads: every column of agent_message fetched with the bare driver
    (no SQLAlchemy), in batches; returns (rows, seconds)."""
    from ctxtool.db.schema import agent_message

    columns = ", ".join(c.name for c in agent_message.columns)
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        t0 = time.perf_counter()
        cur.execute(f"SELECT {columns} FROM agent_message {where}", params)
        rows = 0
        while batch := cur.fetchmany(10_000):
            rows += len(batch)
        return rows, time.perf_counter() - t0
    finally:
        raw.close()
