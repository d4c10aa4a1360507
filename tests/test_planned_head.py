"""A compaction reads its session's head with only what restoring and planning read
(``session_head(..., planning=True)``): the same plan and restored context as the whole head
gives, on real transcripts with a checkpoint of ctxtool's and of the runtime's own."""

from __future__ import annotations

import pytest
from sqlalchemy import event

from ctxtool.compaction import CompactionSettings
from ctxtool.compaction.compactor import Compactor
from ctxtool.compaction.summarizers import ExtractiveSummarizer
from ctxtool.core.prepare import prepare
from ctxtool.core.status import CompactionStatus
from ctxtool.db import create_engine
from ctxtool.importer import Importer
from ctxtool.migrate import Migrator
from ctxtool.store import Store
from ctxtool.store.counts import read_suffix
from ctxtool.store.reads import restored_context, session_head

from .conftest import TRANSCRIPTS

SETTINGS = CompactionSettings(context_window=16000, reserve_tokens=2000, keep_recent_tokens=3000)
FILES = [
    ("codex", "codex/edgerunner-codex-session.jsonl"),
    ("pi", "pi/kimchi-dev-session.jsonl"),  # Pi's own compactions: runtime checkpoints
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    engine = create_engine(f"sqlite:///{tmp_path_factory.mktemp('head') / 'store.db'}")
    Migrator(engine).up()
    for fmt, name in FILES:
        Importer(engine, fmt=fmt).import_paths([str(TRANSCRIPTS / name)])
    compactor = Compactor(engine, ExtractiveSummarizer(), SETTINGS)
    outcomes = compactor.compact_all()
    assert any(o.status is CompactionStatus.COMPACTED for o in outcomes)
    yield Store(engine)
    engine.dispose()


def test_the_planned_head_restores_and_plans_as_the_whole_head(store):
    checked = 0
    with store.engine.connect() as conn:
        for session_id in store.session_ids():
            whole = session_head(conn, session_id)
            planned = session_head(conn, session_id, planning=True)
            assert planned.encoding == whole.encoding and planned.cut == whole.cut
            for field in ("session_id", "title", "model", "system_prompt", "details"):
                assert getattr(planned.session, field) == getattr(whole.session, field)
            if whole.latest is not None:
                checked += 1
                for field in (
                    "id",
                    "summary",
                    "first_kept_message_id",
                    "parent_compaction_id",
                    "summary_tokens",
                    "details",
                ):
                    assert getattr(planned.latest, field) == getattr(whole.latest, field)
            session, ctx, encoding = read_suffix(conn, session_id, None, store_counts=False)
            full = restored_context(conn, session_id)
            assert ctx.entries() == full.entries() and ctx.to_openai() == full.to_openai()
            mine = prepare(
                ctx, session.model, SETTINGS, encoding, max_summary_tokens=4000, force=True
            )
            theirs = prepare(
                full, whole.session.model, SETTINGS, encoding, max_summary_tokens=4000, force=True
            )
            assert mine.plan is not None and mine.plan == theirs.plan
            for field in ("tokens_before", "summary_budget", "summarized", "kept", "files"):
                assert getattr(mine, field) == getattr(theirs, field), field
            assert mine.parent_id == theirs.parent_id and mine.span() == theirs.span()
            conn.rollback()
    assert checked >= 2  # a checkpoint of ctxtool's and the runtime's


def test_a_compaction_reads_half_the_head_columns(store):
    """What the driver parses a description of: 12 columns, not the 24 of the whole head."""
    heads = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        if "FROM agent_session LEFT OUTER JOIN agent_compaction" in statement:
            heads.append(len(cursor.description))

    event.listen(store.engine, "after_cursor_execute", seen)
    try:
        with store.engine.connect() as conn:
            read_suffix(conn, store.session_ids()[0], None, store_counts=False)
            conn.rollback()
            session_head(conn, store.session_ids()[0])
    finally:
        event.remove(store.engine, "after_cursor_execute", seen)
    assert heads == [12, 24]
