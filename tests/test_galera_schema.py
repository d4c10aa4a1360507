"""The schema on distributed engines. Ready for TiDB: its ``/*T![auto_id_cache]
AUTO_ID_CACHE=1 */`` table option reaches the server, is a comment to MariaDB (the same tables
either way), leaves databases migrated before it as they were, and `migrate status` on TiDB
names a table without it. On Galera (marked ``galera``): 0009's virtual INVISIBLE column and
its index, added through one node, are on every node, and a runtime's bare INSERT through
another node still works."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ctxtool.db.dialects import dialect_of, is_tidb, lacks_auto_id_cache
from ctxtool.migrate import Migration, Migrator, load_migrations, split_statements
from ctxtool.migrate.states import with_note

from .galera_cluster import NODES, galera  # noqa: F401 - the session fixture
from .waiting import wait_until

OPTION = "/*T![auto_id_cache] AUTO_ID_CACHE=1 */"


def _seed() -> Migration:
    return load_migrations("mysql")[0]


def test_executable_comments_stay_in_their_statement_and_plain_ones_go():
    sql = f"CREATE TABLE a (x INT) /* a note; */ {OPTION};\n/*!40101 SET x = 1 */;\n/* only */;"
    assert split_statements(sql) == [f"CREATE TABLE a (x INT)  {OPTION}", "/*!40101 SET x = 1 */"]


def test_the_tables_with_ids_carry_the_option_in_the_statements_sent():
    creates = {
        re.search(r"CREATE TABLE IF NOT EXISTS (\w+)", s).group(1): s for s in _seed().statements()
    }
    assert OPTION in creates["agent_message"] and OPTION in creates["agent_compaction"]
    assert OPTION not in creates["agent_session"]  # no AUTO_INCREMENT there


def test_the_option_is_a_no_op_on_mariadb(mysql_empty_db):
    """The seed's CREATE TABLE with the option and without it make the very same table."""
    statement = next(s for s in _seed().statements() if "agent_message" in s)
    assert OPTION in statement
    with mysql_empty_db.engine.begin() as conn:
        conn.exec_driver_sql(statement.replace("agent_message", "with_option"))
        conn.exec_driver_sql(statement.replace(OPTION, "").replace("agent_message", "without"))
        shown = [
            conn.exec_driver_sql(f"SHOW CREATE TABLE {t}").first()[1].replace(t, "t")
            for t in ("with_option", "without")
        ]
    assert shown[0] == shown[1]
    assert "AUTO_ID_CACHE" not in shown[0] and "AUTO_INCREMENT" in shown[0]


def test_a_database_migrated_before_the_option_stays_applied(mysql_empty_db):
    """0001 gained a comment MariaDB ignores: its recorded checksum still counts as this file."""
    files = load_migrations("mysql")
    before = Migration(files[0].version, files[0].name, files[0].sql.replace(f" {OPTION}", ""))
    assert before.checksum != files[0].checksum
    Migrator(mysql_empty_db.engine, [before, *files[1:]]).up()
    migrator = Migrator(mysql_empty_db.engine)
    assert [s.state for s in migrator.status()] == ["applied"] * len(files)
    assert migrator.up() == []  # nothing refused, nothing to run
    assert migrator.repair() == []  # no checksum to accept


def test_a_changed_file_is_still_refused():
    files = load_migrations("mysql")
    changed = Migration(files[0].version, files[0].name, files[0].sql + "\n-- edited\n")
    assert not files[0].recorded_as(changed.checksum)


def test_tidb_is_told_apart_by_its_version_and_a_table_without_the_option_found():
    assert is_tidb("8.0.11-TiDB-v7.5.0") and is_tidb("5.7.25-TiDB-v6.5.1")
    assert not is_tidb("10.11.19-MariaDB-0+deb12u1") and not is_tidb("8.0.36")
    cached = (
        "CREATE TABLE `agent_message` (\n  `id` bigint NOT NULL AUTO_INCREMENT,\n"
        "  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci AUTO_INCREMENT=30001"
    )
    assert lacks_auto_id_cache(cached)
    assert not lacks_auto_id_cache(cached + " /*T![auto_id_cache] AUTO_ID_CACHE=1 */")
    assert lacks_auto_id_cache(cached + " /*T![auto_id_cache] AUTO_ID_CACHE=100 */")
    assert not lacks_auto_id_cache("CREATE TABLE `t` (`k` int NOT NULL, PRIMARY KEY (`k`))")


def test_status_on_mariadb_has_no_tidb_note_and_the_note_goes_to_one_version(mysql_db, db):
    assert dialect_of(db.engine).tables_without_ordered_ids(db.engine.connect(), ["x"]) == []
    states = Migrator(mysql_db.engine).status()
    assert all(s.detail is None for s in states)
    noted = with_note(states, "0001", "TiDB: agent_message lacks AUTO_ID_CACHE=1")
    assert [s.detail for s in noted][:2] == ["TiDB: agent_message lacks AUTO_ID_CACHE=1", None]


def _0009_on(db) -> tuple[str | None, list[str]]:
    """(tool_call_count's EXTRA in information_schema, idx_message_session_id_tokens's columns
    in order) as the node behind ``db`` has them."""
    with db.engine.connect() as conn:
        extra = conn.exec_driver_sql(
            "SELECT EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = 'agent_message' AND COLUMN_NAME = 'tool_call_count'"
        ).scalar()
        index = conn.exec_driver_sql(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = "
            "DATABASE() AND TABLE_NAME = 'agent_message' AND INDEX_NAME = "
            "'idx_message_session_id_tokens' ORDER BY SEQ_IN_INDEX"
        )
        return extra, [r[0] for r in index]


@pytest.mark.galera
def test_0009_through_one_node_is_on_every_node_and_a_bare_insert_works_through_another(
    galera,  # noqa: F811 - the fixture imported above, by name
):
    """0009 adds a VIRTUAL INVISIBLE column and rebuilds an index over it; on Galera the DDL
    runs in total order isolation on every node. Migrated up to 0008 through node 1, with a
    message stored, then `migrate up` through node 2: node 3 has the same column and index,
    and a runtime's `INSERT INTO agent_message VALUES (...)` (no column list) through node 3
    stores a row whose computed count node 1 reads."""
    index = ["session_id", "id", "token_count", "token_encoding", "role"]
    index += ["tool_call_count", "tool_call_id"]
    with galera.database() as dbs:
        Migrator(dbs[1].engine).up(to="0008")
        with dbs[1].engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO agent_session (session_id) VALUES (1)")
            conn.exec_driver_sql(
                "INSERT INTO agent_message (session_id, role, tool_calls) "
                """VALUES (1, 'assistant', '[{"id": "a"}, {"id": "b"}]')"""
            )
        assert _0009_on(dbs[1]) == (None, index[:4])
        done = subprocess.run(
            [sys.executable, "-m", "ctxtool", "--db", dbs[2].url, "migrate", "up"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        for node in NODES:
            extra, columns = wait_until(
                lambda n=node: (found := _0009_on(dbs[n]))[0] and found,
                f"0009's column on node {node}",
            )
            assert "VIRTUAL" in extra.upper() and "INVISIBLE" in extra.upper(), (node, extra)
            assert columns == index, node
        given = {"session_id": 1, "role": "tool", "content": "ok", "tool_calls": '[{"id": "c"}]'}
        with dbs[3].engine.begin() as conn:
            columns = list(conn.exec_driver_sql("SELECT * FROM agent_message LIMIT 0").keys())
            assert "tool_call_count" not in columns
            conn.exec_driver_sql(
                "INSERT INTO agent_message VALUES ("
                + ", ".join("%s" if c in given else "DEFAULT" for c in columns)
                + ")",
                tuple(given[c] for c in columns if c in given),
            )
        counts = wait_until(
            lambda: (
                len(
                    found := dbs[1].rows(
                        "SELECT tool_call_count AS n FROM agent_message ORDER BY id"
                    )
                )
                == 2
                and found
            ),
            "node 3's insert on node 1",
        )
        assert [r["n"] for r in counts] == [2, 1]
