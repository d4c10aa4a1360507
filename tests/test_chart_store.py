"""The chart of a session read from a real store (SQLite and MariaDB): its sizes are what
``Store.context_tokens`` measured at those messages, as the agent carried on and ctxtool
compacted twice; a runtime's checkpoints (a shared transcript) are placed by their times."""

from __future__ import annotations

import pytest

from ctxtool.core.context_size import synthetic_result_tokens
from ctxtool.store import Store
from ctxtool.store.chart import session_chart
from ctxtool.store.reads import SessionHistory

from .builders import add_session, coding_session
from .conftest import TRANSCRIPTS
from .test_inspect_cli import WINDOW, add_messages, run


def test_the_chart_is_what_context_tokens_measured_at_each_point(db, cli):
    store = Store(db.engine)
    add_session(db, 1, coding_session(6), model="gpt-4o", system_prompt="You are a coder.")
    measured = {}  # message id -> Store.context_tokens when it was the newest
    newest = db.scalar("SELECT MAX(id) FROM agent_message")
    measured[newest] = store.context_tokens(1)
    run(cli, db, "compact", "1", "--force", *WINDOW, "--keep-recent-tokens", "1500")
    after_first = store.context_tokens(1)
    add_messages(db, 1, coding_session(3, tag=" b"))
    measured[db.scalar("SELECT MAX(id) FROM agent_message")] = store.context_tokens(1)
    run(cli, db, "compact", "1", "--force", *WINDOW, "--keep-recent-tokens", "900")
    after_second = store.context_tokens(1)
    add_messages(db, 1, coding_session(2, tag=" c"))
    last = db.scalar("SELECT MAX(id) FROM agent_message")
    measured[last] = store.context_tokens(1)
    run(cli, db, "tokens", "count", "1")

    chart = session_chart(SessionHistory(store, 1), window=6000, threshold=5000)
    assert chart.uncounted == 0 and len(chart.ids) == 44
    at = {mid: chart.sizes[chart.ids.index(mid)] for mid in measured}
    assert at == measured
    first, second = chart.drops
    assert (first.index, first.before, first.after) == (24, measured[newest], after_first)
    assert second.after == after_second and second.index == 36
    assert first.recorded_before == first.before  # ctxtool's own figure, the same measure
    assert chart.sizes[-1] == store.context_tokens(1) and chart.threshold == 5000


@pytest.mark.parametrize(
    "transcript",
    [
        "pi/openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc.jsonl",
        "claude-code/a5c478e1-0d31-46d4-9fd6-3b6b203b3752.jsonl",
    ],
)
def test_a_runtimes_checkpoints_are_placed_by_their_times(db, cli, transcript):
    run(cli, db, "import", TRANSCRIPTS / transcript)
    store = Store(db.engine)
    # Imported without counts: each message estimated from its length, and said so.
    estimated = session_chart(SessionHistory(store, 1))
    assert estimated.uncounted == len(estimated.ids) > 0
    run(cli, db, "tokens", "count", "--all")
    history = SessionHistory(store, 1)
    chart = session_chart(history)
    assert 0.5 < estimated.peak / chart.peak < 2, (estimated.peak, chart.peak)
    assert chart.drops and chart.uncounted == 0
    assert [d.checkpoint_id for d in chart.drops] == [c.id for c in history.compactions]
    messages = store.messages(1)
    assert [m.id for m in messages] == chart.ids
    for k, cp in enumerate(history.compactions):
        drop = chart.drops[k]
        before_it = messages[drop.index - 1].created_at
        assert chart.time(drop.index - 1) == before_it  # read for the drawing
        assert before_it is None or before_it <= cp.created_at  # written by then
        if drop.index < len(messages):  # the next message came after it
            assert messages[drop.index].created_at > cp.created_at
        # The context at that checkpoint, as `context show --at` counts it, until the next
        # one replaced it, is the chart's size just before the next drop (tool calls all
        # answered there; a synthetic result is counted by the view alone).
        view = history.view(cp.id)
        end = chart.drops[k + 1].index if k + 1 < len(chart.drops) else len(chart.sizes)
        synthetic = view.count("synthetic_result") * synthetic_result_tokens(view.encoding)
        assert chart.sizes[end - 1] + synthetic == view.tokens, cp.id
