"""The hand-written answer keys are well-formed and grounded in the transcripts they key.

The keys in tests/answer_keys/ are written by a person reading real transcripts, never by ctxtool's
code: they are the independent ground truth the evaluator and the summarizers are scored against.
These tests only guard their shape and that every key phrase really occurs in the keyed span, so
a key cannot drift into asking for something the span never said.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .conftest import TRANSCRIPTS

ANSWER_KEYS = Path(__file__).parent / "answer_keys"
KEY_FILES = sorted(ANSWER_KEYS.glob("*.json"))
# Keys kept from the summarizer's author (holdout/README.md): checked here like the tuning keys,
# scored separately, so the gap between the two sets shows whether the summarizer generalizes.
HOLDOUT_FILES = sorted((ANSWER_KEYS / "holdout").glob("*.json"))
ALL_KEY_FILES = KEY_FILES + HOLDOUT_FILES

FORMATS = {"claude-code", "codex", "pi", "openai-chat"}
KINDS = {
    "goal",
    "latest_request",
    "open_tasks",
    "error_fix",
    "file_changed",
    "instruction",
    "decision",
    "current_work",
    "remaining_work",
    "superseded",
    "file_removed",
    "number",
}
KEY_FIELDS = {
    "transcript",
    "format",
    "through_line",
    "through_message",
    "agent_summary_line",
    "notes",
    "probes",
}
PROBE_FIELDS = {"id", "kind", "question", "answer", "all_of", "none_of", "negated", "state"}
# Where the work stands at the cut (README.md): the kinds each state may key.
STATES = {
    "fixed": {"error_fix"},
    "open": {"error_fix"},
    "pending": {"open_tasks", "remaining_work", "current_work"},
    "done": {"open_tasks", "remaining_work", "current_work"},
}
MAX_PROBES = 15
# Words that occur in any coding session: a key phrase made of one of them proves nothing.
GENERIC_PHRASES = {
    "added",
    "agent",
    "change",
    "changed",
    "changes",
    "code",
    "command",
    "done",
    "error",
    "errors",
    "file",
    "files",
    "fixed",
    "from",
    "have",
    "that",
    "the user",
    "this",
    "tool",
    "test",
    "tests",
    "update",
    "updated",
    "user",
    "what",
    "when",
    "with",
    "work",
}
MIN_PHRASE = 4


def normalised(text: str) -> str:
    """Case-folded with runs of whitespace made one space: how an evaluator matches key phrases."""
    return re.sub(r"\s+", " ", text).strip().casefold()


def strings_in(value: object) -> list[str]:
    """Every string a decoded record holds, JSON text inside strings (tool arguments) decoded too,
    so a phrase is found as the reader saw it, not as JSON escaped it."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in "{[" and stripped[-1:] in "}]":
            try:
                return [value, *strings_in(json.loads(stripped))]
            except ValueError:
                pass
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings_in(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    return []


def transcript_lines(key: dict) -> list[str]:
    return (TRANSCRIPTS / key["transcript"]).read_text(encoding="utf-8").splitlines()


def message_entries(key: dict) -> list[object]:
    """The entries a through_message span counts: a pretty-printed trajectory's `history`, or the
    elements of a transcript that is one top-level JSON array (an OpenHands event list)."""
    document = json.loads((TRANSCRIPTS / key["transcript"]).read_text(encoding="utf-8"))
    return document if isinstance(document, list) else document["history"]


def span_records(key: dict) -> list[object]:
    """The records of the keyed span: JSONL lines 1..through_line, or the first through_message
    entries of a pretty-printed trajectory's history or of a top-level event array."""
    if "through_message" in key:
        return message_entries(key)[: key["through_message"]]
    return [json.loads(line) for line in transcript_lines(key)[: key["through_line"]] if line]


def span_text(key: dict) -> str:
    return "\n".join(normalised(s) for record in span_records(key) for s in strings_in(record))


def is_agent_summary(fmt: str, record: dict) -> bool:
    """Whether a record is the transcript's own summary of what came before it."""
    payload = record.get("payload") if isinstance(record.get("payload"), dict) else {}
    return {
        "claude-code": record.get("isCompactSummary") is True,
        "pi": record.get("type") == "compaction",
        "codex": record.get("type") == "compacted" or payload.get("type") == "compacted",
    }.get(fmt, False)


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(
    scope="module",
    params=ALL_KEY_FILES,
    ids=[p.stem if p in KEY_FILES else f"holdout/{p.stem}" for p in ALL_KEY_FILES],
)
def key_file(request) -> Path:
    return request.param


def indexed_transcripts() -> set[str]:
    """format/file of every transcript INDEX.tsv describes."""
    rows = (TRANSCRIPTS / "INDEX.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return {"/".join(row.split("\t")[:2]) for row in rows if row.strip()}


def test_every_indexed_transcript_has_a_key_and_no_key_names_another():
    keyed = {load(path)["transcript"] for path in KEY_FILES}
    assert len(KEY_FILES) >= 10
    assert keyed == indexed_transcripts()


def test_the_holdout_keys_span_several_transcripts_and_name_indexed_ones():
    """The held-out set is large enough to give its own figure, and keys only shared transcripts."""
    keyed = [load(path)["transcript"] for path in HOLDOUT_FILES]
    assert len(HOLDOUT_FILES) >= 8
    assert len(set(keyed)) >= 6
    assert set(keyed) <= indexed_transcripts()
    assert (ANSWER_KEYS / "holdout" / "README.md").is_file()


def test_key_is_well_formed(key_file):
    key = load(key_file)
    assert set(key) <= KEY_FIELDS, set(key) - KEY_FIELDS
    assert key["format"] in FORMATS
    assert key["transcript"].split("/")[0] == key["format"]
    stem = Path(key["transcript"]).stem
    assert key_file.stem == f"{key['format']}--{stem}" or key_file.stem.startswith(
        f"{key['format']}--{stem}--"
    ), "file name is <format>--<transcript stem>[--<span name>].json"
    assert isinstance(key["notes"], str) and key["notes"].strip()
    assert ("through_line" in key) != ("through_message" in key)
    assert 1 <= len(key["probes"]) <= MAX_PROBES
    ids = [probe["id"] for probe in key["probes"]]
    assert len(ids) == len(set(ids)), "probe ids are unique within a key"
    for probe in key["probes"]:
        assert set(probe) <= PROBE_FIELDS, (probe["id"], set(probe) - PROBE_FIELDS)
        assert probe["kind"] in KINDS, probe["id"]
        assert probe["question"].strip().endswith("?"), probe["id"]
        assert probe["answer"].strip(), probe["id"]
        assert probe["all_of"] and all(
            isinstance(group, list) and group and all(isinstance(p, str) for p in group)
            for group in probe["all_of"]
        ), probe["id"]
        assert all(isinstance(p, str) for p in probe.get("none_of", [])), probe["id"]
        assert probe.get("negated", False) in (True, False), probe["id"]
        if "state" in probe:
            assert probe["kind"] in STATES.get(probe["state"], ()), (
                f"{probe['id']}: state {probe['state']!r} does not fit kind {probe['kind']!r}"
            )
            if probe["state"] == "fixed":
                assert len(probe["all_of"]) >= 2, f"{probe['id']}: a fixed error names its fix"


def test_span_is_within_the_transcript(key_file):
    key = load(key_file)
    path = TRANSCRIPTS / key["transcript"]
    assert path.is_file(), f"{path} is missing"
    if "through_message" in key:
        entries = message_entries(key)
        assert 1 <= key["through_message"] < len(entries), "messages remain after the span"
        return
    lines = transcript_lines(key)
    assert 1 <= key["through_line"] <= len(lines)
    if "agent_summary_line" in key:
        line = key["agent_summary_line"]
        assert key["through_line"] < line <= len(lines)
        assert is_agent_summary(key["format"], json.loads(lines[line - 1])), (
            f"line {line} is not the transcript's own summary"
        )


def test_key_phrases_are_distinctive(key_file):
    for probe in load(key_file)["probes"]:
        phrases = [p for group in probe["all_of"] for p in group] + probe.get("none_of", [])
        for phrase in phrases:
            text = normalised(phrase)
            assert len(text) >= MIN_PHRASE and text not in GENERIC_PHRASES, (
                f"{probe['id']}: {phrase!r} is too generic to be a key"
            )


def test_every_key_group_is_grounded_in_the_span(key_file):
    key = load(key_file)
    text = span_text(key)
    for probe in key["probes"]:
        for group in probe["all_of"]:
            assert any(normalised(p) in text for p in group), (
                f"{key_file.name} {probe['id']}: none of {group} occurs in the keyed span"
            )
        for phrase in probe.get("none_of", []):
            assert all(normalised(phrase) not in map(normalised, g) for g in probe["all_of"]), (
                f"{probe['id']}: {phrase!r} is both required and forbidden"
            )


def test_the_agent_summary_after_a_span_is_not_part_of_it():
    """The span stops at its last line: the transcript's own summary, written after it, is not
    read as span text (else a key could ask for what only the agent's summary says)."""
    checked = 0
    for path in ALL_KEY_FILES:
        key = load(path)
        if "agent_summary_line" not in key:
            continue
        record = json.loads(transcript_lines(key)[key["agent_summary_line"] - 1])
        summary = normalised(" ".join(strings_in(record.get("summary") or record.get("message"))))
        if len(summary) > 100:
            assert summary not in span_text(key), path.name
            checked += 1
    assert checked >= 3


def test_both_key_sets_ask_where_the_work_stands():
    """Each set has state probes of every kind (README.md), so quality_table's state figure is
    measured on both: fixed and open errors, tasks still to do and tasks done."""
    for files in (KEY_FILES, HOLDOUT_FILES):
        states = [p["state"] for path in files for p in load(path)["probes"] if "state" in p]
        for state, least in (("fixed", 5), ("open", 2), ("pending", 5), ("done", 3)):
            assert states.count(state) >= least, (state, states.count(state))
