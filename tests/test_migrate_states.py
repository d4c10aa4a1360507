"""Where a database stands against the shipped files: the pure verdicts of migrate.states, on
plain lists (no database)."""

from __future__ import annotations

import itertools

import pytest

from ctxtool.core.errors import CtxtoolError
from ctxtool.migrate import HistoryRow, Migration
from ctxtool.migrate.states import (
    migration_states,
    not_current_message,
    pending_migrations,
    refuse_unsafe,
    schema_is_current,
)

A = Migration("0001", "seed", "CREATE TABLE a (x INT);")
B = Migration("0002", "more", "ALTER TABLE a ADD COLUMN y INT;\nCREATE INDEX i ON a (y);")


def row(
    m: Migration,
    status: str,
    checksum: str | None = None,
    done: int | None = None,
    error: str | None = None,
) -> HistoryRow:
    return HistoryRow(
        m.version, m.name, checksum or m.checksum, status, "2026-01-01", None, 5, done, None, error
    )


def test_states_of_applied_pending_changed_and_missing_files():
    gone = Migration("0000", "old", "")
    history = {"0001": row(A, "applied", checksum="0" * 64), "0000": row(gone, "applied")}
    states = {s.version: s for s in migration_states([A, B], history)}
    assert states["0001"].state == "checksum changed" and not states["0001"].ok
    assert states["0002"].state == "pending"
    assert states["0000"].state == "file missing"
    assert [s.version for s in migration_states([A, B], history)] == ["0000", "0001", "0002"]


def test_an_interrupted_file_is_pending_again_and_says_where_it_resumes():
    history = {"0001": row(A, "applied"), "0002": row(B, "running", done=1)}
    [state] = [s for s in migration_states([A, B], history) if s.version == "0002"]
    assert state.state == "running" and "1 of 2 statements done; `up` resumes there" in state.detail
    assert pending_migrations([A, B], history) == [B]
    refuse_unsafe([A, B], history, "sql/mysql")  # resumable: not refused
    assert "0002_more is running" in not_current_message(migration_states([A, B], history))


def test_a_failed_file_blocks_up_until_repaired_and_says_how():
    history = {"0001": row(A, "applied"), "0002": row(B, "failed", done=1, error="boom")}
    with pytest.raises(
        CtxtoolError,
        match=r"0002_more.sql failed \(boom\)\. 1 statement\(s\) "
        r"before it took effect.*migrate repair 0002",
    ):
        refuse_unsafe([A, B], history, "sql/mysql")


def test_a_changed_applied_file_blocks_up():
    history = {"0001": row(A, "applied", checksum="f" * 64)}
    with pytest.raises(CtxtoolError, match="sql/sqlite/0001_seed.sql changed after it was applied"):
        refuse_unsafe([A, B], history, "sql/sqlite")


def test_pending_respects_to_and_current_means_nothing_to_say():
    assert pending_migrations([A, B], {}, to="0001") == [A]
    history = {"0001": row(A, "applied"), "0002": row(B, "baseline")}
    assert not_current_message(migration_states([A, B], history)) is None


def test_the_quick_check_agrees_with_the_status_on_every_history():
    """`schema_is_current`, the check every command makes from three columns, says current
    exactly where the status has nothing to say: over every row each file may have (none,
    applied, baseline, running, failed; its checksum or another) and a row no file ships."""
    gone = Migration("0000", "old", "")
    kinds = [None, "applied", "baseline", "running", "failed", "changed"]
    for a, b, extra in itertools.product(kinds, kinds, (False, True)):
        history = {}
        for m, kind in ((A, a), (B, b)):
            if kind == "changed":
                history[m.version] = row(m, "applied", checksum="f" * 64)
            elif kind is not None:
                history[m.version] = row(m, kind)
        if extra:
            history[gone.version] = row(gone, "applied")
        rows = [(r.version, r.checksum, r.status) for r in history.values()]
        expected = not_current_message(migration_states([A, B], history)) is None
        assert schema_is_current([A, B], rows) == expected, (a, b, extra)
