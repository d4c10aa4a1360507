"""A counted store is shown without a vocabulary (issue #44): `tokens count` keeps the count of
each system prompt and checkpoint summary as sent in their details, compaction keeps its own
summary's, and `context show` reuses them, so a fresh process showing a context whose every
message is counted loads no vocabulary and imports no LLM client. A text changed since it was
counted, or a count without ctxtool's digest of the text, is counted again."""

from __future__ import annotations

import json
import os

import sqlalchemy as sa

from ctxtool.core.context_size import HEAD_COUNTS_KEY, text_digest
from ctxtool.core.records import SUMMARY_PREFIX
from ctxtool.core.tokens import MessageText, count_messages
from ctxtool.db.schema import agent_compaction as C
from ctxtool.db.schema import agent_session as S
from ctxtool.store import Store

from .builders import LIMITS, add_session, coding_session
from .test_startup import run_fresh

PROMPT = "You are a careful coding agent. Run the tests before you claim a fix."
SUMMARY = "## Goal\nFix the rounding of the checkout total.\n\n## Done\n- read shop/tax.py"


def _show(db, *args: str) -> tuple[dict, dict]:
    """`context show 1 --json` in a fresh process: the document, and what it loaded."""
    return run_fresh(
        ["--db", db.url, "context", "show", "1", "--json", *args],
        {k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")},
    )


def _runtime_checkpoint(db, session_id: int, first_kept: int, details=None) -> None:
    """A checkpoint as a runtime writes it (no count of ctxtool's), cut at a user message."""
    with db.engine.begin() as conn:
        conn.execute(
            C.insert().values(
                session_id=session_id,
                summary=SUMMARY,
                first_kept_message_id=first_kept,
                parent_compaction_id=0,
                details=details,
            )
        )


def _head_tokens(encoding: str = "o200k_base") -> tuple[int, int]:
    texts = [MessageText("system", PROMPT), MessageText("user", SUMMARY_PREFIX + SUMMARY)]
    prompt, summary = count_messages(texts, encoding)
    return prompt, summary


def test_a_counted_store_is_shown_without_a_vocabulary_or_the_llm_client(db, cli):
    ids = add_session(db, 1, coding_session(4), model="gpt-4o", system_prompt=PROMPT)
    _runtime_checkpoint(db, 1, ids[8])
    before, loaded = _show(db)
    assert loaded == {"openai": False, "vocabularies": ["o200k_base"]}  # the head is counted

    counted = cli("--db", db.url, "tokens", "count", "--all", "--json")
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout)["heads_counted"] == 2
    after, loaded = _show(db)
    assert loaded == {"openai": False, "vocabularies": []}
    assert after == before  # the same figures, from the kept counts
    prompt, summary = _head_tokens()
    with db.engine.connect() as conn:
        details = conn.execute(sa.select(S.c.details)).scalar_one()
        kept = conn.execute(sa.select(C.c.details)).scalar_one()
    assert details[HEAD_COUNTS_KEY]["o200k_base"]["tokens"] == prompt
    assert kept[HEAD_COUNTS_KEY]["o200k_base"]["tokens"] == summary
    # Counted once: a second run finds nothing to count.
    again = cli("--db", db.url, "tokens", "count", "--all", "--json")
    assert json.loads(again.stdout)["heads_counted"] == 0


def test_a_text_changed_since_its_count_is_counted_again(db, cli):
    ids = add_session(db, 1, coding_session(4), model="gpt-4o", system_prompt="short")
    _runtime_checkpoint(db, 1, ids[8])
    assert cli("--db", db.url, "tokens", "count", "--all").exit_code == 0
    with db.engine.begin() as conn:  # the runtime rewrites the prompt; its counts stay
        conn.execute(S.update().values(system_prompt=PROMPT))
    shown, loaded = _show(db)
    assert loaded["vocabularies"] == ["o200k_base"]
    prompt, _ = _head_tokens()
    assert shown["messages"][0]["token_count"] == prompt


def test_a_count_without_ctxtools_digest_is_not_taken(db):
    ids = add_session(db, 1, coding_session(4), model="gpt-4o", system_prompt=PROMPT)
    forged = {HEAD_COUNTS_KEY: {"o200k_base": {"tokens": 1, "digest": "0" * 24}}}
    _runtime_checkpoint(db, 1, ids[8], details=forged)
    shown, loaded = _show(db)
    _, summary = _head_tokens()
    assert loaded["vocabularies"] == ["o200k_base"]
    assert shown["messages"][1]["token_count"] == summary


def test_counting_the_heads_keeps_the_sessions_time_and_its_other_details(db, cli):
    add_session(db, 1, coding_session(2), model="gpt-4o", system_prompt=PROMPT)
    with db.engine.begin() as conn:
        conn.execute(
            S.update().values(details={"cwd": "/srv/shop"}, updated_at="2026-01-02 03:04:05")
        )
    assert cli("--db", db.url, "tokens", "count", "1").exit_code == 0
    with db.engine.connect() as conn:
        details, updated = conn.execute(sa.select(S.c.details, S.c.updated_at)).one()
    assert details["cwd"] == "/srv/shop"
    assert details[HEAD_COUNTS_KEY]["o200k_base"]["digest"] == text_digest(PROMPT)
    assert str(updated).startswith("2026-01-02 03:04:05")


def test_compaction_keeps_its_summarys_count(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o", system_prompt=PROMPT)
    done = cli("--db", db.url, "compact", "1", "--summarizer", "extractive", "--force", *LIMITS)
    assert done.exit_code == 0, done.output
    with db.engine.connect() as conn:
        summary, tokens, details = conn.execute(
            sa.select(C.c.summary, C.c.summary_tokens, C.c.details)
        ).one()
    kept = details[HEAD_COUNTS_KEY]["o200k_base"]
    assert kept == {"tokens": tokens, "digest": text_digest(SUMMARY_PREFIX + summary)}


def test_the_heads_are_counted_a_page_at_a_time(db):
    """Pages of two rows: every session's prompt and every checkpoint's summary, once."""
    for sid in range(1, 4):
        ids = add_session(
            db, sid, coding_session(4, tag=str(sid)), model="gpt-4o", system_prompt=PROMPT
        )
        _runtime_checkpoint(db, sid, ids[8])
    assert Store(db.engine).count_heads(batch_size=2) == 6
    assert Store(db.engine).count_heads(batch_size=2) == 0
    prompt, summary = _head_tokens()
    with db.engine.connect() as conn:
        kept = [d[HEAD_COUNTS_KEY]["o200k_base"] for (d,) in conn.execute(sa.select(S.c.details))]
        kept += [d[HEAD_COUNTS_KEY]["o200k_base"] for (d,) in conn.execute(sa.select(C.c.details))]
    assert [k["tokens"] for k in kept] == [prompt] * 3 + [summary] * 3
    assert Store(db.engine).count_heads(session_id=2, recount=True, batch_size=1) == 2


def test_eval_of_ctxtools_checkpoint_reads_its_stored_section_counts(db, cli):
    """`eval` counts a summary's sections, which ctxtool's own checkpoint stored when it was
    written in the session's encoding: read, not counted, so no vocabulary is loaded, and
    the figures are the ones counting gives. A summary changed since (its digest differs), or
    a runtime's checkpoint, which stores none: counted."""
    add_session(db, 1, coding_session(12), model="gpt-4o", system_prompt=PROMPT)
    done = cli("--db", db.url, "compact", "1", "--summarizer", "extractive", "--force", *LIMITS)
    assert done.exit_code == 0, done.output
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")}
    report, loaded = run_fresh(["--db", db.url, "eval", "1", "--json"], env)
    assert loaded == {"openai": False, "vocabularies": []}
    counted = json.loads(cli("--db", db.url, "eval", "1", "--json").stdout)  # this process
    assert report["section_tokens"] == counted["section_tokens"] and report["section_tokens"]
    summary = Store(db.engine).latest_compaction(1).summary
    from ctxtool.core.evaluator import section_costs

    assert report["section_tokens"] == {s.heading: s.tokens for s in section_costs(summary)}

    with db.engine.begin() as conn:  # the summary changed since it was counted: counted
        conn.execute(sa.update(C).values(summary=C.c.summary + " "))
    report, loaded = run_fresh(["--db", db.url, "eval", "1", "--json"], env)
    assert loaded["vocabularies"] == ["o200k_base"]

    add_session(db, 2, coding_session(4, tag="r"), model="gpt-4o")
    ids = [m.id for m in Store(db.engine).messages(2)]
    _runtime_checkpoint(db, 2, ids[8])
    report, loaded = run_fresh(["--db", db.url, "eval", "2", "--json"], env)
    assert loaded["vocabularies"] == ["o200k_base"]
    assert report["section_tokens"] == {s.heading: s.tokens for s in section_costs(SUMMARY)}
