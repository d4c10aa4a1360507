"""Rejection advice and notes that are true (issue #31 item 6): "a larger --max-summary-tokens
leaves room" only when that flag sets the summary's budget (not when the budget is already
capped at a quarter of the threshold), and `--force` on a context far below its window does not
claim the window made it keep less than keep_recent_tokens."""

from __future__ import annotations

import json

from .builders import add_session, coding_session
from .compacting import compact_with_llm
from .llm_server import FakeLLM

STEPS = [f"{i}. Port module{i} to the streaming reader" for i in range(1, 31)]
FULL = "## Goal\nFix the bug.\n\n## Next Steps\n" + "\n".join(STEPS)
LOSSY = "## Goal\nFix the bug.\n\n## Next Steps\n" + "\n".join(STEPS[:20])


def test_a_larger_max_summary_tokens_is_advised_only_when_it_would_help(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.summary_text = FULL
        assert compact_with_llm(cli, db, llm, "1", "--min-quality", "0").exit_code == 0
        llm.summary_text = LOSSY
        # LIMITS: a threshold of 5000, so the budget is 1250 whatever --max-summary-tokens
        # (default 4096) says.
        capped = compact_with_llm(cli, db, llm, "1", "--force", "--min-quality", "0", "--json")
        small = compact_with_llm(
            cli,
            db,
            llm,
            "1",
            "--force",
            "--min-quality",
            "0",
            "--max-summary-tokens",
            "600",
            "--json",
        )
    capped_error = json.loads(capped.stdout)["error"]
    assert capped.exit_code == 1 and "at least 90% required" in capped_error
    assert "leaves room" not in capped_error, capped_error
    assert "budget, 1250 tokens, is already the most a threshold of 5000 allows" in capped_error
    small_error = json.loads(small.stdout)["error"]
    assert small.exit_code == 1 and "a larger --max-summary-tokens leaves room" in small_error


def test_force_below_the_window_says_why_it_kept_so_little(db, cli):
    short = [
        {"role": "user", "content": "Rename the helper in utils.py to parse_config, please."},
        {"role": "assistant", "content": "Renamed it and updated the three callers. " * 6},
    ]
    add_session(db, 1, short, model="gpt-4o")
    result = cli("--db", db.url, "compact", "1", "--force", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    [note] = json.loads(result.stdout)["notes"]
    assert "fits its window" not in note
    assert "keep_recent_tokens (20000) would keep every message" in note, note
    human = cli("--db", db.url, "compact", "1", "--force", "--dry-run")
    assert "note: kept " in human.stdout and "fits its window" not in human.stdout
