"""Every table fits the terminal in every --fmt (issue #44): at COLUMNS=80 the tables of
`sessions archive` (with and without --redact), `sessions purge --dry-run`, `context
checkpoints` and `search` keep each line within 80 columns for each table style tabulate draws,
with its borders, on plain ASCII sessions whose source ids and checksums are long. What a table
cuts short --json keeps whole: the full checksum, the placeholders written by type. Through the
real entry point (the console script for the default style, click's for the sweep of styles),
on SQLite and MariaDB."""

from __future__ import annotations

import json

import pytest
from tabulate import tabulate_formats

from .test_display_width import columns, ctxtool

# The styles that lay rows out in aligned columns on a terminal. The markup ones (html, latex,
# mediawiki, ...) are written for another program to lay out, one cell a line or a row a line.
TERMINAL_FORMATS = sorted(
    f
    for f in tabulate_formats
    if not f.startswith(("html", "unsafehtml", "latex", "mediawiki", "moinmoin", "jira"))
    and f not in ("textile", "youtrack", "tsv", "asciidoc")
)

SOURCE = "0195f0e2-7c1d-7a8e-9f3b-2d4c6e8a0b1c"


def _pi_session(path, n: int) -> None:
    """An ASCII Pi session with a runtime checkpoint, a home directory and an e-mail address
    (what --redact replaces)."""
    lines: list[dict] = [{"type": "session", "version": 3, "id": f"{SOURCE[:-1]}{n}"}]
    parent = None
    for i in range(12):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"turn {i}: please fix the rounding in /home/alice/shop/tax{i}.py" + (
            ", and mail alice@example.com when the tests pass" if i == 4 else ""
        )
        message: dict = {"role": role, "content": [{"type": "text", "text": text}]}
        if role == "assistant":
            message |= {"provider": "pi-fixture", "model": "gpt-4o", "stopReason": "stop"}
        entry = {"type": "message", "id": f"m{i:07d}", "parentId": parent, "message": message}
        lines.append(entry)
        parent = entry["id"]
        if i == 7:
            lines.append(
                {
                    "type": "compaction",
                    "id": "c0000001",
                    "parentId": parent,
                    "summary": "## Goal\nFix the rounding in the tax module.",
                    "firstKeptEntryId": "m0000006",
                    "tokensBefore": 900,
                }
            )
            parent = "c0000001"
    stamp = "2026-05-12T01:02:27.673Z"
    path.write_text("".join(json.dumps({**x, "timestamp": stamp}) + "\n" for x in lines))


@pytest.fixture
def store(db, tmp_path):
    """Two ASCII sessions imported through the console script, archived once (plain)."""
    for n in (1, 2):
        _pi_session(tmp_path / f"rounding-fix-session-{n}.jsonl", n)
    imported = ctxtool(db.url, "import", str(tmp_path))
    assert imported.returncode == 0, imported.stderr
    archived = ctxtool(db.url, "sessions", "archive", "-o", str(tmp_path / "plain"), "--json")
    assert archived.returncode == 0, archived.stderr
    return db, tmp_path, json.loads(archived.stdout)


def _fits(text: str, what: str) -> None:
    wide = [f"{columns(line)}: {line}" for line in text.splitlines() if columns(line) > 80]
    assert not wide, what + ":\n" + "\n".join(wide)


def _commands(folder) -> list[list[str]]:
    return [
        ["sessions", "archive", "-o", str(folder / "again")],
        ["sessions", "archive", "-o", str(folder / "redacted"), "--redact"],
        ["sessions", "purge", "-a", str(folder / "plain"), "--dry-run"],
        ["sessions", "purge", "-a", str(folder / "redacted"), "--dry-run"],
        ["context", "checkpoints", "1"],
        ["search", "rounding"],
    ]


def test_archive_and_purge_tables_fit_and_json_keeps_every_value(store):
    db, folder, written = store
    assert [list(d) for d in written] == [
        ["session_id", "source", "file", "messages", "checkpoints", "checksum", "redacted"]
    ] * 2
    assert all(len(d["checksum"]) == 64 and d["redacted"] == {} for d in written)
    redacted = ctxtool(db.url, "sessions", "archive", "-o", str(folder / "r"), "--redact", "--json")
    counts = [d["redacted"] for d in json.loads(redacted.stdout)]
    assert all(c["home-dir"] >= 6 and c["email"] == 1 for c in counts), counts
    purge = json.loads(
        ctxtool(
            db.url, "sessions", "purge", "-a", str(folder / "plain"), "--dry-run", "--json"
        ).stdout
    )
    assert [(c["verdict"], c["purged"]) for c in purge] == [("would purge", False)] * 2
    assert list(purge[0]) == [
        "session_id", "source", "file", "messages", "checkpoints", "verdict", "purged"
    ]  # fmt: skip

    shown = {}
    for command in _commands(folder):
        result = ctxtool(db.url, *command)
        refused = command[:2] == ["sessions", "purge"] and "redacted" in command[3]
        assert result.returncode == int(refused), result.stderr  # nothing to purge: exit 1
        assert "Traceback" not in result.stderr
        _fits(result.stdout, " ".join(command))
        shown[" ".join(command[:2]) + (" redact" if "redact" in str(command) else "")] = (
            result.stdout
        )
    plain, secret = shown["sessions archive"], shown["sessions archive redact"]
    checksum = written[0]["checksum"]
    assert checksum[:12] + "…" in plain and checksum not in plain  # cut, with an ellipsis
    assert "redacted" not in plain  # nothing redacted without --redact: no column
    assert "1 email" in secret and "home-dir" in secret and "{" not in secret  # words
    assert "would purge" in shown["sessions purge"]
    assert "kept: its archive is redacted" in " ".join(shown["sessions purge redact"].split())
    assert "rounding" in shown["search rounding"]


@pytest.mark.parametrize("group", [0, 1])
def test_every_table_style_fits_80_columns(store, cli, group):
    """Half the styles each run (two runs on each database), every table command in each."""
    db, folder, _ = store
    previews = [
        ["sessions", "archive", "-o", str(folder / "preview"), "--redact-preview"],
        ["context", "export", "1", "--redact-preview"],
    ]
    for fmt in TERMINAL_FORMATS[group::2]:
        for command in _commands(folder) + previews:
            result = cli("--db", db.url, *command, "--fmt", fmt, env={"COLUMNS": "80"})
            refused = command[:2] == ["sessions", "purge"] and "redacted" in command[3]
            assert result.exit_code == int(refused), (fmt, command, result.output)
            _fits(result.stdout, f"--fmt {fmt} {' '.join(command)}")
            assert "(no rows)" not in result.stdout and result.stdout.count("\n") >= 3
        preview = cli(
            "--db", db.url, "sessions", "delete", "2", "--fmt", fmt, env={"COLUMNS": "80"}
        )
        assert preview.exit_code == 2 and "pi:0195f0e2" in preview.stdout, preview.output
        _fits(preview.stdout, f"--fmt {fmt} sessions delete 2")
