"""The schema is ready for TiDB: its ``/*T![auto_id_cache] AUTO_ID_CACHE=1 */`` table option
reaches the server, is a comment to MariaDB (the same tables either way), leaves databases
migrated before it as they were, and `migrate status` on TiDB names a table without it."""

from __future__ import annotations

import re

from ctxtool.db.dialects import dialect_of, is_tidb, lacks_auto_id_cache
from ctxtool.migrate import Migration, Migrator, load_migrations, split_statements
from ctxtool.migrate.states import with_note

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
