"""The faults issue #42's review found in extractive summaries, each as a rule on plain lists
and on the real span it was found in: a plan the agent stopped updating while it reported its
work passing is not the open work; a heading line ending in ":" goes with the list it
introduces; a latest request that is the goal's is said once; a plan step or a fragment of a
request is no constraint or decision."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ctxtool.core.evaluator.answers import ContextText
from ctxtool.core.work_state import (
    OPEN_PART,
    OTHER,
    STALE_PLAN_CALLS,
    asks_the_agent,
    cut_mid_sentence,
    is_plan_step,
    report_parts,
    stale_plan_done,
)
from ctxtool.evaluation.keys import keyed_span, load_key

from .conftest import TRANSCRIPTS
from .keyed_spans import extractive_summary, section

KEYS = Path(__file__).parent / "answer_keys"


@pytest.fixture(scope="module")
def span(tmp_path_factory):
    def load(name: str, through: int | None = None):
        key = load_key(KEYS / f"{name}.json")
        if through is not None:  # the span of a compaction the review read, not the key's
            key = dataclasses.replace(key, through=through)
        return keyed_span(key, TRANSCRIPTS, tmp_path_factory.mktemp(name[:30]))

    return load


PLAN = [
    "Scaffold the workspace and domain model",
    "Build the operator terminal with responsive states",
    "Run browser QA at three widths",
]
PASSING = "All checks and tests now pass. I'm starting the server for browser QA."


def test_a_plan_left_behind_is_done_up_to_the_last_step_reported_finished():
    words = ["The operator terminal is implemented with responsive states.", PASSING]
    assert stale_plan_done(PLAN, words, STALE_PLAN_CALLS) == [True, True, False]


def test_a_plan_kept_up_to_date_or_without_passing_checks_stands():
    words = ["The operator terminal is implemented with responsive states.", PASSING]
    # updated recently: the plan says where the work stands
    assert stale_plan_done(PLAN, words, STALE_PLAN_CALLS - 1) == [False] * 3
    # no check passed since: the reports may be of work still failing
    assert stale_plan_done(PLAN, words[:1], 100) == [False] * 3
    # checks pass, but no report names a step's work: nothing is retired
    assert stale_plan_done(PLAN, [PASSING], 100) == [False] * 3


def test_edgerunner_s_stale_plan_is_not_listed_as_pending(span):
    """Codex edgerunner cut at line 504: update_plan last ran at line 146 with "Scaffold Rust
    workspace …" in progress; 76 calls later the agent reports the operator terminal built
    and all checks passing, and is at browser QA. The steps the reports went past are done,
    and the next step is the plan's first step left, not "Finish … Scaffold"."""
    text = extractive_summary(span("codex--edgerunner-codex-session", 504))
    pending = "\n".join(ContextText(text).pending)
    assert "Scaffold Rust workspace" not in pending
    assert "React operator terminal" not in pending
    assert any(line.startswith("- [x] Scaffold Rust workspace") for line in section(text, "Done"))
    assert any("browser QA" in line for line in section(text, "Open tasks"))
    step = "\n".join(section(text, "Next step"))
    assert "Scaffold" not in step and "browser QA" in step


def test_a_heading_goes_with_the_list_it_introduces():
    behaviour = "Now invalid themes will:\n1. **On startup**: Log error, fall back to dark theme"
    assert report_parts(behaviour) == [(OTHER, behaviour)]  # a new state, no step to take
    steps = "Next steps:\n1. Run the tests\n2. Open the PR"
    assert report_parts(steps) == [(OPEN_PART, steps)]
    assert report_parts("Now commit the feature files only:")[0][0] == OPEN_PART
    assert report_parts("Now I will commit:")[0][0] == OPEN_PART


def test_pi_s_last_words_on_invalid_themes_are_said_with_their_list(span):
    """pi large-session cut at line 863: the agent's last words are "Now invalid themes
    will:" and the list of what they now do. That is the fix in place (Done), said with its
    list; the heading is never the next step alone, the list item never "1." alone."""
    for budget in (3500, 1500):
        text = extractive_summary(span("pi--large-session", 863), budget)
        done = "\n".join(section(text, "Done"))
        assert "Now invalid themes will:" in done
        assert "Log error, fall back to dark theme" in done
        assert "> 1. (names" not in done
        assert not any("invalid themes" in line for line in section(text, "Next step"))


def test_a_latest_request_that_is_the_goal_s_is_said_once():
    from ctxtool.compaction.summarizers import ExtractiveSummarizer, SummaryRequest
    from ctxtool.core.records import Message

    ask = "Add a roadmap section for the Telegram agent and research Visa card partners. " * 6
    messages = [Message(1, 1, "user", ask), Message(2, 1, "assistant", "Done: the roadmap.")]
    text = ExtractiveSummarizer().summarize(SummaryRequest(None, messages, {})).text
    assert text.count("research Visa card partners") == section(text, "Goal")[0].count(
        "research Visa card partners"
    )
    assert section(text, "Latest request") == ["(the goal's request, quoted above)"]


def test_fundwise_s_goal_is_not_quoted_twice(span):
    """FundWise cut at line 59: the one request (1,502 characters, voice-typed) is the goal
    and the latest request; it was quoted under both (~375 tokens twice)."""
    for budget in (3500, 1500):
        text = extractive_summary(span("claude-code--FundWise-claude-session", 59), budget)
        assert "split mode first" in "\n".join(section(text, "Goal"))
        assert "split mode first" not in "\n".join(section(text, "Latest request"))


WRAPPED = (
    "in our roadmap we are going through the split mode first then we'll have this telegram\n"
    "bot which is like an agent and as we have already mentioned in our documents we will\n"
    "never open the fund mode to everyone so we'll go with split mode on mainnet first then we\n"
    "will have this agent ready. Always use USDC.\n"
    "never push to main\n"
)


def test_a_line_of_a_wrapped_sentence_states_no_rule():
    # a line the one before goes on into, or that goes on into the next: a piece of a sentence
    assert cut_mid_sentence("never open the fund mode to everyone so we'll go with", WRAPPED)
    assert cut_mid_sentence(
        "bot which is like an agent and as we have already mentioned in our documents we will",
        WRAPPED,
    )
    # a sentence of its own, and a short line after a finished sentence, are rules
    assert not cut_mid_sentence("Always use USDC.", WRAPPED)
    assert not cut_mid_sentence("never push to main", WRAPPED)
    assert not cut_mid_sentence("never push to main", "always use pnpm\nnever push to main")


def test_a_plan_step_or_a_request_is_no_constraint_or_decision():
    assert is_plan_step("**Phase 1**: Sufficiency check — Existing PARA notes do not cover this")
    assert is_plan_step("Step 2 - build the index")
    assert not is_plan_step("Never skip the sufficiency check in any phase.")
    assert asks_the_agent("I want you to do a research on that as well.")
    assert asks_the_agent("Can you use pnpm instead?")
    assert not asks_the_agent("We'll go with split mode first, then the agent.")


def test_fundwise_s_voice_typed_request_leaves_no_fragments(span):
    """FundWise cut at line 59: the request is voice-typed and hard-wrapped; its wrapped lines
    ("docs documentsThen we will open …", "the personal finance will manage …") were listed
    as a constraint and a decision, and "I want you to do a research on that as well." as a
    decision."""
    text = extractive_summary(span("claude-code--FundWise-claude-session", 59))
    stated = "\n".join(section(text, "Constraints") + section(text, "Decisions"))
    assert "documentsThen" not in stated
    assert "the personal finance will manage" not in stated
    assert "I want you to do a research" not in stated


def test_paradocs_plan_step_is_no_constraint(span):
    """paradocs cut at line 67: the plan's "**Phase 1**: Sufficiency check …" was listed as a
    constraint."""
    text = extractive_summary(span("pi--paradocs-session", 67))
    assert not any("Phase 1" in line for line in section(text, "Constraints"))
