"""What a user hit (issue #31 item 6), through the real entry point: a MySQL URL without a
database name, and `migrate up --to 3` for 0003."""

from __future__ import annotations

import pytest

from ctxtool.errors import CtxtoolError
from ctxtool.migrate import Migrator


@pytest.mark.parametrize("url", ["mysql://root@127.0.0.1:3306", "mysql+pymysql://root@h/"])
def test_a_mysql_url_without_a_database_says_so(cli, url):
    result = cli("--db", url, "sessions", "list")
    assert result.exit_code == 1
    assert result.output.strip().endswith("e.g. mysql://root@127.0.0.1:3306/agents")
    assert "names no database" in result.output and "internal error" not in result.output


def test_migrate_to_a_version_by_its_number(empty_db, cli):
    result = cli("--db", empty_db.url, "migrate", "up", "--to", "3")
    assert result.exit_code == 0, result.output
    assert "0003_binary_source_ids.sql" in result.output and "0004" not in result.output
    unknown = cli("--db", empty_db.url, "migrate", "up", "--to", "42")
    assert unknown.exit_code == 2
    assert "--to 42: no such migration version (there are 0001, 0002" in unknown.output
    with pytest.raises(CtxtoolError, match="baseline 99"):
        Migrator(empty_db.engine).baseline("99")
    assert [m.version for m in Migrator(empty_db.engine).up(to="4")] == ["0004"]
