"""The agent's last words split into what they report finished and what they leave open
(``core.work_state.report_parts``), on plain strings and on real spans: a report of finished
work is done work, never current work or the next step; what the words leave open is. A
carried item the span's words last report finished is done (``finished_by_report``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ctxtool.core.evaluator.answers import ContextText
from ctxtool.core.sections import parse_sections
from ctxtool.core.work_state import OPEN_PART, OTHER, REPORT, finished_by_report, report_parts
from ctxtool.evaluation.keys import keyed_span, load_key

from .conftest import TRANSCRIPTS

KEYS = Path(__file__).parent / "answer_keys"


def labels(words: str) -> list[tuple[str, str]]:
    return report_parts(words)


def test_a_report_and_the_work_it_goes_on_to_are_told_apart():
    assert labels("Build passes. Now commit the feature files only:") == [
        (REPORT, "Build passes."),
        (OPEN_PART, "Now commit the feature files only:"),
    ]
    assert labels("Pushed the branch; want me to open the PR?") == [
        (REPORT, "Pushed the branch;"),
        (OPEN_PART, "want me to open the PR?"),
    ]
    assert labels("The tests pass now, so let me commit.") == [
        (REPORT, "The tests pass now,"),
        (OPEN_PART, "so let me commit."),
    ]
    assert labels("WP15 complete. Next: WP16.") == [
        (REPORT, "WP15 complete."),
        (OPEN_PART, "Next: WP16."),
    ]


def test_a_heading_line_takes_the_label_of_what_it_introduces():
    words = (
        "What I changed:\n- Added scrubber: /repo/sanitize.py\n- Generated redacted file:\n"
        "/repo/log_redacted.jsonl\nImportant:\n- The original raw file still exists at:\n"
        "/repo/log.jsonl\n- If you want, delete that raw file."
    )
    assert labels(words) == [
        (REPORT, "What I changed:\n- Added scrubber: /repo/sanitize.py\n"
         "- Generated redacted file:\n/repo/log_redacted.jsonl"),
        (OPEN_PART, "Important:\n- The original raw file still exists at:\n/repo/log.jsonl\n"
         "- If you want, delete that raw file."),
    ]  # fmt: skip


def test_words_that_only_look_like_plans_are_not_open_work():
    # a list's number, a "Now:" label, a new state ("now uses"), a name like next.js
    assert labels("1. **Core Features**: view and add todos") == [
        (OTHER, "1. **Core Features**: view and add todos")
    ]
    assert labels("**Now:** crypto.getRandomValues()")[0][0] == OTHER
    assert labels("- Enabled raw HTML: `markdown-it` now uses `html: true`.")[0][0] == REPORT
    assert labels("I've created a todo app using Next.js with error handling.")[0][0] == REPORT
    assert labels("Should I continue with WP14 now?")[0][0] == OPEN_PART


def test_a_carried_item_is_finished_when_the_span_last_reports_its_subject_done():
    item = "- [ ] WP15: Create InteractiveMode from TuiRenderer"
    assert finished_by_report(item, ["Starting WP15.", "WP15 complete. Next: WP16."])
    assert not finished_by_report(item, ["WP15 complete.", "WP15 still needs its tests."])
    assert not finished_by_report(item, ["WP14 complete."])  # another item's report
    assert finished_by_report("- Phase 7: update `learn.md`", ["Updated `learn.md`."]) is False
    assert finished_by_report("- Update `learn.md` for the new path", ["Updated `learn.md`."])
    assert not finished_by_report("- Push the branch", ["Pushed."])  # no name to tell it by


@pytest.fixture(scope="module")
def span(tmp_path_factory):
    def load(name: str):
        key = load_key(KEYS / f"{name}.json")
        return keyed_span(key, TRANSCRIPTS, tmp_path_factory.mktemp(name[:30]))

    return load


def _summary(span, budget: int = 3500) -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import summary_sections

    return summary_sections.summary_of(span, [], budget)


def section(text: str, heading: str) -> list[str]:
    return [i for s in parse_sections(text) if s.heading == heading for i in s.items]


def test_a_closing_report_is_done_and_what_it_leaves_is_the_next_step(span):
    """The Codex log viewer session cut after the agent's report on redacting the log: its
    turn is over. What it changed (the scrubber, the redacted file) is done, never listed as
    to do; the raw file it says still exists, to delete, is the next step."""
    text = _summary(span("codex--20260213134203_redacted_current_codex_session_jsonl_export"
                         "--sensitive-question"))  # fmt: skip
    pending = ContextText(text).pending
    assert not any("added scrubber" in line for line in pending)
    assert any("added scrubber" in line.lower() for line in section(text, "Done"))
    assert any("delete that raw file" in line for line in pending)
    assert any("delete that raw file" in line for line in section(text, "Next step"))
    assert section(text, "Current work") == []


def test_mid_turn_words_keep_what_passed_out_of_current_work(span):
    """FundWise cut while the agent commits FW-005: "Build passes." is done, "Now commit the
    FW-005 feature files only" is the work under way."""
    text = _summary(span("claude-code--FundWise-claude-session"))
    work = section(text, "Current work")
    assert any(line.startswith("> Now commit the FW-005 feature files") for line in work)
    assert not any("Build passes" in line for line in work)
    assert "> Build passes." in section(text, "Done")
