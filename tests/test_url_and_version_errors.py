"""What a user hit (issue #31 item 6), through the real entry point: a MySQL URL without a
database name, and `migrate up --to 3` for 0003."""

from __future__ import annotations

import json

import pytest

from ctxtool.core.errors import CtxtoolError
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


def test_a_sqlite_url_with_two_slashes_is_one_line_with_the_form_to_use(cli):
    result = cli("--db", "sqlite://u:s3cr3tPw@ha.db", "sessions", "list")
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "\\n" not in result.output and "s3cr3tPw" not in result.output
    assert "three slashes" in result.output and "(sqlite:///ha.db)" in result.output


def test_a_bare_path_is_a_sqlite_file(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for path in ("./agents.db", "plain.db", str(tmp_path / "abs.sqlite")):
        missing = cli("--db", path, "sessions", "list")
        assert missing.exit_code == 3 and "does not exist" in missing.output, missing.output
        created = cli("--db", path, "migrate", "up")
        assert created.exit_code == 0, created.output
        assert cli("sessions", "list", "--db", path).exit_code == 0
    assert {p.name for p in tmp_path.iterdir()} >= {"agents.db", "plain.db", "abs.sqlite"}
    wrong = cli("--db", "root:pw@h/x", "sessions", "list")  # not a path: a URL typed wrong
    assert wrong.exit_code == 1 and "no scheme" in wrong.output


def test_database_url_is_read_after_ctxtool_database_url(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"CTXTOOL_DATABASE_URL": None, "DATABASE_URL": "generic.db"}
    assert cli("migrate", "up", env=env).exit_code == 0
    assert (tmp_path / "generic.db").is_file() and not (tmp_path / "ctxtool.db").exists()
    shown = cli("config", "--json", env=env)
    url = next(r for r in json.loads(shown.output) if r["setting"] == "database.url")
    assert url["source"] == "environment DATABASE_URL"
    both = {"CTXTOOL_DATABASE_URL": f"sqlite:///{tmp_path / 'own.db'}", "DATABASE_URL": "x.db"}
    assert cli("migrate", "up", env=both).exit_code == 0
    assert (tmp_path / "own.db").is_file() and not (tmp_path / "x.db").exists()


def test_another_programs_database_url_is_named_as_such(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"CTXTOOL_DATABASE_URL": None, "DATABASE_URL": "postgresql://app:s3cr3tPw@pg/app"}
    result = cli("sessions", "list", env=env)
    assert result.exit_code == 1 and "s3cr3tPw" not in result.output
    assert result.output.strip().endswith(
        "(the URL is $DATABASE_URL; --db or $CTXTOOL_DATABASE_URL chooses ctxtool's own)"
    )
    assert cli("--db", "x.db", "migrate", "up", env=env).exit_code == 0  # --db wins


def test_a_tilde_in_a_sqlite_path_is_the_home_directory_for_connecting_too(cli, tmp_path):
    """`~` was expanded when the file was named but not when it was opened."""
    env = {"HOME": str(tmp_path), "CTXTOOL_DATABASE_URL": None, "DATABASE_URL": None}
    for db, name in (("~/x.db", "x.db"), ("sqlite:///~/y.db", "y.db")):
        created = cli("--db", db, "migrate", "up", env=env)
        assert created.exit_code == 0, created.output
        assert (tmp_path / name).is_file()
        status = cli("--db", db, "migrate", "status", env=env)
        assert status.exit_code == 0 and str(tmp_path) in status.output, status.output


def test_a_path_with_a_colon_is_a_sqlite_file_when_it_starts_as_a_path(cli, tmp_path, monkeypatch):
    """`notes:2024.db` cannot be told from `user:password` and stays refused (masked), but the
    message says how to give it; `./notes:2024.db` and an absolute path are files."""
    monkeypatch.chdir(tmp_path)
    for db in ("./notes:2024.db", str(tmp_path / "C:x.db")):
        created = cli("--db", db, "migrate", "up")
        assert created.exit_code == 0, created.output
    assert {p.name for p in tmp_path.iterdir()} >= {"notes:2024.db", "C:x.db"}
    refused = cli("--db", "notes:2024.db", "migrate", "up")
    assert refused.exit_code == 1 and "./notes:" in refused.output, refused.output
    assert "2024" not in refused.output  # it may be user:password


def test_an_empty_db_is_refused_and_a_directory_is_named_as_one(cli, tmp_path, monkeypatch):
    """`--db ''` meant ./ctxtool.db in silence; a directory failed as an unopenable file."""
    monkeypatch.chdir(tmp_path)
    env = {"CTXTOOL_DATABASE_URL": None, "DATABASE_URL": None, "CTXTOOL_CONFIG": None}
    for args in (["--db", "", "migrate", "up"], ["migrate", "up", "--db", ""]):
        empty = cli(*args, env=env)
        assert empty.exit_code == 2 and "--db is empty" in empty.output, empty.output
    assert not (tmp_path / "ctxtool.db").exists()
    # The help needs no database: it is printed, and the empty --db fails nothing.
    for args in (["--db", "", "compact", "--help"], ["sessions", "list", "--db", "", "--help"]):
        helped = cli(*args, env=env)
        assert helped.exit_code == 0 and helped.output.startswith("Usage: "), helped.output
    # "--help" as an option's value is no help: the command runs, and the empty --db is
    # refused, never the default or the environment's database used instead.
    (tmp_path / "other.db").touch()
    other = {**env, "CTXTOOL_DATABASE_URL": f"sqlite:///{tmp_path / 'other.db'}"}
    for args in (
        ["sessions", "list", "--db", "", "--user", "--help"],
        ["--db", "", "sessions", "list", "--user", "--help"],
    ):
        valued = cli(*args, env=other)
        assert valued.exit_code == 2 and "--db is empty" in valued.output, valued.output
    (tmp_path / "dir").mkdir()
    for db in ("dir/", "dir", "sqlite:///dir"):
        directory = cli("--db", db, "migrate", "up", env=env)
        assert directory.exit_code == 1, directory.output
        assert f"{tmp_path / 'dir'} is a directory" in directory.output, directory.output


def test_a_path_with_a_colon_is_printed_whole(cli, tmp_path, monkeypatch):
    """A path holds no password: `./notes:2024.db` is not masked as `./notes:***`."""
    monkeypatch.chdir(tmp_path)
    missing = cli("--db", "./notes:2024.db", "sessions", "list")
    assert missing.exit_code == 3, missing.output
    assert "--db ./notes:2024.db migrate up" in missing.output, missing.output
