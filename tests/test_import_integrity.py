"""Issue 9 (import items): a source id names one transcript, hostile records and sizes are
file:line errors, a failed file leaves nothing behind, and the smaller traps (FIFO, symlink loop,
BOM, missing parent, Pi cut on a tool result). Every test runs on SQLite and MariaDB."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ctxtool.importer import Importer
from ctxtool.store import Store

from .conftest import TRANSCRIPTS
from .waiting import LOCK_WAITS_INTERVAL, lock_waits, wait_until


def jsonl(records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def write(path: Path, records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(records if isinstance(records, bytes) else jsonl(records))
    return path


def counts(db) -> tuple[int, int, int]:
    return tuple(
        db.scalar(f"SELECT COUNT(*) FROM {t}")
        for t in ("agent_session", "agent_message", "agent_compaction")
    )


def contents(db, session_id: int) -> list[str]:
    return [
        r["content"]
        for r in db.rows(
            "SELECT content FROM agent_message WHERE session_id = :s ORDER BY id", s=session_id
        )
    ]


def chat(*texts):
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)
    ]


def cc(uuid, parent, kind, text, session="cc-1"):
    message = {"role": kind, "content": text}
    if kind == "assistant":
        message = {
            "id": f"m-{uuid}",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
        }
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": session,
        "timestamp": "2026-01-01T00:00:00Z",
        "message": message,
    }


# -- item 1: one source id, one transcript ----------------------------------------------------------


def test_same_file_name_in_two_folders_is_two_transcripts(db, cli, tmp_path):
    alpha = write(tmp_path / "run1" / "task-42.jsonl", chat("ALPHA question", "ALPHA answer"))
    beta = write(
        tmp_path / "run2" / "task-42.jsonl", chat("BETA question", "BETA answer", "BETA more")
    )
    result = cli("--db", db.url, "import", "--json", tmp_path)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["added"] for r in rows] == [2, 3]
    a, b = (r["session_id"] for r in rows)
    assert a != b
    assert contents(db, a) == ["ALPHA question", "ALPHA answer"]
    assert contents(db, b) == ["BETA question", "BETA answer", "BETA more"]
    # The same file again (grown) is the same transcript.
    write(alpha, chat("ALPHA question", "ALPHA answer", "ALPHA follow-up"))
    [again] = Importer(db.engine).import_paths([str(alpha)])
    assert (again.session_id, again.messages_added, again.messages_present) == (a, 1, 2)
    assert beta.exists()


def test_file_names_that_differ_only_in_case_are_two_transcripts(db, tmp_path):
    upper = write(tmp_path / "Chat.jsonl", chat("upper"))
    lower = write(tmp_path / "chat.jsonl", chat("lower"))
    results = Importer(db.engine).import_paths([str(upper), str(lower)])
    assert [r.error for r in results] == [None, None]
    assert results[0].session_id != results[1].session_id
    assert counts(db) == (2, 2, 0)


def test_a_file_that_disagrees_with_the_transcript_it_claims_to_extend_is_refused(
    db, cli, tmp_path
):
    first = write(
        tmp_path / "a" / "s.jsonl",
        [
            cc("u1", None, "user", "original question"),
            cc("a1", "u1", "assistant", "original answer"),
        ],
    )
    assert cli("--db", db.url, "import", first).exit_code == 0
    before = counts(db)
    # Another file claiming the same Claude Code session, with other words under the same ids.
    other = write(
        tmp_path / "b" / "s.jsonl",
        [
            cc("u1", None, "user", "a different question"),
            cc("a1", "u1", "assistant", "original answer"),
            cc("u2", "a1", "user", "and more"),
        ],
    )
    result = cli("--db", db.url, "import", other)
    assert result.exit_code == 1
    assert f"{other}:1: message 'u1' differs" in result.output and "not merged" in result.output
    assert counts(db) == before
    # An OpenAI chat file replaced in place by another conversation is refused the same way.
    path = write(tmp_path / "c.jsonl", chat("one", "two"))
    assert cli("--db", db.url, "import", path).exit_code == 0
    write(path, chat("uno", "dos", "tres"))
    result = cli("--db", db.url, "import", path)
    assert result.exit_code == 1 and f"{path}:1: message 'L1' differs" in result.output


# -- item 7: ids compared byte for byte ---------------------------------------------------------------


def test_message_ids_that_differ_in_case_or_a_trailing_space_are_distinct(db, tmp_path):
    records = [
        {"role": "user", "content": c, "id": i}
        for c, i in (("a", "Msg-1"), ("b", "msg-1"), ("c", "msg-1 "), ("d", "MSG-1"))
    ]
    path = write(tmp_path / "ids.jsonl", records)
    [res] = Importer(db.engine).import_paths([str(path)])
    assert res.error is None and res.messages_added == 4
    [again] = Importer(db.engine).import_paths([str(path)])
    assert (again.messages_added, again.messages_present) == (0, 4)


# -- item 8: the size that is sent ----------------------------------------------------------------------


def test_size_checks_count_escaped_bytes_and_tool_call_arguments(db, tmp_path):
    quotes = "'\\" * (5 * 1024 * 1024)  # 10 MiB of text, 20 MiB once escaped for MySQL
    escaped = write(tmp_path / "quotes.jsonl", chat("hi") + [{"role": "user", "content": quotes}])
    args = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "write", "arguments": "x" * (17 * 1024 * 1024)},
            }
        ],
    }
    big_call = write(tmp_path / "args.jsonl", chat("hi") + [args])
    raw = '"\n' * (5 * 1024 * 1024)  # 10 MiB sent as they are (not escaped): they fit
    unescaped = write(tmp_path / "raw.jsonl", chat("hi") + [{"role": "user", "content": raw}])
    [ok] = Importer(db.engine).import_paths([str(unescaped)])
    assert ok.error is None and ok.messages_added == 2
    assert contents(db, ok.session_id)[-1] == raw
    with db.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM agent_message")
        conn.exec_driver_sql("DELETE FROM agent_session")
    results = Importer(db.engine).import_paths([str(escaped), str(big_call)])
    if db.kind == "mysql":  # max_allowed_packet 16 MiB
        assert f"{escaped}:2: message of 20.0 MB as sent" in results[0].error
        assert f"{big_call}:2: message of 17.0 MB as sent" in results[1].error
        assert "tool-call arguments" in results[1].error
        assert counts(db) == (0, 0, 0)
    else:  # SQLite takes statements up to 1 GB
        assert [r.error for r in results] == [None, None]
        assert db.scalar("SELECT MAX(LENGTH(content)) FROM agent_message") == len(quotes)


# -- item 9: a failed file leaves no session row ------------------------------------------------------


@pytest.mark.parametrize(
    "bad,where",
    [
        (b'{"role": "user", "content": NaN}\n', ":2: malformed JSON"),
        (b'{"role": "user", "content": "x", "extra": Infinity}\n', ":2: malformed JSON"),
        (
            json.dumps({"role": "user", "content": "x", "name": "n" * 300}).encode() + b"\n",
            ":2: invalid",
        ),
        (
            json.dumps(
                {"role": "user", "content": "x", "extra": json.loads("[" * 40 + "]" * 40)}
            ).encode()
            + b"\n",
            ":2: a value is nested more than",
        ),
        (b'{"role": "user", "content": "lone \\ud800 surrogate"}\n', ":2: a string holds a lone"),
        (b'{"role": "user", "content": "x", "n": ' + b"9" * 5000 + b"}\n", ":2: malformed JSON"),
    ],
)
def test_a_failed_file_leaves_no_empty_session_row(db, cli, tmp_path, bad, where):
    path = write(tmp_path / "bad.jsonl", jsonl(chat("fine")) + bad)
    result = cli("--db", db.url, "import", path)
    assert result.exit_code == 1, result.output
    assert f"{path}{where}" in result.output
    assert "Traceback" not in result.output
    assert counts(db) == (0, 0, 0)


def test_a_model_that_is_a_list_fails_the_file_and_leaves_nothing(db, tmp_path):
    records = [
        {"type": "session", "version": 3, "id": "pi-x", "timestamp": "2026-01-01T00:00:00Z"},
        {
            "type": "message",
            "id": "e1",
            "parentId": None,
            "message": {"role": "user", "content": "hi"},
        },
        {"type": "model_change", "id": "e2", "parentId": "e1", "modelId": ["gpt", "5"]},
    ]
    path = write(tmp_path / "pi.jsonl", records)
    [res] = Importer(db.engine).import_paths([str(path)])
    assert (
        res.error == f"{path}:3: invalid pi record: 'modelId' must be a string, not an array "
        "(use --skip-invalid to skip such records)"
    )
    assert counts(db) == (0, 0, 0)
    [res] = Importer(db.engine, skip_invalid=True).import_paths([str(path)])
    assert res.error is None and res.skipped["invalid_record"] == 1 and counts(db) == (1, 1, 0)


def _large_chat(path: Path, messages: int = 200_000) -> Path:
    """An OpenAI chat file that takes a few seconds to import (about 45 MB)."""
    with open(path, "wb") as f:
        for i in range(messages):
            f.write(
                json.dumps(
                    {
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": f"message {i} " + "x" * 200,
                    }
                ).encode()
                + b"\n"
            )
    return path


def _batches_written(db, wal: Path | None) -> bool:
    """Whether an import in another process has written several batches, uncommitted. MariaDB:
    its open transaction changed thousands of rows. SQLite: its pages spilled into the WAL (a
    transaction's pages go there once the page cache is full; a commit of the session row alone
    is a few pages)."""
    if db.kind == "sqlite":
        return wal.exists() and wal.stat().st_size > 4_000_000
    return (
        db.scalar(
            "SELECT COALESCE(MAX(t.trx_rows_modified), 0) FROM information_schema.innodb_trx t "
            "JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id "
            "WHERE p.db = DATABASE()"
        )
        or 0
    ) > 3 * 1024


@pytest.mark.slow
def test_an_import_killed_mid_file_leaves_no_session_row_and_a_reimport_works(db, cli, tmp_path):
    """kill -9 of a real `ctxtool import` after it sent some batches: nothing of the file stays,
    not even its session row (which used to be committed before the messages), and importing it
    again stores it whole."""
    path = _large_chat(tmp_path / "big.jsonl")
    wal = Path(db.url.removeprefix("sqlite:///") + "-wal") if db.kind == "sqlite" else None
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxtool", "--db", db.url, "import", str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not _batches_written(db, wal) and proc.poll() is None and time.monotonic() < deadline:
            # INNODB_TRX is a cache refreshed only after 0.1 s without reads: poll slower.
            time.sleep(0.25)
        assert proc.poll() is None, "the import ended before it could be killed"
        assert _batches_written(db, wal), "the import never wrote its batches"
    finally:
        proc.kill()
        proc.wait()
    assert counts(db) == (0, 0, 0)
    result = cli("--db", db.url, "import", "--json", path)
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert (row["added"], row["present"]) == (200_000, 0)
    assert counts(db) == (1, 200_000, 0)


class _CuttableProxy:
    """A TCP proxy in front of the MariaDB server, counting the bytes clients send; ``cut()``
    closes every connection and refuses new ones, as when the network to the server is lost
    (the importer can then neither finish nor clean anything up)."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sent = 0
        self.sockets: list[socket.socket] = []
        self.is_cut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # cut
            if self.is_cut:
                client.close()
                return
            server = socket.create_connection(self.target)
            self.sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, counted: bool) -> None:
        try:
            while data := src.recv(65536):
                if counted:
                    self.sent += len(data)
                dst.sendall(data)
        except OSError:
            pass

    def cut(self) -> None:
        self.is_cut = True
        # A close alone leaves a listener blocked in accept() on another thread accepting.
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def test_an_import_that_loses_its_connection_leaves_no_session_row(mysql_db, tmp_path):
    """The network to the server goes away while an import sends its batches: the file fails
    with one line, the server rolls its transaction back, and no session row stays (the
    importer could not reach the server to remove one). A re-import then works."""
    import sqlalchemy as sa

    from ctxtool.db import create_engine

    path = _large_chat(tmp_path / "big.jsonl", 100_000)
    url = sa.engine.make_url(mysql_db.url)
    proxy = _CuttableProxy(url.host, url.port or 3306)
    engine = create_engine(url.set(port=proxy.port).render_as_string(hide_password=False))
    results = []
    importing = threading.Thread(
        target=lambda: results.extend(Importer(engine).import_paths([str(path)]))
    )
    importing.start()
    deadline = time.monotonic() + 60
    while proxy.sent < 3_000_000 and importing.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert importing.is_alive(), "the import ended before the connection was cut"
    proxy.cut()
    importing.join()
    engine.dispose()
    [res] = results
    assert res.error and "\n" not in res.error and res.session_id is None
    assert counts(mysql_db) == (0, 0, 0)
    [again] = Importer(mysql_db.engine).import_paths([str(path)])
    assert again.error is None and again.messages_added == 100_000
    assert counts(mysql_db) == (1, 100_000, 0)


# -- item 3: one bad file never stops the others --------------------------------------------------------


def test_a_directory_with_one_hostile_file_imports_all_the_others(db, cli, tmp_path):
    write(tmp_path / "a.jsonl", chat("first file"))
    write(
        tmp_path / "b.jsonl",
        chat("ok") + [{"role": "tool", "tool_call_id": ["unhashable"], "content": "x"}],
    )
    write(tmp_path / "c.jsonl", chat("last file", "reply"))
    result = cli("--db", db.url, "import", tmp_path)
    assert result.exit_code == 4, result.output
    assert (
        f"{tmp_path / 'b.jsonl'}:2: invalid openai-chat record: 'tool_call_id' must be a string"
        in result.output
    )
    assert "1 of 3 file(s) failed" in result.output and "Traceback" not in result.output
    assert counts(db) == (2, 3, 0)


# -- item 12 -------------------------------------------------------------------------------------------


def test_pi_checkpoint_whose_first_kept_entry_is_a_tool_result_keeps_the_call(db, tmp_path):
    def entry(i, parent, message):
        return {
            "type": "message",
            "id": i,
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:00Z",
            "message": message,
        }

    records = [
        {
            "type": "session",
            "version": 3,
            "id": "pi-cut",
            "timestamp": "2026-01-01T00:00:00Z",
            "cwd": "/w",
        },
        entry("e1", None, {"role": "user", "content": "read it"}),
        entry(
            "e2",
            "e1",
            {
                "role": "assistant",
                "content": [
                    {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}}
                ],
            },
        ),
        entry(
            "e3",
            "e2",
            {"role": "toolResult", "toolCallId": "c1", "content": [{"type": "text", "text": "A"}]},
        ),
        entry("e4", "e3", {"role": "assistant", "content": [{"type": "text", "text": "done"}]}),
        {
            "type": "compaction",
            "id": "e5",
            "parentId": "e4",
            "summary": "asked to read a",
            "firstKeptEntryId": "e3",
            "tokensBefore": 500,
        },
        entry("e6", "e5", {"role": "user", "content": "next"}),
    ]
    [res] = Importer(db.engine).import_paths([str(write(tmp_path / "pi.jsonl", records))])
    assert res.error is None and res.compactions_added == 1
    [cp] = Store(db.engine).compactions(res.session_id)
    kept = db.rows(
        "SELECT source_id, role FROM agent_message WHERE id = :i", i=cp.first_kept_message_id
    )
    assert kept == [{"source_id": "e2", "role": "assistant"}]
    assert cp.details["first_kept_moved_to_call_of"] == "e3"
    ctx = Store(db.engine).restored_context(res.session_id).to_openai()
    assert "asked to read a" in ctx[0]["content"]
    assert [m["role"] for m in ctx[1:]] == ["assistant", "tool", "assistant", "user"]


def test_a_fifo_is_refused_at_once(db, tmp_path):
    fifo = tmp_path / "live.jsonl"
    os.mkfifo(fifo)
    write(tmp_path / "ok.jsonl", chat("fine"))
    proc = subprocess.run(
        [sys.executable, "-m", "ctxtool", "--db", db.url, "import", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 4, proc.stderr
    assert f"{fifo}: not a regular file" in proc.stderr
    assert counts(db) == (1, 1, 0)


def test_a_symlink_loop_is_named_as_such(db, cli, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    os.symlink(b, a)
    os.symlink(a, b)
    result = cli("--db", db.url, "import", a)
    assert result.exit_code == 1
    assert f"{a}: too many levels of symbolic links" in result.output
    assert "no such file" not in result.output


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_line(db, tmp_path):
    path = write(tmp_path / "bom.jsonl", b"\xef\xbb\xbf" + jsonl(chat("first", "second")))
    [res] = Importer(db.engine).import_paths([str(path)])
    assert res.error is None and res.messages_added == 2


def test_a_claude_code_record_whose_parent_is_missing_keeps_the_earlier_records(db, tmp_path):
    records = [
        cc("u1", None, "user", "one"),
        cc("a1", "u1", "assistant", "two"),
        cc("u2", "trimmed-away", "user", "three"),
        cc("a2", "u2", "assistant", "four"),
    ]
    [res] = Importer(db.engine).import_paths([str(write(tmp_path / "gap.jsonl", records))])
    assert res.error is None
    assert contents(db, res.session_id) == ["one", "two", "three", "four"]
    assert not any(k.startswith("abandoned_branch") for k in res.skipped)


def test_a_real_transcript_with_a_bom_and_crlf_free_lines_still_imports(db, tmp_path):
    src = TRANSCRIPTS / "pi" / "agent-sessions-pi-small.jsonl"
    path = write(tmp_path / "pi-bom.jsonl", b"\xef\xbb\xbf" + src.read_bytes())
    [res] = Importer(db.engine).import_paths([str(path)])
    assert res.error is None and res.messages_added > 0


def test_a_session_stored_under_the_old_file_stem_id_is_found_once_and_renamed(db, tmp_path):
    """Before path-derived ids, an OpenAI chat file was stored under its file stem. After an
    upgrade, re-importing the same file extends that session (and moves it to the new id); a
    same-named file with another conversation gets a session of its own, not a refusal."""
    path = write(tmp_path / "run1" / "task-42.jsonl", chat("ALPHA question", "ALPHA answer"))
    [first] = Importer(db.engine).import_paths([str(path)])
    with db.engine.begin() as conn:  # as an older ctxtool stored it
        conn.exec_driver_sql("UPDATE agent_session SET source_id = 'task-42'")
    write(path, chat("ALPHA question", "ALPHA answer", "ALPHA more"))
    [again] = Importer(db.engine).import_paths([str(path)])
    assert (again.error, again.session_id) == (None, first.session_id)
    assert (again.messages_added, again.messages_present) == (1, 2)
    assert db.scalar("SELECT source_id FROM agent_session") == first.source_id
    # The old id is gone: another task-42 is a new transcript even if it started differently.
    with db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE agent_session SET source_id = 'task-42'")
    other = write(tmp_path / "run2" / "task-42.jsonl", chat("BETA question", "BETA answer"))
    [beta] = Importer(db.engine).import_paths([str(other)])
    assert beta.error is None and beta.session_id != first.session_id and beta.messages_added == 2
    assert counts(db) == (2, 5, 0)
    assert db.scalar("SELECT COUNT(*) FROM agent_session WHERE source_id = 'task-42'") == 1


def test_a_file_name_that_is_not_utf8_is_imported_under_a_printable_id(db, cli, tmp_path):
    folder = os.fsencode(tmp_path)
    with open(os.path.join(folder, b"caf\xe9.jsonl"), "wb") as f:  # Latin-1 file name
        f.write(jsonl(chat("bonjour")))
    result = cli("--db", db.url, "import", "--json", tmp_path)
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row["added"] == 1
    assert db.scalar("SELECT source_id FROM agent_session").startswith("caf\\xe9@")


def test_a_batch_the_server_refuses_stops_the_batches_queued_behind_it(mysql_db, tmp_path):
    """The writer thread may hold a second batch while the server works on the first: when the
    server refuses a batch, the ones queued behind it are never sent, the file fails with one
    line, and the transaction leaves nothing. A trigger (slow, then SIGNAL) refuses one
    message; a MyISAM table, which no rollback empties, records every row that reached it."""
    with mysql_db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE arrived (content TEXT) ENGINE=MyISAM")
        conn.exec_driver_sql(
            "CREATE TRIGGER refuse BEFORE INSERT ON agent_message FOR EACH ROW BEGIN "
            "INSERT INTO arrived VALUES (NEW.content); "
            "IF NEW.content = 'boom' THEN DO SLEEP(1); "
            "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; END IF; END"
        )
    texts = [f"m{i}" for i in range(30_000)]
    texts[1_500] = "boom"  # in the second batch (BATCH_ROWS is 1000)
    path = write(tmp_path / "big.jsonl", chat(*texts))
    [res] = Importer(mysql_db.engine).import_paths([str(path)])
    assert res.error and "refused by the test" in res.error and "\n" not in res.error
    assert res.messages_added == 0
    assert counts(mysql_db) == (0, 0, 0)
    arrived = {r["content"] for r in mysql_db.rows("SELECT content FROM arrived")}
    assert "boom" in arrived and "m1499" in arrived
    assert not arrived & {f"m{i}" for i in range(2_000, 30_000)}  # nothing after that batch


def test_a_completed_message_too_large_as_sent_is_refused_with_its_line(mysql_db, tmp_path):
    """A message completed by a later import goes out as an UPDATE the driver escapes (newlines
    and double quotes too): its size is counted that way, so 10 MiB of them is a one-line
    refusal naming the file and line, not a dropped connection; the same text as a new
    message (the import's own escaping leaves them as they are) fits."""

    def cc(uuid, parent, kind, content, session="grow-1"):
        message = (
            {"id": "msg-1", "role": "assistant", "content": content}
            if kind == "assistant"
            else {"role": kind, "content": content}
        )
        return {
            "type": kind,
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": session,
            "timestamp": "2026-01-01T00:00:00Z",
            "message": message,
        }

    big = '"\n' * (5 * 1024 * 1024)
    records = [
        cc("u1", None, "user", "hi"),
        cc("a1", "u1", "assistant", [{"type": "text", "text": "Let me look."}]),
        cc("a2", "a1", "assistant", [{"type": "text", "text": big}]),
    ]
    path = write(tmp_path / "grow.jsonl", records[:2])
    [first] = Importer(mysql_db.engine).import_paths([str(path)])
    assert first.error is None and first.messages_added == 2
    write(path, records)  # the agent streamed the rest of the same assistant message
    [grown] = Importer(mysql_db.engine).import_paths([str(path)])
    assert grown.error is not None and "\n" not in grown.error
    assert f"{path}:2: message of 20.0 MB as sent" in grown.error
    assert contents(mysql_db, first.session_id) == ["hi", "Let me look."]
    fresh = write(tmp_path / "fresh.jsonl", [dict(r, sessionId="grow-2") for r in records])
    [whole] = Importer(mysql_db.engine).import_paths([str(fresh)])
    assert whole.error is None and whole.messages_added == 2


def test_a_file_failing_while_batches_wait_sends_none_of_them(mysql_db, tmp_path):
    """The parser fails (a malformed line) while the server is still busy with an earlier batch
    and another waits behind it: the waiting batch is never sent, nothing stays. A slow trigger
    holds the third batch; a MyISAM table, which no rollback empties, records what arrived."""
    with mysql_db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE arrived (content TEXT) ENGINE=MyISAM")
        conn.exec_driver_sql(
            "CREATE TRIGGER slow BEFORE INSERT ON agent_message FOR EACH ROW BEGIN "
            "INSERT INTO arrived VALUES (NEW.content); "
            "IF NEW.content = 'slow' THEN DO SLEEP(1); END IF; END"
        )
    from ctxtool.store.import_writes import BATCH_ROWS as B

    texts = [f"m{i}" for i in range(5 * B)]
    texts[2 * B + B // 2] = "slow"  # in the third batch
    data = jsonl(chat(*texts)).splitlines(keepends=True)
    data[4 * B + B // 2] = b'{"role": "user", "content": \n'  # the fifth batch never completes
    path = write(tmp_path / "late-failure.jsonl", b"".join(data))
    [res] = Importer(mysql_db.engine).import_paths([str(path)])
    assert res.error and f"{path}:{4 * B + B // 2 + 1}: malformed JSON" in res.error
    assert counts(mysql_db) == (0, 0, 0)
    arrived = {r["content"] for r in mysql_db.rows("SELECT content FROM arrived")}
    assert {"m0", "slow", f"m{3 * B - 1}"} <= arrived  # the third batch was running: it finished
    assert not arrived & {f"m{i}" for i in range(3 * B, 5 * B)}  # the fourth waited: not sent


def test_a_batch_is_bounded_by_all_its_bytes_not_only_the_text(mysql_db, tmp_path):
    """Tool-call arguments count towards a batch's byte bound: 300 calls of 100 KB each go out
    in several batches, not one of 30 MB."""
    from ctxtool.store import import_writes as store_messages

    calls = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": "write", "arguments": "x" * 100_000},
                }
            ],
        }
        for i in range(300)
    ]
    path = write(tmp_path / "calls.jsonl", chat("hi") + calls)
    sizes = []
    render = store_messages.MessageWriter._flush

    def measuring_flush(writer):
        sizes.append(sum(len(v) for row in writer._rows for v in row if isinstance(v, str)))
        render(writer)

    store_messages.MessageWriter._flush = measuring_flush
    try:
        [res] = Importer(mysql_db.engine).import_paths([str(path)])
    finally:
        store_messages.MessageWriter._flush = render
    assert res.error is None and res.messages_added == 301
    assert max(sizes) < store_messages.BATCH_BYTES + 200_000


def _one_deadlock(db, table: str) -> None:
    """The next insert into ``table`` fails once with a deadlock (1213), as the server reports
    one; ``once.n`` becomes 1 when it has (a MyISAM table: no rollback undoes it)."""
    with db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE once (n INT) ENGINE=MyISAM")
        conn.exec_driver_sql("INSERT INTO once VALUES (0)")
        conn.exec_driver_sql(
            f"CREATE TRIGGER conflict BEFORE INSERT ON {table} FOR EACH ROW BEGIN "
            "IF (SELECT n FROM once) = 0 THEN UPDATE once SET n = 1; "
            "SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, "
            "MESSAGE_TEXT = 'Deadlock found when trying to get lock'; END IF; END"
        )


def test_an_import_retried_after_a_write_conflict_reads_its_file_again(mysql_db, cli, tmp_path):
    """A deadlock (1213) in the middle of an import, as concurrent imports from cron meet when
    they create their session rows, is retried from the start of the file. The first attempt's
    reader, dropped mid-file, used to close the file with it (a generator delegating to the
    file with ``yield from`` closes it): the retry failed with "seek of closed file"."""
    _one_deadlock(mysql_db, "agent_message")
    texts = [f"message {i}" for i in range(3000)]
    path = write(tmp_path / "retried.jsonl", jsonl(chat(*texts)))
    # The failed attempt's reader sits in a reference cycle (its error, kept by the writer
    # thread's future) and goes whenever the cyclic collector runs: here at once.
    thresholds = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        result = cli("--db", mysql_db.url, "import", path)  # not a terminal: no progress shown
    finally:
        gc.set_threshold(*thresholds)
    assert result.exit_code == 0, result.output
    assert mysql_db.rows("SELECT n FROM once")[0]["n"] == 1  # the conflict did happen
    stored = [r["content"] for r in mysql_db.rows("SELECT content FROM agent_message ORDER BY id")]
    assert stored == texts


def test_a_deadlock_creating_the_session_row_is_retried(mysql_db, tmp_path):
    """The new session's row is inserted by the import's own transaction: a deadlock there (as
    the server may report one under concurrent imports) rolls the whole attempt back and the
    import is tried again; one session row, every message once."""
    _one_deadlock(mysql_db, "agent_session")
    path = write(tmp_path / "first.jsonl", chat("one", "two"))
    [res] = Importer(mysql_db.engine).import_paths([str(path)])
    assert res.error is None and res.messages_added == 2
    assert mysql_db.rows("SELECT n FROM once")[0]["n"] == 1  # the deadlock did happen
    assert [r["session_id"] for r in mysql_db.rows("SELECT session_id FROM agent_session")] == [
        res.session_id
    ]
    assert counts(mysql_db) == (1, 2, 0)


def test_concurrent_first_imports_of_different_transcripts_all_succeed(mysql_db, tmp_path):
    """Four new transcripts imported at once, on four real connections (as from cron): their
    session ids come from one counter row (they used to race on MAX()+1 and deadlock in
    InnoDB), every file is stored whole under a session of its own."""
    import threading

    paths = [
        write(
            tmp_path / f"t{k}.jsonl",
            jsonl(chat(*[f"t{k} m{i} " + "é" * (i % 200) for i in range(1500)])),
        )
        for k in range(4)
    ]
    results = [None] * len(paths)
    start = threading.Barrier(len(paths))

    def run(k):
        start.wait()
        [results[k]] = Importer(mysql_db.engine).import_paths([str(paths[k])])

    for _ in range(5):  # the race does not always happen: a few rounds
        with mysql_db.engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM agent_message")
            conn.exec_driver_sql("DELETE FROM agent_session")
        threads = [threading.Thread(target=run, args=(k,)) for k in range(len(paths))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [r.error for r in results] == [None] * len(paths)
        assert len({r.session_id for r in results}) == len(paths)
        assert counts(mysql_db)[:2] == (len(paths), len(paths) * 1500)


def _hold_on(db, text: str, seconds: int) -> None:
    """An insert of a message with this text sleeps ``seconds``: the import writing it keeps
    its transaction (and its uncommitted session row) open that long."""
    with db.engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TRIGGER hold BEFORE INSERT ON agent_message FOR EACH ROW BEGIN "
            f"IF NEW.content = '{text}' THEN DO SLEEP({int(seconds)}); END IF; END"
        )


def _wait_until_sleeping(db, thread) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and thread.is_alive():
        if db.scalar(
            "SELECT COUNT(*) FROM information_schema.processlist "
            "WHERE db = DATABASE() AND state = 'User sleep'"
        ):
            return
        time.sleep(0.05)
    pytest.fail("the first import never reached its held message")


def test_a_first_import_does_not_wait_for_another_transcripts_open_import(mysql_db, tmp_path):
    """One new transcript's import holds its transaction open (its session row inserted,
    uncommitted); a second new transcript's import completes meanwhile. Allocating the second
    id must not read the first's row with a lock (a locking MAX() would wait for its commit,
    up to innodb_lock_wait_timeout)."""
    _hold_on(mysql_db, "hold", 6)
    slow = write(tmp_path / "slow.jsonl", chat("slow one", "hold", "slow three"))
    quick = write(tmp_path / "quick.jsonl", chat("quick one", "quick two"))
    results = {}
    first = threading.Thread(
        target=lambda: results.update(slow=Importer(mysql_db.engine).import_paths([str(slow)])[0])
    )
    first.start()
    _wait_until_sleeping(mysql_db, first)
    assert counts(mysql_db) == (0, 0, 0)  # the first import's rows are all uncommitted
    started = time.monotonic()
    [res] = Importer(mysql_db.engine).import_paths([str(quick)])
    took = time.monotonic() - started
    still_open = first.is_alive()
    first.join()
    assert res.error is None and res.messages_added == 2
    assert still_open and took < 4, f"the second import waited for the first ({took:.1f} s)"
    assert results["slow"].error is None and results["slow"].messages_added == 3
    assert res.session_id != results["slow"].session_id
    assert counts(mysql_db) == (2, 5, 0)


def test_a_first_import_of_a_transcript_being_imported_waits_and_finds_it_all(mysql_db, tmp_path):
    """Two first imports of the same transcript: the second blocks on the first's uncommitted
    session row (the unique source key), then finds the session and every message present."""
    _hold_on(mysql_db, "hold", 2)
    path = write(tmp_path / "same.jsonl", chat("one", "hold", "three"))
    results = []
    first = threading.Thread(
        target=lambda: results.extend(Importer(mysql_db.engine).import_paths([str(path)]))
    )
    first.start()
    _wait_until_sleeping(mysql_db, first)
    [second] = Importer(mysql_db.engine).import_paths([str(path)])
    first.join()
    [res] = results
    assert (res.error, res.messages_added) == (None, 3)
    assert (second.error, second.session_id) == (None, res.session_id)
    assert (second.messages_added, second.messages_present) == (0, 3)
    assert counts(mysql_db) == (1, 3, 0)


def test_new_sessions_take_ids_above_every_stored_one_and_never_one_again(db, tmp_path):
    """Session ids a runtime wrote are respected, and an id once handed out (to a session since
    deleted, or to an import that failed) is not handed out again."""

    def runtime_session(session_id):
        with db.engine.begin() as conn:
            conn.exec_driver_sql(
                f"INSERT INTO agent_session (session_id, title) VALUES ({session_id}, 'runtime')"
            )

    def import_one(name, records):
        [res] = Importer(db.engine).import_paths([str(write(tmp_path / name, records))])
        return res

    from ctxtool.store.import_writes import RUNTIME_HEADROOM as ROOM

    assert import_one("a.jsonl", chat("a")).session_id == 1  # no runtime here yet: the next
    assert import_one("b.jsonl", chat("b")).session_id == 2
    runtime_session(41)  # a runtime writes sessions here: its next MAX()+1 ids are left to it,
    assert import_one("c.jsonl", chat("c")).session_id == 41 + ROOM
    # whoever wrote the highest (found by review: once ours was the highest, the next import
    # took MAX()+1, the id a runtime takes next, and a runtime then waited on it and failed)
    assert import_one("d.jsonl", chat("d")).session_id == 41 + 2 * ROOM
    with db.engine.begin() as conn:
        conn.exec_driver_sql(f"DELETE FROM agent_message WHERE session_id = {41 + 2 * ROOM}")
        conn.exec_driver_sql(f"DELETE FROM agent_session WHERE session_id = {41 + 2 * ROOM}")
    failed = import_one("bad.jsonl", jsonl(chat("fine")) + b"{not json\n")
    assert failed.error and failed.session_id is None
    later = import_one("e.jsonl", chat("e"))
    # Never an id again: not the deleted one's, nor the failed import's (the one after it).
    assert later.error is None and later.session_id > 41 + 2 * ROOM + 1
    assert sorted(r["session_id"] for r in db.rows("SELECT session_id FROM agent_session")) == [
        1,
        2,
        41,
        41 + ROOM,
        later.session_id,
    ]


def test_a_runtime_session_not_yet_committed_is_never_taken_over(mysql_db, tmp_path):
    """A runtime inserts the next session id in a transaction still open when an import takes
    its id (a plain read of MAX() cannot see it): the import's row waits on the primary key,
    fails on it once the runtime commits, and the import takes another id."""
    import sqlalchemy as sa

    nxt = mysql_db.scalar("SELECT last_value FROM ctxtool_counters") + 1
    path = write(tmp_path / "a.jsonl", chat("mine"))
    results = []
    with mysql_db.engine.connect() as runtime:
        runtime.execute(
            sa.text("INSERT INTO agent_session (session_id, title) VALUES (:i, 'runtime')"),
            {"i": nxt},
        )
        importing = threading.Thread(
            target=lambda: results.extend(Importer(mysql_db.engine).import_paths([str(path)]))
        )
        importing.start()
        wait_until(
            lambda: lock_waits(mysql_db, "%INSERT%agent_session%") or not importing.is_alive(),
            "the import's session row to wait on the runtime's",
            interval=LOCK_WAITS_INTERVAL,
        )
        runtime.commit()
    importing.join()
    [res] = results
    assert res.error is None and res.messages_added == 1 and res.session_id != nxt
    assert mysql_db.rows("SELECT session_id, title FROM agent_session ORDER BY session_id") == [
        {"session_id": nxt, "title": "runtime"},
        {"session_id": res.session_id, "title": "mine"},
    ]


def test_a_runtime_taking_max_plus_one_in_a_loop_never_collides_with_imports(mysql_db, tmp_path):
    """Found by review: a runtime that takes MAX(session_id)+1 for each new session, writing
    in a tight loop beside imports, took the id an import had just been handed (the import
    started again, and 26 of 80 gave up after five tries) or waited on an import's uncommitted
    row and then failed on it. Imports now leave it room above its highest id."""
    import sqlalchemy as sa

    paths = [
        write(tmp_path / f"t{i}.jsonl", chat(f"question {i}", f"answer {i}")) for i in range(40)
    ]
    stop = threading.Event()
    runtime = {"created": 0, "failed": 0}

    def runtime_loop():
        engine = sa.create_engine(mysql_db.url)
        with engine.connect() as conn:
            while not stop.is_set():
                try:
                    conn.exec_driver_sql(
                        "INSERT INTO agent_session (session_id, title) SELECT "
                        "COALESCE(MAX(session_id), 0) + 1, 'runtime' FROM agent_session"
                    )
                    conn.commit()
                    runtime["created"] += 1
                except sa.exc.DBAPIError:
                    conn.rollback()
                    runtime["failed"] += 1
        engine.dispose()

    loop = threading.Thread(target=runtime_loop)
    loop.start()
    try:
        results = [Importer(mysql_db.engine).import_paths([str(p)])[0] for p in paths]
    finally:
        stop.set()
        loop.join()
    assert [r.error for r in results] == [None] * len(paths)
    assert runtime["created"] > len(paths) and runtime["failed"] == 0, runtime
    assert (
        mysql_db.scalar("SELECT COUNT(*) FROM agent_session WHERE title = 'runtime'")
        == runtime["created"]
    )
    assert mysql_db.scalar("SELECT COUNT(*) FROM agent_message") == 2 * len(paths)


def test_an_import_waiting_too_long_on_its_session_says_why_and_writes_nothing(mysql_db, tmp_path):
    """Two imports of one transcript queue on its session row; one that waits past
    innodb_lock_wait_timeout (the other is long) gets 1205: said in words, nothing written.
    Two tries of a 1 s wait, not the default ten (about 17 s): the retry is not the subject."""
    from dataclasses import replace

    import sqlalchemy as sa

    from ctxtool.db import create_engine
    from ctxtool.importer import IMPORT_POLICY

    twice = replace(IMPORT_POLICY, attempts=2)

    path = write(tmp_path / "a.jsonl", chat("one"))
    [first] = Importer(mysql_db.engine).import_paths([str(path)])
    write(path, chat("one", "two"))
    impatient = create_engine(
        sa.engine.make_url(mysql_db.url)
        .update_query_dict({"init_command": "SET innodb_lock_wait_timeout=1"})
        .render_as_string(hide_password=False)
    )
    with mysql_db.engine.connect() as other:  # the other import, still writing the session
        other.execute(
            sa.text("SELECT session_id FROM agent_session WHERE session_id = :s FOR UPDATE"),
            {"s": first.session_id},
        )
        [res] = Importer(impatient, retry=twice).import_paths([str(path)])
        other.rollback()
    assert res.error and "[1205]" in res.error and "an import of the same transcript" in res.error
    assert "\n" not in res.error and "run it again" in res.error
    assert contents(mysql_db, first.session_id) == ["one"]
    [again] = Importer(impatient, retry=twice).import_paths([str(path)])
    assert again.error is None and contents(mysql_db, first.session_id) == ["one", "two"]
    impatient.dispose()


def test_a_runtime_id_at_bigints_largest_leaves_no_session_id_and_says_so(db, tmp_path):
    """Found by review: a runtime session at 2^63-1 made the counter overflow (on SQLite to a
    REAL, stored for good) and every later import end in an internal error."""
    with db.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO agent_session (session_id, title) VALUES (9223372036854775807, 'runtime')"
        )
    before = db.rows("SELECT name, last_value FROM ctxtool_counters")
    [res] = Importer(db.engine).import_paths([str(write(tmp_path / "a.jsonl", chat("a")))])
    assert res.error and "no session id is left" in res.error and "internal error" not in res.error
    assert db.rows("SELECT name, last_value FROM ctxtool_counters") == before
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 1


def test_an_import_into_a_stored_session_writes_its_row_first(db, cli, tmp_path):
    """The import of a grown transcript takes its session by writing the row (updated_at), not
    by a locking read: on a multi-primary cluster only a write orders it against a runtime's
    insert or a compaction through another node (store.session_touch). So the write comes
    first in the transaction, before it reads what the session holds: every statement is
    recorded on the engine the import uses, and the first of the writing transaction to name
    a session's table is the UPDATE of its row (updated_at changing proves nothing of order)."""
    from sqlalchemy import event

    path = write(tmp_path / "grown.jsonl", chat("question", "answer"))
    assert cli("--db", db.url, "import", path).exit_code == 0
    before = db.scalar("SELECT updated_at FROM agent_session")
    time.sleep(0.01)  # updated_at has milliseconds on SQLite
    write(path, chat("question", "answer", "follow-up"))
    transactions: list[list[str]] = []

    def began(conn):
        transactions.append([])

    def executed(conn, cursor, statement, parameters, context, executemany):
        if transactions:
            transactions[-1].append(" ".join(statement.split()))

    event.listen(db.engine, "begin", began)
    event.listen(db.engine, "before_cursor_execute", executed)
    try:
        (result,) = Importer(db.engine).import_files([str(path)])  # what `import` runs
    finally:
        event.remove(db.engine, "before_cursor_execute", executed)
        event.remove(db.engine, "begin", began)
    assert result.error is None and result.messages_added == 1, result.as_dict()
    # The one that reads and writes messages (on MySQL their inserts go through the driver's
    # cursor, past the engine's events: the reads of what the session holds are seen).
    (writing,) = [t for t in transactions if any("agent_message" in s for s in t)]
    tables = ("agent_session", "agent_message", "agent_compaction")
    touching = [s for s in writing if any(t in s for t in tables)]
    assert touching[0].startswith("UPDATE agent_session SET updated_at="), writing
    assert str(db.scalar("SELECT updated_at FROM agent_session")) > str(before)
