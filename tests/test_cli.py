"""The command line as a whole: every command's failure paths are one line with no password,
--db anywhere, the configuration file, completion, colour, closed pipes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from ctxtool.cli import main
from ctxtool.db import create_engine, mask_url, scrub

from .builders import add_session, coding_session, run_on_a_terminal
from .conftest import TRANSCRIPTS, Database

SECRET = "s3cr3tPw"

# Every command, with arguments that make it reach the database.
COMMANDS = [
    ["migrate", "status"],
    ["migrate", "up"],
    ["migrate", "baseline"],
    ["migrate", "repair"],
    ["tokens", "count", "--all"],
    ["tokens", "report"],
    ["tokens", "count", "1"],
    ["compact", "--all"],
    ["compact", "1"],
    ["compact", "1", "--dry-run"],
    ["context", "show", "1"],
    ["context", "checkpoints", "1"],
    ["context", "diff", "1"],
    ["context", "export", "1", "--format", "markdown"],
    ["sessions", "list"],
    ["sessions", "delete", "1", "--yes"],
    ["validate"],
    ["validate", "1"],
]

BAD_URLS = [
    f"mysql+pymysql://root:{SECRET}@127.0.0.1:3306/ctxtool_no_such_db",  # unknown database
    f"mysql+pymysql://root:{SECRET}@127.0.0.1:1/x",  # server down
    f"root:{SECRET}@127.0.0.1/x",  # no scheme
    f"mysql+pymysql//root:{SECRET}@h/x",  # missing colon
    f"mysql+pymysql://root@127.0.0.1/x?password={SECRET}",  # password as a query
    f"mysql+pymysql://root:ab@{SECRET}@127.0.0.1/x",  # unescaped @
    f"mysql+pymysql://root:{SECRET}@127.0.0.1:abc/x",  # port not a number
    f"mysql://root:{SECRET}?x@127.0.0.1:abc/x",  # ... and a '?' in the password
    f"mysql://root:{SECRET}",  # no host at all
    f"root:{SECRET}",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?charset=bogus",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?charset=sjis",  # breaks escaping
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?charset=utf8mb4&charset=gbk",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?connect_timeout=zz",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?collation=latin1_swedish_ci",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?collation=utf8mb4_bin%3BDROP%20TABLE%20t",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?collation=utf8mb4_bin&collation=utf8mb4_general_ci",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?foo=bar",
    # Options PyMySQL takes and then fails on (NotImplementedError, ValueError, OverflowError,
    # struct.error, FileNotFoundError, ssl.SSLError) before any database error.
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?compress=yes",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?connect_timeout=0",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?read_timeout=99999999999999999999",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?write_timeout=0",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?client_flag=99999999999999999999",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?ssl_ca=/no/such/ca.pem",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1/x?ssl_ca={__file__}",  # not a certificate
    f"mysql+mysqldb://root:{SECRET}@127.0.0.1/x",  # driver not installed
    f"postgresql://root:{SECRET}@127.0.0.1/x",
    "sqlite:///no/such/directory/x.db",
]


def _run(args, env=None, input=None):
    """In-process through the real entry point, exceptions caught, so a traceback would show up
    as ``result.exception`` other than SystemExit."""
    runner = CliRunner()
    env = {
        "OPENAI_API_KEY": None,
        "OPENAI_BASE_URL": None,
        "CTXTOOL_DATABASE_URL": None,
        "CTXTOOL_DEBUG": None,
        **(env or {}),
    }
    return runner.invoke(main, args, env=env, input=input, catch_exceptions=True)


def _assert_one_clean_line(result, args):
    assert isinstance(result.exception, SystemExit) or result.exception is None, (
        args,
        repr(result.exception),
        result.output,
    )
    assert "Traceback" not in result.output, (args, result.output)
    assert SECRET not in result.output, (args, result.output)
    assert "internal error" not in result.output, (args, result.output)


@pytest.mark.parametrize("url", BAD_URLS)
def test_every_command_with_a_bad_url_says_one_line_without_the_password(url, tmp_path):
    os.chdir(tmp_path)  # no ./ctxtool.toml or ./ctxtool.db of the caller's
    for args in COMMANDS:
        for placement in (["--db", url, *args], [*args, "--db", url]):
            result = _run(placement)
            _assert_one_clean_line(result, placement)
            assert result.exit_code in (1, 3), (placement, result.output)
            errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
            assert len(errors) == 1, (placement, result.output)


def test_url_options_that_would_break_a_guarantee_are_refused(tmp_path):
    """Found by review: ``?autocommit=1`` was taken, and a failed or killed import then left
    the batches before the failure behind; SQLite's unknown options were ignored with a raw
    SAWarning (``mode=ro`` left the file writable), a bad timeout was a bare ValueError."""
    os.chdir(tmp_path)
    db_file = tmp_path / "x.db"
    cases = [
        ("mysql://root@127.0.0.1/x?autocommit=1", "option 'autocommit' is not supported"),
        (f"sqlite:///{db_file}?mode=ro", "unknown option 'mode' for SQLite"),
        (f"sqlite:///{db_file}?timeout=abc", "timeout must be a number of seconds, not 'abc'"),
        (f"sqlite:///{db_file}?cached_statements=2.5", "cached_statements must be a whole number"),
    ]
    for url, said in cases:
        result = _run(["--db", url, "migrate", "up"])
        _assert_one_clean_line(result, url)
        assert result.exit_code == 1 and said in result.output, (url, result.output)
        assert "SAWarning" not in result.output
        assert not db_file.exists()
    result = _run(["--db", f"sqlite:///{db_file}?timeout=2.5", "migrate", "up"])
    assert result.exit_code == 0 and db_file.exists(), result.output


# Numbers past a signed 64-bit integer: SQLite's driver overflowed on them, MariaDB refused the
# LIMIT as a syntax error (1064), a lease as an overflow (1916); nan and inf as seconds.
HUGE = str(2**64 + 1)
BAD_NUMBERS = [
    ["sessions", "list", "--limit", HUGE],
    ["sessions", "list", "--width", HUGE],
    ["sessions", "list", "--over-window", "--context-window", HUGE],
    ["sessions", "list", "--over-window", "--reserve-tokens", HUGE],
    ["compact", "--all", "--limit", HUGE, "--dry-run"],
    ["compact", "--all", "--workers", HUGE],
    ["compact", "1", "--timeout", "nan"],
    ["compact", "1", "--timeout", "1e400"],
    ["compact", "1", "--timeout", "inf"],
    ["compact", "1", "--timeout", "0"],
    ["compact", "1", "--force", "--lease-seconds", HUGE],
    ["compact", "1", "--force", "--lease-seconds", "99999999999"],
    ["compact", "1", "--min-carry-over", "nan"],
    ["compact", "1", "--retries", HUGE],
    ["compact", "1", "--context-window", HUGE],
    ["compact", "1", "--reserve-tokens", HUGE],
    ["compact", "1", "--keep-recent-tokens", HUGE],
    ["compact", "1", "--max-summary-tokens", HUGE],
    ["compact", "1", "--summary-input-tokens", HUGE],
    ["tokens", "count", "--all", "--batch-size", HUGE],
    ["validate", "--context-window", HUGE],
    ["validate", "--reserve-tokens", HUGE],
    ["context", "show", "1", "--at", HUGE],
    ["context", "show", "1", "--width", HUGE],
    ["context", "export", "1", "--at", HUGE],
    ["context", "diff", "1", HUGE],
    ["context", "diff", "1", "1", HUGE],
]


def test_every_command_on_an_unknown_session_or_a_missing_key(db, tmp_path):
    add_session(
        db,
        1,
        [{"role": "user", "content": "hello " * 50}, {"role": "assistant", "content": "hi " * 50}]
        * 20,
    )
    for unknown in ("999999", str(2**63), HUGE):  # past BIGINT: no id, an unknown source id
        for args in COMMANDS:
            named = [a if a != "1" else unknown for a in args]
            result = _run(["--db", db.url, *named])
            _assert_one_clean_line(result, named)
            if unknown in named:
                assert result.exit_code == 1 and unknown in result.output, (named, result.output)
    for args in BAD_NUMBERS:
        result = _run(["--db", db.url, *args])
        _assert_one_clean_line(result, args)
        bad = next(a for a in args if a in (HUGE, "nan", "1e400", "inf", "0", "99999999999"))
        assert result.exit_code == 2 and bad in result.output, (args, result.output)
    # The largest lease the options take is one both servers' date arithmetic holds.
    result = _run(["--db", db.url, "compact", "1", "--force", "--lease-seconds", "315360000"])
    _assert_one_clean_line(result, "--lease-seconds 315360000")
    for args in (
        ["compact", "1", "--force", "--summarizer", "openai"],
        ["compact", "--all", "--force", "--summarizer", "openai"],
    ):
        result = _run(["--db", db.url, *args])
        _assert_one_clean_line(result, args)
        assert result.exit_code != 0 and "OPENAI_API_KEY" in result.output, result.output
    pi_file = next((TRANSCRIPTS / "pi").glob("*.jsonl"))
    result = _run(["--db", db.url, "import", str(pi_file), "--format", "claude-code"])
    _assert_one_clean_line(result, "import --format claude-code")
    assert result.exit_code != 0


def test_masking_handles_urls_that_do_not_parse():
    assert SECRET not in mask_url(f"root:{SECRET}@host/x")
    assert SECRET not in mask_url(f"mysql+pymysql://root:ab@{SECRET}@h/x")
    assert SECRET not in mask_url(f"mysql://u@h/x?ssl_ca=/a&password={SECRET}")
    for tail in ("?x", "/x"):  # parses, with a '?' or a '/' in the password
        odd = f"mysql://u:{SECRET}{tail}@h/db"
        assert SECRET not in mask_url(odd) and mask_url(odd) == "mysql://u:***@h/db"
        assert SECRET not in scrub(f"driver said {SECRET}{tail}", odd)
    assert mask_url("sqlite:///a/b@c.db") == "sqlite:///a/b@c.db"
    # Text that does not parse: the password may hold '?' or '@', and the host may be missing.
    for odd, shown in (
        (f"mysql://root:{SECRET}?x@127.0.0.1:abc/x", "mysql://root:***@127.0.0.1:abc/x"),
        (f"mysql://root:{SECRET}?x@a@h:abc/x", "mysql://root:***@h:abc/x"),
        (f"mysql://root:{SECRET}", "mysql://root:***"),
        (f"root:{SECRET}", "root:***"),
        (f"root:{SECRET}/x", "root:***/x"),
    ):
        assert mask_url(odd) == shown, odd
        assert SECRET not in scrub(f"driver said {SECRET}?x", odd), odd
    # ... but a port stays readable, and so does a URL with no password.
    assert mask_url("mysql://h:3306") == "mysql://h:3306"
    assert (
        mask_url("mysql://root@h/x?init_command=SET%20@a=1")
        == "mysql://root@h/x?init_command=SET%20@a=1"
    )
    # A short password is scrubbed as a word, not out of every word that contains it.
    assert (
        scrub("Access denied for user 'pw' (using pw)", "mysql://pw:pw@h/x")
        == "Access denied for user '***' (using ***)"
    )
    assert scrub("unknown error at position 3", "mysql://u:p@h/x") == "unknown error at position 3"


def test_a_bad_port_or_tls_file_is_named_in_the_error(tmp_path):
    os.chdir(tmp_path)
    not_pem = tmp_path / "notes.txt"
    not_pem.write_text("just text\n")
    base = f"mysql+pymysql://root:{SECRET}@127.0.0.1"
    for url, needle in (
        (f"{base}:99999/x", "port 99999 is out of range (1-65535)"),
        (f"{base}:0/x", "port 0 is out of range"),
        (f"{base}/x?ssl_ca={not_pem}", f"TLS ssl_ca {not_pem}:"),
        (f"{base}/x?ssl_cert={not_pem}", f"TLS ssl_cert {not_pem} (no PEM certificate in it)"),
        (
            f"{base}/x?ssl_cert={not_pem}&ssl_key={not_pem}",
            f"TLS ssl_cert {not_pem} (no PEM certificate in it)",
        ),
    ):
        result = _run(["--db", url, "migrate", "status"])
        assert result.exit_code != 0 and needle in result.output, (url, result.output)
        assert len(result.output.strip().splitlines()) == 1, result.output
        _assert_one_clean_line(result, url)


def test_mysql_scheme_means_pymysql_and_db_works_after_the_command(db, cli):
    if db.kind == "mysql":
        url = db.url.replace("mysql+pymysql://", "mysql://")
        result = cli("migrate", "status", "--db", url)
        assert result.exit_code == 0, result.output
    result = cli("--db", "sqlite:///ignored.db", "migrate", "status", "--db", db.url)
    assert result.exit_code == 0, result.output  # the later --db wins
    assert not os.path.exists("ignored.db")


def test_read_commands_never_create_a_sqlite_file(tmp_path, cli):
    path = tmp_path / "typo.db"
    for args in (
        ["sessions", "list"],
        ["validate"],
        ["migrate", "status"],
        ["tokens", "report"],
        ["migrate", "up", "--dry-run"],
    ):
        result = cli("--db", f"sqlite:///{path}", *args)
        assert str(path) in result.output or args[-1] == "--dry-run", result.output
        assert not path.exists(), args
    result = cli("--db", f"sqlite:///{path}", "migrate", "status")
    assert result.exit_code == 3 and "does not exist yet" in result.output


def test_config_file_precedence_and_the_config_command(db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ctxtool.toml").write_text(
        f'[database]\nurl = "{db.url}"\n\n[compact]\nreserve-tokens = 1234\nsummarizer = "extractive"\n'
    )
    result = _run(["config", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["setting"]: r for r in json.loads(result.output)}
    assert rows["config_file"]["value"] == str(tmp_path / "ctxtool.toml")
    assert rows["database.url"]["source"] == "config file"
    assert rows["compact.reserve-tokens"] == {
        "setting": "compact.reserve-tokens",
        "value": 1234,
        "source": "config file",
    }
    assert rows["compact.keep-recent-tokens"]["source"] == "default"
    # The URL in the file is the one used ...
    assert _run(["migrate", "status"]).exit_code == 0
    # ... the environment beats the file, and an option beats both.
    env = {"CTXTOOL_DATABASE_URL": f"sqlite:///{tmp_path / 'env.db'}"}
    rows = {r["setting"]: r for r in json.loads(_run(["config", "--json"], env=env).output)}
    assert rows["database.url"]["source"] == "environment CTXTOOL_DATABASE_URL"
    rows = {
        r["setting"]: r
        for r in json.loads(_run(["--db", "sqlite:///opt.db", "config", "--json"], env=env).output)
    }
    assert rows["database.url"] == {
        "setting": "database.url",
        "value": "sqlite:///opt.db",
        "source": "option",
    }
    # The file's compaction settings reach the command: a dry run shows its threshold.
    add_session(db, 1, [{"role": "user", "content": "x"}], model="gpt-4o")
    plan = json.loads(_run(["compact", "1", "--dry-run", "--json"]).output)
    assert plan["threshold"] == 128_000 - 1234
    secret = tmp_path / "secret.toml"
    secret.write_text(f'[database]\nurl = "mysql+pymysql://u:{SECRET}@db.internal/agents"\n')
    shown = _run(["--config", str(secret), "config"]).output
    assert SECRET not in shown and "u:***@db.internal" in shown
    # A URL that does not parse, and the LLM endpoint's URL, are masked from a file too.
    secret.write_text(
        f'[database]\nurl = "mysql://root:{SECRET}?x@db.internal:abc/agents"\n\n'
        f'[compact]\nbase-url = "http://llm:{SECRET}@llm.internal/v1"\n'
    )
    result = _run(["--config", str(secret), "config", "--json"])
    assert result.exit_code == 0 and SECRET not in result.output, result.output
    rows = {r["setting"]: r for r in json.loads(result.output)}
    assert rows["compact.base-url"] == {
        "setting": "compact.base-url",
        "source": "config file",
        "value": "http://llm:***@llm.internal/v1",
    }
    assert rows["database.url"]["value"] == "mysql://root:***@db.internal:abc/agents"
    bad = tmp_path / "bad.toml"
    for text, needle in (
        ("[compact\n", "invalid TOML"),
        ("compact = 5\n", "[compact] must be a table"),
        ("[compact]\nreserve-tokns = 5\n", "compact.reserve-tokns: no such option"),
        ('[compact]\nworkers = "many"\n', "--workers"),
        # TOML's own types: inf, arrays, floats, dates, numbers for flags.
        ("[compact]\nworkers = 1e400\n", "compact.workers (--workers): inf"),
        ("[compact]\nworkers = [1]\n", "compact.workers (--workers): an array"),
        ("[compact]\nworkers = 2.5\n", "2.5 is not a whole number"),
        ("[compact]\nworkers = true\n", "True is not a whole number"),
        ("[compact]\ntimeout = nan\n", "nan is not a finite number"),
        ("[compact]\ntimeout = 1e400\n", "inf is not a finite number"),
        ("[compact]\nmin-carry-over = {a = 1}\n", "a table"),
        ("[compact]\nreserve-tokens = 2026-01-01\n", "a date or time"),
        (
            '[sessions.list]\nsince = "0001-01-01T00:00:00+01:00"\n',
            "outside the years a time in UTC can have",
        ),
        ("[compact]\nlease-seconds = 99999999999999999999\n", "99999999999999999999"),
        ("[compact]\nforce = 5\n", "compact.force (--force): 5 is not true or false"),
        ('[compact]\nmodel = ["a"]\n', "compact.model (--model): an array"),
        ("[sessions.list]\nlimit = 1e400\n", "sessions.list.limit (--limit): inf"),
        ("[tokens.count]\nbatch-size = [1]\n", "tokens.count.batch-size"),
        ('[import]\nskip-invalid = "yes"\n', "'yes' is not true or false"),
        ('database = "sqlite:///x.db"\n', "database must be a table"),
        ('[database]\nulr = "sqlite:///x.db"\n', "database.ulr: no such setting"),
    ):
        bad.write_text(text)
        result = _run(["--config", str(bad), "compact", "--all", "--dry-run"])
        assert result.exit_code == 2 and needle in result.output, (text, result.output)
        _assert_one_clean_line(result, text)
    # A directory or a missing path given as --config: the message says which.
    for path, needle in (
        (tmp_path, "is a directory, not a file"),
        (tmp_path / "none.toml", "does not exist"),
    ):
        result = _run(["--config", str(path), "compact", "--all", "--dry-run"])
        assert result.exit_code != 0 and f"{path} {needle}" in result.output, result.output
        _assert_one_clean_line(result, str(path))


def test_completion_scripts_and_whole_descriptions_in_help():
    for shell, needle in (
        ("bash", "complete -o nosort -F"),
        ("zsh", "#compdef ctxtool"),
        ("fish", "complete --no-files --command ctxtool"),
    ):
        result = _run(["completion", shell])
        assert result.exit_code == 0 and needle in result.output, (shell, result.output)
    help_text = _run(["--help"]).output
    assert "restored contexts are valid for an API" in help_text  # not cut at 45 characters
    for args in (["compact", "--help"], ["tokens", "count", "--help"]):
        text = _run(args).output
        assert "--db URL" in text


def test_colour_on_a_terminal_only(db, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    args = ["--db", db.url, "migrate", "status"]
    shown = run_on_a_terminal(args, env={**env, "TERM": "xterm"})[1]
    assert "\x1b[32mapplied" in shown, shown
    assert "\x1b[" not in run_on_a_terminal(args, env={**env, "TERM": "xterm", "NO_COLOR": "1"})[1]
    piped = subprocess.run(
        [sys.executable, "-m", "ctxtool", *args], capture_output=True, text=True, env=env
    )
    assert piped.returncode == 0 and "applied" in piped.stdout and "\x1b[" not in piped.stdout


def test_a_closed_pipe_is_not_an_error(db):
    add_session(db, 1, [{"role": "user", "content": f"line {i}\n" * 50} for i in range(400)])
    reader = subprocess.Popen(
        ["head", "-c", "100"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxtool", "--db", db.url, "context", "show", "1", "--full"],
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
    )
    reader.stdin.close()
    _, err = proc.communicate(timeout=60)
    reader.wait(timeout=60)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and b"Error" not in err


def _failing_run(args: list[str], code: int | None) -> subprocess.CompletedProcess:
    """``ctxtool ARGS`` unpiped: it fails, with ``code`` where one is given."""
    plain = subprocess.run(
        [sys.executable, "-m", "ctxtool", *args], capture_output=True, text=True, timeout=60
    )
    assert plain.returncode == (code if code is not None else plain.returncode) != 0, (
        args,
        plain.returncode,
        plain.stderr,
    )
    return plain


def _closed_pipe_run(args: list[str], code: int | None, stderr_kept: bool) -> None:
    """``ctxtool ARGS`` with its reader gone before the first line exits as it does unpiped.
    ``stderr_kept``: first with stdout alone closed (the error lines still written); then, for
    every case, with stderr going into the closed pipe too (`2>&1 | head`)."""
    plain = _failing_run(args, code)
    if stderr_kept:
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before the first line: every write fails
        try:
            piped = subprocess.run(
                [sys.executable, "-m", "ctxtool", *args],
                stdout=write_end,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
            )
        finally:
            os.close(write_end)
        assert piped.returncode == plain.returncode, (args, piped.returncode, piped.stderr)
        errors = [line for line in plain.stderr.splitlines() if line.startswith("Error")]
        assert errors and all(e in piped.stderr for e in errors), (args, piped.stderr)
        assert "Traceback" not in piped.stderr
    # The error line cannot be written anywhere, the exit code still says what happened (it was
    # 0: the failed write of the error line ended it).
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        both = subprocess.run(
            [sys.executable, "-m", "ctxtool", *args],
            stdout=write_end,
            stderr=write_end,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert both.returncode == plain.returncode, (args, both.returncode)


def test_a_closed_pipe_keeps_the_exit_code_and_the_error(sqlite_db, tmp_path):
    """Found by review: a reader gone before a failing command wrote its output (``migrate
    status | head`` under ``pipefail``, a deploy gate) made it exit 0 and hid its error line.
    The output is dropped; the exit code and stderr are what they are unpiped. The cases share
    nothing they write (the import has a store of its own) and run at once."""
    empty = f"sqlite:///{tmp_path / 'not-migrated.db'}"
    imported = Database("sqlite", f"sqlite:///{tmp_path / 'imported.db'}").migrate()
    imported.engine.dispose()
    transcript = tmp_path / "good.jsonl"
    transcript.write_text('{"role": "user", "content": "hello"}\n')
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "bad.jsonl").write_text('{"role": "user", "content": "x"}\n{bad\n')
    add_session(sqlite_db, 1, [{"role": "user", "content": "hello"}])
    with sqlite_db.engine.begin() as conn:  # a checkpoint keeping a message of no session
        conn.exec_driver_sql(
            "INSERT INTO agent_compaction (session_id, summary, "
            "first_kept_message_id) VALUES (1, 'old', 999999)"
        )
    files = [str(tmp_path / name) for name in ("empty.jsonl", "bad.jsonl", "good.jsonl")]
    cases = [
        (["--db", empty, "migrate", "status"], 3, True),
        (["--db", sqlite_db.url, "validate"], 1, True),
        (["--db", imported.url, "import", *files], None, True),
        (["--db", sqlite_db.url, "sessions", "delete", "1"], 2, False),
        (["--db", sqlite_db.url, "context", "show", "--no-such-option"], 2, False),
    ]
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        for done in [pool.submit(_closed_pipe_run, *case) for case in cases]:
            done.result()


def test_output_that_cannot_be_written_is_one_line(sqlite_db):
    """Standard output on a full disk (``> /dev/full``: ENOSPC) was 'internal error: OSError
    ... this is a bug', and a traceback for --help and --version, which write while parsing."""
    add_session(sqlite_db, 1, [{"role": "user", "content": f"line {i}\n" * 5} for i in range(40)])
    for args in (
        ["sessions", "list"],
        ["context", "show", "1"],
        ["context", "show", "1", "--full"],
        ["context", "export", "1", "--format", "jsonl"],
        ["config"],
        ["--help"],
        ["--version"],
    ):
        with open("/dev/full", "w") as full:
            proc = subprocess.run(
                [sys.executable, "-m", "ctxtool", "--db", sqlite_db.url, *args],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
            )
        assert proc.returncode == 1, (args, proc.stderr)
        assert (
            proc.stderr == "Error: cannot write the output to /dev/full: No space left on device\n"
        ), (args, proc.stderr)


def test_stdout_closed_and_toml_dates_and_times_before_the_first_utc_time(sqlite_db, tmp_path):
    """Found by review: with stdout closed (``>&-``) even --version ended in a traceback; a
    TOML date-time for `since` was refused though --since takes it; a stored or given time that
    falls before year 1 once taken to UTC was 'internal error: OverflowError'."""
    # With and without COLUMNS: without it the width is asked of the closed stdout (this
    # test failed as 'NoneType' object has no attribute 'isatty' where COLUMNS was unset).
    bare = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    for env in (bare, {**bare, "COLUMNS": "80"}):
        for args in (["--version"], ["--db", sqlite_db.url, "sessions", "list"]):
            proc = subprocess.run(
                ["sh", "-c", 'exec "$0" -m ctxtool "$@" >&-', sys.executable, *args],
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
                env=env,
            )
            assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stderr)
            assert "internal error" not in proc.stderr and "bug in ctxtool" not in proc.stderr
    add_session(sqlite_db, 1, [{"role": "user", "content": "hello"}], model="gpt-4o")
    config = tmp_path / "dates.toml"
    for value in ("2026-01-01T00:00:00Z", "2026-01-01", "2026-01-01T00:00:00"):
        config.write_text(f"[sessions.list]\nsince = {value}\n")
        result = _run(
            ["--config", str(config), "--db", sqlite_db.url, "sessions", "list", "--json"]
        )
        assert result.exit_code == 0, (value, result.output)
    with sqlite_db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE agent_message SET created_at = '0001-01-01T00:00:00+01:00'"))
        conn.execute(sa.text("UPDATE agent_session SET created_at = '0001-01-01T00:00:00+01:00'"))
    for args in (
        ["sessions", "list"],
        ["context", "show", "1"],
        ["validate"],
        ["tokens", "report"],
        ["compact", "--all", "--dry-run"],
    ):
        result = _run(["--db", sqlite_db.url, *args])
        assert result.exit_code in (0, 1) and "internal error" not in result.output, (
            args,
            result.output,
        )
    result = _run(
        ["--db", sqlite_db.url, "sessions", "list", "--since", "9999-12-31T23:59:59-01:00"]
    )
    assert result.exit_code == 2 and "outside the years a time in UTC can have" in result.output


def test_a_changed_record_under_snapshot_isolation_is_a_write_conflict():
    """MariaDB 11.6+ with innodb_snapshot_isolation raises 1020 where a row changed after the
    transaction's snapshot (two imports taking session ids at once): a lost race, retried."""
    from pymysql.err import OperationalError as DriverError
    from sqlalchemy.exc import OperationalError

    from ctxtool.db.dialects import MySQL

    changed = OperationalError(
        "UPDATE ctxtool_counters ...",
        {},
        DriverError(1020, "Record has changed since last read in table 'ctxtool_counters'"),
    )
    other = OperationalError("SELECT 1", {}, DriverError(1054, "Unknown column"))
    assert MySQL().is_write_conflict(changed) and not MySQL().is_write_conflict(other)


def _leaf_commands(command, path=()):
    import click

    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _leaf_commands(sub, (*path, name))
    else:
        yield path, command


def test_every_command_documents_itself_and_every_option_has_help():
    import click

    for path, command in _leaf_commands(main):
        assert command.help and "Example" in command.help, path
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.help, (path, param.opts)


def test_an_unknown_source_format_is_a_usage_error(db):
    result = _run(["--db", db.url, "sessions", "list", "--source-format", "claude"])
    assert result.exit_code == 2 and "claude-code" in result.output


def test_every_session_argument_takes_the_transcripts_own_id(db, cli):
    """The id a user has is the transcript's (a Claude Code file name): every command that names
    a session takes it, or a unique prefix of it (#11, #12 item 8)."""
    path = TRANSCRIPTS / "claude-code" / "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    assert cli("--db", db.url, "import", path).exit_code == 0
    for args, code in (
        (["compact", "fe5e1c67", "--dry-run", "--json"], 0),
        (["validate", "fe5e1c67"], 0),
        (["tokens", "count", "fe5e1c67"], 0),
        (["tokens", "report", "fe5e1c67", "--json"], 0),
        (["context", "show", "fe5e1c67-53e7", "--json"], 0),
        (["context", "checkpoints", "fe5e1c67"], 0),
        (["sessions", "delete", "fe5e1c67"], 2),
    ):
        result = cli("--db", db.url, *args)
        assert result.exit_code == code, (args, result.output)
    plan = json.loads(cli("--db", db.url, "compact", "fe5e1c67", "--dry-run", "--json").stdout)
    assert plan["session_id"] == 1


def test_a_urls_collation_is_the_connections(mysql_empty_db, cli):
    """``?collation=`` reaches the connection (SQLAlchemy's SET NAMES used to reset it to the
    charset's default, silently); one the server does not know is a one-line error."""

    def with_collation(name: str) -> str:
        return (
            sa.engine.make_url(mysql_empty_db.url)
            .update_query_dict({"collation": name})
            .render_as_string(hide_password=False)
        )

    for name in ("utf8mb4_bin", "utf8mb4_unicode_ci"):
        engine = create_engine(with_collation(name))
        try:
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SELECT @@collation_connection").scalar() == name
                assert conn.exec_driver_sql("SELECT @@SESSION.time_zone").scalar() == "+00:00"
        finally:
            engine.dispose()
    result = cli("--db", with_collation("utf8mb4_no_such"), "migrate", "status")
    assert result.exit_code != 0
    assert "Unknown collation" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_a_urls_yes_no_options_mean_what_they_say(mysql_empty_db, cli):
    """Found by review: SQLAlchemy hands PyMySQL ``?ssl_disabled=false`` as the text 'false',
    which PyMySQL takes as true: TLS was turned off by the option meant to keep it on."""

    def tls_wanted(query: dict) -> bool:
        url = sa.engine.make_url(mysql_empty_db.url).update_query_dict(query)
        engine = create_engine(url.render_as_string(hide_password=False))
        try:
            with engine.connect() as conn:
                return bool(conn.connection.dbapi_connection.ssl)
        finally:
            engine.dispose()

    default = tls_wanted({})
    assert default, "PyMySQL asks for TLS when the server offers it"
    for value in ("false", "0", "no", "off", "False"):
        assert tls_wanted({"ssl_disabled": value}) == default, value
    for value in ("true", "1", "yes", "on"):
        assert tls_wanted({"ssl_disabled": value}) is False, value
    url = sa.engine.make_url(mysql_empty_db.url).update_query_dict({"ssl_disabled": "maybe"})
    result = cli("--db", url.render_as_string(hide_password=False), "sessions", "list")
    assert result.exit_code == 1 and "ssl_disabled must be true or false" in result.output


def test_a_urls_init_command_runs_and_timestamps_stay_utc(mysql_empty_db):
    """A user's ``?init_command=`` runs on every connection (ctxtool's own UTC setting used to
    replace it silently), and ctxtool's time zone still wins over one the user sets."""

    def with_init(command: str) -> str:
        return (
            sa.engine.make_url(mysql_empty_db.url)
            .update_query_dict({"init_command": command})
            .render_as_string(hide_password=False)
        )

    engine = create_engine(with_init("SET time_zone = '+05:00'"))
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT @@SESSION.time_zone").scalar() == "+00:00"
        probe = create_engine(with_init("SET @ctx_probe = 42"))
        with probe.connect() as conn:
            assert conn.exec_driver_sql("SELECT @ctx_probe").scalar() == 42
            assert conn.exec_driver_sql("SELECT @@SESSION.time_zone").scalar() == "+00:00"
        probe.dispose()
    finally:
        engine.dispose()


def test_an_error_naming_a_file_or_argument_with_a_newline_is_still_one_line(db, tmp_path):
    """Found by review: the table escaped such names, the Error line kept the raw newline."""
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "a\nb\x1b[31m.jsonl").write_text("garbage\n")
    for args, shown in (
        (["import", str(odd)], "a\\nb\\x1b[31m.jsonl"),
        (["context", "show", "x\ny"], "session x\\ny does not exist"),
    ):
        result = _run(["--db", db.url, *args])
        _assert_one_clean_line(result, args)
        errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
        assert shown in errors[0], result.output
        assert "\x1b" not in result.output and result.exit_code == 1
        # Nothing of the name on a line of its own: every line is a table's or an Error line.
        assert all(
            line.startswith(("Error:", "file ", "---", "/"))
            for line in result.output.splitlines()
            if line.strip()
        ), result.output


def test_the_window_options_mean_the_same_in_every_command(db, cli):
    """--context-window / --reserve-tokens are declared once: each command that takes them
    puts the same threshold on the same session, and refuses the same nonsense (exit 2)."""
    add_session(db, 1, coding_session(20), model="gpt-4o")
    window = ["--context-window", "6000", "--reserve-tokens", "1000"]
    planned = cli("--db", db.url, "compact", "1", "--dry-run", "--json", *window)
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.stdout)["threshold"] == 5000
    listed = cli("--db", db.url, "sessions", "list", "--over-window", "--json", *window)
    assert [(r["session_id"], r["threshold"]) for r in json.loads(listed.stdout)] == [(1, 5000)]
    roomy = ["--context-window", "60000", "--reserve-tokens", "1000"]
    assert (
        json.loads(
            cli("--db", db.url, "sessions", "list", "--over-window", "--json", *roomy).stdout
        )
        == []
    )
    checked = cli("--db", db.url, "validate", "1", "--json", *window)
    assert checked.exit_code == 0  # over its window, waiting for compaction: a warning
    assert [i["rule"] for i in json.loads(checked.stdout)] == ["over_window"]
    assert "threshold of 5000 tokens" in json.loads(checked.stdout)[0]["message"]
    for args in (
        ["compact", "1", "--dry-run"],
        ["sessions", "list", "--over-window"],
        ["validate", "1"],
    ):
        refused = cli("--db", db.url, *args, "--context-window", "2000", "--reserve-tokens", "2000")
        assert refused.exit_code == 2, (args, refused.output)
        assert refused.output.rstrip().endswith(
            "Error: --reserve-tokens 2000 leaves nothing of a --context-window of 2000"
        ), (args, refused.output)


def test_a_session_is_named_the_same_ways_in_every_command(db, cli):
    """SESSION is an id, a source id or a unique prefix wherever it is taken; the hidden
    --session of before 0.2 still works where it did."""
    add_session(db, 7, coding_session(2), model="gpt-4o")
    with db.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE agent_session SET source_id = 'fe5e1c67-aaaa' WHERE session_id = 7")
        )
    for ref in ("7", "fe5e1c67-aaaa", "fe5e1c"):
        for args in (
            ["tokens", "report", ref, "--json"],
            ["tokens", "report", "--session", ref, "--json"],
            ["validate", ref, "--json"],
            ["validate", "--session", ref, "--json"],
            ["context", "show", ref, "--json"],
            ["compact", ref, "--dry-run", "--json"],
        ):
            result = cli("--db", db.url, *args)
            assert result.exit_code == 0, (args, result.output)
            doc = json.loads(result.stdout)
            if isinstance(doc, list):
                assert all(row["session_id"] == 7 for row in doc), (args, doc)
            else:
                assert doc["session_id"] == 7, (args, doc)
    unknown = cli("--db", db.url, "context", "show", "nosuch")
    assert unknown.exit_code != 0 and "nosuch" in unknown.output


def test_the_command_line_imports_plainly():
    """No import loop is dodged inside a function: every import of the command line's modules
    (and of the error translation, output and configuration modules beside it) is at the top."""
    import ast
    from pathlib import Path

    import ctxtool

    package = Path(ctxtool.__file__).parent
    files = sorted((package / "cli").glob("*.py")) + [
        package / name
        for name in ("failures.py", "core/errors.py", "output.py", "terminal.py", "config_file.py")
    ]
    nested = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                nested += [
                    f"{path.name}:{node.lineno}"
                    for node in ast.walk(function)
                    if isinstance(node, (ast.Import, ast.ImportFrom))
                ]
    assert len(files) > 10 and nested == []
