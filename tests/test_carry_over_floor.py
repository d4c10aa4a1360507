"""A runtime's long summary carried into a small window: the new summary must keep the share
of its items that its budget can hold, not 90% of a text three times its budget."""

from __future__ import annotations

import json

import pytest

from ctxtool.core.prepare import scaled_floor

from .conftest import TRANSCRIPTS

# Claude Code's own compaction in this session is a 2,541-token summary; at a 4,000-token
# window the new summary's budget is 750 tokens.
LONG_SUMMARY = TRANSCRIPTS / "claude-code" / "a5c478e1-0d31-46d4-9fd6-3b6b203b3752.jsonl"


def test_a_long_carried_summary_is_held_to_what_the_budget_can_hold(cli, sqlite_db):
    assert cli("--db", sqlite_db.url, "import", LONG_SUMMARY).exit_code == 0
    window = ["--context-window", "4000"]
    done = cli("--db", sqlite_db.url, "compact", "1", *window, "--json")
    assert done.exit_code == 0, done.output
    outcome = json.loads(done.output)
    assert outcome["status"] == "compacted", outcome
    # 90% of 750/2,541 is 27%: the summary keeps at least that, and less than 90%, which
    # rejected it before the floor followed the budget.
    assert 0.266 <= outcome["carry_over"] < 0.9
    assert outcome["quality"]["fabrications"] == [] and outcome["score"] >= 0.6


@pytest.mark.parametrize(
    ("previous_tokens", "budget", "floor"),
    [(500, 750, 0.9), (750, 750, 0.9), (1500, 750, 0.45), (2541, 750, 0.266), (7500, 750, 0.09)],
)
def test_the_floor_is_the_share_of_what_the_budget_holds(previous_tokens, budget, floor):
    assert scaled_floor(0.9, previous_tokens, budget) == floor
