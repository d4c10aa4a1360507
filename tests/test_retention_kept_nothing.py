"""Issue 45 item 7, the archive's part: a checkpoint that kept nothing when it was written (its
cut after the session's last message, ``details.kept_after_message``) survives
`sessions archive` -> `sessions purge` -> `import` of the archive.

Such a cut names no message: none holds its id, or another session's does (ids are shared).
The archive used to write it as ``first_kept_source_id = "ctxtool:<cut>"``, a message the file
does not hold, so the import of the archive dropped the checkpoint (compaction_unresolved) and
the session restored to the previous checkpoint and every message since. It is now written
with no first kept message and read back as a checkpoint ending the file, or, when the runtime
appended messages after it, as keeping the first of them (what the store restores).

The inputs: the real OpenClaw session cut after its third compaction, whose first kept entry
is the line after it (a live Pi session that has just compacted, as in
test_pi_compaction_at_end), the real Pi file whose last record is a compaction, and sessions a
runtime wrote from plain lists of messages. Every test on SQLite and MariaDB, through the CLI.
"""

from __future__ import annotations

import json
import re

from ctxtool.core.records import KEPT_AFTER_MESSAGE
from ctxtool.db.schema import agent_compaction, agent_message
from ctxtool.retention import MANIFEST
from ctxtool.store import Store

from .builders import add_session, assert_valid_context, coding_session
from .conftest import TRANSCRIPTS

OPENCLAW = TRANSCRIPTS / "pi" / "openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc.jsonl"
# The shared Pi file whose last record is a compaction (INDEX.tsv): its firstKeptEntryId names
# the file's first entry, so it keeps everything; it travels with the others unchanged.
PI_SMALL = TRANSCRIPTS / "pi" / "agent-sessions-pi-small.jsonl"
COMPACTION_LINE = 415
# What differs between two stores holding the same sessions: the ids the rows were given.
_ID_KEYS = {
    "id",
    "session_id",
    "checkpoint_id",
    "first_kept_message_id",
    "replaced_by_checkpoint_id",
}


def _openclaw_live(tmp_path):
    """The OpenClaw file up to its compaction of line 415, which keeps from the entry after it
    (not written yet), and the whole file's lines."""
    lines = OPENCLAW.read_text(encoding="utf-8").splitlines(keepends=True)
    compaction = json.loads(lines[COMPACTION_LINE - 1])
    assert compaction["type"] == "compaction"
    compaction["firstKeptEntryId"] = json.loads(lines[COMPACTION_LINE])["id"]
    lines[COMPACTION_LINE - 1] = json.dumps(compaction, ensure_ascii=False) + "\n"
    live = tmp_path / "openclaw-live.jsonl"
    live.write_text("".join(lines[:COMPACTION_LINE]), encoding="utf-8")
    return live, lines


def _without_ids(value):
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in _ID_KEYS}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"(message|checkpoint) \d+", r"\1 N", value)
    return value


def restored(db, cli) -> list[tuple]:
    """Each session's restored context, in session order: the library's (as the model gets
    it) and `context show --json`'s (counts, tokens, summary), both without row ids. (A
    runtime's session and messages get a source id from their archive: not compared.)"""
    store = Store(db.engine)
    out = []
    for sid in store.session_ids():
        shown = cli("--db", db.url, "context", "show", str(sid), "--json")
        assert shown.exit_code == 0, shown.output
        ctx = store.restored_context(sid)
        view = _without_ids(json.loads(shown.stdout))
        view.pop("source")
        out.append((ctx.to_openai(), len(ctx.messages), view))
    return out


def _round_trip(db, cli, tmp_path) -> list[dict]:
    """Archive every session, purge them all, import the archive; the import's rows."""
    archive = tmp_path / "archive"
    written = cli("--db", db.url, "sessions", "archive", "-o", archive, "--json")
    assert written.exit_code == 0, written.output
    purged = cli("--db", db.url, "sessions", "purge", "-a", archive, "--json")
    assert purged.exit_code == 0, purged.output
    assert all(c["purged"] for c in json.loads(purged.stdout)), purged.stdout
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0
    back = cli("--db", db.url, "import", "--json", archive)
    assert back.exit_code == 0, back.output
    rows = json.loads(back.stdout)
    assert not any(r["skipped_by_kind"].get("compaction_unresolved") for r in rows), rows
    return rows


def _valid(db, cli) -> None:
    checked = cli("--db", db.url, "validate")
    assert checked.exit_code == 0, checked.output
    assert "0 error(s)" in checked.output


def test_a_real_pi_session_that_just_compacted_comes_back_from_its_archive(db, cli, tmp_path):
    live, lines = _openclaw_live(tmp_path)
    first = cli("--db", db.url, "import", "--json", live, PI_SMALL)
    assert first.exit_code == 0, first.output
    store = Store(db.engine)
    [kept_nothing] = store.compactions(1)[-1:]
    assert kept_nothing.details[KEPT_AFTER_MESSAGE] + 1 == kept_nothing.first_kept_message_id
    # Session 2's first message holds the id after session 1's cut.
    assert (
        db.scalar(
            "SELECT session_id FROM agent_message WHERE id = :i",
            i=kept_nothing.first_kept_message_id,
        )
        == 2
    )
    before = restored(db, cli)
    assert before[0][1] == 0 and before[0][2]["messages_kept"] == 0  # the summary alone
    assert before[0][2]["summary"] == kept_nothing.summary
    checkpoints = db.scalar("SELECT COUNT(*) FROM agent_compaction")

    rows = _round_trip(db, cli, tmp_path)
    assert sum(r["compactions"] for r in rows) == checkpoints
    assert restored(db, cli) == before
    [back] = [r["session_id"] for r in rows if "session-1" in r["file"]]
    last = store.compactions(back)[-1]
    assert last.summary == kept_nothing.summary
    newest = db.scalar("SELECT MAX(id) FROM agent_message WHERE session_id = :s", s=back)
    assert (last.first_kept_message_id, last.details[KEPT_AFTER_MESSAGE]) == (newest + 1, newest)
    _valid(db, cli)

    # Archived again, the archive is the same (a second round trip loses nothing either).
    again = _round_trip(db, cli, tmp_path / "again")
    assert sum(r["compactions"] for r in again) == checkpoints
    assert restored(db, cli) == before
    [back] = [r["session_id"] for r in again if "session-" in r["file"] and r["added"] > 100]

    # The live file grows: the session the archive brought back is its session, and keeps
    # what the file adds after the summary; ctxtool's first compaction then carries it over.
    live.write_text("".join(lines), encoding="utf-8")
    grown = cli("--db", db.url, "import", "--json", live)
    assert grown.exit_code == 0, grown.output
    [row] = json.loads(grown.stdout)
    assert row["session_id"] == back and row["added"] > 100 and row["compactions"] == 0
    ctx = store.restored_context(back)
    assert ctx.compaction.summary == kept_nothing.summary
    assert ctx.messages[0].source_id == json.loads(lines[COMPACTION_LINE])["id"]
    settings = ["--context-window", "20000", "--reserve-tokens", "2000"]
    settings += ["--keep-recent-tokens", "3000", "--min-quality", "0"]
    compacted = cli("--db", db.url, "compact", str(back), "--json", *settings)
    assert compacted.exit_code == 0, compacted.output
    out = json.loads(compacted.stdout)
    assert out["status"] == "compacted" and out["carry_over"] is not None, out
    [imported, new] = store.compactions(back)[-2:]
    assert new.parent_compaction_id == imported.id
    _valid(db, cli)


def _kept_nothing_checkpoint(db, session_id: int, summary: str) -> int:
    """A runtime's checkpoint summarizing all of the session, keeping nothing yet."""
    with db.engine.begin() as conn:
        last = conn.execute(
            agent_message.select()
            .with_only_columns(agent_message.c.id)
            .where(agent_message.c.session_id == session_id)
            .order_by(agent_message.c.id.desc())
            .limit(1)
        ).scalar_one()
        conn.execute(
            agent_compaction.insert().values(
                session_id=session_id,
                summary=summary,
                first_kept_message_id=last + 1,
                details={KEPT_AFTER_MESSAGE: last},
            )
        )
    return last + 1


def test_runtime_sessions_keeping_nothing_come_back_from_their_archive(db, cli, tmp_path):
    # Session 1 keeps nothing and nothing follows; session 2's message then holds its cut's id.
    add_session(db, 1, coding_session(3, "a"), system_prompt="You are a coder.")
    cut1 = _kept_nothing_checkpoint(db, 1, "Session 1: three files fixed.")
    ids2 = add_session(db, 2, coding_session(2, "b"))
    assert ids2[0] == cut1
    # Session 2 keeps nothing, then its runtime appends a turn: kept after the summary, the
    # first of it not at the cut's id (session 3 took that id first).
    cut2 = _kept_nothing_checkpoint(db, 2, "Session 2: two files fixed.")
    add_session(db, 3, [{"role": "user", "content": "Session 3, a question."}])
    with db.engine.begin() as conn:
        for m in coding_session(1, "c"):
            conn.execute(agent_message.insert().values(session_id=2, **m))
    # Session 3 keeps nothing, and no message holds its cut's id yet.
    _kept_nothing_checkpoint(db, 3, "Session 3: one question asked.")
    store = Store(db.engine)
    assert db.scalar("SELECT session_id FROM agent_message WHERE id = :i", i=cut2) == 3
    assert [len(store.restored_context(s).messages) for s in (1, 2, 3)] == [0, 4, 0]
    _valid(db, cli)
    before = restored(db, cli)

    archive = tmp_path / "archive"
    assert cli("--db", db.url, "sessions", "archive", "-o", archive).exit_code == 0
    records = [
        json.loads(line)
        for n in (1, 2, 3)
        for line in (archive / f"session-{n}.jsonl").read_text().splitlines()
    ]
    firsts = [r["first_kept_source_id"] for r in records if r["type"] == "ctxtool_checkpoint"]
    kept2 = store.restored_context(2).messages[0].id
    assert firsts == [None, f"ctxtool:{kept2}", None]
    manifest = json.loads((archive / MANIFEST).read_text())
    assert [e["checkpoints"] for e in manifest["sessions"].values()] == [1, 1, 1]

    rows = _round_trip(db, cli, tmp_path / "trip")
    assert [r["compactions"] for r in rows] == [1, 1, 1]
    after = restored(db, cli)
    # A runtime's checkpoint names no summarizer; the import of its archive says who brought it.
    assert [v.pop("summarizer") for _, _, v in before] == [None] * 3
    assert [v.pop("summarizer") for _, _, v in after] == ["imported:ctxtool"] * 3
    assert after == before
    for r in rows:
        assert_valid_context(store, r["session_id"])
    _valid(db, cli)


def test_an_archive_that_would_drop_a_checkpoint_is_never_purged_against(db, cli, tmp_path):
    """The purge reads the archive as the import will: a checkpoint keeping from a message the
    file lacks (as archives written before kept nothing named the cut, ``ctxtool:<cut>``), or
    naming none without saying it kept nothing, would not come back; its session stays."""
    from ctxtool.retention import Checksum

    add_session(db, 1, coding_session(2, "a"))
    cut = _kept_nothing_checkpoint(db, 1, "Everything so far.")
    archive = tmp_path / "archive"
    assert cli("--db", db.url, "sessions", "archive", "-o", archive).exit_code == 0
    path = archive / "session-1.jsonl"
    original = path.read_text()
    for first_kept, details, verdict in (
        (f"ctxtool:{cut}", None, "keeps from a message the file does not hold"),
        (None, {}, "keeps no message and does not say it kept nothing"),
    ):
        records = [json.loads(line) for line in original.splitlines()]
        records[-1]["first_kept_source_id"] = first_kept
        if details is not None:
            records[-1]["details"] = details
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        # The manifest agrees with the file: only the purge's reading of it can tell.
        checksum = Checksum()
        for r in records[1:]:
            checksum.add(r)
        manifest = json.loads((archive / MANIFEST).read_text())
        manifest["sessions"]["1"]["checksum"] = checksum.hexdigest()
        (archive / MANIFEST).write_text(json.dumps(manifest))
        refused = cli("--db", db.url, "sessions", "purge", "-a", archive, "--json")
        assert refused.exit_code == 1, refused.output
        [check] = json.loads(refused.stdout)
        assert verdict in check["verdict"] and not check["purged"]
        assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 1
    # Such a file is refused by the import in one line, nothing written.
    assert cli("--db", db.url, "sessions", "purge", "-a", tmp_path / "none").exit_code == 1
    imported = cli("--db", db.url, "import", path)
    assert imported.exit_code == 1
    assert "'first_kept_source_id' is missing" in imported.output
    assert "Traceback" not in imported.output
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 1


def _archive_file(tmp_path, name: str, checkpoint: dict):
    """An archive file of a two-message session and one checkpoint record."""
    records = [
        {"type": "ctxtool_session", "source_format": "pi", "source_id": f"s-{name}"},
        {"type": "ctxtool_message", "source_id": "m1", "role": "user", "content": "hi"},
        {"type": "ctxtool_message", "source_id": "m2", "role": "assistant", "content": "yes"},
        {"type": "ctxtool_checkpoint", "source_id": "c1", "summary": "All of it."} | checkpoint,
    ]
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_checkpoint_record_naming_no_kept_message_is_taken_only_with_an_id_marker(
    db, cli, tmp_path
):
    """The archive reader's hostile cases: a null, absent, empty or non-string first kept
    message, and a kept_after_message that is no id (a boolean, a string, a float, a number
    too large for JSON's integers), are each refused in one line and write nothing; any integer
    marker is taken, and the import writes its own marker (the session's last message) and cut."""
    missing = "'first_kept_source_id' is missing"
    refused = {
        "no_marker": ({"first_kept_source_id": None, "details": {}}, missing),
        "absent_no_details": ({}, missing),
        "bool": ({"first_kept_source_id": None, "details": {KEPT_AFTER_MESSAGE: True}}, missing),
        "text": ({"first_kept_source_id": None, "details": {KEPT_AFTER_MESSAGE: "5"}}, missing),
        "float": ({"first_kept_source_id": None, "details": {KEPT_AFTER_MESSAGE: 5.0}}, missing),
        "huge": ({"details": {KEPT_AFTER_MESSAGE: 10**30}}, missing),
        "empty": ({"first_kept_source_id": "", "details": {KEPT_AFTER_MESSAGE: 3}}, missing),
        "number": (
            {"first_kept_source_id": 5, "details": {KEPT_AFTER_MESSAGE: 3}},
            "'first_kept_source_id' must be a string",
        ),
        "list": (
            {"first_kept_source_id": [], "details": {KEPT_AFTER_MESSAGE: 3}},
            "'first_kept_source_id' must be a string",
        ),
    }
    for name, (checkpoint, said) in refused.items():
        result = cli("--db", db.url, "import", _archive_file(tmp_path, name, checkpoint))
        assert result.exit_code == 1, (name, result.output)
        assert said in result.output and "Traceback" not in result.output, (name, result.output)
        assert db.scalar("SELECT COUNT(*) FROM agent_session") == 0, name
    for name, marker in (("absent", 3), ("negative", -1), ("int64", 2**63 - 1)):
        path = _archive_file(tmp_path, name, {"details": {KEPT_AFTER_MESSAGE: marker}})
        result = cli("--db", db.url, "import", "--json", path)
        assert result.exit_code == 0, (name, result.output)
        [row] = json.loads(result.stdout)
        assert (row["added"], row["compactions"]) == (2, 1), (name, row)
        [cp] = Store(db.engine).compactions(row["session_id"])
        last = db.scalar(
            "SELECT MAX(id) FROM agent_message WHERE session_id = :s", s=row["session_id"]
        )
        assert cp.first_kept_message_id == last + 1, name
        assert cp.details[KEPT_AFTER_MESSAGE] == last, (name, cp.details)
        assert Store(db.engine).restored_context(row["session_id"]).messages == [], name
    _valid(db, cli)
