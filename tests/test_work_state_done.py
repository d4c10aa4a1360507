"""The agent's closing words read as a report of finished work (``core.work_state``), on plain
strings: its quote is then done work, never current work still pending."""

from __future__ import annotations

from ctxtool.core.work_state import done_by_action, done_by_file, reported_done


def test_a_closing_report_of_what_was_changed_is_done():
    report = (
        "Updated only JavaScript as requested: `viewer.js`.\n"
        "Changes made:\n- Removed the sanitization path.\nValidation:\n- `node --check` passed."
    )
    assert reported_done(report)
    assert reported_done("Implemented the parser and its tests.")


def test_a_plan_a_question_or_a_next_step_is_not_done():
    assert not reported_done("I'll update the parser next.")
    assert not reported_done("Updated the parser. Next: wire the CLI.")
    assert not reported_done("Should I update the parser?")
    assert not reported_done("Looking at the parser first.\nUpdated understanding: it is lazy.")


def test_a_task_is_done_by_a_later_call_that_carries_out_its_action():
    assert done_by_action("Phase 10: Submit PR", ["git status", "erk pr submit 2>&1"])
    assert done_by_action("Push to origin", ["git push -u origin feature"])
    assert not done_by_action("Push the branch", ["git push -u origin feature"])
    assert done_by_action("Commit changes", ["git add -A ", "git commit -a  Commit the changes"])
    # a commit message that happens to name the task's words is no action
    assert not done_by_action("Write unit tests", ['git commit -m "Write unit tests"'])
    assert not done_by_action("Write unit tests", ["pytest tests/unit"])
    # one word is too little to say which action, and the call must hold every word
    assert not done_by_action("Phase 9: Deploy", ["make deploy"])
    assert not done_by_action("Submit PR", ["erk pr view"])


def test_reports_of_things_made_are_done():
    assert reported_done("## ✅ TODO App Creation Complete\nI've successfully created the app.")
    assert reported_done("I've created a complete Vue.js todo application.")
    assert reported_done("Committed `5484f07` with the staged changes.")
    assert reported_done("The TODO app is now ready for use.")
    assert reported_done("Here's the deal:\n**SFX added:**\n- **Tick** — a blip")
    assert not reported_done("I've created the skeleton. Next: the handlers.")


def test_an_item_that_makes_a_file_the_span_changed_is_done():
    changed = ["/repo/packages/agent/src/cli-new.ts", "/repo/src/modes/interactive/a.ts"]
    assert done_by_file("- Create `cli-new.ts` pointing to `main-new.ts`", changed)
    assert done_by_file("1. Add src/modes/interactive/ with the components", changed)
    assert not done_by_file("- Test via `npx tsx src/cli-new.ts`", changed)  # no making
    assert not done_by_file("- Create `main-new.ts` from main.ts", changed)  # not changed
    assert not done_by_file("- Create the release notes", changed)  # names no file
