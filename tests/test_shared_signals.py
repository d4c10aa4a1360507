"""One compaction reads its span's signals once (span_facts.shared_signals): the extractive
summarizer's notes and the quality gate's probes read the same span, and each ran signals_of
over it (#45 item 12). Outside a compaction nothing is kept: a span read again is read anew."""

from __future__ import annotations

from pathlib import Path

from ctxtool.compaction.compactor import Compactor
from ctxtool.compaction.summarizers import ExtractiveSummarizer
from ctxtool.core import span_facts
from ctxtool.core.records import Message
from ctxtool.evaluation.keys import keyed_span, load_key

from .builders import SETTINGS, add_session, coding_session
from .conftest import TRANSCRIPTS

KEYS = Path(__file__).resolve().parent / "answer_keys"


def _counting(monkeypatch) -> list[int]:
    """The span sizes signals are read from (the real reading runs; this only counts it)."""
    read: list[int] = []
    real = span_facts._signals_of

    def counted(messages):
        read.append(len(messages))
        return real(messages)

    monkeypatch.setattr(span_facts, "_signals_of", counted)
    return read


def test_one_compaction_reads_its_span_s_signals_once(sqlite_db, monkeypatch):
    add_session(sqlite_db, 1, coding_session(12), model="gpt-4o")
    read = _counting(monkeypatch)
    outcome = Compactor(sqlite_db.engine, ExtractiveSummarizer(), SETTINGS).compact_session(1)
    assert outcome.status == "compacted" and outcome.quality is not None
    assert len(read) == 1, read  # before: twice, the summarizer's and the gate's


def _span() -> list[Message]:
    return [
        Message(1, 1, "user", "Fix the failing test in src/app.py. Never push to main."),
        Message(2, 1, "assistant", "Fixed src/app.py."),
    ]


def test_signals_are_read_anew_outside_a_compaction(monkeypatch):
    read = _counting(monkeypatch)
    span = _span()
    first = span_facts.signals_of(span)
    span[0].content = "Add a changelog entry."
    again = span_facts.signals_of(span)
    assert len(read) == 2
    assert first.latest_request is not None and "src/app.py" in first.latest_request.text
    assert again.latest_request is not None and again.latest_request.text.startswith("Add a")


def test_inside_a_block_the_same_messages_are_read_once(monkeypatch):
    read = _counting(monkeypatch)
    span = _span()
    with span_facts.shared_signals():
        first = span_facts.signals_of(span)
        assert span_facts.signals_of(list(span)) is first  # the same messages in another list
        other = span_facts.signals_of(span[:1])  # another span
        assert other is not first
        assert span_facts.signals_of(tuple(span)) is first
    assert read == [2, 1]
    assert span_facts.signals_of(span) is not first  # the block ended: read anew
    assert read == [2, 1, 2]


def _json_parses(monkeypatch) -> list[str]:
    """The call arguments parsed as JSON (the real parse runs; this only counts it)."""
    parsed: list[str] = []
    real = span_facts._arguments

    def counted(raw):
        parsed.append(raw)
        return real(raw)

    monkeypatch.setattr(span_facts, "_arguments", counted)
    return parsed


def test_one_reading_of_a_span_parses_each_call_s_arguments_once(monkeypatch, tmp_path):
    """Every signal that walks the calls asks for their arguments (about ten times a span):
    within one reading each JSON text is parsed once, and the signals are those read without
    it (a real Codex session's span, 1,000 messages and more)."""
    key = load_key(KEYS / "codex--edgerunner-codex-session.json")
    messages = keyed_span(key, TRANSCRIPTS, tmp_path).summarized
    parsed = _json_parses(monkeypatch)
    unshared = span_facts._signals_of(messages)  # no reading-once block: each asks anew
    asked = len(parsed)
    parsed.clear()
    once = span_facts.signals_of(messages)
    assert once == unshared
    assert len(parsed) == len(set(parsed)) > 0  # each text parsed once
    assert asked > 3 * len(parsed), (asked, len(parsed))


def test_one_compaction_reads_each_user_message_s_kind_once(sqlite_db, monkeypatch):
    """Planning asks what each user message is (a turn's start), the summarizer and the gate
    ask again of the span's: one compaction reads it once a message."""
    add_session(sqlite_db, 1, coding_session(12), model="gpt-4o")
    asked: list[int] = []
    real = span_facts._user_text_kind

    def counted(m):
        asked.append(m.id)
        return real(m)

    monkeypatch.setattr(span_facts, "_user_text_kind", counted)
    outcome = Compactor(sqlite_db.engine, ExtractiveSummarizer(), SETTINGS).compact_session(1)
    assert outcome.status == "compacted"
    assert asked and len(asked) == len(set(asked)), asked
