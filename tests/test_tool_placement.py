"""The order a context is sent in, computed in two passes over messages in id order
(records.ToolResultPlacement, what `context show` streams through), against the rule as it
was written over a held list before (the reference below, kept verbatim), on random
histories: calls answered in place, later, twice, never; ids reused and empty; results of
no call; roles no chat API takes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.core.records import (
    CHAT_ROLES,
    NO_RESULT_TEXT,
    ContextEntry,
    Message,
    ToolResultPlacement,
    answer_tool_calls,
    pair_tool_calls,
)


def reference_answer_tool_calls(messages):
    """answer_tool_calls as it was before the two-pass placement (c25d09a)."""
    answer = pair_tool_calls(messages).answers
    placed: set[int] = set()
    out: list[ContextEntry] = []
    for i, m in enumerate(messages):
        if i in placed:
            continue
        if m.role == "tool":
            out.append(ContextEntry(m, orphan=True))
            continue
        if m.role not in CHAT_ROLES:
            out.append(ContextEntry(m, foreign=True))
            continue
        out.append(ContextEntry(m))
        call_ids = m.call_ids
        if not call_ids:
            continue
        wanted = set(call_ids)
        j = i + 1
        while (
            j < len(messages)
            and messages[j].role == "tool"
            and answer.get((i, messages[j].tool_call_id or "")) == j
        ):
            placed.add(j)
            wanted.discard(messages[j].tool_call_id or "")
            out.append(ContextEntry(messages[j]))
            j += 1
        for call_id in call_ids:
            if call_id not in wanted:
                continue
            k = answer.get((i, call_id))
            if k is not None:
                placed.add(k)
                out.append(ContextEntry(messages[k], moved=True))
            else:
                out.append(
                    ContextEntry(
                        Message(
                            None,  # type: ignore[arg-type]
                            m.session_id,
                            "tool",
                            NO_RESULT_TEXT,
                            tool_call_id=call_id,
                            created_at=m.created_at,
                        ),
                        synthetic=True,
                    )
                )
    return out


ids = st.sampled_from(["a", "b", "c", ""])
kinds = st.one_of(
    st.tuples(st.just("user"), st.none()),
    st.tuples(st.just("function"), st.none()),
    st.tuples(st.just("assistant"), st.lists(ids, max_size=3)),
    st.tuples(st.just("tool"), st.none() | ids),
)


def _history(drawn):
    out = []
    for n, (role, arg) in enumerate(drawn, start=1):
        if role == "assistant":
            calls = [{"id": c, "function": {"name": f"f{c}", "arguments": "{}"}} for c in arg]
            out.append(Message(n, 1, role, f"m{n}", tool_calls=calls or None))
        elif role == "tool":
            out.append(Message(n, 1, role, f"r{n}", tool_call_id=arg))
        else:
            out.append(Message(n, 1, role, f"m{n}"))
    return out


@settings(max_examples=400, deadline=None)
@given(st.lists(kinds, max_size=14))
def test_two_passes_place_every_result_as_the_held_rule_did(drawn):
    history = _history(drawn)
    expected = reference_answer_tool_calls(history)
    assert answer_tool_calls(history) == expected
    # Streamed by message id, a moved result fetched by its id when its call is reached.
    placement = ToolResultPlacement()
    scanned = [placement.scan(m.id, m)[0] for m in history]
    synthetic = [e for e, _ in placement.finish()]
    by_id = {m.id: m for m in history}
    fetched: list[int] = []

    def fetch(keys):
        fetched.extend(keys)
        return {k: by_id[k] for k in keys}

    streamed = list(placement.entries(((m.id, m) for m in history), fetch))
    assert [(e.message.id, e.synthetic, e.moved, e.orphan, e.foreign) for e in streamed] == [
        (e.message.id, e.synthetic, e.moved, e.orphan, e.foreign) for e in expected
    ]
    # The first pass sees every entry once (in id order, the synthetic ones at the end), and
    # only the moved results are fetched.
    assert sorted(id(e.message) for e in scanned) == sorted(id(m) for m in history)
    assert len(synthetic) == sum(e.synthetic for e in expected)
    assert sorted(fetched) == sorted(e.message.id for e in expected if e.moved)
    # What the HTML page's contents name before it is written: the entry sent last.
    assert placement.last_sent() == (bool(expected), expected[-1].message.id if expected else None)
