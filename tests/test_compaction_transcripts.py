"""Every shared transcript compacted twice with the extractive summarizer at a small window
(scripts/retention_table.py, which also prints the README's table): nothing stays over its
threshold unless reported as over_window, the second summary keeps >= 90% of the first one's
items and every modified file, and no goal comes from boilerplate."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from ctxtool import quality
from ctxtool.compaction.sections import summary_items

from .conftest import TRANSCRIPTS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import retention_table  # noqa: E402

# A slash command the user typed is a goal (with its arguments); its wrapper never is.
BOILERPLATE = re.compile(r"^\s*(<|# AGENTS\.md|Caveat:|\[Request interrupted)")


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    return retention_table.compact_twice(TRANSCRIPTS, tmp_path_factory.mktemp("retention"))


def test_every_transcript_imports_and_compacts(rows):
    assert len(rows) == len([p for p in TRANSCRIPTS.rglob("*") if p.suffix in (".jsonl", ".traj")])
    for r in rows:
        assert "run1" in r, r
        assert r["run1"].status in ("compacted", "over_window", "rejected"), r["transcript"]
        if r["run1"].status == "rejected":  # the quality gate refused it: said, nothing written
            assert r["summary1"] is None and "summary" in r["run1"].error, r["transcript"]


def test_nothing_stays_over_its_threshold_unreported(rows):
    for r in rows:
        if r["context_tokens"] > r["threshold"] and r["run2"].status != "rejected":
            assert r["run2"].status == "over_window", r["transcript"]
            assert "must stay verbatim" in r["run2"].error
        assert not r["run2"].ok or r["context_tokens"] <= r["threshold"], r["transcript"]
    assert any(r["run2"].status == "over_window" for r in rows)  # Pi's `$ find .` output


def test_the_second_summary_keeps_the_first(rows):
    for r in rows:
        first, second = r["summary1"], r["summary2"]
        if first is None or second is None:
            continue
        assert r["run2"].carry_over >= 0.9, r["transcript"]
        assert quality.carry_over(first.summary, second.summary) >= 0.9
        for path in first.details.get("modified_files") or []:
            assert path in second.summary, (r["transcript"], path)


def test_no_goal_from_boilerplate(rows):
    for r in rows:
        for cp in (r["summary1"], r["summary2"]):
            if cp is not None:
                goal = retention_table.goal_of(cp.summary)
                assert goal and not BOILERPLATE.match(goal), (r["transcript"], goal)


def test_an_agent_s_own_summary_is_carried_forward(rows):
    """Pi's before-compaction.jsonl arrives with a structured summary (Next Steps, User
    Preferences): ctxtool's checkpoint on top of it keeps them."""
    [pi] = [r for r in rows if r["transcript"] == "before-compaction.jsonl"]
    summary = pi["summary1"].summary
    assert "Create directories: `src/utils/`" in summary  # an item of Pi's "## Next Steps"
    assert "E2E tests only" in summary  # and of its "## User Preferences"
    assert len(summary_items(summary)) > 10
