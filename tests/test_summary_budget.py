"""A summary that carries an earlier one may grow past its budget, up to a stated limit
(``prepare.SUMMARY_GROWTH_LIMIT``) and only while the restored context keeps room under its
threshold (issue #42: "where the carried content needs room, let the budget grow"), and the
files the checkpoints' lists name are never fabrications."""

from __future__ import annotations

import pytest

from ctxtool.compaction.compactor import Compactor
from ctxtool.compaction.summarizers import ExtractiveSummarizer
from ctxtool.core.evaluator.fabrications import fabrications
from ctxtool.core.plan import CompactionSettings
from ctxtool.core.prepare import SUMMARY_GROWTH_LIMIT, grown_budget
from ctxtool.core.records import Message
from ctxtool.core.tokens import count_text
from ctxtool.importer import Importer
from ctxtool.store import Store

from .conftest import TRANSCRIPTS

# Pi's OpenClaw session ends with its runtime's own summaries carried: the first ctxtool
# checkpoint at a 16k window carries the latest of them.
OPENCLAW = TRANSCRIPTS / "pi" / "openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc.jsonl"


@pytest.mark.parametrize(
    ("budget", "previous", "room", "grown"),
    [
        (3500, 500, 10_000, 3500),  # a small carried summary: the span's own items fit
        (3500, 2000, 10_000, 3750),  # the carried summary and half a budget
        (3500, 3600, 10_000, 5250),  # at most SUMMARY_GROWTH_LIMIT times the budget
        (3500, 3400, 4000, 4000),  # never past what the kept messages leave
        (3500, 3400, 1000, 3500),  # never under the budget
    ],
)
def test_the_budget_grows_for_carried_content_up_to_its_limit(budget, previous, room, grown):
    assert grown_budget(budget, previous, room) == grown
    assert grown <= budget * SUMMARY_GROWTH_LIMIT


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
    assert budget < outcome.summary_tokens <= budget * SUMMARY_GROWTH_LIMIT
    assert outcome.carry_over == 1.0 and outcome.fabrications == 0
    assert outcome.tokens_after <= settings.threshold(None)


def test_a_path_the_checkpoints_lists_name_is_no_fabrication():
    span = [Message(1, 1, "user", "Tidy the docs.")]
    summary = "## Files read\n`docs/guide/install.md`"
    assert [f.text for f in fabrications(summary, span)] == ["docs/guide/install.md"]
    assert fabrications(summary, span, known_paths=["docs/guide/install.md"]) == []
