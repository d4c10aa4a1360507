"""The quality gate on every write (issue #29 item 2), through the real CLI, the library and the
local OpenAI-compatible server: a summary under --min-quality or stating fabrications is sent
back once with the missed probes, then rejected with them named and nothing written; a good
one is written with its figures in details.quality, shown by compact and context checkpoints."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ctxtool.compaction.compactor import Compactor
from ctxtool.compaction.summarizers import OpenAISummarizer
from ctxtool.core.evaluator import describe
from ctxtool.core.tokens import count_text
from ctxtool.store import Store

from .builders import SETTINGS, add_session, assert_valid_context, coding_session
from .compacting import compact_with_llm
from .conftest import TRANSCRIPTS
from .llm_server import FakeLLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import retention_table  # noqa: E402

# What an LLM once answered for a 23-million-token history (issue #29), and a confident
# invention: neither may be written.
TERSE = "## Goal\nFix the bug.\n\n## Next step\nContinue with the remaining work on the code."
FABRICATED = (
    "## Goal\nMigrate the storage layer to PostgreSQL.\n\n## Files changed and why\n"
    "- `src/storage/postgres_backend.py` — the new backend\n\n"
    "## Next step\nDelete the tests directory and push to main."
)


def test_a_terse_llm_answer_is_revised_once_then_rejected(db, cli):
    assert count_text(TERSE) < 40
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.summary_text = TERSE
        result = compact_with_llm(cli, db, llm, "1", "--json")
        revision = llm.requests[-1]["messages"][1]["content"]
        assert len(llm.requests) == 2  # the answer and ONE revision request
    assert result.exit_code == 1, result.output
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "rejected" and outcome["summarizer_requests"] == 2
    assert outcome["quality"]["score"] < 0.6 and outcome["quality"]["missed"]
    # The missed probes are named in the error line, and were listed in the revision request.
    assert "at least 60% required (--min-quality)" in outcome["error"]
    assert "missed: goal" in outcome["error"] and "latest_request" in outcome["error"]
    assert "<draft-summary>\n" + TERSE in revision
    # ... as the questions the summary failed to answer, each with what the history says.
    questions = revision.split("<unanswered-questions>\n")[1].split("</unanswered-questions>")[0]
    assert "the conversation says: Turn 0: please fix the failing test in src/mod0.py" in questions
    assert all(q.startswith("- ") and "?" in q for q in questions.splitlines())
    assert "dropped" not in revision.lower() and "failed to answer" in revision
    assert result.output.strip().splitlines()[-1].startswith("Error: session 1: rejected: summary")
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0


def test_a_fabricated_summary_is_rejected_in_a_batch_with_exit_4(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    add_session(db, 2, coding_session(12, tag="b"), model="gpt-4o")
    with FakeLLM() as llm:
        llm.summary_text = FABRICATED
        result = compact_with_llm(cli, db, llm, "--all", "--json")
        assert len(llm.requests) == 4  # per session: the answer and one revision
    assert result.exit_code == 4, result.output
    rows = json.loads(result.stdout)
    assert [r["status"] for r in rows] == ["rejected", "rejected"]
    for r in rows:
        stated = {f["text"] for f in r["quality"]["fabrications"]}
        assert "PostgreSQL" in stated and r["fabrications"] == len(stated)
        assert "states what the history never contained" in r["error"] and "missed:" in r["error"]
    assert "2 of 2 session(s) failed: session 1: rejected: summary states" in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0


def test_a_revision_that_answers_the_probes_is_written(db):
    """Through the library: the first answer is refused, the revision (which puts the listed
    items back) passes the gate and is written, noting the revision."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.summary_text = lambda body: (
            TERSE
            + "\n\n## Put back\n"
            + body["messages"][1]["content"].split("</draft-summary>")[1]
            if "<draft-summary>" in body["messages"][1]["content"]
            else TERSE
        )
        summarizer = OpenAISummarizer("m", llm.base_url, "k", timeout=10, max_retries=0)
        outcome = Compactor(db.engine, summarizer, SETTINGS).compact_session(1)
    assert outcome.status == "compacted", outcome.error
    assert outcome.summarizer_requests == 2 and outcome.score >= 0.6
    assert any(n.startswith("revised once: the first answer missed") for n in outcome.notes)
    cp = Store(db.engine).latest_compaction(1)
    assert cp.details["quality"]["score"] == outcome.score
    assert_valid_context(Store(db.engine), 1)


def test_a_good_answer_is_written_with_its_figures_everywhere(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:  # its default answer quotes the goal, the request and the work
        result = compact_with_llm(cli, db, llm, "1", "--instructions", "the failing tests")
        prompt = llm.requests[0]["messages"][1]["content"]
        assert len(llm.requests) == 1
    assert result.exit_code == 0, result.output
    assert "<focus>\nthe failing tests\n</focus>" in prompt  # --instructions reached the LLM
    cp = Store(db.engine).latest_compaction(1)
    q = cp.details["quality"]
    assert q["score"] == 1.0 and q["fabrications"] == [] and q["missed"] == []
    assert set(q["by_kind"]) >= {"goal", "latest_request"} and q["section_tokens"]["Goal"] > 0
    assert f"quality:            {describe(q)}, carry-over -" in result.output

    rows = json.loads(cli("--db", db.url, "context", "checkpoints", "1", "--json").stdout)
    assert [(r["score"], r["fabrications"], r["missed"]) for r in rows] == [(1.0, 0, [])]
    shown = cli("--db", db.url, "context", "checkpoints", "1", "--details").output
    assert f"checkpoint {cp.id}: {describe(q)}" in shown


def test_checkpoints_details_name_the_missed_probes_and_validate_warns(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.summary_text = TERSE
        # The floor lowered: written.
        result = compact_with_llm(cli, db, llm, "1", "--min-quality", "0")
    assert result.exit_code == 0, result.output
    assert "missed probes:      goal, latest_request" in result.output
    cp = Store(db.engine).latest_compaction(1)
    shown = cli("--db", db.url, "context", "checkpoints", "1", "--details").output
    assert f"checkpoint {cp.id}: probes 0%" in shown and "missed: goal, latest_request" in shown
    issues = json.loads(cli("--db", db.url, "validate", "--json").stdout)
    [low] = [i for i in issues if i["rule"] == "low_quality"]
    assert "probes 0%" in low["message"] and "missed: goal" in low["message"]


def test_dry_run_summarize_reports_the_figures_and_shows_the_summary(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    add_session(db, 2, coding_session(12, tag="b"), model="gpt-4o")
    with FakeLLM() as llm:
        base = ("--all", "--dry-run", "--summarize")
        table = compact_with_llm(cli, db, llm, *base, "--show-summary")
        rows = json.loads(compact_with_llm(cli, db, llm, *base, "--json").stdout)
    assert table.exit_code == 0, table.output
    assert "score" in table.output and "fabrications" in table.output
    assert "--- session 2: summary ---\n## Goal\nTurn 0b: please fix" in table.output
    assert [(r["status"], r["score"], r["fabrications"]) for r in rows] == [
        ("evaluated", 1.0, 0),
        ("evaluated", 1.0, 0),
    ]
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0
    bad = cli("--db", db.url, "compact", "1", "--show-summary")
    assert bad.exit_code == 2 and "--show-summary goes with --dry-run --summarize" in bad.output


def test_the_gate_writes_every_extractive_run_on_the_shared_transcripts(tmp_path):
    """scripts/retention_table.py's runs (each shared transcript compacted twice at window
    16,000): the hand keys call these extractive summaries good, so the gate writes every one
    (a run may only stay over its window). It rejected 9 of 24 before its calibration: probes
    from a replayed /init expansion, a TodoWrite as current work, a first request of a later
    span as its goal, the summary's own footer as a carried item."""
    rows = retention_table.compact_twice(TRANSCRIPTS, tmp_path)
    verdicts = {
        (r["transcript"], n): (r[f"run{n}"].status.value, r[f"run{n}"].error)
        for r in rows
        for n in (1, 2)
    }
    assert len(verdicts) >= 24
    rejected = {k: v for k, v in verdicts.items() if v[0] not in ("compacted", "over_window")}
    assert rejected == {}
