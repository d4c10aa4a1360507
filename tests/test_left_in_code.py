"""The notes the agent's code leaves for later (span_facts.left_in_code) are comments its
writes added in code: not a markdown heading, not a template's instruction to its reader,
not a TODO already in an edit's unchanged context (found by the session's review)."""

from __future__ import annotations

from ctxtool.core.span_facts import left_in_code
from tests.test_span_facts import Span


def _left(*writes: tuple[str, str, str]) -> list[tuple[str, str]]:
    s = Span()
    s.user("Set the project up.")
    for path, old, new in writes:
        if old:
            s.call("Edit", "ok", file_path=path, old_string=old, new_string=new)
        else:
            s.call("Write", "ok", file_path=path, content=new)
    return left_in_code(s.messages)


def test_a_todo_comment_the_agent_added_to_code_is_left_for_later():
    assert _left(("src/app.ts", "", "const a = 1;\n// TODO: wire the real API client\n")) == [
        ("src/app.ts", "TODO: wire the real API client")
    ]


def test_a_heading_a_doc_and_a_template_leave_nothing():
    assert _left(("CLAUDE.md", "", "# TODO App Project\n\n# TODO: write the intro\n")) == []
    assert _left((".env.example", "", "# Replace with your real OpenAI API key\nKEY=\n")) == []
    assert _left(("src/app.py", "", "# TODO App\nx = 1\n")) == []  # no 'TODO:' note


def test_a_todo_in_an_edits_unchanged_context_is_not_what_it_left():
    old = "# TODO: handle errors\nx = 1\n"
    assert _left(("src/app.py", old, "# TODO: handle errors\nx = 2\n")) == []
