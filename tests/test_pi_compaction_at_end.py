"""Issue 45 item 7: a Pi compaction that is its file's last record, keeping nothing yet.

The input is the real OpenClaw session cut right after its third compaction (line 415), that
compaction's firstKeptEntryId pointing at the entry written after it in the full file (line
416): everything before it is summarized and its first kept entry is not in the file yet, as
in a live Pi session that has just compacted. The import used to skip it
(``compaction_without_kept_message``), so the session restored to the second checkpoint and
the 230-odd messages since; it now restores to the summary alone, and the rest of the file,
imported once it has grown, is kept after it. Between the two imports another session's
messages take the id after the cut (ids are shared by every session), as they do on a live
store.
"""

from __future__ import annotations

import json

from ctxtool.core.records import KEPT_AFTER_MESSAGE, Compaction
from ctxtool.core.validation import MessageRef, validate_session
from ctxtool.store import Store

from .conftest import TRANSCRIPTS

OPENCLAW = TRANSCRIPTS / "pi" / "openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc.jsonl"
OTHER = TRANSCRIPTS / "pi" / "agent-sessions-pi-small.jsonl"
COMPACTION_LINE = 415


def _live_file() -> tuple[list[str], dict]:
    """The file's lines, its compaction at line 415 keeping from the entry after it."""
    lines = OPENCLAW.read_text(encoding="utf-8").splitlines(keepends=True)
    compaction = json.loads(lines[COMPACTION_LINE - 1])
    assert compaction["type"] == "compaction"
    compaction["firstKeptEntryId"] = json.loads(lines[COMPACTION_LINE])["id"]
    lines[COMPACTION_LINE - 1] = json.dumps(compaction, ensure_ascii=False) + "\n"
    return lines, compaction


def test_a_pi_compaction_ending_the_file_restores_to_its_summary_then_keeps_what_follows(
    db, cli, tmp_path
):
    lines, compaction = _live_file()
    live = tmp_path / "session.jsonl"
    live.write_text("".join(lines[:COMPACTION_LINE]), encoding="utf-8")
    first = cli("--db", db.url, "import", "--json", live)
    assert first.exit_code == 0, first.output
    store = Store(db.engine)
    ctx = store.restored_context(1)
    assert ctx.compaction is not None and ctx.compaction.summary == compaction["summary"]
    assert ctx.messages == []  # the summary alone, as Pi restores it
    last = db.scalar("SELECT MAX(id) FROM agent_message WHERE session_id = 1")
    assert ctx.compaction.first_kept_message_id == last + 1
    assert ctx.compaction.details[KEPT_AFTER_MESSAGE] == last
    # The store's kept sums and counts agree: nothing but the summary.
    tokens = cli("--db", db.url, "context", "show", "1", "--json")
    assert tokens.exit_code == 0, tokens.output
    assert json.loads(tokens.stdout)["messages_kept"] == 0

    # Another session's first message takes the id after the cut.
    other = cli("--db", db.url, "import", OTHER)
    assert other.exit_code == 0, other.output
    assert db.scalar("SELECT session_id FROM agent_message WHERE id = :i", i=last + 1) == 2
    checked = cli("--db", db.url, "validate", "1")
    assert checked.exit_code == 0, checked.output
    assert "0 error(s)" in checked.output

    # The file grows: the messages a later import appends are kept after the summary.
    live.write_text("".join(lines), encoding="utf-8")
    grown = cli("--db", db.url, "import", "--json", live)
    assert grown.exit_code == 0, grown.output
    added = db.rows(
        "SELECT id, source_id FROM agent_message WHERE session_id = 1 AND id > :i ORDER BY id",
        i=last,
    )
    assert added and added[0]["source_id"] == json.loads(lines[COMPACTION_LINE])["id"]
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction WHERE session_id = 1") == 3
    ctx = store.restored_context(1)
    assert ctx.compaction.summary == compaction["summary"]
    assert [m.id for m in ctx.messages] == [m["id"] for m in added]

    # ctxtool's own first compaction of the session carries that summary over.
    settings = ["--context-window", "20000", "--reserve-tokens", "2000"]
    settings += ["--keep-recent-tokens", "3000", "--min-quality", "0"]
    compacted = cli("--db", db.url, "compact", "1", "--json", *settings)
    assert compacted.exit_code == 0, compacted.output
    out = json.loads(compacted.stdout)
    assert out["status"] == "compacted" and out["carry_over"] is not None, out
    [imported, new] = store.compactions(1)[-2:]
    assert new.parent_compaction_id == imported.id
    assert imported.first_kept_message_id <= new.first_kept_message_id
    assert out["summarised_messages"] == sum(
        1 for m in added if m["id"] < new.first_kept_message_id
    )
    checked = cli("--db", db.url, "validate")
    assert checked.exit_code == 0, checked.output
    assert "0 error(s)" in checked.output


def test_validate_accepts_a_cut_after_the_last_message_only_with_its_marker():
    # The rule alone: the cut's id is held by no message, or by another session's.
    other = {10: MessageRef(10, 2, "user")}
    for marked, expected in (({KEPT_AFTER_MESSAGE: 9}, []), (None, ["first_kept_other_session"])):
        cp = Compaction(1, 1, "summary", 10, details=marked)
        assert [i.rule for i in validate_session(1, [cp], other, [])] == expected
    cp = Compaction(1, 1, "summary", 10, details={KEPT_AFTER_MESSAGE: 7})  # not the id before
    assert [i.rule for i in validate_session(1, [cp], {}, [])] == ["first_kept_missing"]
    cp = Compaction(1, 1, "summary", 10, details={KEPT_AFTER_MESSAGE: 9})
    assert validate_session(1, [cp], {}, []) == []
