"""The agent's closing words read as a report of finished work (``core.work_state``), on plain
strings: its quote is then done work, never current work still pending."""

from __future__ import annotations

from ctxtool.core.work_state import reported_done


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
