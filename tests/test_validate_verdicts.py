"""validate as a deploy gate (issue #44): an error is what the store got wrong; a session over
its window is a warning while it waits for compaction and a note once acknowledged; each
context is checked against the threshold compact cut it for. compact's over-window error line
names the way out. Through the real entry point, on SQLite and MariaDB."""

from __future__ import annotations

import json

from ctxtool.db.schema import agent_message

from .builders import LIMITS, add_session, coding_session
from .test_compaction_runs import _find_output_session

LONG = [{"role": "user", "content": "start"}, {"role": "assistant", "content": "word " * 6000}]
WINDOW = ["--context-window", "4000", "--reserve-tokens", "500"]


def test_waiting_and_acknowledged_sessions_do_not_fail_the_gate(db, cli):
    add_session(db, 1, LONG, model="gpt-4o")
    add_session(db, 2, LONG, model="gpt-4o")
    assert cli("--db", db.url, "sessions", "mark", "2", "--over-window-ok").exit_code == 0

    checked = cli("--db", db.url, "validate", *WINDOW, "--json")
    assert checked.exit_code == 0, checked.output
    found = {i["session_id"]: i for i in json.loads(checked.stdout)}
    assert [(i["rule"], i["severity"]) for i in found.values()] == [
        ("over_window", "warning"),
        ("over_window", "note"),
    ]
    assert "waiting for compaction (`ctxtool compact 1`)" in found[1]["message"]
    assert "acknowledged" in found[2]["message"]
    assert "`ctxtool sessions mark 2 --over-window-ok`" in found[2]["message"]

    human = cli("--db", db.url, "validate", *WINDOW)
    assert human.exit_code == 0
    assert "2 session(s) checked: 0 error(s), 1 warning(s), 1 note(s)" in " ".join(
        human.stderr.split()
    )
    assert cli("--db", db.url, "validate", *WINDOW, "--errors-only", "--json").stdout.strip() == (
        "[]"
    )


def test_validate_checks_the_threshold_compact_used(db, cli):
    """After `compact --context-window 6000`, a plain validate checks what the checkpoint was
    cut for (5000), not gpt-4o's 128k window; a window given on the command line wins."""
    add_session(db, 1, coding_session(20), model="gpt-4o")
    compacted = cli("--db", db.url, "compact", "1", *LIMITS, "--json")
    assert compacted.exit_code == 0, compacted.output
    [details] = [
        json.loads(d) if isinstance(d, str) else d
        for d in [db.scalar("SELECT details FROM agent_compaction WHERE session_id = 1")]
    ]
    assert details["threshold"] == 5000
    assert json.loads(cli("--db", db.url, "validate", "--json").stdout) == []
    # The session grows past that threshold: validate says so, against the recorded one.
    with db.engine.begin() as conn:
        for m in coding_session(20, tag="more"):
            conn.execute(agent_message.insert().values(session_id=1, **m))
    grown = cli("--db", db.url, "validate", "--json")
    assert grown.exit_code == 0, grown.output
    [issue] = json.loads(grown.stdout)
    assert issue["rule"] == "over_window" and issue["severity"] == "warning"
    assert "over its threshold of 5000 tokens (the one checkpoint" in issue["message"]
    roomy = cli("--db", db.url, "validate", "--context-window", "200000", "--json")
    assert json.loads(roomy.stdout) == []
    plain = cli("--db", db.url, "validate")
    assert "the threshold compact cut it for" in " ".join(plain.stderr.split())


def test_compact_over_window_names_the_way_out(db, cli):
    add_session(db, 1, coding_session(6) + _find_output_session(), model="gpt-4o")
    batch = cli("--db", db.url, "compact", "--all", *LIMITS)
    assert batch.exit_code == 4
    assert "acknowledge it: ctxtool sessions mark 1 --over-window-ok" in batch.stderr
    one = cli("--db", db.url, "compact", "1", *LIMITS)
    assert one.exit_code == 1
    assert "ctxtool sessions mark 1 --over-window-ok" in one.stderr
    assert one.output.count("Error:") == 1
    # validate names the same way out: compact cut what it could and it stays over.
    checked = cli("--db", db.url, "validate", *LIMITS[:4], "--json")
    [issue] = [i for i in json.loads(checked.stdout) if i["rule"] == "over_window"]
    assert "no safe cut fits it" in issue["message"]
    assert "ctxtool sessions mark 1 --over-window-ok" in issue["message"]


def test_validate_trusts_a_threshold_only_ctxtool_recorded():
    """A runtime's checkpoint (parent_compaction_id None, its own summarizer) whose details
    carry a 'threshold' of its own (10**12, or 0) does not decide whether validate sees a
    session over its window: the model's window does; ctxtool's own recorded one still does."""
    from ctxtool.core.plan import CompactionSettings
    from ctxtool.core.records import Compaction
    from ctxtool.core.validation import checked_threshold, window_issue

    def checkpoint(summarizer: str, threshold: int) -> Compaction:
        return Compaction(
            id=7,
            session_id=1,
            summary="a summary",
            first_kept_message_id=10,
            parent_compaction_id=None,
            summarizer=summarizer,
            details={"threshold": threshold},
        )

    for runtime in (checkpoint("pi", 10**12), checkpoint("pi", 0), checkpoint("openai", 0)):
        threshold = checked_threshold("gpt-4o", CompactionSettings(), runtime, given=False)
        assert window_issue(1, 500_000, threshold, runtime), threshold
        assert not window_issue(1, 1_000, threshold, runtime), threshold
    ours = checkpoint("extractive", 5000)
    assert checked_threshold("gpt-4o", CompactionSettings(), ours, given=False).tokens == 5000
