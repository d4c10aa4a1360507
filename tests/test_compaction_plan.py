"""The cut-point planner over plain lists: examples and hypothesis properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.core.errors import CtxtoolError, InvalidSettings
from ctxtool.core.plan import (
    CompactionSettings,
    PlanMessage,
    context_window_for,
    is_safe_cut,
    plan_compaction,
    plan_message,
    should_compact,
)
from ctxtool.core.records import Message, answer_tool_calls, pair_tool_calls
from ctxtool.core.touched_files import files_touched, merge_file_lists
from ctxtool.core.validation import validate_restored_messages


def user(i, t=100):
    return PlanMessage(i, "user", t)


def call(i, ids, t=50):
    return PlanMessage(i, "assistant", t, tuple(ids))


def result(i, cid, t=100):
    return PlanMessage(i, "tool", t, tool_call_id=cid)


def say(i, t=50):
    return PlanMessage(i, "assistant", t)


def test_threshold_uses_the_model_window_and_reserve():
    s = CompactionSettings()
    assert s.threshold("gpt-4o-2024-08-06") == 128_000 - 16_384
    assert s.threshold("claude-sonnet-4-5") == 200_000 - 16_384
    # The default reserve is at most a quarter of the window: a small window still compacts.
    assert s.threshold("gpt-4-0613") == 8_192 - 2_048
    # An explicit reserve is used as given, and one that takes the whole window is an error.
    assert CompactionSettings(reserve_tokens=4_000).threshold("gpt-4-0613") == 8_192 - 4_000
    with pytest.raises(CtxtoolError, match="leaves nothing of the 8192-token window of gpt-4"):
        CompactionSettings(reserve_tokens=16_384).threshold("gpt-4-0613")
    assert CompactionSettings(context_window=40_000).threshold("gpt-4o") == 40_000 - 10_000
    assert context_window_for("gpt-4o-mini") == 128_000
    assert context_window_for("unknown-model") == 128_000
    assert (
        CompactionSettings(context_window=50_000, reserve_tokens=1000).threshold("gpt-4o") == 49_000
    )
    assert should_compact(112_000, "gpt-4o", s) and not should_compact(111_000, "gpt-4o", s)


def test_settings_refuse_themselves_on_construction():
    """A library caller gets the guard the CLI gets, before any session is read."""
    with pytest.raises(InvalidSettings) as refused:
        CompactionSettings(context_window=4000, reserve_tokens=16_384)
    assert (
        str(refused.value) == "--reserve-tokens 16384 leaves nothing of a --context-window of 4000"
    )
    assert refused.value.exit_code == 2
    with pytest.raises(InvalidSettings, match="--reserve-tokens 4000 leaves nothing"):
        CompactionSettings(context_window=4000, reserve_tokens=4000)
    with pytest.raises(InvalidSettings, match="--keep-recent-tokens -1 is negative"):
        CompactionSettings(keep_recent_tokens=-1)
    with pytest.raises(InvalidSettings, match="--reserve-tokens -5 is negative"):
        CompactionSettings(reserve_tokens=-5)
    with pytest.raises(InvalidSettings, match="--context-window 0 is not a window"):
        CompactionSettings(context_window=0)
    assert CompactionSettings(context_window=4000, reserve_tokens=3999).threshold(None) == 1


def test_cut_at_turn_boundary_keeping_at_least_the_budget():
    msgs = [
        user(1),
        call(2, ["a"]),
        result(3, "a"),
        say(4),
        user(5),
        call(6, ["b"]),
        result(7, "b"),
        say(8),
        user(9),
        say(10),
    ]
    plan = plan_compaction(msgs, keep_recent_tokens=200)
    # Budget reached at message 8; nearest user message at or before it is 5.
    assert plan.first_kept_message_id == 5
    assert plan.summarized_ids == [1, 2, 3, 4]
    assert plan.kept_tokens >= 200 and not plan.split_turn


def test_never_cuts_between_call_and_result():
    msgs = [
        user(1, 10),
        call(2, ["a", "b"], 10),
        result(3, "a", 500),
        result(4, "b", 500),
        say(5, 10),
    ]
    for cut in range(1, 5):
        assert is_safe_cut(msgs, cut) == (cut in (1, 4)), cut  # index 1 = id 2, index 4 = id 5
    plan = plan_compaction(msgs, keep_recent_tokens=400)
    # One turn bigger than the budget: split inside it at the assistant message that makes the
    # calls (its results stay with it), never at a tool result.
    assert plan.split_turn
    assert plan.first_kept_message_id == 2
    assert plan.summarized_ids == [1]


def test_a_call_id_reused_in_later_turns_does_not_close_the_cuts_between():
    from ctxtool.core.plan import safe_cuts

    # Runtimes that number calls per turn reuse "call_0": each result answers the latest call.
    msgs = [
        user(1),
        call(2, ["call_0"]),
        result(3, "call_0"),
        user(4),
        call(5, ["call_0"]),
        result(6, "call_0"),
        user(7),
        call(8, ["call_0"]),
        result(9, "call_0"),
        say(10),
    ]
    assert [c for c, ok in enumerate(safe_cuts(msgs)) if ok] == [1, 3, 4, 6, 7, 9, 10]
    # A call never answered, then the id reused: the later result belongs to the later call.
    msgs = [user(1), call(2, ["x"]), user(3), call(4, ["x"]), result(5, "x"), user(6)]
    assert [c for c, ok in enumerate(safe_cuts(msgs)) if ok] == [1, 2, 3, 5, 6]
    plan = plan_compaction(
        [
            user(1, 5000),
            call(2, ["call_0"]),
            result(3, "call_0", 5000),
            user(4, 5000),
            call(5, ["call_0"]),
            result(6, "call_0", 100),
            say(7),
        ],
        300,
    )
    assert plan.first_kept_message_id == 4 and not plan.split_turn


def test_split_turn_at_assistant_after_answered_calls():
    msgs = [
        user(1, 10),
        call(2, ["a"], 10),
        result(3, "a", 300),
        call(4, ["b"], 10),
        result(5, "b", 300),
        say(6, 300),
    ]
    plan = plan_compaction(msgs, keep_recent_tokens=500)
    assert plan.split_turn and plan.first_kept_message_id == 4
    kept = [m for m in msgs if m.id >= plan.first_kept_message_id]
    assert all(m.tool_call_id != "a" for m in kept)


def test_text_a_runtime_injects_as_a_user_message_is_no_turn_boundary():
    """One long turn (a slash command whose work runs for hours) with a skill's expansion
    stored as a user message early on: the cut lands near the budget inside the turn, not back
    at the expansion, which would keep almost everything."""
    msgs = [user(1, 10), PlanMessage(2, "user", 2000, starts_turn=False)]
    for i in range(3, 60, 2):
        msgs += [call(i, [f"c{i}"], 10), result(i + 1, f"c{i}", 1000)]
    plan = plan_compaction(msgs, keep_recent_tokens=5000)
    assert plan.split_turn and 5000 <= plan.kept_tokens <= 6100
    assert msgs[[m.id for m in msgs].index(plan.first_kept_message_id)].role == "assistant"
    # The same turn with the expansion read as the user's: the cut walked back to it.
    typed = [PlanMessage(2, "user", 2000)] + msgs[2:]
    assert plan_compaction([user(1, 10), *typed], 5000).first_kept_message_id == 2


def test_the_planner_reads_which_user_messages_the_user_typed():
    def stored(i, text, **details):
        return plan_message(Message(i, 1, "user", text, details=details or None))

    assert stored(1, "<command-name>/erk:plan-implement</command-name>").turn_boundary
    assert stored(2, "please fix the test").turn_boundary and stored(3, "ok").turn_boundary
    assert not stored(4, "Base directory for this skill: /x\n# Skill").turn_boundary
    assert not stored(5, "<system-reminder>x</system-reminder>").turn_boundary
    assert not stored(6, "# /erk:plan-implement\n\nImplement a plan", is_meta=True).turn_boundary
    assert PlanMessage(7, "user", 1).turn_boundary and not say(8).turn_boundary


def test_nothing_to_summarize():
    assert plan_compaction([user(1), say(2)], keep_recent_tokens=10_000) is None
    assert plan_compaction([user(1)], keep_recent_tokens=0) is None


def test_files_touched_from_tool_calls():
    calls = [
        {"id": "1", "function": {"name": "Read", "arguments": '{"file_path": "/src/a.py"}'}},
        {"id": "2", "function": {"name": "edit", "arguments": '{"path": "/src/b.py"}'}},
        {"id": "3", "function": {"name": "read", "arguments": '{"path": "/src/b.py"}'}},
        {
            "id": "4",
            "function": {
                "name": "apply_patch",
                "arguments": "*** Begin Patch\n*** Update File: src/c.py\n@@\n*** End Patch",
            },
        },
        {"id": "5", "function": {"name": "bash", "arguments": "not json"}},
    ]
    read, modified = files_touched(calls)
    assert read == ["/src/a.py"]
    assert modified == ["/src/b.py", "src/c.py"]
    # A read names its path as the evaluator's probes read it (signals.path_of): stripped, the
    # first key that holds one, never an empty string.
    odd = [
        {"id": "6", "function": {"name": "view", "arguments": '{"path": "  /src/d.py "}'}},
        {"id": "7", "function": {"name": "read", "arguments": '{"file_path": "", "path": "/e"}'}},
        {"id": "8", "function": {"name": "grep", "arguments": '{"path": ""}'}},
    ]
    assert files_touched(odd) == (["/src/d.py", "/e"], [])
    merged = merge_file_lists(
        {"read_files": ["/src/b.py", "/old.py"], "modified_files": ["/x.py"]}, read, modified
    )
    assert merged == {
        "read_files": ["/old.py", "/src/a.py"],
        "modified_files": ["/x.py", "/src/b.py", "src/c.py"],
    }


# -- properties ----------------------------------------------------------------------------------


@st.composite
def sessions(draw, min_turns=1, max_turns=12):
    """Random sessions: turns of user text, tool-call rounds (parallel calls), assistant text."""
    msgs: list[PlanMessage] = []
    next_id = draw(st.integers(1, 1000))
    call_no = 0
    for _ in range(draw(st.integers(min_turns, max_turns))):
        msgs.append(PlanMessage(next_id, "user", draw(st.integers(1, 3000))))
        next_id += 1
        for _ in range(draw(st.integers(0, 4))):
            ids = []
            for _ in range(draw(st.integers(1, 3))):
                call_no += 1
                ids.append(f"c{call_no}")
            msgs.append(PlanMessage(next_id, "assistant", draw(st.integers(1, 500)), tuple(ids)))
            next_id += 1
            for cid in ids:
                msgs.append(
                    PlanMessage(next_id, "tool", draw(st.integers(1, 5000)), tool_call_id=cid)
                )
                next_id += 1
        if draw(st.booleans()):
            msgs.append(PlanMessage(next_id, "assistant", draw(st.integers(1, 2000))))
            next_id += 1
        next_id += draw(st.integers(0, 3))  # ids need not be dense (other sessions interleave)
    return msgs


def _no_orphans(kept: list[PlanMessage]) -> bool:
    calls = {c for m in kept for c in m.call_ids}
    return all(m.tool_call_id in calls for m in kept if m.role == "tool")


@settings(max_examples=400, deadline=None)
@given(sessions(), st.integers(0, 20_000))
def test_plan_properties(msgs, budget):
    plan = plan_compaction(msgs, budget)
    if plan is None:
        return
    cut = next(i for i, m in enumerate(msgs) if m.id == plan.first_kept_message_id)
    kept, summarized = msgs[cut:], msgs[:cut]
    assert summarized and kept
    assert plan.summarized_ids == [m.id for m in summarized]
    assert kept[0].role != "tool"
    assert _no_orphans(kept)
    assert is_safe_cut(msgs, cut)
    if not plan.notes:
        assert plan.kept_tokens >= budget
    if not plan.split_turn:
        assert kept[0].role == "user"


@settings(max_examples=200, deadline=None)
@given(
    sessions(min_turns=2, max_turns=20),
    st.integers(100, 8000),
    st.lists(st.integers(1, 40), min_size=1, max_size=6),
)
def test_iterative_compactions_cover_every_message_exactly_once(msgs, budget, growth):
    """Compact repeatedly while the session grows: each checkpoint summarizes exactly the span
    from the previous first kept message to its own cut, so every message is summarized at most
    once, and summarized spans + the final kept suffix are the whole history, in order."""
    visible = 0
    first_kept_index = 0
    spans: list[list[int]] = []
    for step in growth:
        visible = min(len(msgs), visible + step)
        suffix = msgs[first_kept_index:visible]
        plan = plan_compaction(suffix, budget)
        if plan is None:
            continue
        assert plan.summarized_ids[0] == suffix[0].id  # starts where the previous one kept
        spans.append(plan.summarized_ids)
        first_kept_index = next(i for i, m in enumerate(msgs) if m.id == plan.first_kept_message_id)
        assert _no_orphans(msgs[first_kept_index:visible])
    covered = [i for span in spans for i in span] + [m.id for m in msgs[first_kept_index:visible]]
    assert covered == [m.id for m in msgs[:visible]]


# -- fits the window ------------------------------------------------------------------------------


def test_keep_recent_is_a_target_the_window_wins():
    msgs = [user(1, 100), say(2, 3000), user(3, 100), say(4, 3000), user(5, 100), say(6, 50)]
    plan = plan_compaction(msgs, keep_recent_tokens=5000)  # keeps 2-6 = 6250 tokens
    assert plan.first_kept_message_id == 2
    fitted = plan_compaction(msgs, keep_recent_tokens=5000, max_kept_tokens=1000)
    assert fitted.first_kept_message_id == 5 and fitted.kept_tokens == 150
    assert not fitted.over_window and "fits its window" in fitted.notes[0]


def test_nothing_safe_fits_is_over_window_naming_the_message():
    msgs = [user(1), call(2, ["a"]), result(3, "a", t=27_500), say(4, 20)]
    plan = plan_compaction(msgs, keep_recent_tokens=100, max_kept_tokens=16_000)
    assert not plan.over_window and plan.first_kept_message_id == 4  # the big result is summarized
    # Pi's `$ find .` case: the huge result is the newest message, its call must stay with it
    msgs = [user(1), call(2, ["a"]), result(3, "a", t=27_500)]
    plan = plan_compaction(msgs, keep_recent_tokens=100, max_kept_tokens=16_000)
    assert plan.over_window and plan.oversized_ids == [3] and plan.first_kept_message_id == 2


@settings(max_examples=300, deadline=None)
@given(sessions(), st.integers(0, 20_000), st.integers(200, 20_000))
def test_a_fitting_safe_cut_is_always_found(msgs, budget, max_kept):
    plan = plan_compaction(msgs, budget, max_kept_tokens=max_kept)
    kept_from = {i: sum(m.tokens for m in msgs[i:]) for i in range(len(msgs))}
    fitting = [
        c
        for c in range(1, len(msgs))
        if is_safe_cut(msgs, c)
        and msgs[c].role in ("user", "assistant")
        and kept_from[c] <= max_kept
    ]
    if plan is None:
        assert not fitting or kept_from[0] <= max_kept
        return
    cut = next(i for i, m in enumerate(msgs) if m.id == plan.first_kept_message_id)
    assert is_safe_cut(msgs, cut) and _no_orphans(msgs[cut:])
    if fitting:
        assert not plan.over_window and plan.kept_tokens <= max_kept
    else:
        assert plan.over_window and plan.oversized_ids


@settings(max_examples=300, deadline=None)
@given(sessions())
def test_safe_cuts_agree_with_the_definition(msgs):
    from ctxtool.core.plan import safe_cuts

    safe = safe_cuts(msgs)
    for c in range(1, len(msgs) + 1):
        summarized_calls = {cid for m in msgs[:c] for cid in m.call_ids}
        expected = (c == len(msgs) or msgs[c].role != "tool") and not any(
            m.role == "tool" and m.tool_call_id in summarized_calls for m in msgs[c:]
        )
        assert safe[c] == expected


# A call as a runtime may store it: with no id at all.
NO_ID_CALL = {"type": "function", "function": {"name": "read", "arguments": "{}"}}


def stored_call(i: int, *ids: str | None) -> Message:
    calls = [NO_ID_CALL if cid is None else {**NO_ID_CALL, "id": cid} for cid in ids]
    return Message(i, 1, "assistant", None, tool_calls=calls)


def orphans_sent(messages: list[Message]) -> set[int]:
    return {e.message.id for e in answer_tool_calls(messages) if e.orphan}


def test_a_call_without_an_id_stays_with_its_result_of_empty_id():
    """A call stored without an id, a notice, then its result stored with ``tool_call_id=""``:
    the planner called the cut after the call safe, and the restored context then sent the
    result as an orphan. One rule now: the empty id pairs like any id, on every side."""
    msgs = [
        Message(1, 1, "user", "go"),
        stored_call(2, None),
        Message(3, 1, "assistant", "reading it"),
        Message(4, 1, "tool", "the file", tool_call_id=""),
        Message(5, 1, "user", "next"),
    ]
    planned = [plan_message(m) for m in msgs]
    assert [is_safe_cut(planned, c) for c in range(1, 5)] == [True, False, False, True]
    sent = answer_tool_calls(msgs)
    assert [e.message.id for e in sent] == [1, 2, 4, 3, 5]  # the result moved up to its call
    assert not any(e.orphan or e.synthetic for e in sent)
    rules = {i.rule for i in validate_restored_messages(1, msgs)}
    assert rules == {"malformed_tool_calls"}  # said once, as what it is: no orphan, no unanswered
    # A result with no tool_call_id at all answers nothing, even a call without an id.
    lost = [msgs[0], msgs[1], Message(4, 1, "tool", "?", tool_call_id=None)]
    assert orphans_sent(lost) == {4}
    assert [e.synthetic for e in answer_tool_calls(lost)] == [False, False, True, False]
    assert pair_tool_calls(lost).unanswered == [(1, "")]


@st.composite
def stored_histories(draw) -> list[Message]:
    """Histories with the odd links runtimes write: calls without ids, empty and reused ids,
    results with no call id, notices between a call and its result, results out of order."""
    ids = st.sampled_from([None, "", "a", "b"])
    msgs: list[Message] = []
    for i in range(1, draw(st.integers(2, 16)) + 1):
        kind = draw(st.sampled_from(["user", "notice", "call", "result"]))
        if kind == "call":
            msgs.append(stored_call(i, *draw(st.lists(ids, min_size=1, max_size=3))))
        elif kind == "result":
            msgs.append(Message(i, 1, "tool", "out", tool_call_id=draw(ids)))
        else:
            msgs.append(Message(i, 1, "user" if kind == "user" else "assistant", "text"))
    return msgs


@settings(max_examples=400, deadline=None)
@given(stored_histories())
def test_a_safe_cut_never_makes_an_orphan(msgs):
    """Whatever the links, keeping from a cut the planner calls safe sends no tool result as an
    orphan that the whole history did not already send so; and validate names exactly the
    results that are sent as orphans."""
    planned = [plan_message(m) for m in msgs]
    whole = orphans_sent(msgs)
    for cut in range(1, len(msgs)):
        if is_safe_cut(planned, cut):
            assert orphans_sent(msgs[cut:]) <= whole
    named = {
        i.message_id
        for i in validate_restored_messages(1, msgs)
        if i.rule in ("orphan_tool_result", "duplicate_tool_result")
    }
    assert named == whole
