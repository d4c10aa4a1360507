"""Cases a review found where span facts stated wrong state: each rule on a plain list."""

from __future__ import annotations

import time

from ctxtool.compaction.summarizers.span_notes import read_span
from ctxtool.core.span_facts import (
    _failures,
    answered_question,
    checklist_left,
    planned_steps_left,
    rejected_calls,
)

from .test_span_facts import Span

WARN = (
    "warning: unused import: `HashMap`\n --> src/main.rs:3:5\n  |\n"
    "3 | use std::collections::HashMap;\n\n"
    'warning: `app` (bin "app") generated 1 warning\n    Finished dev [unoptimized] target(s)\n'
)


def _warned(span: Span) -> list:
    return [f for f in _failures(span.messages) if f.warning]


def test_a_warning_is_fixed_only_when_a_later_run_of_the_program_no_longer_prints_it():
    edit = {"file_path": "src/main.rs", "old_string": "fn main() {", "new_string": "fn main() {}"}
    printed_again = Span()
    printed_again.user("add a --verbose flag to the CLI")
    printed_again.call("Bash", WARN, exit_code=0, command="cargo check")
    printed_again.call("Edit", "ok", **edit)
    printed_again.call("Bash", WARN, exit_code=0, command="cargo check")
    assert _warned(printed_again) == []
    not_rerun = Span()
    not_rerun.user("add a --verbose flag")
    not_rerun.call("Bash", WARN, exit_code=0, command="cargo check")
    not_rerun.call("Edit", "ok", **edit)
    assert _warned(not_rerun) == []
    cut = Span()
    cut.user("go")
    cut.call("Bash", WARN, exit_code=0, command="cargo check")
    cut.call("Edit", "ok", **edit)
    cut.call("Bash", "    Finished dev\n", exit_code=0, command="cargo check 2>&1 | tail -2")
    assert _warned(cut) == []
    gone = Span()
    gone.user("go")
    gone.call("Bash", WARN, exit_code=0, command="cargo check")
    gone.call("Edit", "ok", **edit)
    gone.call("Bash", "    Finished dev\n", exit_code=0, command="cargo check")
    [fixed] = _warned(gone)
    assert fixed.fixed and "unused import" in fixed.error


def test_a_run_that_printed_a_warning_is_not_shown_failed_nor_given_a_then():
    span = Span()
    span.user("tidy the build")
    span.call("Bash", WARN, exit_code=0, command="cargo check")
    span.add("assistant", "I'll drop the unused import in src/main.rs now.")
    span.call("Edit", "ok", file_path="src/main.rs", old_string="use x;", new_string="")
    span.call("Bash", "    Finished dev\n", exit_code=0, command="cargo check")
    assert [f.warning for f in _failures(span.messages)] == [True]
    notes = read_span(span.messages)
    assert not any("→ failed" in line for line in notes.current_work)
    assert not any("warned" in line and "(then:" in line for line in notes.errors)


def test_many_warnings_over_many_runs_are_judged_in_linear_time():
    out = "".join(f"warning: unused import: `M{j}`\n --> src/m{j}.rs:3:5\n\n" for j in range(150))
    span = Span()
    span.user("make it build cleanly")
    for i in range(375):
        span.call("Bash", out + "    Finished dev\n", exit_code=0, command="cargo check")
        span.call(
            "Edit", "ok", file_path=f"src/m{(i * 7) % 300}.rs", old_string="a", new_string="b"
        )
    start = time.process_time()
    assert _warned(span) == []  # each warning printed again after its last edit
    assert time.process_time() - start < 3


def test_a_checklist_item_the_span_did_after_writing_the_list_is_not_left_open():
    span = Span()
    span.user("add a parser and tests for it")
    plan = "# Plan\n- [ ] Add parser in parser.py\n- [ ] Add tests in test_parser.py\n- [ ] Run pytest\n"
    plan += "- [ ] Update the README\n"
    span.call("Write", "ok", file_path="PLAN.md", content=plan)
    span.call("Write", "ok", file_path="parser.py", content="def parse(s):\n    return s.split()\n")
    span.call("Write", "ok", file_path="test_parser.py", content="def test():\n    pass\n")
    span.call("Bash", "1 passed in 0.01s", exit_code=0, command="pytest")
    assert checklist_left(span.messages) == ["Update the README"]
    span.add("assistant", "All done: the README update is in.")
    assert checklist_left(span.messages) == []


def test_a_template_s_checkboxes_are_no_tasks():
    span = Span()
    span.user("add a pull request template")
    boxes = "## Checklist\n- [ ] Tests added\n- [ ] Docs updated\n"
    span.call("Write", "ok", file_path=".github/pull_request_template.md", content=boxes)
    span.call("Write", "ok", file_path="docs/issue-template.md", content=boxes)
    assert checklist_left(span.messages) == []


def test_a_reply_that_goes_on_to_something_new_answers_no_question():
    done = "Done. I made these changes:\n1. Added the parser\n2. Fixed the lexer\n3. Updated README"
    assert answered_question("run it 2 times", done) is None
    assert answered_question("now do step 3", done) is None
    assert answered_question("2", done) is None  # a list of things done offers no options
    offered = "Two ways:\n1. Keep both\n2. Merge them\nWhich would you prefer?"
    assert answered_question("2", offered) == "Merge them"
    asked = "All tests pass. Should I commit the changes?"
    assert answered_question("ok now let's add dark mode", asked) is None
    assert answered_question("please add a LICENSE file too", asked) is None
    assert answered_question("ok, i hope compaction didn't hurt you", asked) is None
    assert answered_question("yes please, commit the changes", asked) == asked.split(". ")[1]
    assert answered_question("sure", asked) == "Should I commit the changes?"


def test_a_then_after_if_since_or_until_plans_no_step_and_a_deleted_file_is_done():
    for words in (
        "I'll keep the old endpoint for now, since then existing clients keep working.",
        "I'll check whether the port is free, and if it is not then kill the old server.",
        "I'll wait for the user's answer; until then nothing changes.",
        "Let me check the tests — if they pass, then I'd say we're done and can push.",
    ):
        span = Span()
        span.user("go")
        span.add("assistant", words)
        assert planned_steps_left(span.messages) == [], words
    span = Span()
    span.user("remove the toml config")
    span.add("assistant", "Next I'm updating the README, then I'll remove `viewer.toml`.")
    patch = "*** Begin Patch\n*** Update File: viewer.toml\n@@\n-a\n+b\n*** End Patch"
    span.call("apply_patch", "Success. Updated the following files:\nM viewer.toml", raw=patch)
    span.add("assistant", "Updated; removing the TOML file next.")
    patch = "*** Begin Patch\n*** Delete File: viewer.toml\n*** End Patch"
    span.call("apply_patch", "Success. Updated the following files:\nD viewer.toml", raw=patch)
    assert planned_steps_left(span.messages) == []


def test_only_the_runtime_s_refusal_is_a_rejected_call():
    refusal = "The user doesn't want to proceed with this tool use. The tool use was rejected."
    span = Span()
    span.user("find where the refusal text is produced")
    span.call("Bash", f'src/p.ts:88:  return "{refusal}"\n', exit_code=0, command="grep -rn x src/")
    span.call("Bash", refusal, error=True, command="rm -rf build")
    assert rejected_calls(span.messages) == [("Bash", "rm -rf build")]
