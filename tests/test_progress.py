"""Long runs say how far they got (issue #31 item 6): off a terminal (cron, a log file) a line
every CTXTOOL_PROGRESS_INTERVAL seconds on stderr, a single-session compaction naming its step
(waiting for the LLM, the gate, the write); Ctrl-C in `tokens count` says how many counts were
saved. Run as a user runs them: the real process, stderr a pipe."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import sqlalchemy as sa

from ctxtool.db.schema import agent_message, agent_session
from ctxtool.output import duration, progress_line

from .builders import LIMITS, add_session, coding_session
from .compacting import openai_args
from .conftest import TRANSCRIPTS
from .llm_server import FakeLLM
from .waiting import wait_until


def _ctxtool(db, *args: str, interval: str = "0.05", **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ctxtool", "--db", db.url, *args],
        env={**os.environ, "CTXTOOL_PROGRESS_INTERVAL": interval, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_progress_lines_say_how_far_and_what_now():
    assert duration(4) == "4 s" and duration(280) == "4 min 40 s" and duration(7500) == "2 h 5 min"
    assert progress_line("compacting", 3, 20, True, None, None, 65) == (
        "compacting: 3/20 (15%), 1 min 5 s"
    )
    assert progress_line("importing", 512, 1024, False, None, None, 2) == "importing: 50%, 2 s"
    assert progress_line(
        "compacting session 7", 0, None, True, "summarizing (waiting for m)", 40, 62
    ) == ("compacting session 7: summarizing (waiting for m) for 40 s, 1 min 2 s in all")


def test_a_single_compaction_names_its_steps_off_a_terminal(sqlite_db):
    db = sqlite_db
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM(delay=0.6) as llm:
        done = _ctxtool(
            db,
            "compact",
            "1",
            *openai_args(llm),
            *LIMITS,
            OPENAI_API_KEY="sk-test",
        )
    assert done.returncode == 0, done.stderr
    lines = [x for x in done.stderr.splitlines() if x.startswith("compacting session 1: ")]
    waiting = [x for x in lines if "summarizing (waiting for m) for " in x]
    assert waiting and waiting[-1].endswith(" in all"), done.stderr
    order = [
        "reading and counting its context",
        "summarizing (waiting for m)",
        "checking the summary (quality gate)",
        "writing the checkpoint",
    ]
    steps = [x.split(": ", 1)[1].rsplit(" for ", 1)[0] for x in lines]
    assert set(steps) <= set(order) and steps == sorted(steps, key=order.index), steps
    assert "session 1: compacted" in done.stdout  # the report itself is unchanged
    quiet = _ctxtool(db, "compact", "1", "--force", *LIMITS, interval="0")
    assert "compacting session" not in quiet.stderr


def test_batches_report_progress_off_a_terminal(sqlite_db):
    db = sqlite_db
    for sid in range(1, 5):
        add_session(db, sid, coding_session(12, tag=str(sid)), model="gpt-4o")
    counted = _ctxtool(db, "tokens", "count", "--all", interval="0.001")
    assert counted.returncode == 0, counted.stderr
    assert re.search(r"^counting tokens: \d+/192 \(\d+%\), \d+ s$", counted.stderr, re.M)
    assert "every count saved" in counted.stdout

    checked = _ctxtool(db, "validate", interval="0.001")
    assert re.search(r"^validating sessions: (\d/4 \(\d+%\), )?\d+ s$", checked.stderr, re.M)

    transcript = TRANSCRIPTS / "claude-code" / "a5c478e1-0d31-46d4-9fd6-3b6b203b3752.jsonl"
    imported = _ctxtool(db, "import", str(transcript), interval="0.001")
    assert imported.returncode == 0, imported.stderr
    assert re.search(r"^importing: \d+%, \d+ s$", imported.stderr, re.M), imported.stderr

    with FakeLLM(delay=0.3) as llm:
        batch = _ctxtool(
            db,
            "compact",
            "--all",
            *openai_args(llm),
            *LIMITS,
            OPENAI_API_KEY="sk-test",
        )
    assert batch.returncode == 0, batch.stderr
    assert re.search(r"^compacting: [0-3]/4 \(\d+%\), \d+ s$", batch.stderr, re.M), batch.stderr


def test_ctrl_c_in_tokens_count_says_how_many_counts_were_saved(sqlite_db):
    db = sqlite_db
    with db.engine.begin() as conn:
        conn.execute(agent_session.insert(), [{"session_id": s} for s in range(1, 41)])
        conn.execute(
            agent_message.insert(),
            [
                {"session_id": s, "role": "user", "content": f"message {i} of session {s} " * 20}
                for s in range(1, 41)
                for i in range(500)
            ],
        )
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxtool", "--db", db.url, "tokens", "count", "--all"]
        + ["--batch-size", "10"],
        env={**os.environ, "CTXTOOL_PROGRESS_INTERVAL": "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def saved() -> int:
        with db.engine.connect() as conn:
            return conn.execute(
                sa.select(sa.func.count()).where(agent_message.c.token_count.is_not(None))
            ).scalar_one()

    wait_until(lambda: saved() >= 100, "the first batches to be saved")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    found = re.search(r"Error: interrupted: the counts of (\d+) message\(s\) were saved", err)
    assert found and "Traceback" not in err, err
    assert int(found[1]) == saved() < 20_000
