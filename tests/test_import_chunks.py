"""Issue #30 item 3: `import --max-transaction-bytes` writes a session's new messages in
consecutive transactions, each under the bound, each a prefix of the session that starts by
writing the session's row; a failure keeps the committed prefix and a re-run continues to
exactly the store one clean import gives. Every test runs on SQLite and MariaDB unless it
needs a server (kill -9 of a real import)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from ctxtool.core.errors import CtxtoolError, FileFailure
from ctxtool.importer import Importer
from ctxtool.store.import_writes import ROW_OVERHEAD

from .galera_cluster import galera  # noqa: F401 - the session fixture
from .test_import_integrity import _large_chat, counts, write

TEXT = 1_000  # bytes of each generated message's content
BOUND = 5 * TEXT  # four of them fit a transaction, with their other columns


def chat(n: int, bad_at: int | None = None) -> bytes:
    """An OpenAI chat file of ``n`` messages of TEXT bytes; line ``bad_at`` is not JSON."""
    lines = []
    for i in range(1, n + 1):
        if i == bad_at:
            lines.append(b"{not json")
            continue
        text = f"message {i:04d} " + "x" * (TEXT - 13)
        lines.append(
            json.dumps({"role": "user" if i % 2 else "assistant", "content": text}).encode()
        )
    return b"\n".join(lines) + b"\n"


def stored(db) -> list[tuple]:
    """Everything an import writes that a re-run must reproduce, in id order."""
    messages = [
        tuple(r.values())
        for r in db.rows(
            "SELECT s.source_id AS session, m.source_id, m.role, m.content, m.tool_calls, "
            "m.tool_call_id FROM agent_message m JOIN agent_session s USING (session_id) "
            "ORDER BY m.id"
        )
    ]
    checkpoints = [
        tuple(r.values())
        for r in db.rows(
            "SELECT c.source_id, c.summary, c.tokens_before, m.source_id AS kept "
            "FROM agent_compaction c JOIN agent_message m ON m.id = c.first_kept_message_id "
            "ORDER BY c.id"
        )
    ]
    return messages + checkpoints


class Commits:
    """Each transaction on the engine: the statements it ran through the engine (on MySQL
    message inserts go through the driver's cursor, past these events) and, for one that
    commits, what its session holds just before the commit, seen from inside it: the messages'
    contents in id order, and how many checkpoints have no stored first kept message."""

    def __init__(self, engine):
        self.engine = engine
        self.transactions: list[list[str]] = []
        self.seen: list[tuple[list[str], int]] = []  # one per commit
        self.writing_first: list[str] = []  # the first session-table statement of each commit
        self._looking = False

    def __enter__(self):
        event.listen(self.engine, "begin", self._begin)
        event.listen(self.engine, "commit", self._commit)
        event.listen(self.engine, "before_cursor_execute", self._executed)
        return self

    def __exit__(self, *exc):
        event.remove(self.engine, "begin", self._begin)
        event.remove(self.engine, "commit", self._commit)
        event.remove(self.engine, "before_cursor_execute", self._executed)

    def _begin(self, conn):
        self.transactions.append([])

    def _executed(self, conn, cursor, statement, parameters, context, executemany):
        if self.transactions and not self._looking:
            self.transactions[-1].append(" ".join(statement.split()))

    def _commit(self, conn):
        self._looking = True
        try:
            contents = [
                r[0] for r in conn.exec_driver_sql("SELECT content FROM agent_message ORDER BY id")
            ]
            orphans = conn.exec_driver_sql(
                "SELECT COUNT(*) FROM agent_compaction c LEFT JOIN agent_message m "
                "ON m.id = c.first_kept_message_id WHERE m.id IS NULL"
            ).scalar()
        finally:
            self._looking = False
        self.seen.append((contents, orphans))
        tables = ("agent_session", "agent_message", "agent_compaction")
        touching = [s for s in self.transactions[-1] if any(t in s for t in tables)]
        if contents and touching:
            self.writing_first.append(touching[0])


def test_each_transaction_is_a_prefix_under_the_bound_starting_with_the_session_row(db, tmp_path):
    path = write(tmp_path / "long.jsonl", chat(30))
    expected = [
        json.loads(line)["content"] for line in path.read_bytes().splitlines()
    ]  # the file's messages, in order
    with Commits(db.engine) as commits:
        [result] = Importer(db.engine, max_transaction_bytes=BOUND).import_paths([str(path)])
    assert result.error is None and result.messages_added == 30, result.as_dict()
    writing = [(c, o) for c, o in commits.seen if c]  # the id allocation commits none
    sizes = [len(c) for c, _ in writing]
    assert sizes == list(range(4, 30, 4)) + [30], sizes  # 4 messages of ~1 KB per 5 KB
    for contents, _orphans in writing:
        assert contents == expected[: len(contents)]
    # The first transaction creates the session's row, every later one writes it first.
    assert len(commits.writing_first) == len(writing)
    assert commits.writing_first[0].startswith("INSERT INTO agent_session"), commits.writing_first
    assert all(
        s.startswith("UPDATE agent_session SET updated_at=") for s in commits.writing_first[1:]
    ), commits.writing_first
    unbounded = tmp_path / "again" / "long.jsonl"
    write(unbounded, path.read_bytes())
    [again] = Importer(db.engine).import_paths([str(unbounded)])
    assert again.messages_added == 30
    halves = [r["content"] for r in db.rows("SELECT content FROM agent_message ORDER BY id")]
    assert halves[:30] == halves[30:] == expected


def test_the_byte_options_take_k_and_m_as_the_token_options_do(db, cli, tmp_path):
    """``--max-transaction-bytes 5k`` is 5,000 bytes (four messages a transaction, as BOUND
    gives), as ``--context-window 32k`` is 32,000 tokens; ``--max-row-bytes 1m`` lets every
    message in, ``1k`` refuses one of 1,500 bytes, ``2k`` takes it."""
    path = write(tmp_path / "s.jsonl", chat(9, bad_at=7))
    done = cli(
        "--db", db.url, "import", "--max-transaction-bytes", "5k", "--max-row-bytes", "1m", path
    )
    assert done.exit_code == 1 and "; 4 messages of session" in done.stderr, done.output
    assert counts(db)[1] == 4
    message = {"role": "user", "content": "y" * 1_500}
    small = write(tmp_path / "t.jsonl", json.dumps(message).encode() + b"\n")
    refused = cli("--db", db.url, "import", "--max-row-bytes", "1k", small)
    assert refused.exit_code == 1 and "is larger than --max-row-bytes 1,000" in refused.stderr, (
        refused.output
    )
    assert cli("--db", db.url, "import", "--max-row-bytes", "2k", small).exit_code == 0
    for wrong in ("4.5k", "-1k", "k"):
        bad = cli("--db", db.url, "import", "--max-transaction-bytes", wrong, path)
        assert bad.exit_code == 2
        assert f"'{wrong}' is not a number of bytes (e.g. 4000 or 4k)" in bad.stderr, bad.stderr


def test_a_message_larger_than_the_bound_goes_alone(db, tmp_path):
    path = write(tmp_path / "big.jsonl", chat(6))
    with Commits(db.engine) as commits:
        [result] = Importer(db.engine, max_transaction_bytes=TEXT).import_paths([str(path)])
    assert result.error is None and result.messages_added == 6
    assert [len(c) for c, _ in commits.seen if c] == [1, 2, 3, 4, 5, 6]
    assert TEXT < TEXT + ROW_OVERHEAD  # each message weighs more than the bound


def test_a_bad_record_after_the_first_chunk_keeps_the_prefix_and_a_rerun_continues(
    db, cli, tmp_path
):
    bad = write(tmp_path / "s.jsonl", chat(30, bad_at=23))
    # Without the bound: one transaction, nothing of the file stays (as always).
    plain = cli("--db", db.url, "import", bad)
    assert plain.exit_code == 1 and f"{bad}:23: malformed JSON" in plain.stderr
    assert counts(db) == (0, 0, 0)

    done = cli("--db", db.url, "import", "--max-transaction-bytes", BOUND, bad)
    assert done.exit_code == 1
    session = db.scalar("SELECT session_id FROM agent_session")
    assert (
        f"Error: {bad}:23: malformed JSON" in done.stderr
        and f"; 20 messages of session {session} are stored (committed before the failure), "
        "and importing the same file again continues from there"
        in done.stderr
    ), done.stderr
    assert "1 of 1 file(s) failed; what was committed before each failure is kept" in done.stderr
    assert counts(db) == (1, 20, 0)  # five whole transactions of four; the sixth rolled back
    # The table's row says the file failed, and the error is said once, on stderr (#44).
    assert done.stdout.splitlines()[-1].split()[-1] == "failed"
    assert "malformed" not in done.stdout and done.stderr.count("malformed JSON") == 1
    # Again, unfixed: nothing more, still refused, the same prefix said.
    still = cli("--db", db.url, "import", "--json", "--max-transaction-bytes", BOUND, bad)
    # Its row says what it found stored: the prefix, present (it said 0 before).
    assert [
        (r["added"], r["present"], r["error"] is not None) for r in json.loads(still.stdout)
    ] == [(0, 20, True)]
    assert counts(db) == (1, 20, 0)
    assert (
        f"; 20 messages of session {session} are stored (committed before the failure)"
        in still.stderr
    ), still.stderr
    assert "what was committed before each failure is kept" in still.stderr
    assert "nothing was written" not in still.stderr

    good = chat(30)
    bad.write_bytes(good)  # the operator fixes the line
    rerun = cli("--db", db.url, "import", "--json", "--max-transaction-bytes", BOUND, bad)
    assert rerun.exit_code == 0, rerun.output
    [row] = json.loads(rerun.stdout)
    assert (row["added"], row["present"], row["session_id"]) == (10, 20, session)

    whole = stored(db)
    with db.engine.begin() as conn:
        for table in ("agent_compaction", "agent_message", "agent_session"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
    assert cli("--db", db.url, "import", bad).exit_code == 0  # one clean import
    assert stored(db) == whole


def claude_code(n_before: int, n_after: int, bad_after_boundary: bool = False) -> list:
    """A linear Claude Code session with a checkpoint (compact_boundary + summary) after
    ``n_before`` messages, keeping from the message after it; ``bad_after_boundary`` puts a
    record that does not fit the format after the summary (a malformed line would be found
    before anything is written: a tree's main line is read first, see below)."""

    def rec(uuid, parent, role, text, **extra):
        message = (
            {"role": "user", "content": text}
            if role == "user"
            else {"id": f"m-{uuid}", "role": role, "content": [{"type": "text", "text": text}]}
        )
        return {
            "type": role,
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": "cc-chunks",
            "timestamp": "2026-01-01T00:00:00Z",
            "message": message,
            **extra,
        }

    records, parent = [], None
    for i in range(n_before):
        uuid = f"b{i}"
        role = "user" if i % 2 == 0 else "assistant"
        records.append(rec(uuid, parent, role, f"before {i} " + "y" * TEXT))
        parent = uuid
    records.append(
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "boundary",
            "parentUuid": None,
            "logicalParentUuid": parent,
            "sessionId": "cc-chunks",
            "timestamp": "2026-01-01T00:00:00Z",
            "compactMetadata": {"preTokens": 9000},
        }
    )
    records.append(rec("summary", "boundary", "user", "Summary: all before", isCompactSummary=True))
    parent = "summary"
    if bad_after_boundary:  # valid JSON on the main line, not a Claude Code record
        records.append(dict(rec("bad", parent, "user", ""), message=[]))
        parent = "bad"
    for i in range(n_after):
        uuid = f"a{i}"
        role = "user" if i % 2 == 0 else "assistant"
        records.append(rec(uuid, parent, role, f"after {i} " + "z" * TEXT))
        parent = uuid
    return records


def _lines(records: list) -> bytes:
    return b"".join((r if isinstance(r, str) else json.dumps(r)).encode() + b"\n" for r in records)


def test_a_checkpoint_commits_only_with_or_after_the_messages_it_refers_to(db, tmp_path):
    path = write(tmp_path / "cc.jsonl", _lines(claude_code(9, 9)))
    with Commits(db.engine) as commits:
        [result] = Importer(db.engine, max_transaction_bytes=BOUND).import_paths([str(path)])
    assert result.error is None, result.error
    assert (result.messages_added, result.compactions_added) == (18, 1)
    writing = [(c, o) for c, o in commits.seen if c]
    assert len(writing) > 3
    assert all(orphans == 0 for _, orphans in writing)
    whole = stored(db)
    kept = [row for row in whole if row[0] == "boundary"]
    assert [k[-1] for k in kept] == ["a0"]  # kept from the first message after the summary
    # The same store as one transaction gives.
    with db.engine.begin() as conn:
        for table in ("agent_compaction", "agent_message", "agent_session"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
    [one] = Importer(db.engine).import_paths([str(path)])
    assert (one.messages_added, one.compactions_added) == (18, 1)
    assert stored(db) == whole


def test_a_failure_right_after_a_checkpoint_leaves_no_checkpoint_without_its_message(db, tmp_path):
    """The checkpoint waits for its first kept message; the file breaks before it: the prefix
    committed holds the messages before, and no checkpoint pointing at nothing. Fixed, the
    re-run stores the checkpoint with its message."""
    path = write(tmp_path / "cc.jsonl", _lines(claude_code(9, 3, bad_after_boundary=True)))
    importer = Importer(db.engine, max_transaction_bytes=BOUND)
    [failed] = importer.import_paths([str(path)])
    assert failed.error and failed.failure and failed.failure.line == 12, failed.error
    assert failed.messages_added == 8 and counts(db) == (1, 8, 0)
    path.write_bytes(_lines(claude_code(9, 3)))
    [rerun] = importer.import_paths([str(path)])
    assert rerun.error is None
    assert (rerun.messages_added, rerun.compactions_added) == (4, 1)
    assert [row[-1] for row in stored(db) if row[0] == "boundary"] == ["a0"]


def test_a_failed_file_is_a_core_error_that_says_what_was_kept(db, tmp_path):
    """The importer returns a file's failure as data (a core error with its fields), and its
    line is the error's own message: the file, the line, what is wrong, what was committed."""
    path = write(tmp_path / "cc.jsonl", _lines(claude_code(9, 3, bad_after_boundary=True)))
    [failed] = Importer(db.engine, max_transaction_bytes=BOUND).import_paths([str(path)])
    failure = failed.failure
    assert isinstance(failure, FileFailure) and isinstance(failure, CtxtoolError)
    assert (failure.file, failure.where, failure.kept) == (str(path), "line 12", (8, 1))
    assert failed.error == str(failure) == f"{path}:12: {failure.message}"
    assert failure.message.startswith(failure.detail + "; 8 messages of session 1 are stored")
    assert failed.as_dict()["error"] == failed.error


def test_a_branched_tree_commits_only_its_main_line(db, tmp_path):
    """A rewind: the abandoned branch (here six records, more than a transaction holds) comes
    before the records that abandon it. Bounded transactions read the main line first, so no
    committed prefix holds the branch."""
    records = claude_code(8, 0)
    abandoned, parent = [], "b1"
    for i in range(6):  # a first try after b1, given up
        rec = dict(records[2 + i % 2], uuid=f"gone{i}", parentUuid=parent)
        rec["message"] = {**rec["message"], **({"id": f"m-gone{i}"} if i % 2 else {})}
        abandoned.append(rec)
        parent = f"gone{i}"
    tree = records[:2] + abandoned + records[2:]
    path = write(tmp_path / "tree.jsonl", _lines(tree))
    [result] = Importer(db.engine, max_transaction_bytes=BOUND).import_paths([str(path)])
    assert result.error is None, result.error
    assert result.skipped["abandoned_branch:assistant"] == 3
    assert [r[1] for r in stored(db)] == [f"b{i}" for i in range(8)]


def test_a_reimport_that_adds_nothing_leaves_updated_at(db, cli, tmp_path):
    path = write(tmp_path / "s.jsonl", chat(3))
    assert cli("--db", db.url, "import", path).exit_code == 0
    before = db.scalar("SELECT updated_at FROM agent_session")
    time.sleep(0.01)  # updated_at has milliseconds on SQLite
    [again] = Importer(db.engine).import_paths([str(path)])
    assert (again.error, again.messages_added, again.messages_present) == (None, 0, 3)
    assert db.scalar("SELECT updated_at FROM agent_session") == before
    # One that adds a message moves it (the touch of a writing transaction stays).
    path.write_bytes(chat(4))
    [grown] = Importer(db.engine).import_paths([str(path)])
    assert grown.messages_added == 1
    assert str(db.scalar("SELECT updated_at FROM agent_session")) > str(before)


def test_a_reimport_that_only_changes_the_sessions_description_writes_it(db, tmp_path):
    path = write(tmp_path / "s.jsonl", _lines(claude_code(2, 0)))
    [first] = Importer(db.engine).import_paths([str(path)])
    assert first.error is None and first.messages_added == 2
    titled = claude_code(2, 0)[:2] + [{"type": "summary", "summary": "A title", "leafUuid": "b1"}]
    path.write_bytes(_lines(titled))
    [again] = Importer(db.engine).import_paths([str(path)])
    assert again.error is None and again.messages_added == 0
    assert db.scalar("SELECT title FROM agent_session") == "A title"


def test_the_bound_is_a_configuration_key_too(db, cli, tmp_path):
    config = tmp_path / "ctxtool.toml"
    config.write_text(f"[import]\nmax-transaction-bytes = {BOUND}\n")
    bad = write(tmp_path / "s.jsonl", chat(30, bad_at=23))
    done = cli("--db", db.url, "import", bad, env={"CTXTOOL_CONFIG": str(config)})
    assert done.exit_code == 1 and "20 messages of session" in done.stderr, done.stderr
    assert counts(db) == (1, 20, 0)


@pytest.mark.slow
def test_a_bounded_import_killed_mid_file_keeps_a_prefix_and_a_rerun_completes_it(
    mysql_db, cli, tmp_path
):
    """kill -9 of a real `ctxtool import --max-transaction-bytes` on MariaDB once some of its
    transactions committed: the store holds a prefix of the file, and importing it again gives
    exactly what one clean import gives."""
    db = mysql_db
    path = _large_chat(tmp_path / "big.jsonl", 40_000)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctxtool",
            "--db",
            db.url,
            "import",
            "--max-transaction-bytes",
            "1000000",
            str(path),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while (
            not db.scalar("SELECT COUNT(*) FROM agent_message")
            and proc.poll() is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        assert proc.poll() is None, "the import ended before it could be killed"
    finally:
        proc.kill()
        proc.wait()
    kept = [r["content"] for r in db.rows("SELECT content FROM agent_message ORDER BY id")]
    assert 0 < len(kept) < 40_000
    assert kept == [f"message {i} " + "x" * 200 for i in range(len(kept))]  # a prefix
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 1
    rerun = cli("--db", db.url, "import", "--json", "--max-transaction-bytes", 1_000_000, path)
    assert rerun.exit_code == 0, rerun.output
    [row] = json.loads(rerun.stdout)
    assert (row["added"], row["present"]) == (40_000 - len(kept), len(kept))
    whole = stored(db)
    with db.engine.begin() as conn:
        for table in ("agent_compaction", "agent_message", "agent_session"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
    assert cli("--db", db.url, "import", path).exit_code == 0
    assert stored(db) == whole


@pytest.mark.galera
def test_a_session_over_wsrep_max_ws_size_imports_in_bounded_transactions(galera):  # noqa: F811
    """Galera refuses a write set over wsrep_max_ws_size: one transaction for a 2 MB session
    under a 1 MB limit fails (one line, nothing written); with --max-transaction-bytes under
    the limit the same import goes through, and every node holds the whole session."""
    from .test_galera import ctxtool

    with galera.database() as nodes, tempfile.TemporaryDirectory() as scratch:
        done = ctxtool(nodes[1].url, "migrate", "up")
        assert done.returncode == 0, done.stderr
        path = _large_chat(Path(scratch) / "long.jsonl", 8_000)  # ~1.8 MB of rows
        server = sa.create_engine(galera.url(1), isolation_level="AUTOCOMMIT")
        with server.connect() as conn:
            limit = conn.exec_driver_sql("SELECT @@GLOBAL.wsrep_max_ws_size").scalar()
            conn.exec_driver_sql("SET GLOBAL wsrep_max_ws_size = 1048576")
        try:
            whole = ctxtool(nodes[1].url, "import", str(path))
            assert whole.returncode == 1, whole.stdout + whole.stderr
            assert f"Error: {path}: database error: [1105] Maximum writeset size exceeded" in (
                whole.stderr
            )
            assert nodes[1].scalar("SELECT COUNT(*) FROM agent_message") == 0
            bounded = ctxtool(
                nodes[1].url, "import", "--json", "--max-transaction-bytes", "500000", str(path)
            )
            assert bounded.returncode == 0, bounded.stderr
            assert json.loads(bounded.stdout)[0]["added"] == 8_000
        finally:
            with server.connect() as conn:
                conn.exec_driver_sql(f"SET GLOBAL wsrep_max_ws_size = {int(limit)}")
            server.dispose()
        for node in (1, 2, 3):
            assert nodes[node].scalar("SELECT COUNT(*) FROM agent_message") == 8_000


def test_a_bounded_import_that_loses_its_connection_keeps_a_prefix_said_in_its_error(
    mysql_db, tmp_path
):
    """The network to the server is lost mid-file: the transactions committed before stay (a
    prefix), the open one is gone whole, the error says how many messages are stored, and
    importing again completes the session."""
    from ctxtool.db import create_engine

    from .test_import_integrity import _CuttableProxy

    path = _large_chat(tmp_path / "big.jsonl", 50_000)
    url = sa.engine.make_url(mysql_db.url)
    proxy = _CuttableProxy(url.host, url.port or 3306)
    engine = create_engine(url.set(port=proxy.port).render_as_string(hide_password=False))
    results: list = []
    importing = threading.Thread(
        target=lambda: results.extend(
            Importer(engine, max_transaction_bytes=1_000_000).import_paths([str(path)])
        )
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
    kept = [r["content"] for r in mysql_db.rows("SELECT content FROM agent_message ORDER BY id")]
    assert 0 < len(kept) < 50_000
    assert kept == [f"message {i} " + "x" * 200 for i in range(len(kept))]
    assert res.error and "\n" not in res.error, res.error
    # What the import saw committed (a COMMIT whose reply the cut lost is not counted).
    assert 0 < res.messages_added <= len(kept)
    assert f"; {res.messages_added:,} messages of session {res.session_id} are stored" in res.error
    [again] = Importer(mysql_db.engine, max_transaction_bytes=1_000_000).import_paths([str(path)])
    assert again.error is None
    assert (again.messages_added, again.messages_present) == (50_000 - len(kept), len(kept))
    assert counts(mysql_db) == (1, 50_000, 0)


def test_two_bounded_imports_of_one_transcript_at_once_store_it_once(mysql_db, tmp_path):
    """They interleave their transactions on the session's row; one that finds its next
    messages stored by the other (a duplicate key) runs its pass again and finds them present.
    Both succeed, every message is stored once, and what they report adds up."""
    from ctxtool.db import create_engine

    path = _large_chat(tmp_path / "shared.jsonl", 20_000)
    results: list = []

    def importing() -> None:
        engine = create_engine(mysql_db.url)
        importer = Importer(engine, max_transaction_bytes=100_000)
        results.extend(importer.import_paths([str(path)]))
        engine.dispose()

    threads = [threading.Thread(target=importing) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.error for r in results] == [None, None], [r.error for r in results]
    assert sum(r.messages_added for r in results) == 20_000
    assert all(r.messages_added + r.messages_present == 20_000 for r in results)
    assert mysql_db.scalar("SELECT COUNT(DISTINCT source_id) FROM agent_message") == 20_000
    assert counts(mysql_db) == (1, 20_000, 0)


def _chain(names: list[str]) -> bytes:
    """A linear Claude Code session whose messages are ``names`` (uuids), TEXT bytes each."""
    records, parent = [], None
    for i, name in enumerate(names):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"{name} " + "w" * TEXT
        message = (
            {"role": "user", "content": text}
            if role == "user"
            else {"id": f"m-{name}", "role": role, "content": [{"type": "text", "text": text}]}
        )
        records.append(
            {
                "type": role,
                "uuid": name,
                "parentUuid": parent,
                "sessionId": "cc-refused",
                "timestamp": "2026-01-01T00:00:00Z",
                "message": message,
            }
        )
        parent = name
    return _lines(records)


def test_a_file_refused_as_no_continuation_commits_nothing_though_past_the_bound(db, cli, tmp_path):
    """New messages before the stored ones: the file is found not to continue the session
    only when a stored message turns up after them, past several bounds' worth. Nothing of it
    may have been committed by then (the new messages would sit after the stored ones, out of
    the file's order, and every re-run would be refused with them in place)."""
    path = tmp_path / "cc.jsonl"
    write(path, _chain(["A", "B"]))
    assert cli("--db", db.url, "import", path).exit_code == 0
    before = stored(db)
    write(path, _chain([f"X{i}" for i in range(12)] + ["A", "B", "C"]))
    for _ in range(2):  # and again: still refused, still nothing written
        refused = cli("--db", db.url, "import", "--max-transaction-bytes", BOUND, path)
        assert refused.exit_code == 1, refused.output
        assert "is not a continuation" in refused.stderr, refused.stderr
        assert "are stored (committed before the failure)" not in refused.stderr
        assert stored(db) == before


def test_a_stored_line_missing_from_a_numbered_file_commits_nothing_though_past_the_bound(
    db, cli, tmp_path
):
    """The same for a file numbered by line whose stored line is gone (skipped as invalid
    here): found only at the file's end, after many bounds' worth of new lines."""
    path = write(tmp_path / "s.jsonl", chat(10))
    assert cli("--db", db.url, "import", path).exit_code == 0
    before = stored(db)
    write(path, chat(40, bad_at=5))
    args = ("import", "--skip-invalid", "--max-transaction-bytes", BOUND, path)
    refused = cli("--db", db.url, *args)
    assert refused.exit_code == 1, refused.output
    assert "no longer has it" in refused.stderr, refused.stderr
    assert stored(db) == before
