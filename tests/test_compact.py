"""`ctxtool compact` against real databases and a local OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import sqlalchemy as sa

from ctxtool.compaction.compactor import Compactor
from ctxtool.compaction.summarizers import ExtractiveSummarizer, OpenAISummarizer
from ctxtool.core.records import SUMMARY_PREFIX
from ctxtool.db.schema import agent_compaction, agent_message
from ctxtool.store import Store
from ctxtool.store.candidates import effective_contexts

from .builders import (
    LIMITS,
    SETTINGS,
    add_session,
    assert_valid_context,
    coding_session,
    history_fingerprint,
)
from .compacting import compact_with_llm
from .llm_server import FakeLLM
from .waiting import wait_until


def test_extractive_compaction_end_to_end(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o", system_prompt="You are a coder.")
    before = history_fingerprint(db)
    store = Store(db.engine)
    tokens_before = store.context_tokens(1)

    result = cli("--db", db.url, "compact", "1", "--dry-run", *LIMITS)
    assert result.exit_code == 0, result.output
    assert "session 1: planned" in result.output and "first kept message" in result.output
    planned = json.loads(cli("--db", db.url, "compact", "1", "--dry-run", "--json", *LIMITS).stdout)
    assert f"tokens after:       {planned['tokens_kept']} + the new summary" in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0

    result = cli("--db", db.url, "compact", "1", "--json", *LIMITS)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["status"] == "compacted" and out["summarizer"] == "extractive"
    assert out["tokens_before"] == tokens_before
    [cp] = store.compactions(1)
    assert cp.summarizer == "extractive" and cp.parent_compaction_id == 0
    assert cp.tokens_before == tokens_before and cp.tokens_after == out["tokens_after"]
    assert cp.first_kept_message_id == out["first_kept_message_id"]
    assert "src/mod0.py" in cp.details["read_files"]
    assert "## Goal" in cp.summary and "Turn 0" in cp.summary
    assert history_fingerprint(db) == before, "compaction must never change history"
    ctx = store.restored_context(1)
    assert ctx.messages[0].id == cp.first_kept_message_id
    assert ctx.messages[0].role == "user"
    assert store.context_tokens(1) == out["tokens_after"] < tokens_before
    # The plan's figure plus the summary the run wrote is what the context costs now.
    assert out["tokens_after"] == planned["tokens_kept"] + cp.summary_tokens
    assert_valid_context(store, 1)
    # Every message got a token count on the way.
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE token_count IS NULL") == 0

    # Below threshold now: nothing happens, exit 0.
    result = cli("--db", db.url, "compact", "1", *LIMITS)
    assert result.exit_code == 0 and "below_threshold" in result.output


def test_a_small_window_model_compacts_with_the_default_settings(db, cli):
    """gpt-4's 8k window: the default 16k reserve would leave a negative threshold, every run
    over_window. The default reserve is a quarter of such a window."""
    add_session(db, 1, coding_session(24), model="gpt-4-0613")
    result = cli("--db", db.url, "compact", "1", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (
        out["status"] == "compacted" and out["tokens_before"] > 8_192 - 2_048 >= out["tokens_after"]
    )
    assert cli("--db", db.url, "validate", "1").exit_code == 0
    bad = cli(
        "--db", db.url, "compact", "1", "--context-window", "8192", "--reserve-tokens", "9000"
    )
    assert bad.exit_code == 2 and "--reserve-tokens 9000 leaves nothing" in bad.output


def test_tokens_after_is_what_the_restored_context_counts(db, cli):
    """Calls never answered in the summarized span are sent with synthetic answers, so they
    count in tokens_before; they go with the span, and tokens_after must not keep them."""
    messages = []
    for m in coding_session(30):
        interrupted = m["role"] == "tool" and int(m["tool_call_id"][4:]) < 20
        if not interrupted:
            messages.append(m)
    add_session(db, 1, messages, model="gpt-4o", system_prompt="You are a coder.")
    result = cli("--db", db.url, "compact", "1", "--json", *LIMITS)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    store = Store(db.engine)
    assert out["status"] == "compacted"
    assert out["tokens_after"] == store.context_tokens(1) == store.latest_compaction(1).tokens_after
    assert out["tokens_after"] == out["tokens_kept"] + store.latest_compaction(1).summary_tokens


def test_iterative_compaction_chains_and_covers_everything(db):
    add_session(db, 1, coding_session(10), model="gpt-4o")
    with FakeLLM() as llm:
        summarizer = OpenAISummarizer("test-model", llm.base_url, "k", timeout=10, max_retries=0)
        compactor = Compactor(db.engine, summarizer, SETTINGS)
        first = compactor.compact_session(1)
        assert first.status == "compacted", first.error
        # The agent keeps working: more messages arrive, then another compaction.
        with db.engine.begin() as conn:
            for m in coding_session(10, tag="b"):
                conn.execute(agent_message.insert().values(session_id=1, **m))
        second = compactor.compact_session(1)
        assert second.status == "compacted", second.error
        prompt = llm.requests[-1]["messages"][1]["content"]
    c1, c2 = Store(db.engine).compactions(1)
    assert c2.parent_compaction_id == c1.id and c2.first_kept_message_id > c1.first_kept_message_id
    assert c2.summarizer == "openai" and c2.summarizer_model == "test-model"
    # The second summary updates the first with exactly the messages from c1's cut to c2's.
    assert f"<previous-summary>\n{c1.summary}\n</previous-summary>" in prompt
    ids = [
        r["id"] for r in db.rows("SELECT id FROM agent_message WHERE session_id = 1 ORDER BY id")
    ]
    span = [i for i in ids if c1.first_kept_message_id <= i < c2.first_kept_message_id]
    first_span_text = db.scalar("SELECT content FROM agent_message WHERE id = :i", i=span[0])
    assert first_span_text.split(":")[0] in prompt
    # (the second span's own turns are tagged "Turn 0b:", so the needle keeps the colon)
    conversation = prompt.split("<previous-summary>")[0]  # the previous summary quotes turn 0
    assert db.scalar("SELECT content FROM agent_message WHERE id = :i", i=ids[0])[:8] not in (
        conversation
    )
    assert c2.details["summarised_from_message_id"] == c1.first_kept_message_id
    assert c2.details["summarised_messages"] == len(span)


@pytest.mark.parametrize(
    "mode,status,needle",
    [
        ("garbage", "failed", "not a chat completion"),
        ("no_choices", "failed", "no message"),
        ("empty", "failed", "empty summary"),
        ("length", "failed", "max_tokens"),
        ("long", "rejected", "not smaller than what it replaces"),
    ],
)
def test_bad_llm_answers_write_nothing(db, mode, status, needle):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.mode = mode
        compactor = Compactor(
            db.engine, OpenAISummarizer("m", llm.base_url, "k", timeout=10, max_retries=0), SETTINGS
        )
        outcome = compactor.compact_session(1)
    assert outcome.status == status and needle in outcome.error
    # The report still says what was planned: a failure keeps the figures of the steps before it.
    assert outcome.tokens_before > outcome.threshold and outcome.summarised_messages > 0
    assert outcome.first_kept_message_id is not None and outcome.seconds > 0
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0
    assert db.scalar("SELECT COUNT(*) FROM agent_session WHERE lease_owner IS NOT NULL") == 0


def test_retries_on_500_and_429_then_succeeds(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.failures.extend([500, 429, 503])
        result = compact_with_llm(
            cli, db, llm, "1", "--retries", "3", "--json", env={"OPENAI_API_KEY": "sk-test"}
        )
        assert len(llm.requests) == 4
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "compacted"
    with FakeLLM() as llm:
        llm.failures.extend([500] * 5)
        result = compact_with_llm(cli, db, llm, "1", "--force", "--retries", "1")
    assert result.exit_code == 1 and "HTTP 500 after 1 retry" in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 1
    with FakeLLM() as llm:  # an answer the client does not retry is reported as the first one
        llm.failures.extend([401] * 5)
        result = compact_with_llm(cli, db, llm, "1", "--force", "--retries", "3")
        assert len(llm.requests) == 1
    assert result.exit_code == 1 and "HTTP 401 (model" in result.output, result.output


def test_many_failures_are_counted_in_the_one_line_error(db, cli):
    """The error line names the first three failed sessions and says how many more there are
    (the table above it lists every one)."""
    for sid in range(1, 6):
        add_session(db, sid, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.failures.extend([400] * 10)
        result = compact_with_llm(cli, db, llm, "--all")
    assert result.exit_code == 4, result.output
    [line] = [x for x in result.stderr.splitlines() if x.startswith("Error:")]
    assert line.startswith("Error: 5 of 5 session(s) failed: session 1: ")
    assert "session 3: " in line and "session 4: " not in line and line.endswith("; and 2 more")


def test_timeout_fails_cleanly(db):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.mode = "hang"
        summarizer = OpenAISummarizer("m", llm.base_url, "k", timeout=0.5, max_retries=1)
        outcome = Compactor(db.engine, summarizer, SETTINGS).compact_session(1)
    assert outcome.status == "failed" and "timed out" in outcome.error
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0


def test_auto_picks_extractive_without_endpoint_and_openai_with(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    env = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None}
    result = cli("--db", db.url, "compact", "1", "--dry-run", *LIMITS, env=env)
    assert "summarizer: extractive" in result.output
    with FakeLLM() as llm:
        result = cli(
            "--db",
            db.url,
            "compact",
            "1",
            *LIMITS,
            env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "sk-test"},
        )
        assert result.exit_code == 0, result.output
        assert "summarizer: openai" in result.output and len(llm.requests) == 1
    assert Store(db.engine).compactions(1)[0].summarizer == "openai"


def test_compact_all_batch_statuses_and_exit_codes(db, cli):
    for sid in range(1, 6):
        add_session(db, sid, coding_session(12 if sid <= 4 else 2), model="gpt-4o")
    result = cli("--db", db.url, "compact", "--all", "--dry-run", "--json", *LIMITS)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["session_id"] for r in rows] == [1, 2, 3, 4]
    assert {r["status"] for r in rows} == {"planned"}
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0

    result = cli("--db", db.url, "compact", "--all", "--limit", "2", "--json", *LIMITS)
    assert [r["status"] for r in json.loads(result.stdout)] == ["compacted", "compacted"]

    with FakeLLM() as llm:
        llm.mode = "empty"
        result = compact_with_llm(cli, db, llm, "--all", "--workers", "2", "--json")
    assert result.exit_code == 4
    assert {r["status"] for r in json.loads(result.stdout)} == {"failed"}
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 2

    result = cli("--db", db.url, "compact", "--all", "--older-than", "1h", *LIMITS)
    assert result.exit_code == 0 and "0 session(s) over threshold" in result.output


def test_a_sibling_reaching_a_session_being_read_skips_it_without_reading(db):
    """The lease is taken before the session is read: a second process that reaches it while
    the first is still reading and planning gets lease_held from one UPDATE, instead of
    reading and planning the whole session again (and, before, winning the claim)."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    sibling = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="sibling")
    seen: list[tuple[str, str]] = []

    def reading(session_id: int, what: str) -> None:
        if what.startswith("reading") and not seen:
            outcome = sibling.compact_session(session_id)
            seen.append((outcome.status, " ".join(outcome.notes)))

    first = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="first", on_phase=reading)
    assert first.compact_session(1).status == "compacted"
    assert seen == [("lease_held", seen[0][1])] and "leased by first" in seen[0][1]
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 1
    assert db.rows("SELECT lease_owner FROM agent_session") == [{"lease_owner": None}]


def test_a_session_that_needs_nothing_gives_back_the_lease_it_took(db):
    """...and the lease moves no `updated_at` (MySQL's ON UPDATE CURRENT_TIMESTAMP would),
    neither when nothing is written nor when a checkpoint is: the same on every database."""
    add_session(db, 1, coding_session(2), model="gpt-4o")
    add_session(db, 2, coding_session(12, tag="b"), model="gpt-4o")
    before = db.rows("SELECT session_id, updated_at FROM agent_session ORDER BY session_id")
    time.sleep(0.01)  # so that a write would show in the microseconds
    compactor = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="me")
    assert compactor.compact_session(1).status == "below_threshold"
    assert compactor.compact_session(2).status == "compacted"
    assert db.rows("SELECT lease_owner FROM agent_session") == [{"lease_owner": None}] * 2
    after = db.rows("SELECT session_id, updated_at FROM agent_session ORDER BY session_id")
    assert after == before


def test_leases(db):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    compactor = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="me")
    future = "2999-01-01 00:00:00" if db.kind == "sqlite" else "2999-01-01 00:00:00.000000"
    with db.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE agent_session SET lease_owner = 'other-host', lease_expires_at = :t"),
            {"t": future},
        )
    assert compactor.compact_session(1).status == "lease_held"
    assert compactor.batch(dry_run=True).candidates == []  # leased sessions are not even candidates
    with db.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE agent_session SET lease_expires_at = :t"), {"t": "2000-01-01 00:00:00"}
        )
    outcome = compactor.compact_session(1)
    assert outcome.status == "compacted"  # an expired lease is taken over
    assert db.rows("SELECT lease_owner FROM agent_session") == [{"lease_owner": None}]
    # An owner without an expiry bounds nothing: free, for the batch and for the claim alike
    # (the claim refused it forever while the batch listed the session as free).
    add_session(db, 2, coding_session(12, tag="b"), model="gpt-4o")
    with db.engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE agent_session SET lease_owner = 'by-hand', "
                "lease_expires_at = NULL WHERE session_id = 2"
            )
        )
    assert [c.session_id for c in compactor.batch(dry_run=True).candidates] == [2]
    assert compactor.compact_session(2).status == "compacted"


def test_parent_unique_key_is_the_last_line_of_defence(db):
    add_session(db, 1, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    row = {"session_id": 1, "summary": "s", "first_kept_message_id": 2, "parent_compaction_id": 0}
    with db.engine.begin() as conn:
        conn.execute(agent_compaction.insert().values(**row))
    with pytest.raises(sa.exc.IntegrityError), db.engine.begin() as conn:
        conn.execute(agent_compaction.insert().values(**row))


def test_live_agent_writes_during_compaction_land_after_the_cut(db):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM(delay=0.5) as llm:
        compactor = Compactor(
            db.engine, OpenAISummarizer("m", llm.base_url, "k", timeout=10, max_retries=0), SETTINGS
        )

        def agent():
            wait_until(lambda: llm.requests, "the compaction's LLM call")  # 0.5 s in flight
            with db.engine.begin() as conn:
                conn.execute(
                    agent_message.insert().values(
                        session_id=1, role="user", content="new while compacting"
                    )
                )

        writer = threading.Thread(target=agent)
        writer.start()
        outcome = compactor.compact_session(1)
        writer.join()
    assert outcome.status == "compacted", outcome.error
    ctx = Store(db.engine).restored_context(1)
    assert ctx.messages[-1].content == "new while compacting"
    assert ctx.to_openai()[0]["content"].startswith(SUMMARY_PREFIX)


def _compact_all_cmd(url: str, base_url: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ctxtool",
        "--db",
        url,
        "compact",
        "--all",
        "--workers",
        "4",
        "--summarizer",
        "openai",
        "--base-url",
        base_url,
        "--json",
        *LIMITS,
        *extra,
    ]


@pytest.mark.slow
def test_two_compact_all_processes_compact_each_session_once(db):
    for sid in range(1, 21):
        add_session(db, sid, coding_session(12, tag=str(sid)), model="gpt-4o")
    with FakeLLM(delay=0.1) as llm:
        env = dict(os.environ, OPENAI_API_KEY="sk-test")
        procs = [
            subprocess.Popen(
                _compact_all_cmd(db.url, llm.base_url),
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    statuses = [r["status"] for out, _ in outs for r in json.loads(out)]
    assert statuses.count("compacted") == 20
    assert set(statuses) <= {"compacted", "lease_held", "lost_race", "below_threshold"}
    per_session = db.rows(
        "SELECT session_id, COUNT(*) AS n FROM agent_compaction GROUP BY session_id"
    )
    assert sorted((r["session_id"], r["n"]) for r in per_session) == [(s, 1) for s in range(1, 21)]
    for sid in range(1, 21):
        assert_valid_context(Store(db.engine), sid)


@pytest.mark.slow
def test_kill_9_leaves_no_checkpoint_and_a_rerun_completes(db):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.mode = "hang"
        proc = subprocess.Popen(
            _compact_all_cmd(db.url, llm.base_url),
            env=dict(os.environ, OPENAI_API_KEY="sk-test"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.time() + 60
        while not llm.requests and time.time() < deadline:
            time.sleep(0.05)
        assert llm.requests, "compaction never reached the LLM"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0
    assert db.scalar("SELECT lease_owner FROM agent_session") is not None  # the dead run's lease
    with db.engine.begin() as conn:  # time passes: the lease expires
        conn.execute(
            sa.text("UPDATE agent_session SET lease_expires_at = :t"), {"t": "2000-01-01 00:00:00"}
        )
    with FakeLLM() as llm:
        out = subprocess.run(
            _compact_all_cmd(db.url, llm.base_url),
            env=dict(os.environ, OPENAI_API_KEY="sk-test"),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 0, out.stderr
    assert [r["status"] for r in json.loads(out.stdout)] == ["compacted"]
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 1


@pytest.mark.slow
def test_ctrl_c_stops_compact_all_without_starting_the_queued_sessions(db):
    """Found by an adversarial run: after SIGINT, compact --all went on calling the LLM for
    every queued session (100 sessions, 2 s an answer: 100 s, every checkpoint written) and
    only then said `interrupted`. Now the queued ones are not started; the running ones finish
    cleanly, with no lease left behind."""
    for sid in range(1, 21):
        add_session(db, sid, coding_session(12, tag=str(sid)), model="gpt-4o")
    with FakeLLM(delay=1.0) as llm:
        proc = subprocess.Popen(
            _compact_all_cmd(db.url, llm.base_url, "--retries", "0"),
            env=dict(os.environ, OPENAI_API_KEY="sk-test"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.time() + 60
        while len(llm.requests) < 4 and time.time() < deadline:
            time.sleep(0.05)
        assert len(llm.requests) >= 4, "compaction never reached the LLM"
        proc.send_signal(signal.SIGINT)
        printed, err = proc.communicate(timeout=60)
        asked = len(llm.requests)
    assert proc.returncode == 130, err
    assert "Error: interrupted" in err and "Traceback" not in err
    assert asked <= 8, asked  # the four running, at most one more round: not all twenty
    done = db.scalar("SELECT COUNT(*) FROM agent_compaction")
    assert 1 <= done <= asked < 20
    # It says what it came to: done before, allowed to finish, never started; the figures add up.
    said = re.search(
        r"Error: interrupted: (.+?), (\d+) not started(?:; the (\d+|one) running (?:was|were) "
        r"allowed to finish: (.+?))?; no lease is left behind",
        err,
    )
    assert said, err

    def sessions(part: str | None) -> dict[str, int]:
        found = re.findall(r"(\d+) (?:session\(s\) )?(\w+)", part or "")
        return {status: int(n) for n, status in found}

    before, finished = sessions(said[1]), sessions(said[4])
    assert sum(before.values()) + int(said[2]) + sum(finished.values()) == 20
    running = {None: 0, "one": 1}.get(said[3]) if said[3] in (None, "one") else int(said[3])
    assert running == sum(finished.values()) <= 4
    assert before.get("compacted", 0) + finished.get("compacted", 0) == done
    # Stdout has the results of what finished, as a normal run prints them (with each
    # rejection's reason), before the interrupt line on stderr.
    rows = json.loads(printed)
    assert len(rows) == sum(before.values()) + sum(finished.values())
    assert sum(r["status"] == "compacted" for r in rows) == done
    assert all(r["error"] for r in rows if r["status"] not in ("compacted", "lease_held"))
    assert db.scalar("SELECT COUNT(*) FROM agent_session WHERE lease_owner IS NOT NULL") == 0
    for sid in range(1, 21):
        assert_valid_context(Store(db.engine), sid)


def test_candidates_read_only_effective_contexts(db):
    """Finding sessions over threshold sums the messages since each cut in one walk of the
    message index: each entry read once (those before a cut passed over), never a row, never a
    history twice."""
    add_session(db, 1, coding_session(60), model="gpt-4o")  # 240 messages, compacted below
    add_session(db, 2, coding_session(3), model="gpt-4o")  # small, never compacted
    compactor = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS)
    assert compactor.compact_session(1).status == "compacted"
    cut = Store(db.engine).latest_compaction(1).first_kept_message_id
    effective = db.scalar(
        "SELECT COUNT(*) FROM agent_message WHERE (session_id = 1 AND id >= :c) OR session_id = 2",
        c=cut,
    )
    assert effective < 40 < db.scalar("SELECT COUNT(*) FROM agent_message")

    with db.engine.connect() as conn:  # the session's own counter: other connections don't count

        def handler_reads():
            return int(
                conn.execute(sa.text("SHOW SESSION STATUS LIKE 'Handler_read_next'")).first()[1]
            )

        before = handler_reads() if db.kind == "mysql" else 0
        rows = {r.session_id: r for r in effective_contexts(conn)}
        if db.kind == "mysql":
            walked = db.scalar("SELECT COUNT(*) FROM agent_message")
            assert handler_reads() - before <= walked + 10
    expected = db.scalar(
        "SELECT SUM(token_count) FROM agent_message WHERE session_id = 1 AND id >= :c", c=cut
    )
    assert rows[1].tokens == expected and rows[1].first_kept_message_id == cut
    assert rows[2].uncounted == 12 and rows[2].first_kept_message_id is None


def test_one_turn_larger_than_the_budget_is_split_safely(db):
    turn = coding_session(12)
    one_turn = [turn[0]] + [m for m in turn if m["role"] != "user"]  # one request, 36 steps
    add_session(db, 1, one_turn, model="gpt-4o")
    with FakeLLM() as llm:
        compactor = Compactor(
            db.engine, OpenAISummarizer("m", llm.base_url, "k", timeout=10, max_retries=0), SETTINGS
        )
        outcome = compactor.compact_session(1)
        prompt = llm.requests[0]["messages"][1]["content"]
    assert outcome.status == "compacted" and outcome.split_turn
    # the split turn's prefix gets a prompt of its own, the request that started it inside
    assert "START of the turn in progress" in prompt
    assert "Turn 0" in prompt.split("<turn-prefix>")[1]
    cp = Store(db.engine).latest_compaction(1)
    assert cp.details["split_turn"] is True
    assert (
        db.scalar("SELECT role FROM agent_message WHERE id = :i", i=cp.first_kept_message_id)
        == "assistant"
    )
    assert_valid_context(Store(db.engine), 1)


def test_commands_refuse_an_old_schema_with_exit_3(empty_db, cli):
    assert cli("--db", empty_db.url, "migrate", "up", "--to", "0001").exit_code == 0
    for args in (["compact", "--all"], ["tokens", "report"], ["import", "-"], ["validate"]):
        result = cli("--db", empty_db.url, *args, input="")
        assert result.exit_code == 3, args
        assert "0002_ctxtool_columns is pending" in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_summarizer_url_credentials_are_masked(db):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    summarizer = OpenAISummarizer(
        "m", "http://svc:hunter2@127.0.0.1:9/v1", "k", timeout=1, max_retries=0
    )
    assert "hunter2" not in summarizer.describe() and "svc:***@" in summarizer.describe()
    keyed = OpenAISummarizer(
        "m", "http://127.0.0.1:9/v1?key=S3cr3t&api_key=S3cr3t", "k", timeout=1, max_retries=0
    )  # a key in the query: found by review
    assert "S3cr3t" not in keyed.describe() and "key=***" in keyed.describe()
    outcome = Compactor(db.engine, summarizer, SETTINGS).compact_session(1)
    assert outcome.status == "failed" and "hunter2" not in outcome.error


def test_a_taken_over_lease_stops_the_slow_owner_from_writing(db):
    """A's LLM call outlives its lease; B takes the session over and compacts it. When A's
    answer finally arrives, A must not append a second checkpoint."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM(delay=1.5) as llm:
        slow = Compactor(
            db.engine,
            OpenAISummarizer("m", llm.base_url, "k", timeout=10, max_retries=0),
            SETTINGS,
            owner="host-a",
        )
        result = {}
        worker = threading.Thread(target=lambda: result.update(a=slow.compact_session(1)))
        worker.start()
        deadline = time.time() + 10
        while not llm.requests and time.time() < deadline:
            time.sleep(0.02)
        with db.engine.begin() as conn:  # A's lease runs out while its LLM call is in flight
            conn.execute(
                sa.text("UPDATE agent_session SET lease_expires_at = :t"),
                {"t": "2000-01-01 00:00:00"},
            )
        b = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS, owner="host-b").compact_session(
            1
        )
        worker.join()
    assert b.status == "compacted"
    assert result["a"].status == "lost_race" and result["a"].compaction_id is None
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 1
    assert db.scalar("SELECT summarizer FROM agent_compaction") == "extractive"
    assert db.scalar("SELECT lease_owner FROM agent_session") is None


def test_a_session_over_threshold_only_by_its_system_prompt_is_found(db):
    add_session(db, 1, coding_session(8), model="gpt-4o", system_prompt="You are careful. " * 400)
    compactor = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS)
    Store(db.engine).count_tokens()
    messages_only = db.scalar("SELECT SUM(token_count) FROM agent_message")
    assert messages_only < SETTINGS.threshold("gpt-4o") < Store(db.engine).context_tokens(1)
    [candidate] = compactor.batch(dry_run=True).candidates
    assert candidate.session_id == 1
    assert candidate.estimated_tokens == Store(db.engine).context_tokens(1)


def test_batch_finds_a_context_over_threshold_through_its_system_prompt(db, monkeypatch):
    """The index sums leave out the system prompt (and an imported summary without a count):
    the batch must still find a session whose prompt carries it over the threshold, however
    large the prompt, and must not measure a session its byte bounds already decide."""
    from ctxtool.compaction.batch import find_batch
    from ctxtool.core.plan import CompactionSettings

    settings = CompactionSettings(context_window=65_536, reserve_tokens=8_192)  # 57,344
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": "alpha " * 2_000}
        for i in range(10)
    ]  # about 20k tokens of messages
    add_session(db, 1, messages, model="gpt-4o", system_prompt="policy " * 40_000)  # ~40k more
    add_session(db, 2, messages, model="gpt-4o", system_prompt="Be brief.")
    add_session(db, 3, messages * 3, model="gpt-4o", system_prompt="Be brief.")  # ~60k: over
    Store(db.engine).count_tokens()
    exact = {sid: Store(db.engine).context_tokens(sid) for sid in (1, 2, 3)}
    assert exact[1] > settings.threshold("gpt-4o") > exact[2]
    assert exact[3] > settings.threshold("gpt-4o")

    from ctxtool.store import candidates

    measured = []
    real = candidates.exact_context_tokens  # the batch's exact measure

    def measuring(conn, session_id, *args, **kwargs):
        measured.append(session_id)
        return real(conn, session_id, *args, **kwargs)

    monkeypatch.setattr(candidates, "exact_context_tokens", measuring)
    batch = find_batch(Store(db.engine), settings, None)
    assert sorted(c.session_id for c in batch.candidates) == [1, 3]
    assert {c.session_id: c.estimated_tokens for c in batch.candidates}[1] == exact[1]
    assert measured == [1]  # 2 is under even with its prompt, 3 is over without it


def test_older_than_reads_the_times_a_runtime_wrote(sqlite_db, cli):
    """SQLite keeps created_at as the runtime wrote it. `--older-than` compared it as text, so a
    message written hours ago as 2026-01-01T09:46:00Z (a T sorts after every time of that day
    written with a space) looked recent for ever and its session was never compacted."""
    db = sqlite_db
    add_session(db, 1, coding_session(12), model="gpt-4o")
    add_session(db, 2, coding_session(12), model="gpt-4o")
    with db.engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE agent_message SET created_at = "
                "strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-2 hours') WHERE session_id = 1"
            )
        )
        conn.execute(
            sa.text(
                "UPDATE agent_message SET created_at = "
                "strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-1 minutes') WHERE session_id = 2"
            )
        )
    result = cli(
        "--db", db.url, "compact", "--all", "--dry-run", "--older-than", "1h", "--json", *LIMITS
    )
    assert result.exit_code == 0, result.output
    assert [r["session_id"] for r in json.loads(result.stdout)] == [1]


def test_a_reserve_that_takes_a_models_whole_window_is_a_usage_error(db, cli):
    """Without --context-window the window is each session's model's: a --reserve-tokens that
    takes all of gpt-4's 8,192 left a threshold of -11,808, every session 'over' it and the
    advice to shorten the system prompt. It is the settings' fault, said once, exit code 2."""
    add_session(db, 1, coding_session(4), model="gpt-4")
    expected = "--reserve-tokens 20000 leaves nothing of the 8192-token window of gpt-4"
    for args in (
        ["compact", "--all", "--dry-run"],
        ["compact", "--all"],
        ["compact", "1"],
        ["compact", "1", "--dry-run"],
        ["sessions", "list", "--over-window"],
        ["validate"],
    ):
        result = cli("--db", db.url, *args, "--reserve-tokens", "20000")
        assert result.exit_code == 2 and expected in result.output, (args, result.output)
        assert "Traceback" not in result.output and "internal error" not in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0
    result = cli("--db", db.url, "sessions", "list", "--over-window", "--reserve-tokens", "2000")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "shape", ["%Y-%m-%d %H:%M:%f-05", "%Y%m%dT%H%M%SZ", "\t%Y-%m-%dT%H:%M:%SZ"]
)
def test_older_than_reads_every_time_shape_the_store_reads(sqlite_db, cli, shape):
    """Found by review: shapes that ctxtool reads as times but SQL compared wrongly (an offset
    on a 26-character time, the compact basic format, a leading tab) made messages written a
    minute ago look old. The newest message of each session is read in Python instead."""
    db = sqlite_db
    add_session(db, 1, coding_session(12), model="gpt-4o")
    local = "-5 hours" if shape.endswith("-05") else "+0 hours"  # a minute ago, in UTC
    with db.engine.begin() as conn:
        conn.execute(
            sa.text(
                f"UPDATE agent_message SET created_at = strftime('{shape}', 'now', "
                f"'-1 minutes', '{local}')"
            )
        )
    result = cli(
        "--db", db.url, "compact", "--all", "--dry-run", "--older-than", "1h", "--json", *LIMITS
    )
    assert result.exit_code == 0 and json.loads(result.stdout) == [], result.output


def test_a_dry_run_reads_the_session_s_head_once(db):
    """The sums, the tails and the plan start from one read of the session and its latest
    checkpoint (the statement that joins the newest checkpoint, alias ``newer``)."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    Store(db.engine).count_tokens()
    compactor = Compactor(db.engine, ExtractiveSummarizer(), SETTINGS)
    heads = []

    def seen(conn, cursor, statement, *args):
        if re.search(r"\bnewer\b", statement):
            heads.append(statement)

    sa.event.listen(db.engine, "before_cursor_execute", seen)
    try:
        outcome = compactor.compact_session(1, dry_run=True)
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", seen)
    assert outcome.status == "planned"
    assert len(heads) == 1
