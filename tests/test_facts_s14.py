"""What the span's runs say of a failure's outcome beyond their exit codes (#42 item 1): each
rule on a plain list, and on the real shared span it was found on."""

from __future__ import annotations

from pathlib import Path

from ctxtool.core.outcomes import Run, outcomes, repeats_error
from ctxtool.core.span_facts import signals_of

from .keyed_spans import keyed_span_named

YARN = 'This project is configured to use yarn because /home/a/package.json has a "packageManager" field'


def _bash(command: str, failed: bool = False, error: str = "", output: str = "") -> Run:
    return Run("Bash", command, failed, error=error, output=output)


def test_a_success_that_prints_the_error_again_fixes_nothing():
    runs = [
        _bash("pnpm --version 2>&1", True, YARN),
        _bash("~/.nvm/bin/pnpm --version 2>&1 | head -5", output=YARN + "\n"),
        _bash("COREPACK_ENABLE_PROJECT_SPEC=0 pnpm --version 2>&1 | tail -3", output="10.33.2\n"),
    ]
    [failure] = outcomes(runs)
    assert failure.fixed_by == runs[2]
    assert repeats_error("npm error code 2 | " + YARN, "…\n" + YARN)
    assert not repeats_error("exit code 1", "exit code 1")  # too short to be the error
    assert not repeats_error(YARN, "10.33.2")


def test_zerion_span_s_pnpm_failure_is_fixed_by_the_env_prefix(tmp_path: Path):
    span = keyed_span_named("claude-code--FundWise-claude-session--zerion-before-build", tmp_path)
    [pnpm] = [
        f for f in signals_of(span.summarized).failures if "configured to use yarn" in f.error
    ]
    assert pnpm.fixed and (pnpm.fixed_by or "").startswith("COREPACK_ENABLE_PROJECT_SPEC=0 pnpm")
