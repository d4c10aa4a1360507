"""A named lock held as a row, for what must run once across a whole cluster (`migrate`).

``GET_LOCK`` is a lock of the server the connection is on: on a multi-primary cluster (Galera)
two runs through two nodes both get it. A row is a write, and writes certify cluster-wide: of
two INSERTs of one lock name through two nodes, one is refused (a duplicate key, or 1213 at
certification), whichever node each ran on. The same row works on one server.

The holder refreshes the row's expiry from a connection of its own while it holds it, so a
run that was killed leaves a row that expires within ``HOLD_S`` and is then taken over. Sooner
where it is provably dead: the row names the server its holder was connected to, and a caller
that holds that server's own lock (GET_LOCK), which the holder held too while it lived, takes
a row left through that server at once.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from ..core.errors import CtxtoolError
from .error_text import error_code
from .schema import Microseconds, mysql_table_options

if TYPE_CHECKING:  # the dialect objects hold these locks: they pass themselves in
    from .dialects import Dialect

LOCK_TABLE = "ctxtool_lock"
HOLD_S = 90  # a lock row not refreshed for this long belongs to a run that is gone
REFRESH_S = 15
POLL_S = 0.25

_MICROSECONDS = Microseconds()
lock_table = sa.Table(
    LOCK_TABLE,
    sa.MetaData(),
    sa.Column("name", sa.String(64), primary_key=True, autoincrement=False),
    sa.Column("owner", sa.String(191), nullable=False),
    sa.Column("server", sa.String(191), nullable=False),  # host:port the holder was on
    sa.Column("acquired_at", _MICROSECONDS, nullable=False),
    sa.Column("expires_at", _MICROSECONDS, nullable=False),
)
mysql_table_options(lock_table, "utf8mb4_bin")
L = lock_table


def lock_owner() -> str:
    """Who holds a lock row: host, process, and a nonce for this holding."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


# MySQL's "Table ... was skipped since its definition is being modified by concurrent DDL
# statement": a look at a table (the CREATE's check that it exists) while another node's CREATE
# of it is being applied here (Galera's total order isolation). Gone a moment later.
CONCURRENT_DDL = 1684
CONCURRENT_DDL_TRIES = 20


def ensure_lock_table(conn: Connection, dialect: Dialect) -> None:
    """Create the lock table if it is not there. Two runs creating it at once through two
    nodes: the second CREATE fails on the table the first made, which is what it wanted, or
    its check finds the table being made (looked at again)."""
    for attempt in range(1, CONCURRENT_DDL_TRIES + 1):
        try:
            lock_table.create(conn, checkfirst=True)
            return
        except SQLAlchemyError as exc:
            if dialect.already_applied(exc):
                return
            if error_code(exc) != CONCURRENT_DDL or attempt == CONCURRENT_DDL_TRIES:
                raise
            time.sleep(0.05 * attempt)


@contextlib.contextmanager
def held_lock_row(
    dialect: Dialect,
    engine: Engine,
    conn: Connection,
    name: str,
    *,
    wait_s: float,
    owner: str | None = None,
    server_lock_held: bool = False,
) -> Iterator[str]:
    """Hold lock ``name`` for the ``with`` block, waiting up to ``wait_s`` for another holder
    to let go. ``conn`` is an AUTOCOMMIT connection (each statement certifies on its own);
    the expiry is refreshed on another connection of ``engine``. ``server_lock_held``: the
    caller holds a lock of its server's own that every holder of this row takes first, so a
    row left through this server is a dead run's. Yields the owner."""
    owner = owner or lock_owner()
    ensure_lock_table(conn, dialect)
    server = str(conn.exec_driver_sql(dialect.server_identity_sql()).scalar_one())
    deadline = time.monotonic() + wait_s
    while not _take(conn, dialect, name, owner, server, server_lock_held):
        if time.monotonic() >= deadline:
            holder = conn.execute(
                sa.select(L.c.owner, L.c.acquired_at, L.c.expires_at).where(L.c.name == name)
            ).first()
            held = (
                f"{holder.owner} since {holder.acquired_at:%Y-%m-%d %H:%M:%S} UTC; if that run is "
                f"gone the lock expires at {holder.expires_at:%H:%M:%S} UTC"
                if holder
                else "another run"
            )
            raise CtxtoolError(
                f"lock {name!r} (table {LOCK_TABLE}) is held by {held} (waited {wait_s:g}s); "
                "try again when it finishes"
            )
        time.sleep(POLL_S)
    stop = threading.Event()
    refresher = threading.Thread(
        target=_refresh, args=(engine, dialect, name, owner, stop), daemon=True
    )
    refresher.start()
    try:
        yield owner
    finally:
        stop.set()
        refresher.join()
        conn.execute(L.delete().where(L.c.name == name, L.c.owner == owner))


def _take(
    conn: Connection,
    dialect: Dialect,
    name: str,
    owner: str,
    server: str,
    server_lock_held: bool,
) -> bool:
    """Insert the lock row, or take over one that expired (or that a dead run left through
    this server): True if it is now ours."""
    values = {
        "owner": owner,
        "server": server,
        "acquired_at": dialect.server_now(),
        "expires_at": dialect.server_now_plus(HOLD_S),
    }
    try:
        conn.execute(L.insert().values(name=name, **values))
        return True
    except IntegrityError:
        pass  # held: taken over below only if it expired
    except SQLAlchemyError as exc:
        if dialect.transient(exc) is None:
            raise
        return False  # lost the race (certification), or a node in trouble: try again
    gone = L.c.expires_at < dialect.server_now()
    if server_lock_held:
        gone = sa.or_(gone, L.c.server == server)
    try:
        taken = conn.execute(L.update().where(L.c.name == name, gone).values(**values)).rowcount
    except SQLAlchemyError as exc:
        if dialect.transient(exc) is None:
            raise
        return False
    return taken == 1


def _refresh(engine: Engine, dialect: Dialect, name: str, owner: str, stop: threading.Event):
    """Push the expiry on while the holder runs (a failure here only shortens the lease)."""
    while not stop.wait(REFRESH_S):
        try:
            with engine.begin() as conn:
                conn.execute(
                    L.update()
                    .where(L.c.name == name, L.c.owner == owner)
                    .values(expires_at=dialect.server_now_plus(HOLD_S))
                )
        except SQLAlchemyError:
            pass
