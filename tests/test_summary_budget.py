"""A summary that carries an earlier one may grow past its budget, up to a stated limit
(``CompactionSettings.max_summary_growth``, --max-summary-growth), the cut planned so that the
kept messages leave it room (issue #42: "where the carried content needs room, let the budget
grow"), and the files the checkpoints' lists name are never fabrications."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ctxtool.compaction.compactor import Compactor
from ctxtool.compaction.summarizers import ExtractiveSummarizer
from ctxtool.core.evaluator.fabrications import fabrications
from ctxtool.core.plan import CompactionSettings
from ctxtool.core.prepare import (
    carried_room,
    carry_over_floor,
    check_summary,
    fitting_budget,
    grown_budget,
    prepare,
    summary_message_tokens,
)
from ctxtool.core.records import Compaction, Message, RestoredContext
from ctxtool.core.tokens import MessageText, count_messages, count_text
from ctxtool.importer import Importer
from ctxtool.store import Store

from .builders import SETTINGS, add_session, coding_session
from .conftest import TRANSCRIPTS

# Pi's OpenClaw session ends with its runtime's own summaries carried: the first ctxtool
# checkpoint at a 16k window carries the latest of them.
OPENCLAW = TRANSCRIPTS / "pi" / "openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc.jsonl"


@pytest.mark.parametrize(
    ("budget", "previous", "growth", "grown"),
    [
        (3500, 500, 1.5, 3500),  # a small carried summary: the span's own items fit
        (3500, 1750, 1.5, 3500),  # half the budget: still no growth
        (3500, 1800, 2.0, 5300),  # the carried summary and a whole budget
        (3500, 3600, 1.5, 5250),  # at most max_summary_growth times the budget
        (1500, 2587, 1.5, 2250),  # OpenClaw's carried summary at an 8k window
        (1500, 963, 2.0, 2463),  # Pi's second summary at 8k, with a larger limit
        (3500, 3600, 1.0, 3500),  # growth off
    ],
)
def test_the_budget_grows_for_carried_content_up_to_its_limit(budget, previous, growth, grown):
    assert grown_budget(budget, previous, growth) == grown
    assert budget <= grown <= budget * growth


def test_a_carried_runtime_summary_gets_room_and_is_kept_whole(sqlite_db):
    [imported] = Importer(sqlite_db.engine).import_paths([str(OPENCLAW)])
    assert imported.error is None and imported.compactions_added == 3, imported
    sid = imported.session_id
    carried = Store(sqlite_db.engine).latest_compaction(sid).summary
    settings = CompactionSettings(
        context_window=16_000, reserve_tokens=2_000, keep_recent_tokens=4_000
    )
    outcome = Compactor(sqlite_db.engine, ExtractiveSummarizer(), settings).compact_session(sid)
    assert outcome.status == "compacted", outcome.error
    budget = settings.threshold(None) // 4
    assert count_text(carried) > budget // 2  # the carried summary needs room
    assert budget < outcome.summary_tokens <= budget * settings.max_summary_growth
    assert outcome.carry_over == 1.0 and outcome.fabrications == 0
    assert outcome.tokens_after <= settings.threshold(None)


def test_a_path_the_checkpoints_lists_name_is_no_fabrication():
    span = [Message(1, 1, "user", "Tidy the docs.")]
    summary = "## Files read\n`docs/guide/install.md`"
    assert [f.text for f in fabrications(summary, span)] == ["docs/guide/install.md"]
    assert fabrications(summary, span, known_paths=["docs/guide/install.md"]) == []


def _context(previous: str | None, turns: int = 40) -> RestoredContext:
    """A session of ``turns`` user/assistant turns of about 200 tokens each, on top of a
    checkpoint whose summary is ``previous``."""
    texts = [
        MessageText(("user", "assistant")[n % 2], f"turn {n} " + "word " * 200)
        for n in range(turns)
    ]
    counts = count_messages(texts, "o200k_base")  # as stored: the message's overhead in it
    messages = [
        Message(n + 1, 1, t.role, t.content, token_count=c)
        for n, (t, c) in enumerate(zip(texts, counts))
    ]
    compaction = Compaction(1, 1, previous, 1) if previous is not None else None
    return RestoredContext(1, None, compaction, messages)


@pytest.mark.parametrize("growth", [1.0, 1.5, 2.0])
def test_the_cut_leaves_room_for_the_grown_budget(growth):
    settings = CompactionSettings(
        context_window=8_000, reserve_tokens=2_000, max_summary_growth=growth
    )
    carried = "## Done\n" + "\n".join(f"- step {n} of the earlier work done" for n in range(300))
    prep = prepare(_context(carried), None, settings, "o200k_base", max_summary_tokens=4096)
    assert prep.plan is not None and not prep.plan.over_window
    assert prep.base_budget == 1500
    assert prep.summary_budget == int(1500 * growth)
    # the kept messages and a summary of the whole grown budget fit the threshold
    summary = summary_message_tokens("word " * prep.summary_budget, "o200k_base")
    assert prep.tokens_kept + summary <= prep.threshold
    without = prepare(_context(None), None, settings, "o200k_base", max_summary_tokens=4096)
    assert without.summary_budget == 1500 and without.tokens_kept >= prep.tokens_kept


def test_the_gate_refuses_a_summary_under_the_floor_of_what_the_grown_budget_holds():
    settings = CompactionSettings(context_window=8_000, reserve_tokens=2_000)
    carried = "## Done\n" + "\n".join(f"- step {n} of the earlier work done" for n in range(300))
    prep = prepare(_context(carried), None, settings, "o200k_base", max_summary_tokens=4096)
    floor = carry_over_floor(prep, 0.9)
    # the carried summary's share that the budget's room for it holds (not 90% of it)
    assert floor == round(0.9 * carried_room(prep) / count_text(carried), 3) < 0.9
    lines = carried.splitlines()[1:]
    for kept in (int(len(lines) * floor) - 2, int(len(lines) * floor) + 2):
        text = "## Done\n" + "\n".join(lines[:kept])
        _, refusal = check_summary(prep, text, min_carry_over=0.9)
        assert (refusal is None) == (kept / len(lines) >= floor), (kept, refusal)


@pytest.mark.parametrize(
    ("budget", "base", "room", "fitted"),
    [
        (3000, 750, 5000, 3000),  # room to spare: the grown budget stands
        (3000, 750, 2780, 2780),  # cut to what fits beside the smallest safe kept suffix
        (3000, 750, 500, 750),  # never below the budget before growth
        (3000, 750, 0, 3000),  # no summary fits at all: growth costs nothing, it stays
        (750, 750, 500, 750),  # a budget that did not grow is not this rule's
    ],
)
def test_a_grown_budget_is_cut_to_what_fits_beside_the_smallest_kept_suffix(
    budget, base, room, fitted
):
    assert fitting_budget(budget, base, room) == fitted


def _carrying(carried: str, last: str | None = None) -> RestoredContext:
    """``_context``'s session with its last message replaced by ``last``."""
    ctx = _context(carried, turns=12)
    if last is not None:
        [count] = count_messages([MessageText("assistant", last)], "o200k_base")
        ctx.messages[-1] = Message(12, 1, "assistant", last, token_count=count)
    return ctx


def test_a_grown_budget_leaves_the_smallest_safe_cut_room_under_the_threshold():
    """At a 4k window (threshold 3,000, budget 750) growth 4 lets a large carried summary take
    the whole threshold: the budget is cut so that the summary and the newest message (the
    least a safe cut keeps) fit, and the plan fits its window, where it was over it."""
    settings = CompactionSettings(context_window=4_000, reserve_tokens=1_000, max_summary_growth=4)
    carried = "## Done\n" + "\n".join(f"- step {n} of the earlier work done" for n in range(400))
    assert count_text(carried) > 3_000
    prep = prepare(_carrying(carried), None, settings, "o200k_base", max_summary_tokens=4096)
    assert prep.plan is not None and not prep.plan.over_window, prep.plan
    assert prep.plan.kept_ids == [12]  # the smallest safe kept suffix
    assert prep.base_budget < prep.summary_budget < 3_000
    whole = summary_message_tokens("word " * prep.summary_budget, "o200k_base")
    assert prep.tokens_kept + whole <= prep.threshold < prep.tokens_kept + whole + 40
    # growth 3 (2,250) fitted already and is left as it was
    three = replace(settings, max_summary_growth=3)
    grown = prepare(_carrying(carried), None, three, "o200k_base", max_summary_tokens=4096)
    assert grown.summary_budget == 2_250 and grown.plan is not None
    assert not grown.plan.over_window


def test_where_no_summary_fits_the_grown_budget_stays_and_the_plan_is_over_window():
    """A newest message larger than the threshold must stay verbatim: the context is over its
    window whatever the summary's size, so the budget keeps its growth for the carried items."""
    settings = CompactionSettings(context_window=4_000, reserve_tokens=1_000, max_summary_growth=4)
    carried = "## Done\n" + "\n".join(f"- step {n} of the earlier work done" for n in range(400))
    huge = _carrying(carried, last="output " * 3_500)
    prep = prepare(huge, None, settings, "o200k_base", max_summary_tokens=4096)
    assert prep.plan is not None and prep.plan.over_window and prep.plan.oversized_ids == [12]
    assert prep.summary_budget == 3_000


def test_the_outcome_follows_the_restored_context_as_measured(sqlite_db):
    """A system prompt of 3,801 tokens under a 5,000-token threshold leaves the budget (1,250)
    no room beside any kept message, so the plan is short of room; the summary comes out
    smaller than its budget and the restored context fits: compacted, not over_window (as it
    was called while the plan's flag, not the measured size, decided), and the checkpoint
    records no over_window."""
    add_session(
        sqlite_db, 1, coding_session(6), model="gpt-4o", system_prompt="Follow the rule. " * 950
    )
    outcome = Compactor(sqlite_db.engine, ExtractiveSummarizer(), SETTINGS).compact_session(1)
    threshold = SETTINGS.threshold("gpt-4o")
    assert "no room is left for messages" in outcome.notes[0]  # the plan was short of room
    assert outcome.tokens_after is not None and outcome.tokens_after <= threshold, outcome
    assert outcome.status == "compacted" and outcome.error is None
    # The plan's note says what came of it: a success does not read as a failure.
    assert outcome.notes[0].endswith(
        f"the summary came out small enough: the restored context holds {outcome.tokens_after} "
        f"of its {threshold} tokens"
    )
    details = Store(sqlite_db.engine).latest_compaction(1).details
    assert "over_window" not in details
