"""Compaction runs against real databases, the real CLI and the local OpenAI-compatible server:
fits the window or says so, dry runs write nothing, odd rows, leases left by killed runs,
late commits inside a summarized span, bounded summarizer input, model families, errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from ctxtool.compaction.compactor import Compactor
from ctxtool.compaction.summarizers import ExtractiveSummarizer, OpenAISummarizer
from ctxtool.core.evaluator import describe
from ctxtool.core.plan import CompactionSettings
from ctxtool.core.tokens import count_text
from ctxtool.db.schema import agent_message
from ctxtool.store import Store
from ctxtool.store.leases import LEASE_BEAT_S

from .builders import LIMITS, SETTINGS, add_session, assert_valid_context, coding_session
from .compacting import compact_with_llm
from .llm_server import FakeLLM, faithful_summary
from .waiting import LOCK_WAITS_INTERVAL, lock_waits, wait_until

ROOT = Path(__file__).resolve().parents[1]


def _no_keys():
    return {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None}


def _find_output_session(n_lines: int = 6000) -> list[dict]:
    """A Pi-like session whose newest message is a huge `$ find .` result."""
    listing = "\n".join(f"./src/pkg{i % 40}/module_{i}.py" for i in range(n_lines))
    return [
        {"role": "user", "content": "List every file of the project"},
        {
            "role": "assistant",
            "content": "Listing.",
            "tool_calls": [
                {
                    "id": "f1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "find ."}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "f1", "content": listing},
    ]


def test_over_window_is_an_outcome_naming_the_message(db, cli):
    ids = add_session(db, 1, coding_session(6) + _find_output_session(), model="gpt-4o")
    add_session(db, 2, coding_session(12), model="gpt-4o")
    result = cli("--db", db.url, "compact", "--all", "--json", *LIMITS)
    assert result.exit_code == 4, result.output
    rows = {r["session_id"]: r for r in json.loads(result.stdout)}
    assert rows[2]["status"] == "compacted"
    assert rows[1]["status"] == "over_window"
    assert f"message {ids[-1]} (tool" in rows[1]["error"]
    assert (
        "Error: 1 of 2 session(s) stay over their window: session 1: over_window:" in result.stderr
    )
    # It compacted what it could, and later runs keep saying so (never a silent nothing_to_cut).
    assert Store(db.engine).latest_compaction(1).first_kept_message_id == ids[-2]
    again = cli("--db", db.url, "compact", "--all", "--json", *LIMITS)
    assert again.exit_code == 4
    assert [r["status"] for r in json.loads(again.stdout)] == ["over_window"]
    one = cli("--db", db.url, "compact", "1", *LIMITS)
    assert one.exit_code == 1 and f"message {ids[-1]} (tool" in one.output
    assert one.output.count("Error:") == 1


def test_over_window_names_the_system_prompt_when_it_is_the_cause(db, cli):
    add_session(db, 1, coding_session(6), model="gpt-4o", system_prompt="Follow the rule. " * 1500)
    result = cli(
        "--db",
        db.url,
        "compact",
        "1",
        "--json",
        "--context-window",
        "6000",
        "--reserve-tokens",
        "1000",
        "--keep-recent-tokens",
        "500",
    )
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert "no safe cut fits: the system prompt (" in error and "leaving 0 for messages" in error
    assert "must stay verbatim" not in error


def test_dry_run_writes_nothing(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    add_session(db, 2, coding_session(12, tag="x"), model="gpt-4o")
    for args in (
        ["compact", "1", "--dry-run"],
        ["compact", "--all", "--dry-run"],
        ["compact", "--all", "--dry-run", "--summarize", "--json"],
    ):
        result = cli("--db", db.url, *args, *LIMITS)
        assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {r["status"] for r in rows} == {"evaluated"}
    assert all(r["summary_tokens"] and r["score"] is not None and r["tokens_after"] for r in rows)
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE token_count IS NOT NULL") == 0
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0
    assert db.scalar("SELECT COUNT(*) FROM agent_session WHERE lease_owner IS NOT NULL") == 0


def test_dry_run_works_for_a_read_only_user(mysql_db, cli):
    db = mysql_db
    add_session(db, 1, coding_session(12), model="gpt-4o")
    url = sa.engine.make_url(db.url)
    user = f"ro_{url.database}"[:32]
    with db.engine.begin() as conn:
        conn.exec_driver_sql(f"DROP USER IF EXISTS '{user}'@'%%'")
        conn.exec_driver_sql(f"CREATE USER '{user}'@'%%' IDENTIFIED BY 'ro-pass'")
        conn.exec_driver_sql(f"GRANT SELECT ON {url.database}.* TO '{user}'@'%%'")
    try:
        ro = url.set(username=user, password="ro-pass").render_as_string(hide_password=False)
        result = cli("--db", ro, "compact", "--all", "--dry-run", "--json", *LIMITS)
        assert result.exit_code == 0, result.output
        assert [r["status"] for r in json.loads(result.stdout)] == ["planned"]
        result = cli("--db", ro, "compact", "1", "--dry-run", "--summarize", *LIMITS)
        assert result.exit_code == 0 and "session 1: evaluated" in result.output
    finally:
        with db.engine.begin() as conn:
            conn.exec_driver_sql(f"DROP USER IF EXISTS '{user}'@'%%'")


@pytest.mark.parametrize("odd", [{"a": 1}, ["call_1"], [None], 42])
def test_odd_tool_calls_do_not_stop_compaction(db, cli, odd):
    msgs = coding_session(12)
    msgs.insert(5, {"role": "assistant", "content": "odd row", "tool_calls": odd})
    add_session(db, 1, msgs, model="gpt-4o")
    add_session(db, 2, coding_session(12, tag="y"), model="gpt-4o")
    assert cli("--db", db.url, "compact", "1", "--dry-run", *LIMITS).exit_code == 0
    result = cli("--db", db.url, "compact", "--all", "--json", *LIMITS)
    assert result.exit_code == 0, result.output
    assert [r["status"] for r in json.loads(result.stdout)] == ["compacted", "compacted"]


def _expire(db, when: str):
    with db.engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE agent_session SET lease_owner = 'dead-host:123:abc', "
                "lease_expires_at = :t WHERE session_id = 1"
            ),
            {"t": when},
        )


def test_a_lease_left_by_a_killed_run_is_reported(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    add_session(db, 2, coding_session(12, tag="z"), model="gpt-4o")
    _expire(db, "2999-01-01 00:00:00")
    result = cli("--db", db.url, "compact", "--all", *LIMITS)
    assert result.exit_code == 0, result.output
    assert (
        "session 1: over threshold, skipped: leased by dead-host:123:abc until 2999-01-01"
        in result.stderr
    )
    rows = json.loads(cli("--db", db.url, "compact", "--all", "--json", *LIMITS).stdout)
    assert [(r["session_id"], r["status"]) for r in rows] == [(1, "lease_held")]
    one = cli("--db", db.url, "compact", "1", *LIMITS)
    assert one.exit_code == 0 and "note: leased by dead-host:123:abc until 2999-01-01" in one.output


class _LeaseWatcher:
    """A summarizer that records, while it runs, how long the session's lease still lasts."""

    def __init__(self, inner, db):
        self.inner, self.db, self.seconds, self.session_id = inner, db, None, 1
        for attr in ("name", "model", "input_tokens", "revises"):
            setattr(self, attr, getattr(inner, attr))

    def seconds_per_request(self):
        return self.inner.seconds_per_request()

    def describe(self):
        return self.inner.describe()

    def summarize(self, request):
        expires = self.db.scalar(
            "SELECT lease_expires_at FROM agent_session WHERE session_id = :s", s=self.session_id
        )
        now = self.db.scalar(
            "SELECT CURRENT_TIMESTAMP" if self.db.kind == "sqlite" else "SELECT UTC_TIMESTAMP()"
        )
        expires = (
            expires
            if not isinstance(expires, str)
            else __import__("datetime").datetime.fromisoformat(expires)
        )
        now = (
            now if not isinstance(now, str) else __import__("datetime").datetime.fromisoformat(now)
        )
        self.seconds = (expires - now).total_seconds()
        return self.inner.summarize(request)


def test_the_lease_is_sized_from_the_summarizer_in_use(db):
    """How long a compactor may work on a session follows the summarizer in use (two minutes
    for extractive, not eleven); the lease as written is short whatever it is, and renewed
    while the work runs (store.leases.Heartbeat), so a killed run's lapses within it."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    watcher = _LeaseWatcher(ExtractiveSummarizer(), db)
    compactor = Compactor(db.engine, watcher, SETTINGS)
    assert compactor._lease_before_plan() == 120
    assert compactor.compact_session(1).status == "compacted"
    assert LEASE_BEAT_S - 10 <= watcher.seconds <= LEASE_BEAT_S + 1
    add_session(db, 2, coding_session(12, tag="l"), model="gpt-4o")
    with FakeLLM() as llm:
        watcher = _LeaseWatcher(
            OpenAISummarizer("m", llm.base_url, "k", timeout=100, max_retries=2), db
        )
        watcher.session_id = 2
        compactor = Compactor(db.engine, watcher, SETTINGS)
        assert 350 <= compactor._lease_before_plan() <= 377  # 100 s x 3 + backoff + margin
        outcome = compactor.compact_session(2)
    assert outcome.status == "compacted", outcome.error
    assert LEASE_BEAT_S - 10 <= watcher.seconds <= LEASE_BEAT_S + 1


def test_a_message_committed_late_below_the_cut_is_not_lost(mysql_db):
    """A inserts a message and has not committed; B inserts two and commits; compaction cuts
    after them; then A commits. The late message must end up summarized (or kept), never in
    neither: the append's locking read waits for A and sees the span changed, so it plans again."""
    db = mysql_db
    add_session(db, 1, coding_session(8), model="gpt-4o")
    # counted now: the run's own count writes would wait on A's row before it even plans
    Store(db.engine).count_tokens()
    a = db.engine.connect()
    tx = a.begin()
    late = a.execute(
        agent_message.insert().values(
            session_id=1, role="user", content="LATE-REQUEST please keep the old API"
        )
    ).inserted_primary_key[0]
    with db.engine.begin() as b:
        b.execute(
            agent_message.insert().values(session_id=1, role="user", content="newest request " * 30)
        )
        b.execute(
            agent_message.insert().values(session_id=1, role="assistant", content="on it " * 30)
        )
    settings = CompactionSettings(context_window=6000, reserve_tokens=1000, keep_recent_tokens=50)
    result = {}
    worker = threading.Thread(
        target=lambda: result.update(
            o=Compactor(db.engine, ExtractiveSummarizer(), settings).compact_session(1, force=True)
        )
    )
    worker.start()
    # compaction has planned without the late message and waits for it in its append
    wait_until(
        lambda: lock_waits(db, "%LOCK IN SHARE MODE%") or not worker.is_alive(),
        "the append to wait on the lock",
        interval=LOCK_WAITS_INTERVAL,
    )
    tx.commit()
    a.close()
    worker.join(60)
    outcome = result["o"]
    assert outcome.status == "compacted", outcome.error
    cp = Store(db.engine).latest_compaction(1)
    summarized = db.scalar(
        "SELECT COUNT(*) FROM agent_message WHERE session_id = 1 AND id < :c",
        c=cp.first_kept_message_id,
    )
    assert cp.details["summarised_messages"] == summarized
    ctx_ids = [m.id for m in Store(db.engine).restored_context(1).messages]
    assert late in ctx_ids or "LATE-REQUEST" in cp.summary


def test_a_session_of_a_million_tokens_is_folded_in_bounded_requests(sqlite_db):
    db = sqlite_db
    word = " ".join(f"tok{i}" for i in range(250))  # ~500 tokens of varied text
    turn = [
        {"role": "user", "content": "Step request: " + word},
        {"role": "assistant", "content": "Done: " + word},
    ]
    add_session(db, 1, turn * 1100, model="gpt-4o")  # 2,200 messages, >1.1M tokens
    with FakeLLM() as llm:
        summarizer = OpenAISummarizer(
            "m", llm.base_url, "k", timeout=30, max_retries=0, input_tokens=100_000
        )
        outcome = Compactor(db.engine, summarizer, CompactionSettings()).compact_session(1)
        sizes = list(llm.prompt_tokens)
    assert outcome.status == "compacted", outcome.error
    assert outcome.tokens_before > 1_000_000
    assert len(sizes) == outcome.summarizer_requests >= 10
    assert max(sizes) <= 100_000
    assert outcome.tokens_after <= CompactionSettings().threshold("gpt-4o")


@pytest.mark.parametrize("model", ["o3-mini", "gpt-5", "gpt-4o-mini", "qwen2.5-coder"])
def test_each_model_family_gets_parameters_it_accepts(db, cli, model):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        result = compact_with_llm(
            cli, db, llm, "1", "--model", model, "--max-summary-tokens", "256", "--json"
        )
        body = llm.requests[-1]
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "compacted"
    if model in ("o3-mini", "gpt-5"):
        assert "max_tokens" not in body and "temperature" not in body
        assert body["max_completion_tokens"] > 256  # headroom for reasoning
    else:
        assert body["max_tokens"] <= 256 and body["temperature"] == 0


def test_the_test_server_rejects_what_the_real_api_rejects(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        result = compact_with_llm(
            cli, db, llm, "1", "--model", "o3-mini", "--request-style", "chat"
        )
    assert result.exit_code == 1
    assert "HTTP 400" in result.output and "Use 'max_completion_tokens' instead" in result.output


def _judging_carry_over_alone(db, llm) -> Compactor:
    """A compactor asking the stand-in server, its gate judging carry-over alone (no probe
    floor)."""
    return Compactor(
        db.engine,
        OpenAISummarizer("m", llm.base_url, "k", timeout=10, max_retries=0),
        SETTINGS,
        min_quality=0,
    )


def test_an_llm_answer_that_drops_the_previous_summary_is_rejected(db):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.summary_text = (
            "## Goal\nFix the bug.\n\n## Constraints & Preferences\n- Keep the tests fast\n\n"
            "## Next Steps\n1. Port the parser\n2. Delete src/mod1.py"
        )
        compactor = _judging_carry_over_alone(db, llm)
        assert compactor.compact_session(1).status == "compacted"
        llm.summary_text = "## Goal\nSomething else entirely."
        before = len(llm.requests)
        outcome = compactor.compact_session(1, force=True)
        # Sent back once with the dropped items, then refused.
        revision = llm.requests[-1]["messages"][1]["content"]
        assert len(llm.requests) - before == 2 and "<draft-summary>" in revision
        # The dropped items, normalised (no list markers; ctxtool.evaluation.carry_over).
        assert "keep the tests fast" in revision and "delete src/mod1.py" in revision
    assert outcome.status == "rejected" and "drops items of the previous summary" in outcome.error
    assert outcome.carry_over < 0.5 and outcome.summarizer_requests == 2
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 1


def test_an_answer_keeping_most_but_not_all_is_revised_or_refused(db):
    """The floor is 90% by default: losing a third of the items (accepted before at 50%) is
    sent back; a revision that puts them back is written, noting the revision."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    steps = [f"{i}. Port module{i} to the streaming reader" for i in range(1, 31)]
    full = "## Goal\nFix the bug.\n\n## Next Steps\n" + "\n".join(steps)
    lossy = "## Goal\nFix the bug.\n\n## Next Steps\n" + "\n".join(steps[:20])
    with FakeLLM() as llm:
        llm.summary_text = full
        compactor = _judging_carry_over_alone(db, llm)
        assert compactor.compact_session(1).status == "compacted"
        llm.summary_text = lambda body: (
            full if "<draft-summary>" in body["messages"][1]["content"] else lossy
        )
        outcome = compactor.compact_session(1, force=True)
        assert outcome.status == "compacted", outcome
        assert outcome.carry_over == 1.0 and outcome.summarizer_requests == 2
        assert any("revised once: the first answer missed 10 items" in n for n in outcome.notes)
        # With the check off, the lossy answer is written as it is.
        llm.summary_text = lossy
        lax = Compactor(
            db.engine,
            OpenAISummarizer("m", llm.base_url, "k", timeout=10, max_retries=0),
            SETTINGS,
            min_carry_over=0,
            min_quality=0,
        ).compact_session(1, force=True)
        assert lax.status == "compacted" and lax.summarizer_requests == 1 and lax.carry_over < 0.9
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 3


def test_a_revision_asks_only_for_the_carried_items_the_span_did_not_finish(db):
    """A carried next step the span carried out (it wrote the file the step was to make) is
    retired: the floor leaves it out, and so does the revision request, which lists what the
    answer dropped and the span did not finish."""
    written = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "w1",
                "type": "function",
                "function": {
                    "name": "write",
                    "arguments": json.dumps({"path": "src/mod3.py", "content": "x = 1\n"}),
                },
            }
        ],
    }
    add_session(db, 1, coding_session(12), model="gpt-4o")
    steps = ["1. Create src/mod3.py"] + [
        f"{i}. Port module{i} to the streaming reader" for i in range(2, 11)
    ]
    full = "## Goal\nFix the bug.\n\n## Next Steps\n" + "\n".join(steps)
    lossy = "## Goal\nFix the bug.\n\n## Next Steps\n" + "\n".join(steps[5:])
    with FakeLLM() as llm:
        llm.summary_text = full
        compactor = _judging_carry_over_alone(db, llm)
        assert compactor.compact_session(1).status == "compacted"
        with db.engine.begin() as conn:  # the span after the cut writes the file
            for m in [written, {"role": "tool", "tool_call_id": "w1", "content": "ok"}]:
                conn.execute(agent_message.insert().values(session_id=1, **m))
        with db.engine.begin() as conn:
            for m in coding_session(12, tag="b"):
                conn.execute(agent_message.insert().values(session_id=1, **m))
        llm.summary_text = lossy
        before = len(llm.requests)
        outcome = compactor.compact_session(1, force=True)
        assert len(llm.requests) - before == 2, outcome  # sent back once
        revision = llm.requests[-1]["messages"][1]["content"]
        dropped = revision.split("<dropped-items>")[1].split("</dropped-items>")[0]
        assert (
            dropped.split()
            == " ".join(f"port module{i} to the streaming reader" for i in range(2, 6)).split()
        )


def test_min_carry_over_is_set_from_the_command_line(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    steps = [f"{i}. Port module{i} to the streaming reader" for i in range(1, 31)]
    full = "## Goal\nFix the bug.\n\n## Next Steps\n" + "\n".join(steps)
    lossy = "## Goal\nFix the bug.\n\n## Next Steps\n" + "\n".join(steps[:20])
    with FakeLLM() as llm:
        base = ("1", "--json", "--min-quality", "0")
        llm.summary_text = full
        assert compact_with_llm(cli, db, llm, *base).exit_code == 0
        llm.summary_text = lossy
        refused = compact_with_llm(cli, db, llm, *base, "--force")
        assert refused.exit_code == 1, refused.output
        row = json.loads(refused.stdout)
        assert row["status"] == "rejected" and "at least 90% required" in row["error"]
        assert len(llm.requests) == 3  # the first answer, and one revision that still drops them
        lax = compact_with_llm(cli, db, llm, *base, "--force", "--min-carry-over", "0.5")
        assert lax.exit_code == 0, lax.output
        assert json.loads(lax.stdout)["status"] == "compacted" and len(llm.requests) == 4
    bad = cli("--db", db.url, "compact", "1", "--min-carry-over", "1.5")
    assert bad.exit_code == 2 and "--min-carry-over" in bad.output
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 2


def test_an_answer_with_a_lone_surrogate_is_stored_repaired(db, cli):
    """JSON may carry "\\ud800", which no database stores: one such answer used to end a whole
    `compact --all` with a traceback."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    add_session(db, 2, coding_session(12, tag="b"), model="gpt-4o")
    with FakeLLM() as llm:
        llm.summary_text = lambda body: (
            faithful_summary(body) + "\nFix the parser \ud800 in src/mod1.py"
        )
        result = compact_with_llm(cli, db, llm, "--all", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["status"] for r in rows] == ["compacted", "compacted"]
    assert any("surrogate" in n for n in rows[0]["notes"])
    assert Store(db.engine).latest_compaction(2).summary.endswith("parser \ufffd in src/mod1.py")


def test_every_summarizer_keeps_within_max_summary_tokens(db, cli):
    add_session(db, 1, coding_session(40), model="gpt-4o")
    result = cli(
        "--db",
        db.url,
        "compact",
        "1",
        "--max-summary-tokens",
        "200",
        "--json",
        "--context-window",
        "12000",
        "--reserve-tokens",
        "1000",
        "--keep-recent-tokens",
        "1500",
    )
    assert result.exit_code == 0, result.output
    assert count_text(Store(db.engine).latest_compaction(1).summary) <= 200
    add_session(db, 2, coding_session(40, tag="s"), model="gpt-4o")
    with FakeLLM() as llm:
        llm.summary_text = "## Goal\n" + "a long summary line\n" * 200
        result = compact_with_llm(
            cli, db, llm, "2", "--max-summary-tokens", "200", "--context-window", "12000"
        )
    assert result.exit_code == 1 and "over its budget of 200 tokens" in result.output
    # Both figures, named: the text's (what the budget bounds) and the message's (what the
    # report's `summary:` line and tokens_after count).
    found = re.search(r"summary text \((\d+) tokens; (\d+) as the context message", result.output)
    assert found and count_text(llm.summary_text.strip()) == int(found[1]) < int(found[2])


def test_quality_is_stored_and_shown(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    result = cli("--db", db.url, "compact", "1", *LIMITS)
    assert result.exit_code == 0, result.output
    cp = Store(db.engine).latest_compaction(1)
    q = cp.details["quality"]
    assert q["summary_only_probes"] > 0 and 0.6 <= q["score"] <= 1 and q["fabrications"] == []
    assert q["missed"] == [] and q["carry_over"] is None  # a first checkpoint carries nothing
    assert f"quality:            {describe(q)}, carry-over -" in result.output
    assert cp.details["summarised_messages"] == len(
        [1 for r in db.rows("SELECT id FROM agent_message") if r["id"] < cp.first_kept_message_id]
    )
    assert_valid_context(Store(db.engine), 1)


def test_errors_are_one_line(db, cli):
    result = cli("--db", db.url, "compact", "99")
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines[:-1] in ([], ["summarizer: extractive (deterministic, no LLM)"]), lines
    assert lines[-1].startswith("Error: session 99 does not exist")  # once, not three times
    assert result.output.count("99") == 1
    for bad in ("10x", "10"):
        result = cli("--db", db.url, "compact", "--all", "--older-than", bad)
        assert result.exit_code == 2 and "a number and a unit" in result.output
    result = cli("--db", db.url, "compact", "--all", "--summarizer", "openai", env=_no_keys())
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: --summarizer openai needs an endpoint or a key: set "
        "OPENAI_API_KEY (api.openai.com), or --base-url / OPENAI_BASE_URL "
        "for a compatible server; --summarizer extractive needs neither"
    )


def test_one_session_honours_row_formats(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    csv_out = cli("--db", db.url, "compact", "1", "--dry-run", "--csv", *LIMITS).stdout.splitlines()
    assert csv_out[0].startswith("session_id,status,") and csv_out[1].startswith("1,planned,")
    nl = cli("--db", db.url, "compact", "1", "--dry-run", "--nl", *LIMITS).stdout.splitlines()
    assert len(nl) == 1 and json.loads(nl[0])["status"] == "planned"


def test_the_documented_cron_line_works_from_a_bare_environment(sqlite_db, cli):
    db = sqlite_db
    add_session(db, 1, coding_session(12), model="gpt-4o")
    env = {
        "PATH": "/usr/bin:/bin",
        "CTXTOOL_DATABASE_URL": db.url,
        "CTXTOOL_COMPACT_OLDER_THAN": "0s",
        "HOME": os.environ.get("HOME", "/tmp"),
    }
    out = subprocess.run(
        [str(ROOT / "scripts" / "cron-compact.sh"), *LIMITS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "command not found" not in out.stderr
    assert [
        json.loads(line)["status"] for line in out.stdout.splitlines() if line.startswith("{")
    ] == ["compacted"]
