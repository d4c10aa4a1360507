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


def bare_fetch(
    engine: sa.Engine, where: str = "", params: tuple = (), ctxtool_driver: bool = False
) -> tuple[int, float]:
    """The baseline for reads: every column of agent_message fetched with the bare driver, as
    a program using PyMySQL alone would (its own connection and default converters, no
    SQLAlchemy, none of ctxtool's settings), in batches; returns (rows, seconds).

    ``ctxtool_driver``: the same fetch on a connection of ctxtool's engine (its faster
    timestamp converter), to show what SQLAlchemy and the records cost on their own."""
    import pymysql

    from ctxtool.db.schema import agent_message

    url = engine.url
    columns = ", ".join(c.name for c in agent_message.columns if c.computed is None)
    raw = (
        engine.raw_connection()
        if ctxtool_driver
        else pymysql.connect(
            host=url.host or "127.0.0.1",
            port=url.port or 3306,
            user=url.username or "",
            password=url.password or "",
            database=url.database,
            charset="utf8mb4",
        )
    )
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


def settle(engine: sa.Engine, timeout: float = 60.0) -> None:
    """Wait until InnoDB has written out what the last run left dirty. Its page cleaner goes on
    flushing for 10 s and more after a 100k-row import (innodb_io_capacity 200): whatever is
    measured next would pay for it, the second run of a pair more than the first. Done when
    the count of dirty pages stops falling."""
    query = "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'"
    deadline = time.monotonic() + timeout
    with engine.connect() as conn:
        previous = None
        while time.monotonic() < deadline:
            dirty = int(conn.exec_driver_sql(query).first()[1])
            if previous is not None and dirty >= previous:
                return
            previous = dirty
            time.sleep(1.0)


def server_cpu_seconds() -> float | None:
    """CPU time the local MariaDB/MySQL server process has used so far (user + system), or
    None when no such process runs on this machine. Read before and after a run, it shows how
    much of the work the server did (the benchmarks' servers are local)."""
    import os
    import subprocess

    for name in ("mariadbd", "mysqld"):
        found = subprocess.run(["pidof", name], capture_output=True, text=True).stdout.split()
        if len(found) == 1:
            try:
                with open(f"/proc/{found[0]}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                return None
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return None
