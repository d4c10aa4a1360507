"""The documentation stays true: docs/commands/ is what ``--help`` prints now (CI fails on
drift, as ``cog --check`` does for sqlite-utils and llm), and no local link points nowhere."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS_SCRIPT = ROOT / "scripts" / "docs.py"
COMMANDS_DIR = ROOT / "docs" / "commands"


def _docs_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(DOCS_SCRIPT), *args], capture_output=True, text=True, cwd=ROOT
    )


def test_checked_in_command_pages_match_help():
    result = _docs_script("--check")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("pages match --help\n")


def test_a_page_holds_what_the_installed_command_prints():
    """The pages are the real entry point's help, not a rendering of it: `ctxtool context show
    --help`, run as a user runs it on a terminal 100 columns wide, appears whole in its page."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")}
    env["COLUMNS"] = "100"
    shown = subprocess.run(
        [sys.executable, "-m", "ctxtool", "context", "show", "--help"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT / "docs",  # no ctxtool.toml here
        check=True,
    ).stdout
    assert "Usage: ctxtool context show [OPTIONS] SESSION" in shown
    page = (COMMANDS_DIR / "context-show.md").read_text(encoding="utf-8")
    assert f"```text\n{shown.rstrip()}\n```" in page


def test_check_names_every_drifted_page_in_one_line_and_a_run_repairs_them(tmp_path):
    pages = tmp_path / "commands"
    shutil.copytree(COMMANDS_DIR, pages)
    (pages / "compact.md").write_text(
        (pages / "compact.md").read_text().replace("--dry-run", "--dry-walk")
    )
    (pages / "tokens-count.md").unlink()
    (pages / "gone.md").write_text("# a command that no longer exists\n")

    result = _docs_script("--check", "--dir", str(pages))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "1 changed (compact.md)" in result.stderr
    assert "1 missing (tokens-count.md)" in result.stderr
    assert "1 stale (gone.md)" in result.stderr
    assert "run scripts/docs.py" in result.stderr

    repaired = _docs_script("--dir", str(pages))
    assert repaired.returncode == 0, repaired.stderr
    assert "1 rewritten, 1 added, 1 removed" in repaired.stdout
    assert _docs_script("--check", "--dir", str(pages)).returncode == 0
    assert sorted(p.name for p in pages.iterdir()) == sorted(p.name for p in COMMANDS_DIR.iterdir())


_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_every_local_link_in_the_readme_and_docs_points_at_a_file():
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = [
        f"{doc.relative_to(ROOT)} -> {target}"
        for doc in documents
        for target in _LINK.findall(doc.read_text(encoding="utf-8"))
        if "://" not in target and not (doc.parent / target).exists()
    ]
    assert broken == []
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/commands/index.md)" in readme
