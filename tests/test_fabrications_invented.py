"""What a small model invents, caught as fabrications (issue #43): line numbers and figures the
history never held, and the prompt's own instructions copied in place of a summary. SmolLM2,
asked to summarize one sentence about parser.py, added "line 13" and "line 42" and wrote the
format's rules into its summary. A faithful summary is never flagged: a quoted command, path,
URL or number the history holds is no fabrication."""

from __future__ import annotations

from ctxtool.core.evaluator import fabrications
from ctxtool.core.records import Message
from ctxtool.core.summary_prompt import BRIEF_FORMAT, SUMMARY_FORMAT

SPAN = [
    Message(
        1,
        1,
        "user",
        "Please fix parser.py so that it accepts empty lines instead of raising ValueError.",
    ),
    Message(2, 1, "assistant", "parser.py now skips empty lines before splitting."),
]

TRACEBACK = [
    Message(1, 1, "user", "pytest fails, see below"),
    Message(
        2,
        1,
        "tool",
        'File "src/parser.py", line 42, in parse\n    key, value = line.split("=")\n'
        "ValueError: not enough values to unpack\n1,234 tests ran in 3.5s; coverage 87%\n"
        "see http://127.0.0.1:8080/api/v2/health",
    ),
]


def kinds(summary: str, span=SPAN, **kwargs) -> list[tuple[str, str]]:
    return [(f.kind, f.text) for f in fabrications(summary, span, **kwargs)]


def test_a_line_number_the_history_never_held_is_a_fabrication():
    summary = "## Done\n- Fixed parser.py at line 13 so that empty lines are skipped (line 42)."
    assert kinds(summary) == [("line", "13"), ("line", "42")]
    assert kinds("- parser.py:13 skips empty lines") == [("line", "13")]
    assert kinds("- lines 40-52 of parser.py changed") == [("line", "40"), ("line", "52")]


def test_a_line_number_or_figure_the_history_holds_is_none():
    summary = (
        "## Errors and fixes\n- `ValueError: not enough values to unpack` at src/parser.py "
        "line 42 (parser.py:42) — still open\n## Done\n- 1234 tests ran in 3.5s, coverage 87%; "
        "checked http://127.0.0.1:8080/api/v2/health"
    )
    assert kinds(summary, TRACEBACK) == []


def test_an_invented_figure_is_a_fabrication_a_small_count_is_not():
    assert kinds("- 250 tests pass, coverage 93.5%", TRACEBACK) == [
        ("figure", "250"),
        ("figure", "93.5"),
    ]
    # One digit: a count a summary may make of what it lists ("2 files changed").
    assert kinds("- 2 files changed", TRACEBACK) == []


def test_numbers_inside_commands_paths_and_urls_are_read_as_those():
    span = [
        Message(1, 1, "user", "run `pytest tests/test_v2.py -k case17` and open https://x.io/a/99")
    ]
    assert kinds("- ran `pytest tests/test_v2.py -k case17`; see https://x.io/a/99", span) == []


def test_the_prompt_s_rules_copied_into_the_summary_are_a_fabrication():
    summary = (
        "## Goal\nFix parser.py.\n## Constraints\n- Keep exact paths, commands and error "
        "messages; state only what the conversation shows, never a file, a line number or a "
        "name it does not."
    )
    [(kind, text)] = kinds(summary)
    assert kind == "instructions"
    assert text.startswith("keep exact paths commands and error messages state only what")


def test_a_format_placeholder_written_as_content_is_a_fabrication():
    summary = "## Goal\nFix parser.py.\n## Current work\nWhat the agent was doing last"
    assert kinds(summary) == [("instructions", "what the agent was doing last")]
    summary = "## Errors and fixes\n- [The exact error] — fixed by [what changed] / still open"
    assert [k for k, _ in kinds(summary)] == ["instructions"]


def test_the_format_s_own_words_in_a_faithful_summary_are_none():
    """Headings, checkboxes, "still open", "[redacted]" and the Next step's prescribed "None:
    the latest request is done" are the format, asked for."""
    summary = (
        "## Goal\nFix parser.py so that it accepts empty lines.\n## Latest request\n> Please fix "
        "parser.py so that it accepts empty lines instead of raising ValueError.\n"
        "## Errors and fixes\n- ValueError on empty lines — fixed by skipping them\n"
        "## Done\n- [x] parser.py skips empty lines\n## Next step\n"
        "None: the latest request is done"
    )
    assert kinds(summary) == []


def test_instructions_the_history_holds_are_none():
    """A conversation about the prompt itself (ctxtool's own development) may quote it."""
    span = SPAN + [Message(3, 1, "user", "The brief format reads:\n" + BRIEF_FORMAT)]
    summary = "## Decisions\n- **Brief format**: state only what the conversation shows, never a file, a line number or a name it does not"
    assert kinds(summary, span) == []
    assert kinds(summary) != []
    assert "state only what the conversation shows" in SUMMARY_FORMAT.lower()


def test_a_summarizer_s_note_of_its_own_counts_is_none():
    summary = (
        "## Done\n- parser.py skips empty lines\n(18 messages summarized extractively; no LLM "
        "was used)\n(6 older items trimmed to stay within 1500 tokens)\n- long output (clipped "
        "to 1452 tokens)\n- (and 13 earlier distinct errors in this span)\n- (and 40 more)\n"
        "(58 files read; the checkpoint's details list them)\n- edit refused (12 times)"
    )
    assert kinds(summary) == []


def test_a_numbered_list_s_markers_are_no_figures():
    summary = "## Done\n" + "\n".join(f"{i}. a step of the parser.py fix" for i in range(9, 13))
    assert kinds(summary) == []
    assert kinds("1. parser.py fixed in 2024 commits") == [("figure", "2024")]
