"""How the import sends rows to MySQL: packed for prepared multi-row INSERTs (``db.prepared``),
or, where a connection cannot prepare, as text with the fast literal renderer. Every value comes
back exactly as it was, whatever characters it holds, from a real server, and a text statement
also through the ``mariadb`` client (a statement-based binlog replayed for a point-in-time
recovery goes through it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxtool.core.import_rules import escaped_bytes
from ctxtool.db import create_engine, dialect_of
from ctxtool.db.dialects import STATEMENT_OVERHEAD, _escape_rare, _MySQLBulkInsert, _row_literal
from ctxtool.db.prepared import MAX_ROWS, MIN_ROWS, Execution, PreparedInsert, pack_rows
from ctxtool.importer import Importer
from ctxtool.migrate import Migrator

SPECIAL = ["\\", "'", '"', "\n", "\r", "\0", "\x1a", "\\'", "''", "\\\\'", "é😀", "%s", "`", "\t"]
texts = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    st.lists(st.sampled_from(SPECIAL + ["a", " "]), max_size=12).map("".join),
)
values = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), texts)


_ESCAPES = {"0": "\0", "r": "\r", "Z": "\x1a", "n": "\n"}  # MySQL's, for the ones used


def _unquote(literal: str) -> list:
    """Read a rendered SQL tuple back the way MySQL's lexer does (backslash escapes on)."""
    assert literal[0] == "(" and literal[-1] == ")"
    out, i, body = [], 0, literal[1:-1]
    while i < len(body):
        if body.startswith("NULL", i):
            out.append(None)
            i += 4
        elif body[i] == "'":
            chars, i = [], i + 1
            while body[i] != "'":
                if body[i] == "\\":
                    i += 1
                    chars.append(_ESCAPES.get(body[i], body[i]))
                else:
                    chars.append(body[i])
                i += 1
            out.append("".join(chars))
            i += 1
        else:
            end = body.find(",", i)
            end = len(body) if end < 0 else end
            out.append(int(body[i:end]))
            i = end
        assert i == len(body) or body[i] == ","
        i += 1
    return out


@settings(max_examples=500, deadline=None)
@given(st.lists(values, min_size=1, max_size=9))
def test_a_rendered_row_reads_back_as_its_values(row):
    literal = _row_literal(tuple(row))
    assert _unquote(literal) == row
    assert _unquote(_escape_rare(literal)) == row  # as the statement is sent


def test_newlines_and_double_quotes_go_as_they_are():
    literal = _row_literal(("a'b\\c", 'x\ny"', "\0\r\x1a", None, 7))
    assert literal == "('a\\'b\\\\c','x\ny\"','\0\r\x1a',NULL,7)"
    assert _escape_rare(literal) == "('a\\'b\\\\c','x\ny\"','\\0\\r\\Z',NULL,7)"


def test_other_values_are_left_to_the_driver():
    assert _row_literal((1, 2.5)) is None
    assert _row_literal((b"bytes",)) is None


def _inserts(conn, table: str, columns: list[str], prepared: bool):
    inserts = _MySQLBulkInsert(
        conn,
        sa.table(table),
        columns,
        dialect_of(conn).max_statement_bytes(conn),
        prepared=prepared,
    )
    assert (inserts.prepared is not None) == prepared
    return inserts


def _tiled(rows: list, n: int = MIN_ROWS) -> list:
    """The rows repeated to at least n (a prepared execution holds MIN_ROWS or more)."""
    return (rows * -(-n // len(rows)))[: max(n, len(rows))]


def _prepared_shape(executions) -> None:
    """Prepared executions hold a power of two of rows, MIN_ROWS to MAX_ROWS."""
    for e in executions:
        if e.body is not None:
            assert MIN_ROWS <= e.count <= MAX_ROWS and e.count & (e.count - 1) == 0, e.count


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "text"])
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(st.tuples(texts, texts), min_size=1, max_size=20))
def test_a_real_server_stores_every_character_as_given(mysql_empty_db, prepared, rows):
    """Prepared: every text as its UTF-8 bytes. Text: raw newlines and double quotes, escaped
    NUL, CR and Ctrl-Z. Either way the server stores each text byte for byte in a TEXT column;
    in the JSON column a text arrives as a JSON string (its control characters escaped by the
    serialiser, as the import's orjson does)."""
    rows = _tiled(rows)
    with mysql_empty_db.engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE IF NOT EXISTS lit (k INT PRIMARY KEY, t MEDIUMTEXT, "
            "j JSON CHECK (JSON_VALID(j))) CHARACTER SET utf8mb4"
        )
        conn.exec_driver_sql("DELETE FROM lit")
        inserts = _inserts(conn, "lit", ["k", "t", "j"], prepared)
        payload = inserts.payload(
            [
                (k, text, json.dumps(other, ensure_ascii=False))
                for k, (text, other) in enumerate(rows)
            ]
        )
        if prepared:
            assert payload[0].body is not None and payload[0].count == MIN_ROWS
        else:
            assert all(type(p) is str for p in payload)
        inserts.send(payload)
        inserts.close()
        back = conn.execute(sa.text("SELECT t, JSON_UNQUOTE(j) FROM lit ORDER BY k")).all()
    assert [tuple(r) for r in back] == rows


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(-(2**63), 2**63 - 1),
            st.none() | texts,
            st.none() | st.sampled_from(["", "x", "é" * 300, "y" * 70_000]),
        ),
        min_size=1,
        max_size=40,
    ),
    times=st.integers(1, 30),
    max_bytes=st.integers(1, 400_000),
)
def test_rows_split_across_executions_keep_their_nulls(mysql_empty_db, rows, times, max_bytes):
    """However the rows are cut into executions (by bytes here, prepared and text mixed), each
    row's NULL bits, lengths and values land on that row, in order: NULL stays NULL, an empty
    text stays empty, integers exact."""
    rows = [(k, *r) for k, r in enumerate(rows * times)]  # a key, the integer and the texts
    with mysql_empty_db.engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE IF NOT EXISTS nul (k INT PRIMARY KEY, n BIGINT, "
            "a MEDIUMTEXT, b MEDIUMTEXT) CHARACTER SET utf8mb4"
        )
        conn.exec_driver_sql("DELETE FROM nul")
        inserts = _inserts(conn, "nul", ["k", "n", "a", "b"], True)
        executions = pack_rows(rows, 4, max_bytes)
        assert [r for e in executions for r in e.rows] == rows
        _prepared_shape(executions)
        assert all(len(e.body) <= max_bytes + 16 for e in executions if e.body is not None)
        inserts.send(executions)
        inserts.close()
        back = [tuple(r) for r in conn.exec_driver_sql("SELECT k, n, a, b FROM nul ORDER BY k")]
    assert back == rows


def _decode(body: bytes, count: int, columns: int) -> list[tuple]:
    """A COM_STMT_EXECUTE body (without its statement id) read back the way the server does:
    flags, iteration count, NULL bitmap, bound-types flag, types, then each non-NULL value as a
    length-encoded string."""
    params = count * columns
    assert body[:5] == b"\x00\x01\x00\x00\x00"
    bitmap = body[5 : 5 + (params + 7) // 8]
    at = 5 + len(bitmap)
    assert body[at] == 1 and body[at + 1 : at + 1 + 2 * params] == b"\xfe\x00" * params
    at += 1 + 2 * params
    values = []
    for i in range(params):
        if bitmap[i >> 3] >> (i & 7) & 1:
            values.append(None)
            continue
        first = body[at]
        size, at = (
            (first, at + 1)
            if first < 251
            else (
                int.from_bytes(
                    body[at + 1 : at + 1 + {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]], "little"
                ),
                at + 1 + {0xFC: 2, 0xFD: 3, 0xFE: 8}[first],
            )
        )
        values.append(body[at : at + size].decode("utf-8"))
        at += size
    assert at == len(body)
    return [tuple(values[r * columns : (r + 1) * columns]) for r in range(count)]


@settings(max_examples=400, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.none() | st.integers(-(2**70), 2**70),
            st.none() | texts,
            st.none() | st.sampled_from(["", "é" * 125, "x" * 251, "y" * 65536]),
        ),
        min_size=1,
        max_size=12,
    ),
    times=st.integers(1, 200),
    max_bytes=st.integers(1, 300_000),
)
def test_every_execution_decodes_to_its_rows(rows, times, max_bytes):
    """Without a server: each prepared execution's body, decoded, is exactly its rows (integers
    as their decimal text), the executions and text parts together are all rows in order."""
    rows = rows * times
    executions = pack_rows(rows, 3, max_bytes)
    assert [r for e in executions for r in e.rows] == rows
    _prepared_shape(executions)
    for e in executions:
        if e.body is not None:
            assert _decode(e.body, e.count, 3) == [
                tuple(None if v is None else str(v) for v in r) for r in e.rows
            ]
            assert len(e.body) <= max_bytes + 16


def test_a_row_left_pending_after_rows_sent_as_text_keeps_its_nulls():
    """Ten rows and a large one exceed the bytes of an execution: the ten go as text, the large
    one stays pending and goes first in the next prepared execution, with its own NULL bits
    (not those of the rows before it)."""
    rows = (
        [(str(i), "a" * 300, "b") for i in range(10)]
        + [(None, "x" * 7000, None)]
        + [("", "", "")] * 63
    )
    executions = pack_rows(rows, 3, 10_000)
    assert [(e.count, e.body is not None) for e in executions] == [(10, False), (64, True)]
    assert _decode(executions[1].body, 64, 3) == rows[10:]


def test_executions_hold_powers_of_two_and_the_rest_goes_as_text():
    """At most five row counts an import (five statements on the server): a batch of 1000 short
    rows is 512 + 256 + 128 + 64 prepared and 40 as text; 1024 rows one execution."""

    def shape(n, size=10):
        return [
            (e.count, e.body is not None)
            for e in pack_rows([(i, "x" * size) for i in range(n)], 2, 1_000_000)
        ]

    assert shape(1000) == [(512, True), (256, True), (128, True), (64, True), (40, False)]
    assert shape(1024) == [(1024, True)]
    assert shape(2100) == [(1024, True), (1024, True), (52, False)]
    assert shape(63) == [(63, False)]
    # 20 KB rows: 49 fit in 1 MB, fewer than a prepared execution holds.
    assert shape(200, 20_000) == [(49, False)] * 4 + [(4, False)]
    # 4 KB rows: 244 fit in 1 MB, sent 128 at a time.
    assert shape(1000, 4000) == [(128, True)] * 7 + [(64, True), (40, False)]


def test_a_statement_holds_at_most_the_protocols_placeholders():
    """65535 placeholders at most: with 100 columns a prepared execution holds 512 rows."""
    executions = pack_rows([(i,) * 100 for i in range(1100)], 100, 10**9)
    assert [(e.count, e.body is not None) for e in executions] == [
        (512, True),
        (512, True),
        (64, True),
        (12, False),
    ]
    assert pack_rows([(1,) * 2000], 2000, 10**9) is None  # too many columns: text


def test_other_values_are_rendered_as_text(mysql_empty_db):
    """A value the packer does not send (a float here) makes the batch go as text."""
    assert pack_rows([(1, 2.5)], 2, 10**6) is None
    with mysql_empty_db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE fl (k INT PRIMARY KEY, f DOUBLE)")
        inserts = _inserts(conn, "fl", ["k", "f"], True)
        payload = inserts.payload([(1, 2.5), (2, None)])
        assert all(type(p) is str for p in payload)
        inserts.send(payload)
        assert conn.exec_driver_sql("SELECT SUM(f) FROM fl").scalar() == 2.5


def _prepared_statements(engine) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").first()[1])


def _chat(path, texts):
    path.write_text("".join(json.dumps({"role": "user", "content": t}) + "\n" for t in texts))
    return path


@pytest.mark.alone_on_the_server
def test_an_import_closes_its_prepared_statements(mysql_db, tmp_path):
    """A pooled connection outlives the import, and the server counts prepared statements
    against one global limit: none is left behind, after an import that worked or failed."""
    before = _prepared_statements(mysql_db.engine)
    good = _chat(tmp_path / "good.jsonl", [f"message {i}" for i in range(2500)])
    [res] = Importer(mysql_db.engine).import_paths([str(good)])
    assert res.error is None and res.messages_added == 2500
    assert _prepared_statements(mysql_db.engine) == before
    # A row the server refuses (a trigger's SIGNAL) fails inside an execution, after others.
    with mysql_db.engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TRIGGER refuse BEFORE INSERT ON agent_message FOR EACH ROW "
            "BEGIN IF NEW.content = 'boom' THEN SIGNAL SQLSTATE '45000' "
            "SET MESSAGE_TEXT = 'refused by a trigger'; END IF; END"
        )
    bad = _chat(tmp_path / "bad.jsonl", [f"other {i}" for i in range(2500)] + ["boom"])
    [res] = Importer(mysql_db.engine).import_paths([str(bad)])
    assert "refused by a trigger" in res.error and "\n" not in res.error
    assert mysql_db.rows("SELECT COUNT(*) AS n FROM agent_message")[0]["n"] == 2500  # good's only
    assert _prepared_statements(mysql_db.engine) == before


@pytest.mark.alone_on_the_server
def test_a_server_that_cannot_prepare_gets_text(mysql_db, tmp_path):
    """At its max_prepared_stmt_count the server refuses to prepare: the import goes on with
    text INSERTs, every message stored once and exactly."""
    texts = [f"it's \\ message {i}\0\r\n" for i in range(1500)]
    path = _chat(tmp_path / "chat.jsonl", texts)
    with mysql_db.engine.connect() as conn:
        limit = conn.exec_driver_sql("SELECT @@GLOBAL.max_prepared_stmt_count").scalar()
        conn.exec_driver_sql("SET GLOBAL max_prepared_stmt_count = 0")
    try:
        [res] = Importer(mysql_db.engine).import_paths([str(path)])
    finally:
        with mysql_db.engine.connect() as conn:
            conn.exec_driver_sql(f"SET GLOBAL max_prepared_stmt_count = {int(limit)}")
    assert res.error is None and res.messages_added == 1500
    assert [
        r["content"] for r in mysql_db.rows("SELECT content FROM agent_message ORDER BY id")
    ] == texts


def test_a_rendered_statement_replays_through_the_mariadb_client(mysql_empty_db, tmp_path):
    """A statement-based binlog (MariaDB's default MIXED format logs a plain INSERT as text) is
    replayed through the command-line client for a point-in-time recovery. The client refuses
    a raw NUL and turns a raw CR LF into LF: the renderer escapes both."""
    url = sa.engine.make_url(mysql_empty_db.url)
    texts = ["nul\0byte", "line1\r\nline2", "ctrl-z\x1a", "quote ' and \\ and \"", "é😀\n"]
    with mysql_empty_db.engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE lit (k INT PRIMARY KEY, t MEDIUMTEXT) CHARACTER SET utf8mb4"
        )
        inserts = _inserts(conn, "lit", ["k", "t"], prepared=False)
        [statement] = inserts.payload(list(enumerate(texts)))
    client = shutil.which("mariadb") or shutil.which("mysql")
    assert client, "the mariadb client is needed (scripts/test.sh installs mariadb-client)"
    script = tmp_path / "replay.sql"
    script.write_bytes(statement.encode("utf-8") + b";\n")
    with script.open("rb") as stdin:
        done = subprocess.run(
            [
                client,
                f"--host={url.host}",
                f"--port={url.port or 3306}",
                f"--user={url.username}",
                "--default-character-set=utf8mb4",
                url.database,
            ],
            stdin=stdin,
            capture_output=True,
            timeout=60,
            env={**os.environ, "MYSQL_PWD": url.password or ""},
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    back = mysql_empty_db.rows("SELECT t FROM lit ORDER BY k")
    assert [r["t"] for r in back] == texts


def test_no_backslash_escapes_is_honoured(mysql_empty_db, tmp_path):
    """Under NO_BACKSLASH_ESCAPES a backslash is an ordinary character: the renderer's escaping
    would store every backslash twice, so such connections take the driver's quoting."""
    texts = ["back\\slash", "it's", "both \\' at once", "nul\0 cr\r\n"]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps({"role": "user", "content": t}) + "\n" for t in texts))
    engine = create_engine(
        sa.engine.make_url(mysql_empty_db.url)
        .update_query_dict({"sql_mode": "NO_BACKSLASH_ESCAPES"})
        .render_as_string(hide_password=False)
    )
    try:
        Migrator(engine).up()
        with engine.connect() as conn:
            assert (
                "NO_BACKSLASH_ESCAPES" in conn.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar()
            )
        [res] = Importer(engine).import_paths([str(path)])
        assert res.error is None, res.error
        with engine.connect() as conn:
            back = [
                r[0] for r in conn.exec_driver_sql("SELECT content FROM agent_message ORDER BY id")
            ]
    finally:
        engine.dispose()
    assert back == texts


@pytest.mark.parametrize("path", ["prepared", "text", "driver-quoted"])
def test_a_fixed_column_is_written_into_every_row(mysql_empty_db, path):
    """The session id, the same in every row of an import, goes in the statement's text once:
    every row stores it, by each way MySQL rows are sent (a prepared execution, rendered text,
    the driver's quoting under NO_BACKSLASH_ESCAPES), with the rows' own values after it."""
    rows = _tiled([(f"t{k}'\\", None if k % 3 else f"n{k}") for k in range(5)], MIN_ROWS + 7)
    engine = mysql_empty_db.engine
    if path == "driver-quoted":
        engine = create_engine(
            sa.engine.make_url(mysql_empty_db.url)
            .update_query_dict({"sql_mode": "NO_BACKSLASH_ESCAPES"})
            .render_as_string(hide_password=False)
        )
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "CREATE TABLE fx (id INT AUTO_INCREMENT PRIMARY KEY, "
                "s BIGINT NOT NULL, t TEXT, n TEXT) CHARACTER SET utf8mb4"
            )
            inserts = _MySQLBulkInsert(
                conn,
                sa.table("fx"),
                ["t", "n"],
                dialect_of(conn).max_statement_bytes(conn),
                prepared=path == "prepared",
                fixed={"s": 2**63 - 1},
            )
            payload = inserts.payload(rows)
            assert (type(payload[0]) is Execution) == (path == "prepared")
            inserts.send(payload)
            inserts.close()
            back = conn.exec_driver_sql("SELECT s, t, n FROM fx ORDER BY id").all()
    finally:
        if path == "driver-quoted":
            engine.dispose()
    assert [tuple(r) for r in back] == [(2**63 - 1, *row) for row in rows]


def test_a_fixed_column_on_sqlite(sqlite_db):
    """SQLite's inserts take the fixed column the same way; it must be an integer (the value
    goes into SQL text)."""
    with sqlite_db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE fx (s INTEGER NOT NULL, t TEXT)")
        inserts = dialect_of(conn).message_inserts(conn, sa.table("fx"), ["t"], {"s": 42})
        inserts.send(inserts.payload([("a",), (None,), ("it's",)]))
        assert conn.exec_driver_sql("SELECT s, t FROM fx ORDER BY rowid").all() == [
            (42, "a"),
            (42, None),
            (42, "it's"),
        ]
        with pytest.raises(ValueError):
            dialect_of(conn).message_inserts(conn, sa.table("fx"), ["t"], {"s": "1); DROP"})


@settings(max_examples=300, deadline=None)
@given(texts)
def test_the_size_rule_counts_what_the_renderer_sends(text):
    """``reconcile.RENDERED_ESCAPES`` and the renderer escape the same characters: the size
    rule's bytes for a text are the bytes of its quoted literal in a sent statement."""
    literal = _escape_rare(_row_literal((text,)))  # "('...')"
    assert escaped_bytes(text) == len(literal.encode("utf-8")) - 4


def test_a_statement_of_several_rows_stays_within_a_small_packet(mysql_empty_db):
    """With a 1 MiB max_allowed_packet two rows of 450k two-byte characters (each one fits)
    must not share a text statement of 1.8 MB (text rows are grouped by characters at 4 bytes
    each), and packed rows are grouped by their bytes within the packet."""
    with mysql_empty_db.engine.begin() as conn:
        conn.info["ctxtool_max_allowed_packet"] = 1024 * 1024  # as read from the server
        statements = _inserts(conn, "lit", ["k", "t"], False).payload(
            [(1, "é" * 450_000), (2, "é" * 450_000), (3, "x")]
        )
        assert len(statements) >= 2
        assert all(len(s.encode("utf-8")) <= 1024 * 1024 for s in statements)
        executions = _inserts(conn, "lit", ["k", "t"], True).payload(
            [(k, "é" * 200) for k in range(1024)]
        )
        assert [(e.count, e.body is not None) for e in executions] == [(256, True)] * 4
        # A fifth of the packet: the server's text of it in a binlog fits the packet too.
        assert all(len(e.body) <= (1024 * 1024 - STATEMENT_OVERHEAD) // 5 for e in executions)


def test_a_prepare_error_other_than_too_many_statements_is_raised(mysql_empty_db):
    """Only a server that cannot prepare (CANNOT_PREPARE) gets text: any other error of the
    prepare (a missing table here) is the import's error, not a quiet change of path."""
    with mysql_empty_db.engine.connect() as conn:
        inserts = _inserts(conn, "missing", ["k"], True)
        with pytest.raises(sa.exc.DBAPIError, match="1146"):
            inserts.send(inserts.payload([(k,) for k in range(MIN_ROWS)]))
        assert inserts.prepared is not None


def test_the_capabilities_the_protocol_code_assumes(mysql_empty_db):
    """``db.prepared`` reads replies laid out for the capabilities PyMySQL negotiates today; a
    driver upgrade that asks for one of these would send every import as text (see
    ``PreparedInsert._prepare``): this says so before a benchmark does."""
    from ctxtool.db.prepared import (
        CLIENT_DEPRECATE_EOF,
        CLIENT_OPTIONAL_RESULTSET_METADATA,
        CLIENT_QUERY_ATTRIBUTES,
    )

    with mysql_empty_db.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        negotiated = raw.server_capabilities & raw.client_flag
    assert not negotiated & (
        CLIENT_QUERY_ATTRIBUTES | CLIENT_OPTIONAL_RESULTSET_METADATA | CLIENT_DEPRECATE_EOF
    )


def test_a_driver_without_the_packet_layer_gets_text(mysql_empty_db):
    """The PyMySQL internals db.prepared writes on are all there; a connection without them
    (a driver release that renamed one) sends text INSERTs instead of failing."""
    with mysql_empty_db.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert PreparedInsert.usable(raw)

        class Renamed:  # the same connection, one internal gone
            def __getattr__(self, name):
                if name == "_read_packet":
                    raise AttributeError(name)
                return getattr(raw, name)

        assert not PreparedInsert.usable(Renamed())


def test_a_connection_without_eof_packets_still_prepares(mysql_empty_db):
    """With CLIENT_DEPRECATE_EOF (which PyMySQL may ask for one day) the prepare reply has no
    EOF packets: reading one more would wait for ever."""
    import pymysql

    from ctxtool.db.prepared import CLIENT_DEPRECATE_EOF

    url = sa.engine.make_url(mysql_empty_db.url)
    with mysql_empty_db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE eof (k INT PRIMARY KEY, t TEXT) CHARACTER SET utf8mb4")
    raw = pymysql.connect(
        host=url.host,
        port=url.port or 3306,
        user=url.username,
        password=url.password or "",
        database=url.database,
        charset="utf8mb4",
        client_flag=CLIENT_DEPRECATE_EOF,
        read_timeout=20,
    )
    try:
        assert raw.server_capabilities & raw.client_flag & CLIENT_DEPRECATE_EOF
        inserts = PreparedInsert(raw, "INSERT INTO eof (k, t) VALUES ", "(?,?)")
        rows = [(k, f"row {k}") for k in range(MIN_ROWS)]
        [execution] = pack_rows(rows, 2, 10**6)
        inserts.execute(execution)
        inserts.close()
        raw.commit()
    finally:
        raw.close()
    assert [
        (r["k"], r["t"]) for r in mysql_empty_db.rows("SELECT k, t FROM eof ORDER BY k")
    ] == rows


def _global_status(engine, name: str) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql(f"SHOW GLOBAL STATUS LIKE '{name}'").first()[1])


@pytest.mark.alone_on_the_server
def test_an_import_of_varied_messages_prepares_few_statements(mysql_db, tmp_path):
    """Messages of every size cut batches at every row count; executions of a power of two of
    rows keep the server's statements to a handful an import (each about 4 MB on MariaDB)."""
    import random

    rng = random.Random(7)
    texts = ["w" * rng.randint(100, 5000) for _ in range(6000)]
    path = _chat(tmp_path / "varied.jsonl", texts)
    # Server-wide counters: the suite runs alone on its server (no other client prepares),
    # and this test alone in the suite (the mark).
    before, held = (
        _global_status(mysql_db.engine, "Com_stmt_prepare"),
        _prepared_statements(mysql_db.engine),
    )
    [res] = Importer(mysql_db.engine).import_paths([str(path)])
    assert res.error is None and res.messages_added == 6000
    prepares = _global_status(mysql_db.engine, "Com_stmt_prepare") - before
    assert 1 <= prepares <= 5
    assert _prepared_statements(mysql_db.engine) == held
    back = mysql_db.rows("SELECT content FROM agent_message ORDER BY id")
    assert [r["content"] for r in back] == texts


def test_a_connection_lost_mid_import_is_reported_as_lost(mysql_db, tmp_path):
    """The import's connection killed while an execution runs: the error says the connection
    was lost (not the failed rollback after it), nothing is stored, the next import works."""
    import threading
    import time

    with mysql_db.engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TRIGGER slow BEFORE INSERT ON agent_message FOR EACH ROW "
            "BEGIN IF NEW.content = 'slow' THEN DO SLEEP(10); END IF; END"
        )
    path = _chat(tmp_path / "slow.jsonl", ["slow"] + [f"m {i}" for i in range(2000)])

    database = sa.engine.make_url(mysql_db.url).database

    def kill_the_import():
        """The import's connection only: the one of this test's database in the trigger's
        sleep (never another client's)."""
        deadline = time.monotonic() + 20
        with mysql_db.engine.connect() as conn:
            while time.monotonic() < deadline:
                sleeping = conn.execute(
                    sa.text(
                        "SELECT id FROM information_schema.PROCESSLIST WHERE STATE = 'User sleep' "
                        "AND DB = :db AND id <> CONNECTION_ID()"
                    ),
                    {"db": database},
                ).first()
                if sleeping:
                    conn.exec_driver_sql(f"KILL CONNECTION {int(sleeping[0])}")
                    return
                time.sleep(0.05)

    killer = threading.Thread(target=kill_the_import)
    killer.start()
    started = time.monotonic()
    [res] = Importer(mysql_db.engine).import_paths([str(path)])
    killer.join()
    assert time.monotonic() - started < 10  # failed when killed, not after the sleep
    assert res.error and ("2013" in res.error or "Lost connection" in res.error), res.error
    assert "[0]" not in res.error and "\n" not in res.error
    assert mysql_db.rows("SELECT COUNT(*) AS n FROM agent_message")[0]["n"] == 0
    with mysql_db.engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER slow")
    [res] = Importer(mysql_db.engine).import_paths([str(path)])
    assert res.error is None and res.messages_added == 2001
