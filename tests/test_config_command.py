"""`ctxtool config` shows every table in force under the keys a file uses, and the one file
read; a misspelt key is one line naming the file, its line and the nearest valid key."""

from __future__ import annotations

import json

import pytest

FILE = """\
[database]
url = "agents.db"

[validate]
errors-only = true

[sessions.list]
limit = 5

[compact]
summarizer = "extractive"
reserve_tokens = 2000
"""


def _rows(result) -> dict[str, dict]:
    assert result.exit_code == 0, result.output
    return {r["setting"]: r for r in json.loads(result.output)}


def test_config_shows_every_table_in_force_under_the_keys_a_file_uses(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ctxtool.toml").write_text(FILE)
    env = {"CTXTOOL_CONFIG": None, "CTXTOOL_DATABASE_URL": None, "DATABASE_URL": None}
    rows = _rows(cli("config", "--json", env=env))
    assert rows["config_file"] == {
        "setting": "config_file",
        "value": str(tmp_path / "ctxtool.toml"),
        "source": "./ctxtool.toml",
    }
    assert rows["database.url"]["value"] == "agents.db"
    in_file = {k: r["value"] for k, r in rows.items() if r["source"] == "config file"}
    assert in_file == {
        "database.url": "agents.db",
        "validate.errors-only": True,
        "sessions.list.limit": 5,
        "compact.summarizer": "extractive",
        "compact.reserve-tokens": 2000,
    }
    assert "compact.kind" not in rows and "compact.reserve_tokens" not in rows
    assert rows["compact.keep-recent-tokens"]["source"] == "default"
    assert rows["validate.rule"]["source"] == "default"  # the table's other options too
    assert "validate.json" not in rows  # an output flag left unset is no setting

    other = tmp_path / "other.toml"
    other.write_text("[compact]\nworkers = 3\n")
    by_env = _rows(cli("config", "--json", env={**env, "CTXTOOL_CONFIG": str(other)}))
    assert by_env["config_file"]["source"] == "environment CTXTOOL_CONFIG"
    assert by_env["compact.workers"]["value"] == 3 and "validate.errors-only" not in by_env
    by_option = _rows(cli("--config", str(other), "config", "--json", env=env))
    assert by_option["config_file"] == {
        "setting": "config_file",
        "value": str(other),
        "source": "option --config",
    }
    table = cli("config", env={**env, "COLUMNS": "80"})
    assert table.exit_code == 0 and max(map(len, table.output.splitlines())) <= 80


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[database]\nurl = "x.db"\n\n[compact]\nsumarizer = "openai"\n',
            "5: compact.sumarizer: no such option of `ctxtool compact`; "
            "did you mean compact.summarizer?",
        ),
        (
            "[compact]\nkeep_recent_tokns = 5\n",
            "2: compact.keep_recent_tokns: no such option of `ctxtool compact`; "
            "did you mean compact.keep-recent-tokens?",
        ),
        (
            "[compact]\nworkers = 2\n\n[sessions.lst]\nlimit = 5\n",
            "4: sessions.lst: no such command or option of `ctxtool sessions`; "
            "did you mean sessions.list?",
        ),
        (
            "[valdate]\nerrors-only = true\n",
            "1: valdate: no such command or option; did you mean validate?",
        ),
        (
            "[compact]\nzzzq = 1\n",
            "2: compact.zzzq: no such option of `ctxtool compact` (see `ctxtool compact --help`)",
        ),
        ("[compact]\nworkers = [1]\n", "2: compact.workers (--workers): an array is not"),
        ('\n[database]\nulr = "x.db"\n', "3: database.ulr: no such setting (only url)"),
    ],
)
def test_a_misspelt_key_names_the_file_its_line_and_the_nearest_key(cli, tmp_path, text, message):
    path = tmp_path / "typo.toml"
    path.write_text(text)
    result = cli("--config", path, "sessions", "list")
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: {path}:{message}"), result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.parametrize("content", [None, "[compactt]\nworkers = 2\n", "not = [toml\n"])
def test_help_prints_whatever_the_config_file_holds(cli, tmp_path, content):
    """--help must not depend on the file: a missing file, a misspelt table or broken TOML
    still print the help; the command itself still fails on the file."""
    path = tmp_path / "ctxtool.toml"
    if content is not None:
        path.write_text(content)
    env = {"CTXTOOL_CONFIG": str(path), "CTXTOOL_DATABASE_URL": None, "DATABASE_URL": None}
    for args in (
        ["compact", "--help"],
        ["migrate", "up", "-h"],
        ["--help"],
        ["sessions", "--help"],
    ):
        result = cli(*args, env=env)
        assert result.exit_code == 0, (args, result.output)
        assert "Usage: " in result.output and "Error" not in result.output
    failed = cli("compact", "--all", env=env)
    assert failed.exit_code == 2 and str(path) in failed.output


def test_a_config_path_that_is_no_regular_file_is_named_as_such(cli):
    env = {"CTXTOOL_CONFIG": "/dev/null", "CTXTOOL_DATABASE_URL": None, "DATABASE_URL": None}
    result = cli("config", env=env)
    assert result.exit_code == 2, result.output
    assert "configuration file /dev/null is not a regular file" in result.output, result.output


def test_compacts_window_holds_for_the_commands_that_measure_against_a_window(
    cli, tmp_path, monkeypatch, sqlite_db
):
    """[compact] context-window / reserve-tokens are what validate's over_window and `sessions
    list --over-window` measure against, unless their own table says otherwise; `config` says
    where the value came from."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ctxtool.toml").write_text(
        f'[database]\nurl = "{sqlite_db.url}"\n\n'
        "[compact]\ncontext-window = 4096\nreserve-tokens = 512\n\n"
        "[sessions.list]\ncontext-window = 8192\n"
    )
    env = {"CTXTOOL_CONFIG": None, "CTXTOOL_DATABASE_URL": None, "DATABASE_URL": None}
    checked = cli("validate", env=env)
    assert checked.exit_code == 0, checked.output
    assert "(window: 4096 tokens)" in checked.output
    rows = _rows(cli("config", "--json", env=env))
    assert rows["validate.context-window"] == {
        "setting": "validate.context-window",
        "value": 4096,
        "source": "config file [compact]",
    }
    assert rows["validate.reserve-tokens"]["value"] == 512
    # The command's own table wins; what it leaves unset still comes from [compact].
    assert rows["sessions.list.context-window"]["value"] == 8192
    assert rows["sessions.list.context-window"]["source"] == "config file"
    assert rows["sessions.list.reserve-tokens"]["source"] == "config file [compact]"
    # The command line wins over both.
    assert "(window: 2048 tokens)" in cli("validate", "--context-window", "2048", env=env).output
