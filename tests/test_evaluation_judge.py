"""The LLM judge through the real openai client against tests/llm_server.py (a real local
OpenAI-compatible server): the model answers from the context alone, then grades its answer."""

from __future__ import annotations

import pytest

from ctxtool.core.evaluator import probe_from_dict
from ctxtool.core.records import Message
from ctxtool.evaluation.judge import (
    ANSWER_PROMPT,
    GRADE_PROMPT,
    Judge,
    JudgeError,
    context_for_judge,
    judged_share,
)

from .llm_server import FakeLLM

GOAL = probe_from_dict(
    {
        "id": "goal",
        "kind": "goal",
        "question": "What is the overall goal?",
        "answer": "Implement plan 8511 with /erk:plan-implement.",
        "all_of": [["plan-implement"], ["8511"]],
    }
)


def reader(body: dict) -> str:
    """A model that answers only from what the request holds: the goal when the context
    names plan 8511, else that the context does not say; grades by the reference's number."""
    system, user = (m["content"] for m in body["messages"])
    if system == ANSWER_PROMPT:
        context = user.split("</context>")[0]
        return "Implement plan 8511." if "8511" in context else "NOT IN CONTEXT"
    assert system == GRADE_PROMPT
    candidate = user.split("Candidate answer:")[1]
    return "CORRECT" if "8511" in candidate else "INCORRECT"


def test_the_judge_answers_from_the_context_and_grades_against_the_key():
    kept = [Message(7, 1, "user", "carry on with the plan")]
    with FakeLLM() as llm:
        llm.summary_text = reader
        judge = Judge("test-model", base_url=llm.base_url, max_retries=0)
        [held] = judge.judge([GOAL], "## Goal\nRun /erk:plan-implement 8511.", kept)
        [missed] = judge.judge([GOAL], "## Goal\nImplement a plan.", kept)
    assert held.correct and held.answer == "Implement plan 8511."
    assert not missed.correct and missed.answer == "NOT IN CONTEXT"
    asked = llm.requests[0]["messages"][1]["content"]
    assert "What is the overall goal?" in asked and "[user #7] carry on with the plan" in asked
    grading = llm.requests[1]["messages"][1]["content"]
    assert "Reference answer: Implement plan 8511" in grading
    assert "plan-implement; 8511" in grading
    # An answer that says the context does not hold it is graded without asking: 3 requests.
    assert len(llm.requests) == 3
    assert held.as_dict() == {"answer": "Implement plan 8511.", "correct": True}
    assert judged_share([held, missed]) == 0.5 and judged_share([]) is None


def test_a_failing_endpoint_is_one_clear_error():
    with FakeLLM() as llm:
        llm.failures.extend([500])
        judge = Judge("test-model", base_url=llm.base_url, max_retries=0)
        with pytest.raises(JudgeError, match=r"judge \(test-model\) answered HTTP 500"):
            judge.judge([GOAL], "summary")


def test_the_context_keeps_the_summary_and_the_newest_kept_messages_that_fit():
    kept = [Message(i, 1, "user", f"message {i} " + "x" * 100) for i in range(1, 11)]
    text = context_for_judge("the summary", kept, limit=500)
    assert text.startswith("## Summary of the earlier history\nthe summary")
    assert "[user #10]" in text and "[user #1]" not in text
    assert text.index("[user #9]") < text.index("[user #10]")
