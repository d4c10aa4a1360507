"""What the start-up commands of issue #44 load, through the real entry point in a fresh
process: `sessions list` and `migrate status` draw their default table without tabulate
(ctxtool.output.simple_table), none parses TOML where there is no configuration file or
loads the completion query, and `context show` loads none of what only another `context`
command or an export needs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .builders import add_session, coding_session

_LOADED = """
import sys
from pathlib import Path
from ctxtool.cli import main
try:
    main(["--db", sys.argv[1], *sys.argv[3:]], prog_name="ctxtool")
except SystemExit as stop:
    assert not stop.code, stop.code
names = sys.argv[2].split(",")
print("loaded:" + ",".join(sorted(n for n in names if n in sys.modules)), file=sys.stderr)
"""

# Modules that only another command, an export or a --fmt style needs.
NOT_AT_START = {
    ("sessions", "list"): ["tabulate", "tomllib", "difflib", "ctxtool.store.completion"],
    ("migrate", "status"): ["tabulate", "tomllib", "difflib", "ctxtool.store.completion"],
    ("context", "show", "1"): [
        "tabulate",
        "tomllib",  # no configuration file to read
        "ctxtool.store.completion",  # a Tab's query
        "ctxtool.export",  # the documents context export writes
        "ctxtool.chart_drawings",
        "ctxtool.core.context_chart",
        "ctxtool.markdown_to_html",
        "ctxtool.redaction",
        "ctxtool.whole_file",
        "ctxtool.store.chart",
    ],
}


def _loaded(url: str, args: tuple[str, ...], names: list[str], cwd) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")}
    env.pop("COLUMNS", None)
    env["XDG_CONFIG_HOME"] = "/nonexistent"  # no configuration file
    out = subprocess.run(
        [sys.executable, "-c", _LOADED, url, ",".join(names), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip(), "the command printed its table"
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("loaded:"), out.stderr
    return [n for n in last.removeprefix("loaded:").split(",") if n]


@pytest.mark.parametrize("args", list(NOT_AT_START), ids=" ".join)
def test_a_start_up_command_loads_only_what_it_needs(sqlite_db, args, tmp_path):
    add_session(sqlite_db, 1, coding_session(2), model="gpt-4o")
    assert _loaded(sqlite_db.url, args, NOT_AT_START[args], tmp_path) == []


def test_context_show_says_which_messages_it_counted_because_import_does_not(sqlite_db, cli):
    """`import` stores no message counts (counting 50,000 messages costs about 0.76 s of CPU;
    `tokens count` does it once, in bulk): `context show` then counts them with the vocabulary,
    and says so under its table until `tokens count` has stored them."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    assert cli("--db", sqlite_db.url, "import", str(examples)).exit_code == 0
    shown = cli("--db", sqlite_db.url, "context", "show", "1")
    assert shown.exit_code == 0, shown.output
    note = "of these messages had no stored count under o200k_base and were counted now"
    assert note in shown.stdout
    assert cli("--db", sqlite_db.url, "tokens", "count", "--all").exit_code == 0
    again = cli("--db", sqlite_db.url, "context", "show", "1")
    assert "no stored count" not in again.stdout
    assert again.stdout.splitlines()[:6] == shown.stdout.splitlines()[:6]  # the same figures
