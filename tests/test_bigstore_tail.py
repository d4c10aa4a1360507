"""A dry run plans from the end of a history (``plan_tail``): the same cut and the same totals
as the whole history's plan, on plain lists and on a real store of each kind (hypothesis)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxtool.compaction.compactor import Compactor, _record_plan
from ctxtool.compaction.summarizers import SummarizerSettings, make_summarizer
from ctxtool.core.compaction_outcome import CompactionOutcome
from ctxtool.core.plan import (
    NEEDS_EARLIER,
    CompactionPlan,
    CompactionSettings,
    PlanMessage,
    plan_compaction,
    plan_tail,
    with_earlier,
)
from ctxtool.core.prepare import prepare
from ctxtool.core.status import CompactionStatus
from ctxtool.core.tokens import count_messages
from ctxtool.db import read_connection
from ctxtool.db.schema import agent_compaction, agent_message
from ctxtool.store import Store, counts
from ctxtool.store.counts import read_suffix

from .builders import add_session

CALL_IDS = ["a", "b", "", "c"]


@st.composite
def histories(draw) -> list[PlanMessage]:
    """Turns with calls and results, and what makes a tail lie: results answering calls made
    long before, reused ids, orphans, duplicates, calls never answered, text a runtime injects
    as a user message (no turn boundary)."""
    out = []
    for i in range(1, draw(st.integers(1, 40)) + 1):
        kind = draw(st.sampled_from(["user", "user", "injected", "call", "result", "say"]))
        tokens = draw(st.integers(1, 400))
        if kind == "user":
            out.append(PlanMessage(i, "user", tokens))
        elif kind == "injected":
            out.append(PlanMessage(i, "user", tokens, starts_turn=False))
        elif kind == "call":
            ids = draw(st.lists(st.sampled_from(CALL_IDS), min_size=1, max_size=2))
            out.append(PlanMessage(i, "assistant", tokens, tuple(ids)))
        elif kind == "result":
            out.append(PlanMessage(i, "tool", tokens, tool_call_id=draw(st.sampled_from(CALL_IDS))))
        else:
            out.append(PlanMessage(i, "assistant", tokens))
    return out


def same_plan(tail: CompactionPlan | None, whole: CompactionPlan | None, start: int) -> None:
    """``tail`` (listing the messages from ``start`` on) says what ``whole`` says."""
    if whole is None or tail is None:
        assert tail is whole
        return
    assert tail.summarized_ids == whole.summarized_ids[start:]
    assert replace(tail, summarized_ids=[], unlisted_summarized=0) == replace(
        whole, summarized_ids=[], unlisted_summarized=0
    )
    assert tail.summarized_count == whole.summarized_count


@settings(max_examples=400, deadline=None)
@example(
    # A result whose call lies before the tail closes every cut up to it.
    history=[
        PlanMessage(1, "user", 10),
        PlanMessage(2, "assistant", 10, ("a",)),
        PlanMessage(3, "user", 10),
        PlanMessage(4, "tool", 10, tool_call_id="a"),
        PlanMessage(5, "user", 300),
    ],
    budget=100,
    room=None,
)
@given(
    history=histories(),
    budget=st.integers(0, 3000),
    room=st.one_of(st.none(), st.integers(0, 4000)),
)
def test_every_tail_that_settles_plans_as_the_whole_history(history, budget, room):
    whole = plan_compaction(history, budget, room)
    settled_from = None
    for start in range(len(history) - 1, -1, -1):
        tail = plan_tail(history[start:], budget, room, whole=start == 0)
        if tail is NEEDS_EARLIER:
            assert start > 0, "the whole history always settles"
            continue
        assert not isinstance(tail, type(NEEDS_EARLIER))
        if tail is not None:
            tail = with_earlier(tail, start, sum(m.tokens for m in history[:start]))
        same_plan(tail, whole, start)
        settled_from = start if settled_from is None else settled_from
    assert settled_from is not None


def test_a_result_answering_a_call_before_the_tail_sends_it_further_back():
    """Message 5 answers message 2's call, so no cut may fall at 3 or 4. The tail from 3 on
    sees 5 as an orphan and 4 as a safe turn boundary: it must not settle there. Over the
    whole history the turn is split at 6."""
    history = [
        PlanMessage(1, "user", 10),
        PlanMessage(2, "assistant", 10, ("a",)),
        PlanMessage(3, "user", 10),
        PlanMessage(4, "user", 10),
        PlanMessage(5, "tool", 10, tool_call_id="a"),
        PlanMessage(6, "assistant", 300),
    ]
    assert plan_tail(history[2:], 100, whole=False) is NEEDS_EARLIER
    assert plan_tail(history[1:], 100, whole=False) is NEEDS_EARLIER
    plan = plan_tail(history, 100, whole=True)
    assert isinstance(plan, CompactionPlan) and plan.first_kept_message_id == 6
    assert plan.split_turn and plan.summarized_count == 5 and plan.summarized_tokens == 50


# A real store: the dry run (tail plan) against the whole suffix's preparation.

TEXT = st.text(alphabet="ab йц.\n", max_size=60)
MESSAGE = st.one_of(
    st.builds(lambda t: {"role": "user", "content": "do " + t}, TEXT),
    st.builds(
        lambda t: {"role": "user", "content": "<system-reminder>" + t + "</system-reminder>"},
        TEXT,
    ),
    st.builds(
        lambda t, ids: {
            "role": "assistant",
            "content": t or None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "Read", "arguments": "{}"}}
                for i in ids
            ],
        },
        TEXT,
        st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2),
    ),
    st.builds(lambda t: {"role": "assistant", "content": t}, TEXT),
    st.builds(
        lambda i, t: {"role": "tool", "tool_call_id": i, "content": t},
        st.sampled_from(["a", "b", "c", "orphan"]),
        TEXT,
    ),
    st.builds(lambda t: {"role": "critic", "content": t}, TEXT),
)
COUNTED = st.sampled_from(["o200k_base", "o200k_base", "o200k_base", "cl100k_base", None])
_ids = itertools.count(1)


@pytest.fixture
def small_pages(monkeypatch):
    """Tails of 2, 4, 8... messages, so the store's histories are read in several pages."""
    monkeypatch.setattr(counts, "FIRST_TAIL_PAGE", 2)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    history=st.lists(st.tuples(MESSAGE, COUNTED), min_size=2, max_size=30),
    checkpoint_at=st.integers(0, 30),
    window=st.integers(150, 2000),
    keep=st.integers(0, 600),
    force=st.booleans(),
)
def test_a_dry_run_plans_from_the_tail_as_from_the_whole_suffix(
    db, small_pages, history, checkpoint_at, window, keep, force
):
    dry_run_as_whole(db, history, checkpoint_at, window, keep, force)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    history=st.lists(st.tuples(MESSAGE, st.just("o200k_base")), min_size=12, max_size=40),
    checkpoint_at=st.integers(0, 8),
    window=st.integers(150, 500),
    keep=st.integers(0, 200),
    force=st.booleans(),
)
def test_a_counted_store_plans_the_span_before_the_tail_from_its_sums(
    db, small_pages, history, checkpoint_at, window, keep, force
):
    """Counted whole, as `tokens count` leaves a store: the span before the tail is the
    suffix's sums less the tail's (candidates.SummedContext.before), not a second walk."""
    dry_run_as_whole(db, history, checkpoint_at, window, keep, force)


def dry_run_as_whole(db, history, checkpoint_at, window, keep, force) -> None:
    """A dry run's outcome and plan are what prepare() over the whole suffix gives."""
    sid = next(_ids)
    ids = add_session(db, sid, [m for m, _ in history], model="gpt-4o", system_prompt="be brief")
    store = Store(db.engine)
    stored = {m.id: m for m in store.messages(sid)}
    with db.engine.begin() as conn:
        for mid, (_, encoding) in zip(ids, history):
            if encoding is not None:
                (n,) = count_messages([stored[mid].text()], encoding)
                conn.execute(
                    agent_message.update()
                    .where(agent_message.c.id == mid)
                    .values(token_count=n, token_encoding=encoding)
                )
        if 0 < checkpoint_at < len(ids):
            conn.execute(
                agent_compaction.insert().values(
                    session_id=sid,
                    summary="## Goal\nfix it",
                    first_kept_message_id=ids[checkpoint_at],
                    tokens_before=1,
                    parent_compaction_id=0,
                )
            )
    rules = CompactionSettings(context_window=window, reserve_tokens=100, keep_recent_tokens=keep)
    compactor = Compactor(db.engine, make_summarizer(SummarizerSettings(kind="extractive")), rules)
    dry = compactor.compact_session(sid, dry_run=True, force=force)
    with read_connection(db.engine) as conn:
        session, ctx, encoding = read_suffix(conn, sid, None, store_counts=False)
    prep = prepare(
        ctx,
        session.model,
        rules,
        encoding,
        max_summary_tokens=compactor.max_summary_tokens,
        force=force,
    )
    whole = _record_plan(CompactionOutcome(sid, CompactionStatus.FAILED), prep)
    whole = replace(whole, status=prep.status or CompactionStatus.PLANNED)
    assert dry.error == whole.error
    for figure in (
        "status",
        "tokens_before",
        "threshold",
        "summarised_messages",
        "kept_messages",
        "first_kept_message_id",
        "split_turn",
        "notes",
        "tokens_kept",
    ):
        assert getattr(dry, figure) == getattr(whole, figure), figure
    with read_connection(db.engine) as conn:
        _, tail_prep = compactor._prepare_from_tail(conn, sid, force)
    if prep.plan is not None:
        assert tail_prep.plan is not None
        assert tail_prep.plan.summarized_tokens == prep.plan.summarized_tokens
        assert tail_prep.plan.summarized_count == len(prep.plan.summarized_ids)
    # Nothing written: the counts the runtime left out are still missing.
    missing = sum(m.token_encoding is None for m in store.messages(sid))
    assert missing == sum(e is None for _, e in history)
