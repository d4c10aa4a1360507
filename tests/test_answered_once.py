"""A compaction pairs its context's tool calls once (``records.AnsweredMessages``): the kept
messages' entries are taken from the whole's at a cut where no call is open, and are what
``answer_tool_calls`` of the kept messages alone gives; elsewhere they are paired again.
Checked on every session of the shared transcripts at many cuts, on a plain list with moved,
orphan and unanswered results, and through ``prepare``'s measure of what it keeps."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.compaction import CompactionSettings
from ctxtool.core import records
from ctxtool.core.context_size import restored_context_tokens
from ctxtool.core.prepare import prepare
from ctxtool.core.records import (
    AnsweredMessages,
    Message,
    RestoredContext,
    ToolResultPlacement,
    answer_tool_calls,
)
from ctxtool.db import create_engine
from ctxtool.importer import Importer
from ctxtool.migrate import Migrator
from ctxtool.store import Store

from .conftest import TRANSCRIPTS


def _same(got, want):
    """Equal entries, and the very records (a synthetic result is made anew each time)."""
    assert got == want
    assert [e.synthetic or e.message for e in got] == [e.synthetic or e.message for e in want]
    assert all(g.synthetic or g.message is w.message for g, w in zip(got, want))


def _counting(monkeypatch):
    calls = []
    real = records.answer_tool_calls
    monkeypatch.setattr(records, "answer_tool_calls", lambda ms: calls.append(1) or real(ms))
    return calls


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    engine = create_engine(f"sqlite:///{tmp_path_factory.mktemp('once') / 'store.db'}")
    Migrator(engine).up()
    Importer(engine).import_paths([str(TRANSCRIPTS)])
    yield Store(engine)
    engine.dispose()


def test_every_shared_session_answers_its_suffixes_as_alone(store, monkeypatch):
    calls = _counting(monkeypatch)
    taken = paired = kinds = 0
    sessions = store.session_ids()
    assert len(sessions) >= 22
    for sid in sessions:
        messages = store.messages(sid)
        answered = AnsweredMessages(messages)
        _same(answered.entries, answer_tool_calls(messages))
        n = len(messages)
        cuts = sorted(set(range(0, n, 7)) | set(range(max(0, n - 40), n + 1)))
        for start in cuts:
            before = len(calls)
            got = answered.suffix(start)
            taken += len(calls) == before and start < n
            paired += len(calls) > before
            want = answer_tool_calls(messages[start:])
            _same(got, want)
            kinds += any(e.moved or e.orphan or e.synthetic for e in want)
    assert taken > 500 and paired > 50 and kinds > 50, (taken, paired, kinds)


def _history():
    def call(n, *ids):
        calls = [{"id": c, "function": {"name": "ls", "arguments": "{}"}} for c in ids]
        return Message(n, 1, "assistant", f"m{n}", tool_calls=calls)

    def result(n, call_id):
        return Message(n, 1, "tool", f"r{n}", tool_call_id=call_id)

    return [
        Message(1, 1, "user", "go"),
        call(2, "a", "b"),
        result(3, "a"),
        Message(4, 1, "user", "more"),
        result(5, "b"),  # moved up to message 2
        result(6, "zz"),  # answers nothing
        call(7, "c"),
        Message(8, 1, "assistant", "no result for c yet"),
        result(9, "c"),  # moved
        call(10, "d"),  # never answered
        Message(11, 1, "user", "end"),
    ]


def test_moved_orphan_and_unanswered_results_at_every_cut(monkeypatch):
    messages = _history()
    answered = AnsweredMessages(messages)
    calls = _counting(monkeypatch)
    taken = []
    for start in range(len(messages) + 1):
        before = len(calls)
        _same(answered.suffix(start), answer_tool_calls(messages[start:]))
        if len(calls) == before:
            taken.append(start)
    # calls open before indices 2-4 (b), 7-8 (c) and 10 (d): those suffixes are paired again
    # (11 keeps nothing)
    assert taken == [0, 1, 5, 6, 9, 11]


SETTINGS = CompactionSettings(context_window=16000, reserve_tokens=2000, keep_recent_tokens=3000)


def test_prepare_measures_the_kept_messages_as_alone(store):
    planned = 0
    for sid in store.session_ids():
        ctx = store.restored_context(sid)
        prep = prepare(ctx, "gpt-4o", SETTINGS, "o200k_base", max_summary_tokens=4000, force=True)
        if prep.plan is None:
            continue
        planned += 1
        kept = RestoredContext(sid, ctx.system_prompt, None, prep.kept)
        alone = restored_context_tokens(kept, "o200k_base")
        assert prep.replaced_tokens == prep.tokens_before - alone
        assert prep.tokens_before == restored_context_tokens(ctx, "o200k_base")
    assert planned >= 15


def _two_passes(messages):
    """The entries and the cuts with no call open as the two passes find them, never the
    one-pass reading of a list already in order (``records._in_place``)."""
    placement = ToolResultPlacement()
    closed = set()
    for i, m in enumerate(messages):
        if not placement.calls_open:
            closed.add(i)
        placement.scan(i, m)
    placement.finish()
    entries = placement.entries(enumerate(messages), lambda keys: {k: messages[k] for k in keys})
    return list(entries), closed


def test_a_list_in_order_is_read_in_one_pass_as_the_two_passes_read_it(store):
    one_pass = other = 0
    for sid in store.session_ids():
        messages = store.messages(sid)
        for start in range(0, len(messages), 5):
            suffix = messages[start:]
            found = records._in_place(suffix)
            if found is None:
                other += 1
                continue
            one_pass += 1
            entries, closed = _two_passes(suffix)
            _same(found[0], entries)
            assert found[1] == closed
    assert one_pass > 100 and other > 200, (one_pass, other)


def _calls(n, ids):
    calls = [{"id": c, "function": {"name": "ls", "arguments": "{}"}} for c in ids]
    return Message(n, 1, "assistant", f"m{n}", tool_calls=calls or None)


# A turn: a user message or a legacy role, or a call and results in some order: each of its
# calls answered in place, some left out, one answered twice or by an id never called.
_ids = st.lists(st.sampled_from(["a", "b", "c", ""]), max_size=3)
_turn = st.one_of(
    st.tuples(st.sampled_from(["user", "function"]), st.just([]), st.just([])),
    st.tuples(st.just("assistant"), _ids, st.none()),
    st.tuples(st.just("assistant"), _ids, st.lists(st.sampled_from(["a", "b", "c", "", None]))),
)


def _list_of(turns):
    out: list[Message] = []
    for role, ids, answered in turns:
        n = len(out) + 1
        if role != "assistant":
            out.append(Message(n, 1, role, f"m{n}"))
            continue
        out.append(_calls(n, ids))
        for call_id in dict.fromkeys(ids) if answered is None else answered:
            out.append(Message(len(out) + 1, 1, "tool", "r", tool_call_id=call_id))
    return out


@settings(max_examples=500, deadline=None)
@given(st.lists(_turn, max_size=8))
def test_the_one_pass_reading_agrees_with_the_two_passes(turns):
    messages = _list_of(turns)
    entries, closed = _two_passes(messages)
    found = records._in_place(messages)
    in_order = all(not (e.moved or e.orphan or e.foreign or e.synthetic) for e in entries)
    assert (found is not None) == in_order
    if found is not None:
        _same(found[0], entries)
        assert found[1] == closed
    _same(answer_tool_calls(messages), entries)
    answered = AnsweredMessages(messages)
    for start in range(len(messages) + 1):
        _same(answered.suffix(start), answer_tool_calls(messages[start:]))
