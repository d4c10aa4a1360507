"""Stored quality figures and carry-over (ctxtool.core.evaluator.gate) and the extractive
summarizer's lossless iteration, on plain lists: no database, no server."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.compaction.summarizers import ExtractiveSummarizer, SummaryRequest
from ctxtool.compaction.summarizers.extractive import MAX_READ_FILES
from ctxtool.core.checkpoint_quality import describe_quality
from ctxtool.core.evaluator import carry_over, evaluate
from ctxtool.core.evaluator import gate as quality
from ctxtool.core.records import Message
from ctxtool.core.sections import canonical_heading, parse_sections, summary_items
from ctxtool.core.tokens import count_text

PI_SUMMARY = """# Context Checkpoint: Refactoring

## Goal
Refactor `coding-agent` to share an `AgentSession` abstraction.

## User Preferences
- E2E tests only, no unit tests for the modes

## Key Decisions Made
1. **Keep old code for reference** - new files main-new.ts, cli-new.ts

## Next Steps
1. Wire print-mode.ts to AgentSession
2. Delete main.ts once parity holds
"""

CLAUDE_SUMMARY = """This session is being continued from a previous conversation that ran out of context.
Analysis:
The user asked for session accumulation.

Summary:
1. Primary Request and Intent:
   - Implement plan #8511 "Session Accumulation for Cross-Machine Learning"
2. Pending Tasks:
   - Run CI on push_session.py after the ruff format fix
"""

CODEX_SUMMARY = (
    "We were migrating the billing service to Postgres 16. The schema dump is in "
    "db/schema.sql; the failing test is tests/test_invoice.py::test_rounding."
)


def msg(i, role, content=None, **kw):
    return Message(i, 1, role, content, **kw)


def read_call(i, path, cid):
    return msg(
        i,
        "assistant",
        None,
        tool_calls=[
            {
                "id": cid,
                "type": "function",
                "function": {"name": "edit", "arguments": json.dumps({"path": path})},
            }
        ],
    )


def test_sections_of_every_writer():
    pi = parse_sections(PI_SUMMARY)
    assert [s.heading for s in pi] == [
        "Context Checkpoint: Refactoring",
        "Goal",
        "User Preferences",
        "Key Decisions Made",
        "Next Steps",
    ]
    claude = {s.heading: s.items for s in parse_sections(CLAUDE_SUMMARY)}
    assert claude["Primary Request and Intent"][0].startswith("- Implement plan #8511")
    assert "Pending Tasks" in claude
    [codex] = parse_sections(CODEX_SUMMARY)
    assert codex.heading == "Summary" and codex.items == [CODEX_SUMMARY]
    assert canonical_heading("Primary Request and Intent") == "Goal"
    assert canonical_heading("User Preferences") == "Constraints"
    assert canonical_heading("Next Steps") == "Next step"
    assert canonical_heading("Project Overview") is None


def test_extractive_goal_is_the_first_real_request_or_the_title():
    summarizer = ExtractiveSummarizer()
    boiler = [
        msg(1, "user", "<user_instructions>be brief</user_instructions>"),
        msg(2, "user", "/init"),
    ]
    out = summarizer.summarize(
        SummaryRequest(None, boiler + [msg(3, "user", "Port the CLI to click")], {})
    )
    assert out.text.split("\n")[1] == "Port the CLI to click"
    out = summarizer.summarize(SummaryRequest(None, boiler, {}, title="Port the CLI"))
    assert out.text.split("\n")[1] == "Port the CLI"


def test_stored_figures_are_described_and_judged_for_validate():
    evaluation = evaluate([msg(1, "user", "Port the CLI to click")], "## Goal\nRefactor src/zz.py")
    figures = {**evaluation.figures(), "carry_over": 0.5}
    assert figures["missed"] == ["goal", "latest_request"] and figures["fabrications"]
    assert describe_quality(figures) == (
        f"probes 0% (0/2), 1 fabrication, summary {figures['summary_tokens']} tokens, "
        "carry-over 50%"
    )
    warning = quality.quality_warning({"quality": figures})
    assert (
        "probes 0%" in warning
        and "'src/zz.py'" in warning
        and "missed: goal, latest_request" in warning
    )
    good = evaluate([msg(1, "user", "Port the CLI to click")], "## Goal\nPort the CLI to click")
    assert quality.quality_warning({"quality": good.figures()}) is None
    # a checkpoint of the older retention figures is still described and judged by them
    old = {"retention": 0.5, "facts_held": 3, "facts": 6, "carry_over": None}
    assert describe_quality(old) == "retention 50% (3/6 facts)"
    assert "retention 50%" in quality.quality_warning({"quality": old})
    assert quality.quality_warning({"quality": old}, min_quality=0.5) is None
    assert quality.quality_warning({}) is None and quality.quality_warning(None) is None


WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=6, max_size=10)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(WORDS, min_size=2, max_size=5), min_size=1, max_size=12, unique_by=lambda w: w[0]
    ),
    st.data(),
)
def test_carry_over_is_the_share_of_items_held(items, data):
    # make items disjoint in words so holding one never holds another
    seen: set[str] = set()
    distinct = []
    for words in items:
        words = [w for w in words if w not in seen]
        if len(words) >= 2:
            seen.update(words)
            distinct.append("- " + " ".join(words))
    if not distinct:
        return
    previous = "## Next Steps\n" + "\n".join(distinct)
    kept = data.draw(st.lists(st.sampled_from(distinct), unique=True))
    new = "## Next Steps\n" + "\n".join(kept)
    assert carry_over(previous, new).share == round(len(kept) / len(distinct), 3)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([PI_SUMMARY, CLAUDE_SUMMARY, CODEX_SUMMARY]),
    st.lists(
        st.sampled_from(
            [
                "Add caching to the API client",
                "Always run ruff before a commit",
                "Rename the settings module",
                "Do not change the schema",
            ]
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_extractive_iteration_keeps_every_previous_item(previous, requests):
    messages = [msg(i + 1, "user", r) for i, r in enumerate(requests)]
    out = ExtractiveSummarizer().summarize(SummaryRequest(previous, messages, {}, max_tokens=4096))
    assert carry_over(previous, out.text).share == 1.0
    for r in requests:
        assert r in out.text
    # and the next iteration, on top of our own summary, keeps everything again
    again = ExtractiveSummarizer().summarize(
        SummaryRequest(out.text, [msg(99, "user", "Ship it")], {})
    )
    assert carry_over(out.text, again.text).share == 1.0


def test_extractive_trims_oldest_first_to_its_budget_and_says_so():
    previous = "## Goal\nKeep the goal\n\n## Next Steps\n" + "\n".join(
        f"- old step {i} " + "padding " * 20 for i in range(60)
    )
    files = {"modified_files": [f"src/m{i}.py" for i in range(5)], "read_files": []}
    messages = [msg(1, "user", "the newest request about the parser")]
    out = ExtractiveSummarizer().summarize(
        SummaryRequest(previous, messages, files, max_tokens=600)
    )
    assert count_text(out.text) <= 600
    assert "Keep the goal" in out.text and "the newest request about the parser" in out.text
    # every changed file named; over budget, their directory is said once ("- `src/`: …")
    assert "- `src/`: `m0.py`, `m1.py`, `m2.py`, `m3.py`, `m4.py`" in out.text
    assert "old step 59" in out.text and "old step 0 " not in out.text
    assert "older items trimmed to stay within 600 tokens" in out.text


def test_extractive_caps_lists_with_a_count():
    files = {"read_files": [f"r{i}.py" for i in range(100)], "modified_files": []}
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": f"tool{i}", "arguments": "{}"}}
        for i in range(20)
    ]
    out = ExtractiveSummarizer().summarize(
        SummaryRequest(None, [msg(1, "assistant", tool_calls=calls)], files)
    )
    assert f"(and {100 - MAX_READ_FILES} more)" in out.text
    assert "tool0 x1" not in out.text  # no tally of calls: it tells the next step nothing


def test_errors_are_the_last_distinct_ones_with_a_count():
    failed = []
    for i in range(1, 40):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"run {i % 23}"})},
        }
        failed.append(msg(2 * i, "assistant", None, tool_calls=[call]))
        failed.append(
            msg(
                2 * i + 1,
                "tool",
                f"run {i}\nValueError: bad value {i % 23}",
                tool_call_id=f"c{i}",
                details={"is_error": True},
            )
        )
    out = ExtractiveSummarizer().summarize(SummaryRequest(None, failed, {})).text
    errors = out.split("## Errors and fixes")[1]
    assert "(and 3 earlier distinct errors in this span)" in errors  # 23 distinct, 20 shown
    assert errors.count("ValueError") == 20


def test_summary_items_leave_out_placeholders():
    assert summary_items(
        "## Goal\n(not stated)\n\n## Errors\n- (none)\n- real\n\n"
        "(12 messages summarized extractively; no LLM was used)"
    ) == ["- real"]
