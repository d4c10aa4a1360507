"""Issue 32 item 3: archive, then purge, never a silent delete.

`sessions archive` writes re-importable JSONL with the checkpoints: a round trip through
`import` gives back the same messages, checkpoints and restored context. `sessions purge`
deletes only what an archive written by ctxtool verifiably holds (counts and a checksum, of the
file and of the store), one transaction per session: a purge killed with -9 has deleted nothing
the archive lacks. Every test on SQLite and MariaDB, through the real entry point."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ctxtool.core.context_size import HEAD_COUNTS_KEY, text_digest
from ctxtool.core.errors import CtxtoolError
from ctxtool.core.records import SUMMARY_PREFIX
from ctxtool.retention import MANIFEST, archive_sessions, parse_age, purge_sessions, select_sessions
from ctxtool.store import Store

from .conftest import TRANSCRIPTS

PI = TRANSCRIPTS / "pi" / "before-compaction.jsonl"  # two checkpoints
CLAUDE = TRANSCRIPTS / "claude-code" / "a5c478e1-0d31-46d4-9fd6-3b6b203b3752.jsonl"  # one


def everything(db) -> dict:
    """Each session as an import leaves it, by its source: the session's fields, its
    messages, its checkpoints (first kept message by source id) and its restored context."""
    store = Store(db.engine)
    out = {}
    for sid in store.session_ids():
        s = store.session(sid)
        messages = store.messages(sid)
        by_id = {m.id: m.source_id for m in messages}
        out[f"{s.source_format}:{s.source_id}"] = (
            (s.title, s.model, s.system_prompt, s.project_id, s.user_id),
            [
                (m.source_id, m.role, m.content, m.tool_calls, m.tool_call_id, m.name)
                for m in messages
            ],
            [
                (c.source_id, c.summary, by_id[c.first_kept_message_id], c.tokens_before)
                for c in store.compactions(sid)
            ],
            store.restored_context(sid).to_openai(),
        )
    return out


def _import(cli, db, *paths) -> list[dict]:
    result = cli("--db", db.url, "import", "--json", *paths)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_round_trip_archive_purge_import(db, cli, tmp_path):
    _import(cli, db, PI, CLAUDE)
    with db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE agent_session SET project_id = 'proj-a', user_id = 'u1'")
    before = everything(db)
    assert sum(len(v[2]) for v in before.values()) == 3
    archive = tmp_path / "archive"

    result = cli("--db", db.url, "sessions", "archive", "-o", archive, "--json")
    assert result.exit_code == 0, result.output
    written = json.loads(result.stdout)
    assert [(w["messages"], w["checkpoints"]) for w in written] == [
        (len(v[1]), len(v[2])) for v in before.values()
    ]
    assert sorted(p.name for p in archive.iterdir()) == [
        MANIFEST,
        "session-1.jsonl",
        "session-2.jsonl",
    ]

    dry = cli("--db", db.url, "sessions", "purge", "-a", archive, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    assert [c["verdict"] for c in json.loads(dry.stdout)] == ["would purge"] * 2
    assert everything(db) == before

    purged = cli("--db", db.url, "sessions", "purge", "-a", archive, "--json")
    assert purged.exit_code == 0, purged.output
    assert all(c["purged"] for c in json.loads(purged.stdout))
    for table in ("agent_session", "agent_message", "agent_compaction"):
        assert db.scalar(f"SELECT COUNT(*) FROM {table}") == 0

    rows = _import(cli, db, archive)  # the folder: the manifest is no transcript
    assert [r["format"] for r in rows] == ["ctxtool-archive"] * 2
    assert everything(db) == before
    # The original transcripts are the same sessions again: nothing new, nothing doubled.
    again = _import(cli, db, PI, CLAUDE)
    assert [r["added"] for r in again] == [0, 0] and all(r["present"] for r in again)
    assert everything(db) == before


def test_which_sessions_are_archived(db, cli, tmp_path):
    _import(cli, db, PI, CLAUDE)
    with db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE agent_session SET project_id = 'old' WHERE session_id = 1")
    store = Store(db.engine)
    newest = max(m.created_at for m in store.messages(2))
    # Messages of session 1 are from 2025, of session 2 from later: "older than" by the last.
    assert select_sessions(Store(db.engine), older_than=parse_age("1d"), now=newest) == [1]
    assert select_sessions(Store(db.engine), project="old") == [1]
    assert select_sessions(Store(db.engine), ["2"]) == [2]
    assert (parse_age("12h").total_seconds(), parse_age("2w").days) == (43200, 14)
    with pytest.raises(CtxtoolError, match="--older-than 'soon'"):
        parse_age("soon")
    result = cli("--db", db.url, "sessions", "archive", "--project", "old", "-o", tmp_path / "a")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "a").glob("*.jsonl")) == ["session-1.jsonl"]
    none = cli("--db", db.url, "sessions", "archive", "--project", "nope", "-o", tmp_path / "b")
    assert none.exit_code == 1 and "no session matches" in none.output


def test_purge_keeps_what_the_archive_does_not_hold(db, cli, tmp_path):
    chat = tmp_path / "chat.jsonl"
    chat.write_bytes(b'{"role": "user", "content": "one"}\n')
    _import(cli, db, PI, CLAUDE, chat)
    archive = tmp_path / "archive"
    archive_sessions(Store(db.engine), [1, 2, 3], str(archive))
    with chat.open("ab") as out:  # session 3 grows after it was archived
        out.write(b'{"role": "assistant", "content": "two"}\n')
    _import(cli, db, chat)
    damaged = archive / "session-2.jsonl"
    damaged.write_bytes(damaged.read_bytes().replace(b'"content":"', b'"content":"X', 1))
    before = everything(db)

    result = cli("--db", db.url, "sessions", "purge", "-a", archive, "--json")
    assert result.exit_code == 4, result.output
    verdicts = {c["session_id"]: c["verdict"] for c in json.loads(result.stdout)}
    assert verdicts[1] == "purged"
    assert "does not hold what the manifest says" in verdicts[2]
    assert "changed since it was archived (2 messages" in verdicts[3]
    assert {k: v for k, v in before.items() if not k.startswith("pi:")} == everything(db)

    (archive / "session-3.jsonl").unlink()
    only = cli("--db", db.url, "sessions", "purge", "-a", archive, "3")
    assert only.exit_code == 1 and "session-3.jsonl is missing from the archive" in only.output
    elsewhere = tmp_path / "not-an-archive"
    elsewhere.mkdir()
    refused = cli("--db", db.url, "sessions", "purge", "-a", elsewhere)
    assert refused.exit_code == 1 and "not an archive written by ctxtool" in refused.output
    unarchived = cli("--db", db.url, "sessions", "purge", "-a", archive, "2", "--dry-run")
    assert unarchived.exit_code == 1 and "kept" in unarchived.output
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 2


def test_a_purge_killed_midway_deletes_nothing_the_archive_lacks(db, tmp_path):
    folder = tmp_path / "chats"
    folder.mkdir()
    for i in range(150):
        lines = [{"role": "user", "content": f"question {i}.{j}"} for j in range(30)]
        (folder / f"c{i:03}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    from ctxtool.importer import Importer

    assert not any(r.error for r in Importer(db.engine).import_paths([str(folder)]))
    archive = tmp_path / "archive"
    entries = {
        e.session_id: e for e in archive_sessions(Store(db.engine), range(1, 151), str(archive))
    }
    # One session changes after the archive: the purge must never delete it.
    with (folder / "c075.jsonl").open("a") as out:
        out.write(json.dumps({"role": "assistant", "content": "late"}) + "\n")
    assert not Importer(db.engine).import_paths([str(folder / "c075.jsonl")])[0].error

    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxtool", "--db", db.url, "sessions", "purge", "-a", str(archive)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while db.scalar("SELECT COUNT(*) FROM agent_session") == 150:  # poll: the first delete
            assert proc.poll() is None, "the purge ended before it deleted anything"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    left = Store(db.engine).session_ids()
    assert 0 < 150 - len(left) < 150 and 76 in left
    # Every session left is whole (no half-deleted one), and what went is in the archive.
    from ctxtool.retention import Checksum, session_records

    for sid in left:
        records = session_records(Store(db.engine), sid)
        next(records)
        checksum = Checksum()
        for r in records:
            checksum.add(r)
        expected = (entries[sid].messages, entries[sid].checksum)
        assert (checksum.messages, checksum.hexdigest()) == expected or sid == 76
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE session_id = 76") == 31
    orphans = db.scalar(
        "SELECT COUNT(*) FROM agent_message m WHERE NOT EXISTS "
        "(SELECT 1 FROM agent_session s WHERE s.session_id = m.session_id)"
    )
    assert orphans == 0
    # The purge run again finishes the job, and still keeps the changed session.
    checks = purge_sessions(Store(db.engine), str(archive))
    assert [c.session_id for c in checks if not c.purged and "already" not in c.verdict] == [76]
    assert Store(db.engine).session_ids() == [76]


def test_an_archive_file_is_a_transcript_ctxtool_reads_like_any_other(db, cli, tmp_path):
    _import(cli, db, PI)
    archive = tmp_path / "a"
    archive_sessions(Store(db.engine), [1], str(archive))
    lines = (archive / "session-1.jsonl").read_bytes().splitlines(keepends=True)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(
        b"".join(lines[:5]) + b'{"type":"ctxtool_message","role":"robot","source_id":"x"}\n'
    )
    result = cli("--db", db.url, "import", broken)
    assert result.exit_code == 1
    assert f"{broken}:6: invalid ctxtool-archive record: role must be one of" in result.output
    assert Path(archive / "session-1.jsonl").exists()


def test_a_checkpoint_ctxtool_wrote_comes_back_as_written_and_a_runtime_session_once(
    db, cli, tmp_path
):
    """#32: after `sessions archive` -> purge -> import, a checkpoint ctxtool wrote is the one
    it wrote (summarizer, its model, summary_tokens, tokens_after in their columns, details as
    they were), not an import with those under details.archived. A runtime's messages, stored
    without a source id, come back under the id the archive gave them, `ctxtool:<id>`: that is
    what finds them when the archive is imported again (nothing doubled)."""
    from .builders import LIMITS, add_session, coding_session

    ids = add_session(db, 1, coding_session(12), model="gpt-4o")
    assert cli("--db", db.url, "compact", "1", *LIMITS).exit_code == 0
    [written] = Store(db.engine).compactions(1)
    assert written.summarizer == "extractive" and written.tokens_after and written.summary_tokens
    archive = tmp_path / "archive"
    assert cli("--db", db.url, "sessions", "archive", "1", "-o", archive).exit_code == 0
    assert cli("--db", db.url, "sessions", "purge", "-a", archive).exit_code == 0
    [row] = _import(cli, db, archive)
    assert row["added"] == len(ids)
    store = Store(db.engine)
    [back] = store.compactions(row["session_id"])
    assert (
        back.summarizer,
        back.summarizer_model,
        back.summary_tokens,
        back.tokens_after,
        back.tokens_before,
        back.details,
    ) == (
        written.summarizer,
        written.summarizer_model,
        written.summary_tokens,
        written.tokens_after,
        written.tokens_before,
        written.details,
    )
    messages = store.messages(row["session_id"])
    assert [m.source_id for m in messages] == [f"ctxtool:{i}" for i in ids]
    [again] = _import(cli, db, archive)
    assert again["added"] == 0 and db.scalar("SELECT COUNT(*) FROM agent_message") == len(ids)


def test_a_runtime_checkpoint_whose_details_are_no_object_comes_back_as_it_was(db, cli, tmp_path):
    """A runtime may write a checkpoint's details as a JSON string or list: `sessions
    archive` failed on it ('str' object is not a mapping, an internal error) and archived
    nothing. They are kept in the archive and come back as they were."""
    from .builders import add_session, coding_session

    ids = add_session(db, 1, coding_session(3))
    with db.engine.begin() as conn:
        for n, details in enumerate(('"just text"', "[1, 2]", '{"k": "v"}')):
            conn.exec_driver_sql(
                "INSERT INTO agent_compaction (session_id, summary, first_kept_message_id, details)"
                f" VALUES (1, 'summary {n}', {ids[4 * n]}, '{details}')"
            )
    before = [(c.summary, c.details) for c in Store(db.engine).compactions(1)]
    assert [d for _, d in before] == ["just text", [1, 2], {"k": "v"}]
    archive = tmp_path / "archive"
    written = cli("--db", db.url, "sessions", "archive", "-o", archive)
    assert written.exit_code == 0, written.output
    purged = cli("--db", db.url, "sessions", "purge", "-a", archive)
    assert purged.exit_code == 0, purged.output
    [row] = _import(cli, db, archive)
    back = [(c.summary, c.details) for c in Store(db.engine).compactions(row["session_id"])]
    # The import counts the summary it writes into an object's details (ctxtool_counts, a
    # cache beside the runtime's keys); the rest is as it was, and text or a list is left alone.
    assert back[2][1].pop(HEAD_COUNTS_KEY)["o200k_base"]["digest"] == text_digest(
        SUMMARY_PREFIX + "summary 2"
    )
    assert back == before
