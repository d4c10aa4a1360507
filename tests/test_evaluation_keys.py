"""The evaluator against the hand-written answer keys (tests/answer_keys): calibrated on real
transcripts. Each keyed span is imported into a SQLite store through ``ctxtool.importer`` and
read back; then (a) the transcript's own agent summary scores high on the hand keys, (b) a dump
of every path and error string of the span scores low, (c) a fabricated summary is flagged and
scores low, (d) the probes derived from the span agree with the hand keys (rate per kind).

Every threshold is below, in one place. Nothing here is a recorded result: the figures are
computed from the transcripts and the keys on every run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxtool.core.errors import CtxtoolError
from ctxtool.core.evaluator import ProbeKind
from ctxtool.core.records import Message
from ctxtool.core.span_facts import modified_paths, signals_of
from ctxtool.evaluation.keys import KeyedSpan, agreement, keyed_span, load_key

from .conftest import TRANSCRIPTS

KEYS_DIR = Path(__file__).parent / "answer_keys"
KEY_FILES = sorted(KEYS_DIR.glob("*.json"))

# -- calibration thresholds (the one place) ------------------------------------------------------
AGENT_SUMMARY_MIN_SCORE = 0.6  # (a) a runtime's own summary of the span, on the hand keys
AGENT_SUMMARY_MIN_MEAN = 0.7  # (a) the mean over all keyed spans with one
DUMP_MAX_SCORE = 0.35  # (b) every path and error string of the span
FABRICATED_MAX_SCORE = 0.35  # (c) an invented goal and next steps plus that dump
MIN_SCORED_PROBES = 3  # spans with fewer summary-only hand probes say little about a summary
# A runtime summary shorter than this is a fixture's placeholder ("[trimmed for fixture]",
# "[REDACTED_MESSAGE len=0]"): there is nothing in it to calibrate on.
MIN_AGENT_SUMMARY_TOKENS = 40
AGREEMENT_MIN = {ProbeKind.GOAL: 0.6, ProbeKind.LATEST_REQUEST: 0.5}  # (d)

# The invented database is one no shared transcript names (PostgreSQL occurs in real spans: a
# search result in the edgerunner session), so it is a fabrication on every keyed span.
FABRICATED_SUMMARY = (
    "Goal: migrate the storage layer to CockroachDB. Next steps: delete the tests directory "
    "and push to main."
)


@pytest.fixture(scope="module")
def keyed_spans(tmp_path_factory) -> list[KeyedSpan]:
    return [
        keyed_span(load_key(path), TRANSCRIPTS, tmp_path_factory.mktemp(path.stem[:40]))
        for path in KEY_FILES
    ]


def path_and_error_dump(messages: list[Message]) -> str:
    """Every path the span's tool calls name and every error string of its failures."""
    paths: dict[str, None] = {}
    for m in messages:
        for call in m.calls():
            try:
                args = json.loads(call["function"]["arguments"] or "{}")
            except ValueError:
                args = {}
            named = (
                [args.get(k) for k in ("file_path", "path", "notebook_path")]
                if isinstance(args, dict)
                else []
            )
            for p in [*named, *modified_paths(call)]:
                if isinstance(p, str) and p:
                    paths[p] = None
    errors = dict.fromkeys(f.error for f in signals_of(messages).failures if f.error)
    return "\n".join(["Files:", *paths, "Errors:", *errors])


def test_there_are_keys_for_at_least_eight_transcripts():
    transcripts = {load_key(p).transcript for p in KEY_FILES}
    assert len(transcripts) >= 8


def test_a_runtimes_own_summary_scores_high_on_the_hand_keys(keyed_spans):
    scored = {}
    for span in keyed_spans:
        if span.checkpoint is None:
            continue
        evaluation = span.evaluate(span.checkpoint.summary)
        if (
            evaluation.summary_tokens < MIN_AGENT_SUMMARY_TOKENS
            or len(evaluation.summary_only) < MIN_SCORED_PROBES
        ):
            continue
        scored[span.key.name] = evaluation.score
        missed = [v.probe.id for v in evaluation.missed]
        assert evaluation.score >= AGENT_SUMMARY_MIN_SCORE, (
            span.key.name,
            evaluation.score,
            missed,
        )
    print("\nagent summaries:", scored)
    assert scored, "no keyed span has an agent summary to calibrate on"
    assert sum(scored.values()) / len(scored) >= AGENT_SUMMARY_MIN_MEAN


def test_a_dump_of_paths_and_errors_scores_low(keyed_spans):
    scores = {}
    for span in keyed_spans:
        evaluation = span.evaluate(path_and_error_dump(span.summarized))
        if len(evaluation.summary_only) < MIN_SCORED_PROBES:
            continue
        scores[span.key.name] = evaluation.score
        assert evaluation.score <= DUMP_MAX_SCORE, (span.key.name, evaluation.score)
    print("\npath-and-error dumps:", scores)
    assert len(scores) >= 5


def test_a_fabricated_summary_is_flagged_and_scores_low(keyed_spans):
    for span in keyed_spans:
        summary = FABRICATED_SUMMARY + "\n\n" + path_and_error_dump(span.summarized)
        evaluation = span.evaluate(summary)
        assert evaluation.fabrications, span.key.name
        assert "cockroachdb" in {f.text.lower() for f in evaluation.fabrications}, span.key.name
        if len(evaluation.summary_only) >= MIN_SCORED_PROBES:
            assert evaluation.score <= FABRICATED_MAX_SCORE, (span.key.name, evaluation.score)


def test_a_runtimes_own_summary_states_no_fabrication(keyed_spans):
    """The agent summaries are real: every path, command, error name and identifier they
    state is in the span (or its kept messages)."""
    checked = 0
    for span in keyed_spans:
        if span.checkpoint is not None:
            assert span.evaluate(span.checkpoint.summary).fabrications == [], span.key.name
            checked += 1
    assert checked >= 3


def test_a_file_that_is_no_answer_key_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(
        '{"transcript": "x.jsonl", "format": "pi", "through_line": 3, "probes": '
        '[{"id": "a", "kind": "mood", "all_of": [["x"]]}]}'
    )
    with pytest.raises(
        CtxtoolError, match=r"bad.json: not an answer key \(probe 'a': unknown kind"
    ):
        load_key(bad)


def test_derived_probes_agree_with_the_hand_keys(keyed_spans):
    rates = agreement(keyed_spans)
    print("\nagreement of derived probes with hand keys, per kind:")
    for kind, (held, total) in sorted(rates.items(), key=lambda kv: kv[0].value):
        print(f"  {kind.value:15} {held}/{total}")
    for kind, minimum in AGREEMENT_MIN.items():
        held, total = rates[kind]
        assert held / total >= minimum, (kind.value, held, total)
