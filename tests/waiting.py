"""Waiting for a state instead of sleeping a fixed time.

A fixed sleep that forces an ordering (the LLM call has started, the append is waiting on a
lock) is too long on an idle machine and too short on a busy one; a test polls for the state it
needs and fails, naming it, when it never comes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], what: str, timeout: float = 60.0, interval: float = 0.02
) -> T:
    """``predicate()``'s first truthy value, asked every ``interval`` seconds; the test fails,
    naming ``what``, after ``timeout`` seconds without one."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {timeout:g} s waiting for {what}")
        time.sleep(interval)


# InnoDB refreshes INNODB_TRX only after 0.1 s without a read of it: polled faster, it never
# shows a new lock wait.
LOCK_WAITS_INTERVAL = 0.25


def lock_waits(db, statement: str) -> int:
    """Statements like ``statement`` (SQL LIKE) in ``db``'s database (MySQL/MariaDB) waiting
    for a row lock; other tests' databases on the same server do not count. Poll it every
    ``LOCK_WAITS_INTERVAL``."""
    return db.scalar(
        "SELECT COUNT(*) FROM information_schema.INNODB_TRX t "
        "JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id "
        "WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE() AND t.trx_query LIKE :statement",
        statement=statement,
    )
