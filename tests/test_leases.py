"""A session's lease is taken once, before the read, when that lease covers the plan: the
checkpoint's append re-checks the lease and the parent, so a second take after the plan was a
transaction for nothing. A plan that needs the lease longer (it folds, or the read took long)
still takes it again, and a compactor whose lease was taken over is still refused at append.
A lease as written is short and renewed by a heartbeat while the work runs: a killed holder's
lapses within half a minute."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager

import pytest
from sqlalchemy import event

from ctxtool.compaction.compactor import Compactor
from ctxtool.compaction.summarizers import ExtractiveSummarizer
from ctxtool.core.durations import LEASE_MARGIN_S, lease_covers
from ctxtool.store import Store, leases

from .builders import LIMITS, SETTINGS, add_session, assert_valid_context, coding_session
from .llm_server import FakeLLM
from .waiting import wait_until


@contextmanager
def _statements(engine):
    """What the engine sends meanwhile: every statement, the lease UPDATEs among them."""
    sent: Counter[str] = Counter()

    def noted(conn, cursor, statement, parameters, context, executemany):
        sent["all"] += 1
        if statement.lstrip().upper().startswith("UPDATE") and "lease_owner" in statement:
            sent["lease"] += 1

    event.listen(engine, "before_cursor_execute", noted)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", noted)


class _Watching(ExtractiveSummarizer):
    """The extractive summarizer, noting how long the session's lease still lasts whenever it
    is asked (``input_tokens``: a bound that makes a long span fold), and running ``meanwhile``
    before it answers (a sibling acting while the LLM call is in flight)."""

    def __init__(self, db, session_id: int, input_tokens: int | None = None, meanwhile=None):
        super().__init__()
        self.db, self.session_id, self.input_tokens = db, session_id, input_tokens
        self.meanwhile = meanwhile
        self.lease_left: list[float] = []
        self.asked_at: list[float] = []  # time.monotonic() at each request

    def summarize(self, request):
        self.asked_at.append(time.monotonic())
        now = "CURRENT_TIMESTAMP" if self.db.kind == "sqlite" else "UTC_TIMESTAMP()"
        seconds = (
            "(julianday(lease_expires_at) - julianday(CURRENT_TIMESTAMP)) * 86400"
            if self.db.kind == "sqlite"
            else f"TIMESTAMPDIFF(SECOND, {now}, lease_expires_at)"
        )
        self.lease_left.append(
            float(
                self.db.scalar(
                    f"SELECT {seconds} FROM agent_session WHERE session_id = :s", s=self.session_id
                )
            )
        )
        if self.meanwhile is not None:
            self.meanwhile()
        return super().summarize(request)


def test_a_batch_takes_each_lease_once(db):
    """Before, each compacted session sent three lease UPDATEs (the batch's claim, the claim
    after the plan, the append's release) and read its newest checkpoint twice: now two, and
    12 statements a session became 10 in scripts/bench_cluster.py's 1 x 16."""
    for sid in range(1, 5):
        add_session(db, sid, coding_session(12, tag=str(sid)), model="gpt-4o")
    compactor = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="this-run")
    batch = compactor.batch()
    with _statements(db.engine) as sent:
        outcomes = compactor.run_batch(batch, workers=2)
    assert [o.status for o in outcomes] == ["compacted"] * 4
    assert sent["lease"] == 2 * 4, sent
    assert db.scalar("SELECT COUNT(*) FROM agent_session WHERE lease_owner IS NOT NULL") == 0
    for sid in range(1, 5):
        assert_valid_context(Store(db.engine), sid)


def test_one_session_takes_its_lease_once_and_it_lasts_the_summary(db):
    """`compact 1`: the take before the read and the append's release, no take between; the
    lease the summarizer runs under is still one request's plus the margin, less the read."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    watching = _Watching(db, 1)
    compactor = Compactor(db.engine, watching, SETTINGS, owner="me")
    with _statements(db.engine) as sent:
        started = time.monotonic()
        assert compactor.compact_session(1).status == "compacted"
    assert sent["lease"] == 2, sent
    [left], [asked_at] = watching.lease_left, watching.asked_at
    # Short (renewed by the heartbeat), taken before the read: what the read took is gone
    # from it (a second of rounding either way; the read's length is the machine's load).
    assert leases.LEASE_BEAT_S - (asked_at - started) - 1 <= left <= leases.LEASE_BEAT_S + 1


def test_a_plan_that_folds_takes_the_lease_again_for_its_length(db):
    """A span larger than the summarizer's input bound is folded over several requests: the
    lease taken before the read (one request) is taken again for the plan's own length."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    watching = _Watching(db, 1, input_tokens=1200)
    compactor = Compactor(db.engine, watching, SETTINGS, owner="me")
    with _statements(db.engine) as sent:
        outcome = compactor.compact_session(1)
    assert outcome.summarizer_requests > 1, outcome
    assert sent["lease"] == 3, sent  # the take, the take for the plan's length, the release
    # As written, each is short: the heartbeat renews it while the folds run.
    assert max(watching.lease_left) <= leases.LEASE_BEAT_S + 1


def test_a_lease_taken_long_before_the_plan_is_taken_again(db):
    """A caller that took the lease long ago (``leased_at``): what is left may not cover the
    summary, so the lease is taken again after the plan; one taken just now is not."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    add_session(db, 2, coding_session(12, tag="b"), model="gpt-4o")
    compactor = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="me")
    with db.engine.connect() as conn:
        assert leases.take(conn, 1, "me", 120) and leases.take(conn, 2, "me", 120)
    with _statements(db.engine) as sent:
        assert compactor.compact_session(1, leased_at=time.monotonic()).status == "compacted"
    assert sent["lease"] == 1, sent  # the append's release
    with _statements(db.engine) as sent:
        long_ago = time.monotonic() - 100
        assert compactor.compact_session(2, leased_at=long_ago).status == "compacted"
    assert sent["lease"] == 2, sent  # taken again after the plan, then released


def test_a_lease_taken_over_during_the_summary_is_refused_at_append(db):
    """The batch's lease is not taken again after the plan; the append still refuses a
    compactor whose lease a sibling took over (it ran out) while the LLM call was in flight,
    and the sibling's checkpoint is the only one."""
    add_session(db, 1, coding_session(12), model="gpt-4o")

    def sibling_takes_over():
        with db.engine.begin() as conn:  # this run's lease runs out...
            conn.exec_driver_sql(
                "UPDATE agent_session SET lease_expires_at = '2000-01-01 00:00:00'"
            )
        sibling = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="sibling")
        assert sibling.compact_session(1).status == "compacted"

    slow = Compactor(db.engine, _Watching(db, 1, meanwhile=sibling_takes_over), SETTINGS)
    batch = slow.batch()
    [outcome] = slow.run_batch(batch)
    assert outcome.status == "lost_race" and outcome.compaction_id is None
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 1
    assert db.scalar("SELECT summarizer FROM agent_compaction") == "extractive"
    assert db.scalar("SELECT lease_owner FROM agent_session") is None


@pytest.mark.parametrize(
    ("held", "elapsed", "needed", "covers"),
    [
        (120, 0.0, 120, True),  # taken just now for what the plan needs
        (120, LEASE_MARGIN_S / 2, 120, True),  # half the margin went to reading and planning
        (120, LEASE_MARGIN_S / 2 + 0.1, 120, False),  # more than half: take it again
        (160, 0.0, 460, False),  # the plan folds over several requests
        (900, 10.0, 900, True),  # --lease-seconds: both lengths are its figure
    ],
)
def test_lease_covers(held, elapsed, needed, covers):
    assert lease_covers(held, elapsed, needed) is covers


def _lease_left(db, session_id: int) -> float | None:
    """Seconds the session's lease still lasts on the server's clock (None: no holder)."""
    return db.scalar(
        "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), lease_expires_at) / 1e6 "
        "FROM agent_session WHERE session_id = :s AND lease_owner IS NOT NULL",
        s=session_id,
    )


def test_a_killed_holder_s_lease_lapses_within_half_a_minute(mysql_db):
    """Found by an adversarial run on Galera: a `compact --all` cut off from its node past the
    outage wait exits 4 and cannot give its leases back; they were sized for the whole summary
    (LLM timeout x attempts + 60 s), so reruns through other nodes reported `lease_held` for
    about 11.5 minutes. A lease is written for LEASE_BEAT_S now and renewed every BEAT_EVERY_S
    while the LLM call runs: a holder killed with kill -9 in the middle of it leaves the
    session free within half a minute, and a rerun compacts it. Fails before: the first lease
    lasted 5+ minutes."""
    db = mysql_db
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM(delay=300) as llm:  # the LLM call outlasts the test
        holder = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ctxtool",
                "--db",
                db.url,
                "compact",
                "--all",
                "--summarizer",
                "openai",
                "--base-url",
                llm.base_url,
                *LIMITS,
            ],
            env=dict(os.environ, OPENAI_API_KEY="sk-test"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_until(lambda: llm.requests, "the holder's LLM call", timeout=120)
            first = _lease_left(db, 1)
            assert first is not None and first <= leases.LEASE_BEAT_S + 1, first
            # Renewed while the call runs: still held past the first lease's end.
            time.sleep(first + 2)
            renewed = _lease_left(db, 1)
            assert renewed is not None and renewed > 0, renewed
            holder.send_signal(signal.SIGKILL)
            holder.wait(30)
            killed_at = time.monotonic()
            wait_until(
                lambda: _lease_left(db, 1) is None or _lease_left(db, 1) < 0,
                "the dead holder's lease to lapse",
                timeout=leases.LEASE_BEAT_S + 15,
            )
            lapsed_after = time.monotonic() - killed_at
        finally:
            if holder.poll() is None:
                holder.kill()
                holder.wait(30)
    assert lapsed_after <= leases.LEASE_BEAT_S + 2, lapsed_after
    rerun = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="rerun")
    assert rerun.compact_session(1).status == "compacted"


def test_the_heartbeat_renews_only_the_leases_still_its_owner_s(db):
    """A beat renews the sessions held and not dropped, and only where the lease is still the
    owner's: one taken over (it ran out meanwhile) stays the taker's."""
    for sid in (1, 2, 3):
        add_session(db, sid, coding_session(2, tag=str(sid)), model="gpt-4o")
    with db.engine.connect() as conn:
        for sid in (1, 2, 3):
            assert leases.take(conn, sid, "me", 1)
        with conn.begin():
            conn.exec_driver_sql(
                "UPDATE agent_session SET lease_owner = 'other' WHERE session_id = 3"
            )
    beat = leases.Heartbeat(db.engine, "me", seconds=600, every=0.05)
    beat.hold([1, 2, 3])
    beat.drop([2])
    wait_until(lambda: beat.beats >= 2, "two beats", timeout=30)
    beat.drop([1, 3])
    with db.engine.connect() as conn:
        assert leases.holder(conn, 1) is not None and leases.holder(conn, 1).owner == "me"
        time.sleep(1.5)
        assert leases.holder(conn, 2) is None  # dropped: its one second ran out
        assert leases.holder(conn, 3) is None or leases.holder(conn, 3).owner == "other"


class _ReadFails:
    """``read_suffix`` that reads (its transaction begun) and then fails with ``error``."""

    def __init__(self, error: BaseException):
        from ctxtool.compaction import compactor

        self.real, self.error = compactor.read_suffix, error

    def __call__(self, *args, **kwargs):
        self.real(*args, **kwargs)
        raise self.error


@pytest.mark.parametrize("error", [ValueError("planted read fault"), KeyboardInterrupt()])
def test_a_failure_inside_the_read_gives_the_lease_back_and_keeps_its_own_cause(
    db, monkeypatch, error
):
    """A failure (or Ctrl-C) inside the session's read left its transaction open; the release
    then began another and failed with SQLAlchemy's "already initialized a Transaction()",
    which replaced the real cause (Ctrl-C exited 1 as a database error) and left the lease
    held until it lapsed (review, 2026-12-07)."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    monkeypatch.setattr("ctxtool.compaction.compactor.read_suffix", _ReadFails(error))
    compactor = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="me")
    if isinstance(error, KeyboardInterrupt):
        with pytest.raises(KeyboardInterrupt):
            compactor.compact_session(1, force=True)
    else:
        outcome = compactor.compact_session(1, force=True)
        assert outcome.status == "failed" and "planted read fault" in (outcome.error or "")
    assert db.scalar("SELECT lease_owner FROM agent_session WHERE session_id = 1") is None
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0
