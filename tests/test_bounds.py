"""The cron batch's token bounds against the exact count, on random suffixes (hypothesis,
a real store of each kind): the sums it reads without the text must bound the restored context
whatever the pairing of calls and results, so no session over its threshold is skipped."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxtool.core.context_size import context_bounds
from ctxtool.core.plan import CompactionSettings
from ctxtool.core.tokens import count_messages
from ctxtool.db import read_connection
from ctxtool.db.schema import agent_message
from ctxtool.store import Store
from ctxtool.store.candidates import effective_contexts

from .builders import add_session

# Short ids and long ones: the upper bound grows with the longest id's bytes. LONG_ID costs
# more tokens than the resend prefix's own bytes (about a token per 4-byte emoji), so a bound
# that left the id out would fall short of what is sent.
LONG_ID = "call_" + "🦀🧪" * 40
CALL_IDS = ["a", "b", "c", LONG_ID, "вызов_" + "ёж9" * 30]
TEXT = st.text(alphabet="ab йц.\n{}", max_size=40)
CALL = st.lists(st.sampled_from(CALL_IDS), min_size=1, max_size=3)
MESSAGE = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, TEXT),
    st.builds(
        lambda t, ids: {
            "role": "assistant",
            "content": t or None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for i in ids
            ],
        },
        TEXT,
        CALL,
    ),
    st.builds(lambda t: {"role": "assistant", "content": t}, TEXT),
    # Results that answer a call, none (orphans), or one already answered (duplicates).
    st.builds(
        lambda i, t: {"role": "tool", "tool_call_id": i, "content": t},
        st.sampled_from([*CALL_IDS, "orphan"]),
        TEXT,
    ),
    st.builds(
        lambda r, t: {"role": r, "content": t},
        st.sampled_from(["User", "ASSISTANT", "Tool", "critic", "system"]),
        TEXT,
    ),
)
# The stored count: the session's encoding (gpt-4o), another one, or none at all.
COUNTED = st.sampled_from(["o200k_base", "o200k_base", "o200k_base", "cl100k_base", None])

_ids = itertools.count(1)


def _call(*ids: str) -> dict:
    calls = [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _result(call_id: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


COUNTED_RIGHT = "o200k_base"


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# The cases the sums cannot see, each past what the head's slack would hide: results that
# answer no call (resent with a prefix holding the long id), calls no result answers (a
# placeholder each), fewer calls than results and the other way round.
@example(suffix=[(_result(LONG_ID), COUNTED_RIGHT)] * 4, system_prompt=None)
# Roles of no chat role but for their case: MySQL's collations equate "User" with "user", and
# the sums took each as sent as stored (it is resent with a prefix), past the upper bound.
@example(suffix=[({"role": "User", "content": "hi"}, COUNTED_RIGHT)] * 12, system_prompt=None)
@example(
    suffix=[(_call("a"), COUNTED_RIGHT), *[(_result(LONG_ID), COUNTED_RIGHT)] * 4],
    system_prompt=None,
)
@example(
    suffix=[(_call(*"abc"), COUNTED_RIGHT)] * 10 + [(_result("a"), COUNTED_RIGHT)],
    system_prompt=None,
)
@example(
    suffix=[(_call(LONG_ID), COUNTED_RIGHT)] + [(_result(LONG_ID), COUNTED_RIGHT)] * 4,
    system_prompt="be brief",
)
@given(
    suffix=st.lists(st.tuples(MESSAGE, COUNTED), min_size=1, max_size=16),
    system_prompt=st.one_of(st.none(), TEXT),
)
def test_the_batch_bounds_hold_the_exact_context_and_never_skip_one_over(db, suffix, system_prompt):
    """[lower, upper] from the sums holds ``Store.context_tokens``; at any threshold around
    those figures the batch's estimate is over it exactly when the exact count is."""
    sid = next(_ids)
    ids = add_session(db, sid, [m for m, _ in suffix], model="gpt-4o", system_prompt=system_prompt)
    store = Store(db.engine)
    stored = {m.id: m for m in store.restored_context(sid).messages}
    with db.engine.begin() as conn:
        for mid, (_, encoding) in zip(ids, suffix):
            if encoding is not None:  # an honest count, made with that encoding
                (n,) = count_messages([stored[mid].text()], encoding)
                conn.execute(
                    agent_message.update()
                    .where(agent_message.c.id == mid)
                    .values(token_count=n, token_encoding=encoding)
                )
    with read_connection(db.engine) as conn:
        (row,) = [r for r in effective_contexts(conn) if r.session_id == sid]
    exact = store.context_tokens(sid)
    low, high = context_bounds(row.suffix, row.head_bytes)
    if not (row.suffix.uncounted or row.suffix.resent):
        assert low <= exact <= high, (low, exact, high, row.suffix)
    for threshold in {exact - 1, exact, low - 1, low, high - 1, high, (low + high) // 2}:
        if threshold < 1:
            continue
        window = CompactionSettings(context_window=threshold, reserve_tokens=0)
        ((_, estimate),) = store.measure_contexts([row], window, None)
        assert (estimate > threshold) == (exact > threshold), (threshold, estimate, exact, row)
