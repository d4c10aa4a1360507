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
from ctxtool.evaluation.keys import KeyedSpan, agreement, keyed_span, load_key, state_held

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
    errors = dict.fromkeys(
        f.error for f in signals_of(messages).failures if f.error and not f.warning
    )  # the errors: a warning the agent fixed is no error it met
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


# Where each state puts its subject: (the section, the line) a right summary writes, and the
# one a summary that misstates it writes (a fixed error called open, an open one called fixed,
# a pending task marked done, a finished one listed as to do).
RIGHT_STATE = {
    "fixed": ("Errors and fixes", "- {} — fixed"),
    "open": ("Errors and fixes", "- {} — still open"),
    "pending": ("Open tasks", "- [ ] {}"),
    "done": ("Done", "- [x] {}"),
}
WRONG_STATE = {
    "fixed": RIGHT_STATE["open"],
    "open": RIGHT_STATE["fixed"],
    "pending": RIGHT_STATE["done"],
    "done": RIGHT_STATE["pending"],
}


def state_summary(span: KeyedSpan, lines: dict[str, tuple[str, str]]) -> str:
    """A summary naming every hand state probe's subject (each of its groups' first
    alternative, on one line) in the section and words ``lines`` gives its state."""
    sections: dict[str, list[str]] = {}
    for probe in span.key.probes:
        if probe.state:
            heading, line = lines[probe.state]
            subject = " ".join(group[0] for group in probe.all_of)
            sections.setdefault(heading, []).append(line.format(subject))
    return "\n\n".join(f"## {h}\n" + "\n".join(items) for h, items in sections.items())


def test_a_summary_that_misstates_where_the_work_stands_scores_low_on_the_hand_state_probes(
    keyed_spans,
):
    """The hand keys' state probes, not only eval's derived ones, tell a summary that names
    every subject in the wrong state from one that names them in the right state: the state
    figure of docs/quality.md is no count of subjects named."""
    right_held = wrong_held = total = faults = 0
    for span in keyed_spans:
        if not any(p.state for p in span.key.probes):
            continue
        right = span.evaluate(state_summary(span, RIGHT_STATE))
        wrong = span.evaluate(state_summary(span, WRONG_STATE))
        held, n = state_held(right)
        right_held, total = right_held + held, total + n
        wrong_held += state_held(wrong)[0]
        faults += sum(bool(v.contradicted) for v in wrong.summary_only if v.probe.state)
    print(f"\nstate probes held: right {right_held}/{total}, wrong {wrong_held}/{total}")
    assert total >= 20
    assert right_held / total >= 0.9
    assert wrong_held / total <= 0.1
    assert faults > 0
