"""`sessions mark S --over-window-ok`: a session that stays over its window because of one giant
kept message is acknowledged; `compact --all` reports it and exits 0 for it; `sessions list`
shows it. On both databases, through the library and the real entry point."""

from __future__ import annotations

import json

from ctxtool.core.compaction_outcome import CompactionOutcome
from ctxtool.core.status import CompactionStatus
from ctxtool.store import Store
from ctxtool.store.acknowledgement import batch_failures

from .builders import LIMITS, add_session, coding_session
from .test_compaction_runs import _find_output_session


def test_only_an_acknowledged_over_window_outcome_is_excused():
    over = CompactionOutcome(1, CompactionStatus.OVER_WINDOW)
    failed = CompactionOutcome(2, CompactionStatus.FAILED)
    done = CompactionOutcome(3, CompactionStatus.COMPACTED)
    assert batch_failures([over, failed, done], set()) == [over, failed]
    assert batch_failures([over, failed, done], {1, 2}) == [failed]


def test_an_acknowledged_session_is_reported_and_no_longer_fails_the_batch(db, cli):
    add_session(db, 1, coding_session(6) + _find_output_session(), model="gpt-4o")
    add_session(db, 2, coding_session(12), model="gpt-4o")
    first = cli("--db", db.url, "compact", "--all", *LIMITS)
    assert first.exit_code == 4 and "stay over their window" in first.stderr

    marked = cli("--db", db.url, "sessions", "mark", "1", "--over-window-ok")
    assert marked.exit_code == 0 and "session 1: over its window, acknowledged" in marked.stderr
    listed = json.loads(cli("--db", db.url, "sessions", "list", "--json").stdout)
    assert [r["over_window_ok_at"] is not None for r in listed] == [False, True]  # newest first
    table = cli("--db", db.url, "sessions", "list", "--width", "0").stdout.splitlines()
    assert "over window" in table[0] and table[-1].rstrip().endswith("ok")

    again = cli("--db", db.url, "compact", "--all", "--json", *LIMITS)
    assert again.exit_code == 0, again.output
    rows = json.loads(again.stdout)
    assert [(r["status"], r["over_window_ok"]) for r in rows] == [("over_window", True)]
    shown = cli("--db", db.url, "compact", "--all", *LIMITS)
    assert shown.exit_code == 0 and "session 1: over its window, acknowledged" in shown.stderr
    assert "over_window" in shown.stdout

    cleared = cli("--db", db.url, "sessions", "mark", "1", "--clear")
    assert cleared.exit_code == 0 and "acknowledgement cleared" in cleared.stderr
    assert cli("--db", db.url, "compact", "--all", *LIMITS).exit_code == 4
    Store(db.engine).mark_over_window_ok("1")  # the library, as the command does
    assert db.scalar("SELECT over_window_ok_at IS NOT NULL FROM agent_session WHERE session_id = 1")


def test_mark_says_what_is_wrong(db, cli):
    add_session(db, 1, [{"role": "user", "content": "hi"}])
    nothing = cli("--db", db.url, "sessions", "mark", "1")
    assert nothing.exit_code == 2 and "--over-window-ok or --clear" in nothing.output
    unknown = cli("--db", db.url, "sessions", "mark", "999", "--over-window-ok")
    assert unknown.exit_code == 1 and "session 999 does not exist" in unknown.output
    assert "Traceback" not in nothing.output + unknown.output
