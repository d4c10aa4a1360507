"""A model turn that ended with the provider's error (Pi records ``stopReason: "error"`` and
its ``errorMessage``, "Request timed out.", on an empty assistant message) is kept by the
import, read by the fabrication check as part of the history, and said once under Errors and
fixes: how often, and whether the agent's next turn went on (#42 item 1)."""

from __future__ import annotations

import json
from pathlib import Path

from ctxtool.compaction.summarizers.span_notes import read_span
from ctxtool.core.evaluator.answers import message_text
from ctxtool.core.outcomes import failed_turn_error
from ctxtool.core.records import Message
from ctxtool.core.sections import ERRORS
from ctxtool.evaluation.keys import keyed_span, load_key

from .conftest import TRANSCRIPTS
from .keyed_spans import extractive_summary, section

KEYS = Path(__file__).parent / "answer_keys"
TIMED_OUT = {"stopReason": "error", "errorMessage": "Request timed out."}


def _turns(*failed: bool) -> list[Message]:
    out = [Message(1, 1, "user", "Tag the notes.")]
    for i, fails in enumerate(failed, start=2):
        details = TIMED_OUT if fails else {"stopReason": "stop"}
        out.append(Message(i, 1, "assistant", None if fails else "Tagged.", details=details))
    return out


def test_a_turn_s_error_is_its_runtime_s_record_and_part_of_the_history():
    failed, went_on = _turns(True, False)[1:]
    assert failed_turn_error(failed) == "Request timed out."
    assert failed_turn_error(went_on) is None
    assert failed_turn_error(Message(9, 1, "user", "x", details=TIMED_OUT)) is None
    assert "Request timed out." in message_text(failed)  # the fabrication check reads it


def test_the_errors_are_said_once_with_how_often_and_whether_the_work_went_on():
    errors = read_span(_turns(True, True, False)).errors
    assert errors == [
        "the model's turn ended with an error: Request timed out. (2 times)"
        " — fixed: the next turn went on"
    ]
    assert read_span(_turns(False, True)).errors[-1].endswith("— still open")
    assert read_span(_turns(False, False)).errors == []


def test_pi_keeps_the_error_and_paradocs_summary_says_what_interrupted_it(tmp_path):
    span = keyed_span(load_key(KEYS / "pi--paradocs-session.json"), TRANSCRIPTS, tmp_path)
    failed = [m for m in span.summarized if failed_turn_error(m)]
    assert failed and all(m.content in (None, "") for m in failed)
    assert json.loads(json.dumps(failed[0].details))["errorMessage"] == "Request timed out."
    [line] = [i for i in section(extractive_summary(span), ERRORS) if "Request timed out" in i]
    assert f"({len(failed)} times)" in line and "fixed: the next turn went on" in line
