"""Transactions run again when a lost race or a passing outage failed them: the one place that
decides what is worth another try, how long to back off, and when to give up.

On a multi-primary cluster (Galera) a write that loses certification against another node's
is refused at COMMIT with 1213, whatever this transaction read; a node that is still joining
answers 1047; a node killed under a connection drops it (2013) and refuses the next one (2003)
until it is back. None of these says anything about the work: the same transaction, run again
a moment later, usually goes through. What persists is raised as it is, so the caller makes it
that one item's outcome (one session of a batch), never the end of the batch.

A server that stays unreachable is waited for once, per engine: the first call that has waited
``RetryPolicy.outage_s`` in vain marks the engine as down, and every later call then tries once
and fails at once instead of waiting again (a batch stops taking work in seconds rather than
spending the outage on every queued item). The first call that gets through clears the mark.
"""

from __future__ import annotations

import random
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from .dialects import CONFLICT, UNREACHABLE, dialect_of

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. ``attempts``: tries in all for a conflict (1213, 1205, 1020);
    ``outage_s``: how long an unreachable server (2003, 2013, 1047) is waited for; delays
    double from ``first_delay_s`` up to ``max_delay_s``, each a random part of that (two
    losers of one race must not retry in step)."""

    attempts: int = 10
    first_delay_s: float = 0.05
    max_delay_s: float = 2.0
    outage_s: float = 30.0

    def delay(self, attempt: int) -> float:
        ceiling = min(self.max_delay_s, self.first_delay_s * 2 ** max(0, attempt - 1))
        return random.uniform(ceiling / 2, ceiling)


DEFAULT_POLICY = RetryPolicy()


class _Outage:
    """Since when an engine's server has not answered, and whether a caller gave up on it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.since: float | None = None
        self.given_up = False

    def failed(self, now: float, outage_s: float) -> bool:
        """Record a failure to reach the server; True when it is time to stop waiting."""
        with self.lock:
            if self.since is None:
                self.since = now
            if self.given_up or now - self.since >= outage_s:
                self.given_up = True
            return self.given_up

    def reached(self) -> None:
        with self.lock:
            self.since, self.given_up = None, False


_outages: weakref.WeakKeyDictionary[Engine, _Outage] = weakref.WeakKeyDictionary()
_outages_lock = threading.Lock()


def _outage_of(engine: Engine) -> _Outage:
    with _outages_lock:
        outage = _outages.get(engine)
        if outage is None:
            outage = _outages[engine] = _Outage()
        return outage


def server_given_up(bind: Engine | Connection) -> bool:
    """Whether a call on this engine has already waited out an outage in vain (and later
    calls fail at once until one gets through)."""
    return _outage_of(bind.engine).given_up


def retry_transaction(
    bind: Engine | Connection,
    work: Callable[[], T],
    *,
    policy: RetryPolicy = DEFAULT_POLICY,
    sleep: Callable[[float], None] = time.sleep,
    lost_race: Callable[[Exception], bool] | None = None,
) -> T:
    """``work()``, run again after a backoff while it fails for a reason that is not its own.

    ``work`` is one whole transaction: it begins and commits (or rolls back) on its own, and
    runs again from its start, so it must read what it decides on inside it. A connection it
    lost is replaced when it next begins (SQLAlchemy invalidates a connection a disconnect
    error came through). ``lost_race`` names the caller's own lost races, retried as a
    conflict is (an import that finds the session another import created meanwhile: a
    duplicate key). What is not transient, or persists, is raised unchanged.
    """
    dialect = dialect_of(bind)
    outage = _outage_of(bind.engine)
    attempt = 0
    while True:
        attempt += 1
        try:
            result = work()
        except Exception as exc:
            if lost_race is not None and lost_race(exc):
                kind: str | None = CONFLICT
            elif isinstance(exc, SQLAlchemyError):
                kind = dialect.transient(exc)
            else:
                kind = None
            if kind is None:
                raise
            _end_transaction(bind)
            if kind == UNREACHABLE:
                if outage.failed(time.monotonic(), policy.outage_s):
                    raise
            elif kind == CONFLICT and attempt >= policy.attempts:
                raise
            sleep(policy.delay(attempt))
        else:
            outage.reached()
            return result


def _end_transaction(bind: Engine | Connection) -> None:
    """Roll back what a failed attempt left open on a caller's connection (a connection lost
    under it is already invalidated: its rollback only resets it)."""
    # Not only when in_transaction(): a transaction a lost connection invalidated is no longer
    # active, yet the connection refuses to reconnect until it is rolled back.
    if isinstance(bind, Connection):
        try:
            bind.rollback()
        except SQLAlchemyError:
            pass
