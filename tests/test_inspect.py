"""Looking back at a session, pure rules: tool calls answered for the API, the context at a
checkpoint, the checkpoint history and the diff of two checkpoints. No database."""

from __future__ import annotations

from datetime import datetime, timedelta

from ctxtool.core.inspection import (
    checkpoint_rows,
    context_at,
    diff_checkpoints,
    pick_pair,
    point_in_history,
)
from ctxtool.core.records import (
    NO_RESULT_TEXT,
    Compaction,
    Message,
    Session,
    answer_tool_calls,
    restore_context,
)

T0 = datetime(2026, 1, 1, 12, 0, 0)


def msg(i, role="user", minute=None, **kw):
    return Message(
        i,
        1,
        role,
        kw.pop("content", f"m{i}"),
        created_at=T0 + timedelta(minutes=i if minute is None else minute),
        **kw,
    )


def call(i, *ids):
    return msg(
        i,
        "assistant",
        content=None,
        tool_calls=[
            {"id": c, "type": "function", "function": {"name": f"tool_{c}", "arguments": "{}"}}
            for c in ids
        ],
    )


def result(i, cid):
    return msg(i, "tool", tool_call_id=cid, content=f"out {cid}")


def shape(entries):
    return [
        (
            e.message.id,
            e.message.role,
            e.message.tool_call_id,
            "synthetic" if e.synthetic else "moved" if e.moved else "orphan" if e.orphan else "",
        )
        for e in entries
    ]


def test_recorded_results_keep_their_place_and_order():
    history = [msg(1), call(2, "a", "b"), result(3, "b"), result(4, "a"), msg(5)]
    assert shape(answer_tool_calls(history)) == [
        (1, "user", None, ""),
        (2, "assistant", None, ""),
        (3, "tool", "b", ""),
        (4, "tool", "a", ""),
        (5, "user", None, ""),
    ]


def test_unanswered_call_gets_a_synthetic_result_right_after_it():
    history = [msg(1), call(2, "a", "b"), result(3, "a"), msg(4), call(5, "c")]
    entries = answer_tool_calls(history)
    assert shape(entries) == [
        (1, "user", None, ""),
        (2, "assistant", None, ""),
        (3, "tool", "a", ""),
        (None, "tool", "b", "synthetic"),
        (4, "user", None, ""),
        (5, "assistant", None, ""),
        (None, "tool", "c", "synthetic"),
    ]
    assert entries[3].to_openai() == {
        "role": "tool",
        "content": NO_RESULT_TEXT,
        "tool_call_id": "b",
    }


def test_a_result_recorded_after_another_message_moves_up_to_its_call():
    # Codex writes an approval notice (a developer/system message) between call and result.
    history = [call(1, "a"), msg(2, "system"), result(3, "a"), msg(4, "assistant")]
    assert shape(answer_tool_calls(history)) == [
        (1, "assistant", None, ""),
        (3, "tool", "a", "moved"),
        (2, "system", None, ""),
        (4, "assistant", None, ""),
    ]


def test_a_call_id_reused_in_a_later_turn_takes_the_result_after_it():
    history = [call(1, "a"), result(2, "a"), msg(3), call(4, "a"), result(5, "a")]
    assert shape(answer_tool_calls(history)) == [
        (1, "assistant", None, ""),
        (2, "tool", "a", ""),
        (3, "user", None, ""),
        (4, "assistant", None, ""),
        (5, "tool", "a", ""),
    ]
    history = [call(1, "a"), result(2, "a"), msg(3), call(4, "a")]
    assert shape(answer_tool_calls(history))[-1] == (None, "tool", "a", "synthetic")


def test_a_result_answers_the_latest_call_of_its_id_without_one():
    # The first call was never answered; its id was reused for a call that was.
    history = [call(1, "a"), msg(2), call(3, "a"), result(4, "a")]
    assert shape(answer_tool_calls(history)) == [
        (1, "assistant", None, ""),
        (None, "tool", "a", "synthetic"),
        (2, "user", None, ""),
        (3, "assistant", None, ""),
        (4, "tool", "a", ""),
    ]


def test_a_result_without_its_call_is_sent_as_a_user_message():
    entries = answer_tool_calls([result(1, "gone"), msg(2)])
    assert shape(entries)[0] == (1, "tool", "gone", "orphan")
    sent = entries[0].to_openai()
    assert sent["role"] == "user" and "gone" in sent["content"] and "out gone" in sent["content"]


def test_restored_context_counts_and_sends_the_synthetic_results():
    ctx = restore_context(1, "sys", None, [msg(1), call(2, "a")])
    sent = ctx.to_openai()
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert len(ctx.texts()) == len(sent) and ctx.texts()[-1].content == NO_RESULT_TEXT


def _checkpoints():
    a = Compaction(
        10,
        1,
        "first summary\nline two",
        first_kept_message_id=4,
        tokens_before=900,
        tokens_after=300,
        created_at=T0 + timedelta(minutes=6, seconds=30),
        details={
            "quality": {
                "score": 0.75,
                "probes": 6,
                "summary_only_probes": 4,
                "held": 3,
                "missed": ["goal"],
                "fabrications": [{"kind": "path", "text": "src/nowhere.py"}],
                "summary_tokens": 12,
                "carry_over": None,
            }
        },
    )
    b = Compaction(
        11,
        1,
        "second summary\nline two",
        first_kept_message_id=8,
        parent_compaction_id=10,
        created_at=T0 + timedelta(minutes=10, seconds=30),
    )
    return a, b


def test_context_at_a_checkpoint_ends_where_the_next_one_replaced_it():
    a, b = _checkpoints()
    history = [msg(i) for i in range(1, 14)]
    session = Session(1, system_prompt="sys")
    at_a = point_in_history([a, b], 10)
    assert at_a.replaced_by is b and not at_a.latest
    # 4..7 were summarized by b (there by id); 8..10 kept by b and written before it; 11.. after.
    assert [m.id for m in context_at(session, at_a, history).messages] == list(range(4, 11))
    latest = point_in_history([a, b])
    assert latest.checkpoint is b and [
        m.id for m in context_at(session, latest, history).messages
    ] == list(range(8, 14))
    assert point_in_history([a, b], -2) == at_a and point_in_history([a, b], -1) == latest
    before = point_in_history([a, b], before_first=True)
    assert before.checkpoint is None
    assert [m.id for m in context_at(session, before, history).messages] == list(range(1, 7))
    # A message b summarized counts as present even when its clock says it came later.
    late = msg(5, minute=99)
    assert at_a.holds(late)
    assert "as it stood until checkpoint 11" in at_a.describe()
    assert "latest" in latest.describe()


def test_unknown_checkpoint_is_an_error_naming_the_session():
    import pytest

    from ctxtool.core.errors import CtxtoolError

    a, b = _checkpoints()
    with pytest.raises(CtxtoolError, match="session 7: checkpoint 99 is not one of its"):
        point_in_history([a, b], 99, session_label="7")


def test_checkpoint_rows_and_diff():
    a, b = _checkpoints()
    rows = checkpoint_rows([a, b], [3, 4], [12, 14])
    assert [
        (
            r["checkpoint_id"],
            r["parent_id"],
            r["cut_from"],
            r["first_kept_message_id"],
            r["messages_summarised"],
            r["score"],
        )
        for r in rows
    ] == [(10, None, None, 4, 3, 0.75), (11, 10, 4, 8, 4, None)]  # as the evaluation stored it
    assert [
        (r["probes_answered"], r["probes_total"], r["fabrications"], r["missed"]) for r in rows
    ] == [(3, 4, 1, ["goal"]), (None, None, None, [])]
    assert rows[0]["quality"].startswith("probes 75% (3/4), 1 fabrication")
    assert all("retention" not in r for r in rows)

    from ctxtool.export import render_checkpoints
    from ctxtool.output import OutputFormat

    table = render_checkpoints(rows, OutputFormat(), None)
    assert "75% (3/4)" in table and "fabricated" in table and "retention" not in table
    assert pick_pair([a, b], None, None) == (a, b)
    assert pick_pair([a], None, None) == (None, a)
    assert pick_pair([a, b], 11, None) == (a, b)
    assert pick_pair([a, b], 0, 11) == (None, b)
    d = diff_checkpoints(a, b, [msg(i) for i in range(1, 12)])
    assert [m.id for m in d.newly_summarised] == [4, 5, 6, 7]
    assert "-first summary" in d.summary_diff and "+second summary" in d.summary_diff
    assert d.as_dict()["cut_from"] == 4 and d.as_dict()["cut_to"] == 8


def test_side_by_side_marks_changed_removed_and_added_lines():
    from ctxtool.core.inspection import side_by_side

    lines = side_by_side("same\nold\ngone", "same\nnew\n", 41)
    assert [line[20] for line in lines] == [" ", "|", "<"]
    assert side_by_side("a", "a\nadded", 41)[1].endswith("> added")
    assert all(len(line) <= 41 for line in side_by_side("x" * 100, "y" * 100, 41))
