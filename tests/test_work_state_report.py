"""The agent's last words split into what they report finished and what they leave open
(``core.work_state.report_parts``), on plain strings and on real spans: a report of finished
work is done work, never current work or the next step; what the words leave open is. A
carried item the span's words last report finished is done (``finished_by_report``)."""

from __future__ import annotations

import json

import pytest

from ctxtool.core.evaluator.answers import ContextText
from ctxtool.core.span_facts import written_texts
from ctxtool.core.work_state import (
    OPEN_PART,
    OTHER,
    REPORT,
    finished_by_report,
    names_brought_in,
    report_parts,
    request_steps,
    steps_left,
    users_own_words,
)

from .keyed_spans import extractive_summary, keyed_span_named, section


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
        return keyed_span_named(name, tmp_path_factory.mktemp(name[:30]))

    return load


def test_a_closing_report_is_done_and_what_it_leaves_is_the_next_step(span):
    """The Codex log viewer session cut after the agent's report on redacting the log: its
    turn is over. What it changed (the scrubber, the redacted file) is done, never listed as
    to do; the raw file it says still exists, to delete, is the next step."""
    text = extractive_summary(span("codex--20260213134203_redacted_current_codex_session_jsonl_export"
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
    text = extractive_summary(span("claude-code--FundWise-claude-session"))
    work = section(text, "Current work")
    assert any(line.startswith("> Now commit the FW-005 feature files") for line in work)
    assert not any("Build passes" in line for line in work)
    assert "> Build passes." in section(text, "Done")


def test_a_runtime_s_notices_in_a_user_message_are_not_the_user_s_words():
    message = (
        "System: [2026-03-06 21:42:42 GMT+8] Exec failed (dawn-pra, code 1) :: error: GH001\n"
        "System: [2026-03-06 21:43:59 GMT+8] Exec completed (briny-nu, code 0)\n\n"
        "[Fri 2026-03-06 21:50 GMT+8] Two questions: why did my push pass?\n"
        "[message_id: 3f496722-f059]"
    )
    assert users_own_words(message) == "Two questions: why did my push pass?"
    assert users_own_words("System: [2026-03-06 21:43:59 GMT+8] Exec completed (x, code 0)") == ""
    assert users_own_words("Fix [this] please") == "Fix [this] please"


PLAN = """## Research Plan

**Question**: which browser storage for a SaaS app?

**Phase 1**: Sufficiency check — search notes.db

**Phase 2**: Web search

**Phase 3**: Fetch and cite — fetch_url then resolve_citation

**Phase 4**: Synthesize — create_para_doc"""


def test_a_plan_s_phases_are_its_steps_and_those_reported_done_are_not_left():
    steps = request_steps(PLAN)
    assert [s.split("**")[1] for s in steps] == ["Phase 1", "Phase 2", "Phase 3", "Phase 4"]
    said = ["**Phase 1 complete**: the notes say little. Moving to **Phase 2**."]
    assert steps_left(steps, said) == steps[1:]
    # a later phase reported done: the ones before it are done too (the work goes in order)
    assert steps_left(steps, said + ["Phase 3 complete."]) == steps[3:]
    assert steps_left(steps, []) == steps


def test_prose_signposts_its_later_steps():
    request = (
        "Pick up FW-005 first. Run pnpm build, commit the feature, then update issues.md and "
        "STATUS.md in a second commit. After that, help decide FW-007."
    )
    assert request_steps(request) == [
        "update issues.md and STATUS.md in a second commit.",
        "help decide FW-007.",
    ]
    assert request_steps("Fix it. When you're done, run the submit command.") == [
        "When you're done run the submit command."
    ]
    assert request_steps("I think then we are done") == []  # "then" that orders nothing
    # a long template's numbered tips are no steps
    tips = "Fix the issue.\n" + "\n".join(
        f"{n}. If you open a file, look {'x' * 300}" for n in range(5)
    )
    assert request_steps(tips) == []


def test_the_next_step_names_the_request_s_steps_not_yet_done(span):
    """paradocs (Pi) cut in Phase 2 of the research plan: Phases 2-4 are left, Phase 1 was
    reported complete; SWE-agent cut after the fix: the template's closing step, running
    submit, is left."""
    text = extractive_summary(span("pi--paradocs-session"))
    [left] = [i for i in section(text, "Next step") if i.startswith("- Steps of the latest")]
    assert "Phase 3**: Fetch and cite" in left and "Phase 4" in left
    assert "Phase 1" not in left
    text = extractive_summary(span("openai-chat--SWE-agent-function_calling_simple"))
    assert any("submit command" in i for i in section(text, "Next step"))


def test_what_stays_the_same_is_no_work_left():
    assert labels("- The rest of the renderer remains the same.")[0][0] != OPEN_PART
    assert labels("What remains is the README.")[0][0] == OPEN_PART


def test_an_earlier_answer_keeps_the_names_a_later_question_asks_for(span):
    """kimchi-dev (Pi), a question-and-answer session: each earlier answer is said whole at
    16k (the ModelRegistry's getApiKeyAndHeaders; streamFn, not a writable property), where
    it stopped after its first line."""
    text = extractive_summary(span("pi--kimchi-dev-session"))
    earlier = "\n".join(section(text, "Earlier requests"))
    assert "getApiKeyAndHeaders" in earlier
    assert "writable" in earlier or "not exposed" in earlier


def test_the_names_an_edit_brings_in():
    assert names_brought_in("fn playTick() { audioCtx.resume() }", "fn old_name() {}") == [
        "playTick",
        "audioCtx",
    ]
    new, old = written_texts(_call("edit", old_string="a_b", new_string="a_b c_d"))
    assert (new.strip(), old.strip()) == ("a_b c_d", "a_b")
    patch = "*** Begin Patch\n*** Update File: x.rs\n-old_one\n+new_one\n*** End Patch"
    assert written_texts(_call("apply_patch", input=patch)) == ("new_one", "old_one")


def _call(name: str, **arguments) -> dict:
    return {
        "id": "c1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def test_a_changed_file_names_what_its_edits_brought_in(span):
    """apanloco's random-number page: index.html's line names the sound functions its later
    edits brought in (playTick, playLand), not only what its first write held."""
    text = extractive_summary(span("claude-code--apanloco-random-session"))
    [line] = [i for i in section(text, "Files changed and why") if "index.html" in i]
    assert "playTick" in line


def test_a_request_s_pending_line_stands_alone(span):
    """bhavana's latest request lists what to build and, inside one component's spec, a
    "pending (spinner)" state: that line is its own line of the quote, so the components the
    span built are not read as pending beside it."""
    text = extractive_summary(span("claude-code--bhavana-claude-session"))
    quote = section(text, "Latest request")
    [pending] = [line for line in quote if "pending" in line]
    assert "Navbar" not in pending and "PropertyCard" not in pending
    assert any("Navbar" in line for line in quote)
