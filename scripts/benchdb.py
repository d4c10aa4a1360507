"""The benchmarks' throw-away database: dropped, created and migrated afresh for each run."""

from __future__ import annotations

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
