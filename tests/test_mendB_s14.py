"""A request's steps are done only by what the span did since the request, each on its own,
and the readers of a request and of the agent's report stay linear in blank lines (review of
session 14: summaries that said a step was done before anything was)."""

from __future__ import annotations

import pytest

from ctxtool.compaction.summarizers import ExtractiveSummarizer, SummaryRequest
from ctxtool.compaction.summarizers.span_notes import read_span
from ctxtool.core.changes import DELETED
from ctxtool.core.records import Message, calls_of
from ctxtool.core.sections import NEXT_STEP
from ctxtool.core.span_facts import _files_changed, is_request, successful_actions
from ctxtool.core.touched_files import files_touched
from ctxtool.core.work_state import (
    changed_named_file,
    own_words,
    reported_done,
    request_steps,
    steps_left,
)
from ctxtool.evaluation.keys import _import_prefix, _only_session, load_key
from tests.test_span_scale import _best_time

from .conftest import TRANSCRIPTS
from .keyed_spans import KEYS, section

ASK = (
    "add a --json flag to cli.py, and update README.md with the new flag, and add tests for it"
    " in tests/test_cli.py"
)


def test_a_step_is_done_by_its_own_file_not_by_a_later_step_s():
    steps = request_steps(ASK)
    assert steps == [
        "add a --json flag to cli.py",
        "update README.md with the new flag",
        "add tests for it in tests/test_cli.py",
    ]
    assert steps_left(steps, [], [], []) == steps  # nothing changed since the request
    # README.md written: its step is done, the one before it is not
    assert steps_left(steps, [], [], ["/w/README.md"]) == [steps[0], steps[2]]
    assert steps_left(steps, [], [], ["/w/cli.py", "/w/tests/test_cli.py"]) == [steps[1]]


def test_a_deletion_does_only_a_step_that_asks_to_remove_the_file():
    gone = ["/w/src/modes/interactive-mode.ts"]
    assert not changed_named_file("create a brand new interactive-mode.ts", [], gone)
    assert changed_named_file("create a brand new interactive-mode.ts", gone)  # written
    assert changed_named_file("remove the old files (interactive-mode.ts, cli.ts)", [], gone)
    assert changed_named_file("delete interactive-mode.ts", [], gone)


def test_a_step_led_by_an_article_takes_the_verb_of_the_step_before():
    steps = request_steps(
        "remove the old files (main.ts, cli.ts), and add a code map to AGENTS.md, and a"
        " DEVELOPMENT.md that README.md links to"
    )
    assert steps[2] == "a DEVELOPMENT.md that README.md links to"
    assert not changed_named_file(steps[2], ["/w/DEVELOPMENT.md"])  # no verb of its own
    assert changed_named_file(steps[2], ["/w/DEVELOPMENT.md"], verb="add")
    written = ["/w/AGENTS.md", "/w/DEVELOPMENT.md"]
    assert steps_left(steps, [], [], written, ["/w/main.ts"]) == []
    assert steps_left(steps, [], [], ["/w/AGENTS.md"], ["/w/main.ts"]) == [steps[2]]


def test_a_verb_typed_with_two_letters_swapped_is_the_verb():
    assert changed_named_file("remoev the old files (main.ts)", [], ["/w/main.ts"])
    assert changed_named_file("udpate README.md", ["/w/README.md"])
    assert not changed_named_file("read README.md", ["/w/README.md"])  # no changing verb


# -- the real span: pi's refactor, where a deletion and an earlier edit read as done steps -----


@pytest.fixture(scope="module")
def pi_messages(tmp_path_factory) -> list[Message]:
    key = load_key(KEYS / "pi--before-compaction--old-files-removed.json")
    store = _import_prefix(key, TRANSCRIPTS, tmp_path_factory.mktemp("pi"), None, "whole")
    return store.messages(_only_session(store))


def _left_at(messages: list[Message], prefix: int) -> tuple[list[str], list[str]]:
    """The latest request's steps at the prefix, and those the span has not done since."""
    span = messages[:prefix]
    start = max(i for i, m in enumerate(span) if is_request(m))
    since = span[start + 1 :]
    changes = _files_changed(since)
    written = [c.path for c in changes if c.kind != DELETED]
    deleted = [c.path for c in changes if c.kind == DELETED]
    said = [m.content or "" for m in since if m.role == "assistant" and m.content]
    steps = request_steps(read_span(span).latest_request or "")
    return steps, steps_left(steps, said, successful_actions(span, start), written, deleted)


def test_pi_s_new_interactive_mode_is_not_made_by_removing_the_old(pi_messages):
    for prefix in (455, 457):  # edited before the request; removed (rm) after it
        steps, left = _left_at(pi_messages, prefix)
        assert any("create a brand spanking new interactive-mode.ts" in s for s in steps)
        assert left == steps, prefix
    assert _left_at(pi_messages, 461)[1] == []  # written at 460: done


def test_pi_s_development_md_is_done_once_written(pi_messages):
    steps, left = _left_at(pi_messages, 830)
    assert steps[2].startswith("a DEVELOPMENT.md in the coding-agent package")
    assert left == []  # the old files removed, the code map and DEVELOPMENT.md written


# -- blank lines are read once ---------------------------------------------------------------


def test_fences_and_report_lines_are_found_in_linear_time_over_blank_lines():
    small, large = "```\n" + " \n" * 1000, "```\n" + " \n" * 8000
    assert own_words("ask\n  ```\ncode\n  ```\nafter") == "ask after"
    assert reported_done("Sounds:\n\n**SFX added:**\n")  # a heading line
    for fn in (own_words, reported_done):
        ratio = _best_time(fn, large) / max(_best_time(fn, small), 1e-6)
        assert ratio < 24, (fn.__name__, ratio)  # 8x the input: ~8x linear, ~64x quadratic


def test_pi_s_summary_at_830_lists_no_step_the_span_did(pi_messages):
    messages = pi_messages[:830]
    read, modified = files_touched(calls_of(messages))
    files = {"read_files": read, "modified_files": modified}
    summary = (
        ExtractiveSummarizer()
        .summarize(SummaryRequest(None, messages, files, max_tokens=3500))
        .text
    )
    assert "Continue the latest request" in " ".join(section(summary, NEXT_STEP))
    assert "not yet done" not in summary  # DEVELOPMENT.md written at 818: nothing left


def test_a_file_changed_before_the_request_leaves_its_step_left_in_the_summary():
    """The summary's steps left read only what happened after the latest request: README.md
    edited in an earlier turn does not make 'update README.md' done (extractive._steps_left)."""
    from ctxtool.compaction.summarizers import ExtractiveSummarizer, SummaryRequest
    from tests.test_span_facts import Span

    s = Span()
    s.user("fix the typo in README.md")
    s.call("Edit", "ok", file_path="README.md", old_string="teh", new_string="the")
    s.add("assistant", "Fixed the typo in README.md.")
    s.user(
        "add a --json flag to cli.py, and update README.md with the new flag, and add tests "
        "for it in tests/test_cli.py"
    )
    s.add("assistant", "Let me look at cli.py first.")
    s.call("Read", "import argparse\n...", file_path="cli.py")
    text = ExtractiveSummarizer().summarize(SummaryRequest(None, s.messages, {})).text
    [left] = [line for line in text.splitlines() if line.startswith("- Steps of the latest")]
    assert "update README.md with the new flag" in left, left
    assert "add a --json flag to cli.py" in left and "tests/test_cli.py" in left, left
