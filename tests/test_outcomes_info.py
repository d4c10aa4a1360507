"""A run that asks only for version, help, a listing or a dry run (``pytest --version``,
``pytest --co``, ``cargo --version``, ``git push --dry-run``) tested, built or pushed nothing:
it fixes no failure of its command's target (ctxtool.core.outcomes), on plain lists and on the
real shared transcripts' own command lines."""

from __future__ import annotations

import pytest

from ctxtool.core.outcomes import Run, command_target, outcomes, resolved_targets
from ctxtool.core.span_facts import runs_of
from ctxtool.importer import Importer
from ctxtool.store import Store

from .conftest import TRANSCRIPTS

OPENCLAW = TRANSCRIPTS / "pi" / "openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc.jsonl"


def bash(command: str, failed: bool = False, error: str = "") -> Run:
    return Run("Bash", command, failed, error=error)


PYTEST_FAILED = bash("python -m pytest tests/", True, "FAILED tests/test_a.py::test_x")


@pytest.mark.parametrize(
    "command",
    [
        "python -m pytest --version",
        "pytest --help",
        "pytest -V",
        "uv run pytest --co -q tests/",
        "pytest --collect-only tests/test_a.py",
        "bash -lc 'cd app && python -m pytest --version'",
    ],
)
def test_a_pytest_information_run_leaves_a_pytest_failure_open(command):
    [outcome] = outcomes([PYTEST_FAILED, bash(command)])
    assert not outcome.fixed
    assert command_target("pytest tests/") not in resolved_targets([bash(command)])


def test_a_real_test_run_after_the_version_fixes_it():
    runs = [PYTEST_FAILED, bash("python -m pytest --version"), bash("pytest tests/")]
    [outcome] = outcomes(runs)
    assert outcome.fixed_by == runs[2]


@pytest.mark.parametrize(
    ("failed", "information", "real"),
    [
        ("cargo build", "cargo --version", "cargo build --release"),
        ("npx tsc", "npx tsc --version", "npx tsc --noEmit"),
        ("npm test", "npm test -- --listTests", "npm test"),
        ("cargo test", "cargo test -- --list", "cargo test"),
        ("make", "make -n", "make"),
        ("git push origin main", "git push --dry-run origin main", "git push origin main"),
        ("npm install", "npm -v", "npm install --legacy-peer-deps"),
    ],
)
def test_an_information_run_fixes_no_failure_of_its_family(failed, information, real):
    runs = [bash(failed, True, "error: could not compile"), bash(information)]
    [outcome] = outcomes(runs)
    assert not outcome.fixed
    [outcome] = outcomes([*runs, bash(real)])
    assert outcome.fixed_by == bash(real)


@pytest.mark.parametrize(
    "command", ["pytest -v", "pytest -n 2 tests/", "pytest help/", "git commit -n -m wip"]
)
def test_flags_that_look_alike_still_run_the_work(command):
    """``-v`` is pytest's verbosity, ``-n`` xdist's workers or git commit's no-verify."""
    failed = bash(command, True, "FAILED")
    [outcome] = outcomes([failed, bash(command.replace(" -n 2", "").replace("help/", "x/"))])
    assert outcome.fixed
    assert not command_target(command).startswith("info:")


def test_a_failed_information_run_is_fixed_by_a_real_run_not_the_other_way():
    """``pytest --version`` failing (pytest missing) is answered by a test run passing; it is
    no test failure, so a version run passing never stands for the tests."""
    missing = bash("python -m pytest --version", True, "No module named pytest")
    [outcome] = outcomes([missing, bash("python -m pytest tests/")])
    assert outcome.fixed
    [outcome] = outcomes([missing, bash("pip install pytest"), bash("pytest --version")])
    assert outcome.fixed


def test_a_remedy_an_error_named_is_not_run_by_its_version():
    failed = Run("Bash", "node build.js", True, error="run npm install first", remedy="npm")
    [outcome] = outcomes([failed, bash("npm -v")])
    assert not outcome.fixed
    [outcome] = outcomes([failed, bash("npm -v"), bash("npm install")])
    assert outcome.fixed


def test_the_real_transcripts_dry_run_push_fixes_no_push(sqlite_db, tmp_path):
    """OpenClaw's own ``git push backup master --dry-run`` line (a Windows shell's ``cd "…";``
    in front): a push that failed before it stays open, its next real push fixes it."""
    if not OPENCLAW.exists():
        pytest.fail(f"{OPENCLAW} is missing: set CTXTOOL_SHARED_DIR")
    [imported] = Importer(sqlite_db.engine, fmt="pi").import_paths([str(OPENCLAW)])
    runs = runs_of(Store(sqlite_db.engine).messages(imported.session_id))
    n, dry = next(
        (n, r) for n, r in enumerate(runs) if "push" in r.command and "--dry-run" in r.command
    )
    real = next(r for r in runs[n + 1 :] if "git push" in r.command and not r.failed)
    assert not dry.failed and "--dry-run" not in real.command
    rejected = bash(real.command, True, "! [rejected] master -> master (fetch first)")
    [outcome] = outcomes([rejected, dry])
    assert not outcome.fixed
    [outcome] = outcomes([rejected, dry, real])
    assert outcome.fixed_by == real
