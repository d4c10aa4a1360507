"""A transcript without a session id of its own, found by its inode (#32, migration 0010): a hard
link made after its import, in another folder, imported in a later run, continues the session;
an inode another file took, or a copy, is a new one. Through `ctxtool import`, on both databases.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tarfile

import pytest

from ctxtool.core.source_records import FileIdentity, RecordedFile
from ctxtool.transcripts.discover import HEAD_BYTES, signed_64

FILES = "ctxtool_transcript_files"


def message(role: str, content: str) -> bytes:
    return json.dumps({"role": role, "content": content}).encode() + b"\n"


def write(path, *lines: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))


def append(path, *lines: bytes) -> None:
    with path.open("ab") as out:
        out.write(b"".join(lines))


def imported(cli, db, *paths, extra=()):
    """`ctxtool import --json PATHS`: one dict per file; the import must succeed."""
    result = cli("--db", db.url, "import", "--json", *extra, *paths)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def sessions(db):
    return db.rows("SELECT session_id, source_id FROM agent_session ORDER BY session_id")


def contents(db, session_id):
    return [
        r["content"]
        for r in db.rows(
            "SELECT content FROM agent_message WHERE session_id = :s ORDER BY id", s=session_id
        )
    ]


def recorded(db):
    return db.rows(f"SELECT device, inode, head_bytes, source_id FROM {FILES} ORDER BY inode")


def test_a_link_made_after_the_import_in_another_folder_continues_the_session_later(
    db, cli, tmp_path
):
    """The exact gap: /a/x.jsonl imported, later linked as /b/y.jsonl and grown, /b imported
    alone in a new run: the same session, one message more, nothing twice."""
    original = tmp_path / "a" / "x.jsonl"
    write(original, message("user", "one"), message("assistant", "two"))
    [first] = imported(cli, db, original)
    assert (first["added"], first["present"]) == (2, 0)
    link = tmp_path / "b" / "y.jsonl"
    link.parent.mkdir()
    os.link(original, link)
    append(link, message("user", "three"))

    [later] = imported(cli, db, link.parent)
    assert (later["session_id"], later["added"], later["present"]) == (first["session_id"], 1, 2)
    [session] = sessions(db)
    assert session["source_id"].startswith("linked@")  # moved to the inode's id, as a name would
    assert contents(db, session["session_id"]) == ["one", "two", "three"]
    st = os.stat(link)
    assert recorded(db) == [
        {
            "device": signed_64(st.st_dev),
            "inode": signed_64(st.st_ino),
            "head_bytes": st.st_size,
            "source_id": session["source_id"],
        }
    ]
    # Either name, again: found, nothing added, nothing written.
    for path in (original, link):
        [again] = imported(cli, db, path)
        assert (again["session_id"], again["added"], again["present"]) == (
            first["session_id"],
            0,
            3,
        )
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 3


@pytest.mark.parametrize("imported_while_linked", [False, True])
def test_the_original_name_deleted_the_link_alone_still_finds_the_session(
    db, cli, tmp_path, imported_while_linked
):
    """Deleted before the link is imported (the session is under the original's path id), or
    after (under the inode id; the file, one name again, is named by its path once more)."""
    original = tmp_path / "a" / "x.jsonl"
    write(original, message("user", "one"))
    [first] = imported(cli, db, original)
    link = tmp_path / "b" / "y.jsonl"
    link.parent.mkdir()
    os.link(original, link)
    if imported_while_linked:
        append(link, message("assistant", "two"))
        assert imported(cli, db, link)[0]["added"] == 1
    original.unlink()
    append(link, message("user", "three"))

    [later] = imported(cli, db, link)
    assert later["session_id"] == first["session_id"]
    assert later["added"] == 1
    [session] = sessions(db)
    assert session["source_id"].startswith("y@")  # one name: its path's id
    assert contents(db, session["session_id"])[-1] == "three"
    assert [r["source_id"] for r in recorded(db)] == [session["source_id"]]


# Another file's bytes: other messages, or the same ones written otherwise (keys in another
# order), which the stored messages alone would take for a continuation.
OTHER_FILES = {
    "other messages": message("user", "something else"),
    "same messages": b'{"content": "one", "role": "user"}\n{"content": "two", "role": "assistant"}\n',
}


@pytest.mark.parametrize("other_bytes", OTHER_FILES.values(), ids=OTHER_FILES.keys())
def test_an_inode_another_file_took_is_a_new_session(db, cli, tmp_path, other_bytes):
    """The imported file gone and its inode holding other bytes (as a reused inode does): the
    record does not match, the new file is a new session, the old one is untouched."""
    original = tmp_path / "a" / "x.jsonl"
    write(original, message("user", "one"), message("assistant", "two"))
    [first] = imported(cli, db, original)
    other = tmp_path / "b" / "y.jsonl"
    other.parent.mkdir()
    inode = os.stat(original).st_ino
    os.rename(original, other)
    other.write_bytes(other_bytes)  # truncated in place: the same inode
    assert os.stat(other).st_ino == inode

    [later] = imported(cli, db, other)
    assert later["session_id"] != first["session_id"]
    assert later["added"] == len(other_bytes.splitlines())
    assert contents(db, first["session_id"]) == ["one", "two"]
    # The inode now holds the new file's session.
    assert [r["source_id"] for r in recorded(db)] == [sessions(db)[1]["source_id"]]


def test_a_file_that_begins_as_the_inodes_did_and_then_differs_is_a_new_session(db, cli, tmp_path):
    """The head agrees (its first 4 KiB are the same) but the messages after it do not: the
    stored messages decide, as for any earlier id, and the file gets a session of its own."""
    long = message("system", "s" * HEAD_BYTES)
    original = tmp_path / "a" / "x.jsonl"
    write(original, long, message("user", "one"))
    [first] = imported(cli, db, original)
    other = tmp_path / "b" / "y.jsonl"
    other.parent.mkdir()
    os.rename(original, other)
    other.write_bytes(long + message("user", "uno") + message("assistant", "dos"))

    [later] = imported(cli, db, other)
    assert later["session_id"] != first["session_id"]
    assert (later["added"], later["present"]) == (2, 0)
    assert contents(db, first["session_id"]) == ["one"]


def test_a_renamed_file_keeps_its_session_and_a_copy_is_a_new_one(db, cli, tmp_path):
    """A rename keeps the inode and the bytes: the session continues (before 0010 a moved file
    was a new session). A copy is another file: a new session, as always."""
    original = tmp_path / "a" / "x.jsonl"
    write(original, message("user", "one"))
    [first] = imported(cli, db, original)
    copy = tmp_path / "c" / "copy.jsonl"
    copy.parent.mkdir()
    shutil.copyfile(original, copy)
    moved = tmp_path / "b" / "moved.jsonl"
    moved.parent.mkdir()
    os.rename(original, moved)
    append(moved, message("assistant", "two"))

    through_move, through_copy = imported(cli, db, moved, copy)
    assert (through_move["session_id"], through_move["added"]) == (first["session_id"], 1)
    assert through_copy["session_id"] != first["session_id"]
    assert contents(db, first["session_id"]) == ["one", "two"]
    assert contents(db, through_copy["session_id"]) == ["one"]


def test_the_file_is_recorded_with_its_session_or_not_at_all(db, cli, tmp_path):
    """A file refused for a bad line leaves no record; with bounded transactions the prefix
    committed before the failure has its record, so a later name continues it (skipping the
    bad line: a file's head is its bytes as they were, a bad line and all)."""
    bad = tmp_path / "a" / "bad.jsonl"
    write(bad, message("user", "one"), b"{not json\n")
    result = cli("--db", db.url, "import", bad)
    assert result.exit_code == 1
    assert sessions(db) == [] and recorded(db) == []

    bounded = tmp_path / "a" / "bounded.jsonl"
    write(bounded, *(message("user", f"m{i}") for i in range(5)), b"{not json\n")
    result = cli("--db", db.url, "import", "--max-transaction-bytes", 10, bounded)
    assert result.exit_code == 1
    [session] = sessions(db)
    assert [r["source_id"] for r in recorded(db)] == [session["source_id"]]
    link = tmp_path / "b" / "later.jsonl"
    link.parent.mkdir()
    os.link(bounded, link)
    bounded.unlink()
    append(link, message("user", "m5"))
    kept = db.scalar("SELECT COUNT(*) FROM agent_message")
    assert 0 < kept < 5
    [later] = imported(cli, db, link, extra=["--max-transaction-bytes", 10, "--skip-invalid"])
    assert (later["session_id"], later["added"], later["present"]) == (
        session["session_id"],
        6 - kept,
        kept,
    )
    assert contents(db, session["session_id"]) == [f"m{i}" for i in range(6)]


def test_a_reimport_writes_the_record_once_and_then_nothing(db, cli, tmp_path):
    """A file imported before its inode was recorded (a store migrated to 0010 since) gets its
    record on its next import; an import that then finds nothing new writes nothing at all
    (the session's updated_at stays). A head that grows is recorded grown, up to 4 KiB."""
    path = tmp_path / "a" / "x.jsonl"
    write(path, message("user", "one"))
    imported(cli, db, path)
    with db.engine.begin() as conn:
        conn.exec_driver_sql(f"DELETE FROM {FILES}")
        # An earlier time than any import's, so that a touch would show.
        conn.exec_driver_sql("UPDATE agent_session SET updated_at = '2020-01-02 03:04:05'")
    before = db.rows("SELECT updated_at FROM agent_session")
    [again] = imported(cli, db, path)
    assert (again["added"], again["present"]) == (0, 1)
    assert [r["head_bytes"] for r in recorded(db)] == [path.stat().st_size]
    # Recording the file is no activity of the session (review finding).
    assert db.rows("SELECT updated_at FROM agent_session") == before
    imported(cli, db, path)
    assert db.rows("SELECT updated_at FROM agent_session") == before
    append(path, message("assistant", "x" * HEAD_BYTES))
    imported(cli, db, path)
    assert [r["head_bytes"] for r in recorded(db)] == [HEAD_BYTES]
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 2


def test_what_has_no_inode_or_needs_none_is_not_recorded(db, cli, tmp_path):
    """Standard input and an archive's members have no file of their own; a transcript that
    names its session (Claude Code) is found by that name. A compressed file is a file."""
    folder = tmp_path / "t"
    write(folder / "chat.jsonl", message("user", "in an archive"))
    archive = tmp_path / "runs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder / "chat.jsonl", arcname="t/chat.jsonl")
    (folder / "chat.jsonl").unlink()
    claude = tmp_path / "claude.jsonl"
    claude.write_text(
        json.dumps(
            {
                "type": "user",
                "sessionId": "4f9d0c1e-claude",
                "uuid": "u1",
                "parentUuid": None,
                "timestamp": "2026-01-01T00:00:00Z",
                "message": {"role": "user", "content": "hi"},
            }
        )
        + "\n"
    )
    result = cli(
        "--db", db.url, "import", "-", "--format", "openai-chat", input=message("user", "piped")
    )
    assert result.exit_code == 0, result.output
    imported(cli, db, archive, claude)
    assert len(sessions(db)) == 3
    assert recorded(db) == []

    packed = tmp_path / "packed.jsonl.gz"
    packed.write_bytes(gzip.compress(message("user", "packed")))
    [result] = imported(cli, db, packed)
    [row] = recorded(db)
    assert row["inode"] == signed_64(packed.stat().st_ino)
    assert row["head_bytes"] == packed.stat().st_size


def test_a_store_not_migrated_to_0010_is_told_to_migrate(empty_db, cli, tmp_path):
    empty_db.migrate(to="0009")
    path = tmp_path / "x.jsonl"
    write(path, message("user", "one"))
    result = cli("--db", empty_db.url, "import", path)
    assert result.exit_code == 3
    assert "0010_transcript_files" in result.output and "migrate up" in result.output
    assert empty_db.scalar("SELECT COUNT(*) FROM agent_session") == 0
    assert cli("--db", empty_db.url, "migrate", "up").exit_code == 0
    assert cli("--db", empty_db.url, "import", path).exit_code == 0


def test_a_recorded_file_matches_only_a_file_that_begins_with_its_head():
    head = b"0123456789"

    def record(size: int) -> RecordedFile:
        return RecordedFile(size, hashlib.sha256(head[:size]).hexdigest(), "openai-chat", "x@1")

    grown = FileIdentity(1, 2, head)
    assert grown.continues(record(4)) and grown.continues(record(10))
    assert not FileIdentity(1, 2, head[:3]).continues(record(4))  # shorter than it was
    assert not FileIdentity(1, 2, b"0123X56789").continues(record(10))  # other bytes
    assert not grown.continues(RecordedFile(0, hashlib.sha256(b"").hexdigest(), "f", "x"))
    assert grown.record("openai-chat", "x@1") == record(10)
    assert signed_64(2**64 - 1) == -1 and signed_64(2**63 - 1) == 2**63 - 1


def test_deleting_or_purging_a_session_takes_its_file_records_with_it(db, cli, tmp_path):
    """`sessions delete` and `sessions purge` remove the records of the files the sessions
    were imported from (the table does not grow with sessions long gone), and nothing else's;
    the file imported again is a new session of its own."""
    first, second = tmp_path / "a" / "x.jsonl", tmp_path / "a" / "y.jsonl"
    write(first, message("user", "one"), message("assistant", "two"))
    write(second, message("user", "three"))
    [one, two] = imported(cli, db, first, second)
    assert len(recorded(db)) == 2

    result = cli("--db", db.url, "sessions", "delete", str(one["session_id"]), "--yes")
    assert result.exit_code == 0, result.output
    assert [r["source_id"] for r in recorded(db)] == [sessions(db)[0]["source_id"]]

    archive = tmp_path / "archive"
    result = cli("--db", db.url, "sessions", "archive", "-o", archive)
    assert result.exit_code == 0, result.output
    result = cli("--db", db.url, "sessions", "purge", "-a", archive)
    assert result.exit_code == 0, result.output
    assert sessions(db) == [] and recorded(db) == []

    [again] = imported(cli, db, first)
    assert (again["added"], again["present"]) == (2, 0)
    assert again["session_id"] not in (one["session_id"], two["session_id"])
    assert len(recorded(db)) == 1
