"""What the database layer says in each dialect's words, run on each database."""

from __future__ import annotations

import sqlalchemy as sa

from ctxtool.db.dialects import insert_or_ignore


def _table() -> sa.Table:
    return sa.Table(
        "ignored_twice",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("note", sa.String(20)),
    )


def _insert_twice(engine: sa.Engine) -> list[tuple]:
    table = _table()
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(insert_or_ignore(table), [{"id": 1, "note": "first"}])
        conn.execute(insert_or_ignore(table), [{"id": 1, "note": "second"}, {"id": 2, "note": "x"}])
        return [tuple(r) for r in conn.execute(sa.select(table).order_by(table.c.id))]


def test_insert_or_ignore_keeps_the_row_that_holds_the_key(empty_db):
    assert _insert_twice(empty_db.engine) == [(1, "first"), (2, "x")]


def test_insert_or_ignore_speaks_mariadb_under_its_own_name(mysql_empty_db):
    """SQLAlchemy names the dialect of a mariadb:// URL "mariadb", not "mysql"; a prefix given
    for "mysql" alone is left out there, and the second insert failed on the taken key."""
    url = sa.make_url(mysql_empty_db.url).set(drivername="mariadb+pymysql")
    engine = sa.create_engine(url)
    try:
        assert engine.dialect.name == "mariadb"
        assert _insert_twice(engine) == [(1, "first"), (2, "x")]
    finally:
        engine.dispose()
