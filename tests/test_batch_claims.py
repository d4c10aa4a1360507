"""`compact --all` claiming its batch as workers come free: several processes running the same
batch pass over the sessions siblings hold or have compacted (never trying or reading them),
each session is compacted once, and leases are given back on every path."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable

import pytest

from ctxtool.compaction.compactor import Compactor
from ctxtool.compaction.summarizers import ExtractiveSummarizer
from ctxtool.store import Store, leases

from .builders import SETTINGS, add_session, assert_valid_context, coding_session
from .compacting import compact_with_llm
from .llm_server import FakeLLM
from .test_compact import _compact_all_cmd
from .waiting import wait_until


def _sessions(db, n: int) -> None:
    for sid in range(1, n + 1):
        add_session(db, sid, coding_session(12, tag=str(sid)), model="gpt-4o")


def _tried(monkeypatch) -> list[int]:
    """Every session a lease was tried for (one at a time, or by a batch's claim): the real
    functions run, against the real database; this only notes their arguments."""
    tried: list[int] = []

    def noting(take: Callable, many: bool) -> Callable:
        def noted(conn, ids, *args, **kwargs):
            tried.extend(ids if many else [ids])
            return take(conn, ids, *args, **kwargs)

        return noted

    monkeypatch.setattr(leases, "take", noting(leases.take, False))
    if hasattr(leases, "take_many"):
        monkeypatch.setattr(leases, "take_many", noting(leases.take_many, True))
    return tried


def _read(compactor: Compactor) -> list[int]:
    """The sessions the compactor reads (its phase callback says so before each read)."""
    read: list[int] = []
    compactor.on_phase = lambda sid, what: read.append(sid) if what.startswith("reading") else None
    return read


def _held(db) -> list[tuple[int, str]]:
    rows = db.rows(
        "SELECT session_id, lease_owner FROM agent_session WHERE lease_owner IS NOT NULL"
    )
    return sorted((r["session_id"], r["lease_owner"]) for r in rows)


def test_a_claim_never_tries_the_sessions_a_sibling_holds(db, monkeypatch):
    """A sibling process found the same batch and holds four of its sessions when this run
    claims. The first claim (two workers: two sessions) reads the leases of the sessions ahead;
    from then on the sibling's sessions are passed over: never tried (before, each was one
    UPDATE of its own, then a read of its holder) and never read."""
    _sessions(db, 10)
    compactor = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="this-run")
    batch = compactor.batch()
    order = [c.session_id for c in batch.candidates]
    assert len(order) == 10
    sibling = order[4:8]
    with db.engine.connect() as conn:
        assert all(leases.take(conn, sid, "sibling-run", 600) for sid in sibling)
    tried, read = _tried(monkeypatch), _read(compactor)
    outcomes = {o.session_id: o for o in compactor.run_batch(batch, workers=2)}
    assert not set(tried) & set(sibling), tried
    assert not set(read) & set(sibling), read
    assert sorted(tried) == sorted(set(order) - set(sibling))  # each of the others once
    for sid in order:
        if sid in sibling:
            assert outcomes[sid].status == "lease_held"
            assert outcomes[sid].notes[0].startswith("leased by sibling-run until ")
        else:
            assert outcomes[sid].status == "compacted"
    assert _held(db) == [(sid, "sibling-run") for sid in sorted(sibling)]


def test_a_session_a_sibling_compacted_since_the_batch_is_not_read_again(db):
    """Before, a session a sibling had compacted after this run found its batch was taken,
    read and planned again, to find it below its threshold."""
    _sessions(db, 4)
    compactor = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="this-run")
    batch = compactor.batch()
    done = batch.candidates[2].session_id
    sibling = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="sibling-run")
    assert sibling.compact_session(done).status == "compacted"
    read = _read(compactor)
    outcomes = {o.session_id: o for o in compactor.run_batch(batch, workers=1)}
    assert outcomes[done].status == "lost_race" and done not in read
    assert outcomes[done].notes == ["compacted by a sibling run since this batch was found"]
    assert sorted(read) == sorted(set(outcomes) - {done})
    per_session = db.rows("SELECT session_id, COUNT(*) AS n FROM agent_compaction GROUP BY 1")
    assert sorted((r["session_id"], r["n"]) for r in per_session) == [(s, 1) for s in range(1, 5)]
    assert _held(db) == []


@pytest.mark.parametrize("mode", ["garbage", "long"])
def test_failed_and_rejected_sessions_give_their_leases_back(db, cli, mode):
    _sessions(db, 6)
    with FakeLLM() as llm:
        llm.mode = mode
        result = compact_with_llm(
            cli, db, llm, "--all", "--workers", "2", "--json", env={"OPENAI_API_KEY": "k"}
        )
    assert result.exit_code == 4, result.output
    assert "Traceback" not in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0
    assert _held(db) == []


def _compact_all(url: str, base_url: str, workers: int) -> subprocess.Popen:
    # The later --workers is the one click keeps.
    return subprocess.Popen(
        _compact_all_cmd(url, base_url, "--workers", str(workers), "--retries", "0"),
        env=dict(os.environ, OPENAI_API_KEY="sk-test"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_processes_running_one_batch_pass_over_each_others_sessions(db):
    """Three real `compact --all` processes of two workers on 24 sessions. Each session is
    compacted once, by one of them; another process that found it reports it `lease_held` (a
    sibling held it) or `lost_race` (a sibling had compacted it) without having started it: such an
    outcome never took a worker's time (before, each was a visit: a take, then a read of the
    holder, 1,154 of them for 400 sessions from 4 x 4 in the benchmark). No lease is left."""
    _sessions(db, 24)
    with FakeLLM(delay=0.1) as llm:
        procs = [_compact_all(db.url, llm.base_url, 2) for _ in range(3)]
        outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in outs]
    rows = [row for out, _ in outs for row in json.loads(out)]
    for out, _ in outs:  # each session of its batch once (a late one finds fewer)
        ids = [row["session_id"] for row in json.loads(out)]
        assert len(ids) == len(set(ids))
    compacted = [row["session_id"] for row in rows if row["status"] == "compacted"]
    assert sorted(compacted) == list(range(1, 25))
    passed = [row for row in rows if row["status"] != "compacted"]
    assert {row["status"] for row in passed} <= {"lease_held", "lost_race"}, passed
    # Not one started: compact_session names its summarizer and times itself in every outcome.
    assert all(row["seconds"] == 0 and row["summarizer"] is None for row in passed), passed
    per_session = db.rows("SELECT session_id, COUNT(*) AS n FROM agent_compaction GROUP BY 1")
    assert sorted((r["session_id"], r["n"]) for r in per_session) == [(s, 1) for s in range(1, 25)]
    assert _held(db) == []
    for sid in range(1, 25):
        assert_valid_context(Store(db.engine), sid)


@pytest.mark.slow
def test_a_killed_process_holds_no_more_leases_than_its_workers(db):
    """Sessions are claimed as workers come free, not ahead: a run killed with -9 leaves the
    leases of the sessions it was compacting (they expire), none of the queue's."""
    _sessions(db, 10)
    with FakeLLM() as llm:
        llm.mode = "hang"
        proc = _compact_all(db.url, llm.base_url, 3)
        try:
            wait_until(lambda: len(llm.requests) >= 3, "three requests to the LLM")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
    held = _held(db)
    assert len(held) == 3 and len({owner for _, owner in held}) == 1, held
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0


def test_a_batch_with_nothing_to_count_walks_the_message_index_once(db, monkeypatch):
    """The counting step's walk of the effective contexts is the batch's when it counted
    nothing (before, every real run walked them twice: on a big store, 40 s each)."""
    from ctxtool.compaction import batch as batch_module

    walks: list[int] = []
    walk = batch_module.read_effective_contexts

    def noted(conn, encoding=None, **options):
        walks.append(1)
        return walk(conn, encoding, **options)

    _sessions(db, 3)
    with db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE agent_message SET token_count = NULL")
    monkeypatch.setattr(batch_module, "read_effective_contexts", noted)
    compactor = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS)
    first = compactor.batch()
    assert len(walks) == 2  # it counted: the batch is found from a second walk
    walks.clear()
    again = compactor.batch()
    assert len(walks) == 1
    reads_only = compactor.batch(dry_run=True)
    assert [c.session_id for c in again.candidates] == [c.session_id for c in first.candidates]
    assert again.candidates == reads_only.candidates and len(again.candidates) == 3
