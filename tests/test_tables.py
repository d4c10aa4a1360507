"""Every human table fits an 80-column terminal (issue #31 item 5): `compact` (one session,
--all, a dry run, --summarize --show-summary), `tokens report`, `validate`, `context
checkpoints`, `eval`. The columns a person reads stay, a sentence wraps instead of being cut,
and --json keeps every field. One fitter, terminal.fit_table, does it for all of them."""

from __future__ import annotations

import json

from ctxtool.core.compaction_outcome import CompactionOutcome
from ctxtool.core.status import CompactionStatus
from ctxtool.output import OutputFormat
from ctxtool.terminal import fit_table

from .builders import LIMITS, add_session, coding_session
from .test_compaction_runs import _find_output_session

NARROW = {"COLUMNS": "80"}


def _fits(text: str, width: int = 80, skip_errors: bool = False) -> None:
    """Every line within ``width`` (the one-line ``Error:`` at the end is an error, not a
    table: it stays whole)."""
    lines = [x for x in text.splitlines() if not (skip_errors and x.startswith("Error: "))]
    wide = [x for x in lines if len(x) > width]
    assert not wide, "\n".join(wide)


def _words(text: str) -> list[str]:
    return text.split()


def _store(db) -> None:
    for sid in range(1, 4):
        add_session(db, sid, coding_session(12, tag=str(sid)), model="gpt-4o")
    # The newest message a 6000-line `find .`: over its window, with a long error.
    add_session(db, 4, coding_session(6) + _find_output_session(), model="gpt-4o")


def test_compact_tables_fit_80_columns_and_json_keeps_every_field(sqlite_db, cli):
    db = sqlite_db
    _store(db)
    planned = cli("--db", db.url, "compact", "--all", "--dry-run", *LIMITS, env=NARROW)
    assert planned.exit_code == 0, planned.output
    _fits(planned.stdout)
    _fits(planned.stderr, skip_errors=True)
    header = planned.stdout.splitlines()[0].split()
    assert header[:4] == ["session", "status", "before", "after"]
    assert "+" in planned.stdout and "(after: N+ is the kept tokens" in planned.stdout
    # The over-window error is wrapped in its cell, every word of it there.
    doc = json.loads(cli("--db", db.url, "compact", "--all", "--dry-run", "--json", *LIMITS).stdout)
    error = next(r["error"] for r in doc if r["session_id"] == 4)
    assert len(error) > 80 and " ".join(_words(error)[:6]) in " ".join(_words(planned.stdout))
    fields = set(CompactionOutcome(1, CompactionStatus.PLANNED).as_dict())
    assert set(doc[0]) == fields | {"over_window_ok"}

    summarized = cli(
        "--db",
        db.url,
        "compact",
        "--all",
        "--dry-run",
        "--summarize",
        "--show-summary",
        *LIMITS,
        env=NARROW,
    )
    _fits(summarized.stdout)
    assert {"summary", "score"} <= set(summarized.stdout.splitlines()[0].split())
    summaries = {
        r["session_id"]: r["summary"]
        for r in json.loads(
            cli(
                "--db", db.url, "compact", "--all", "--dry-run", "--summarize", "--json", *LIMITS
            ).stdout
        )
        if r["summary"]
    }
    shown = summarized.stdout.split("--- session 1: summary ---\n")[1].split("\n--- session")[0]
    assert _words(shown) == _words(summaries[1])  # wrapped, nothing lost
    assert max(len(line) for line in summaries[1].splitlines()) > 80

    one = cli("--db", db.url, "compact", "1", *LIMITS, env=NARROW)
    assert one.exit_code == 0, one.output
    _fits(one.output)
    assert "quality:" in one.stdout

    done = cli("--db", db.url, "compact", "--all", *LIMITS, env=NARROW)
    assert done.exit_code == 4
    _fits(done.stdout)
    assert "compacted" in done.stdout and "over_window" in done.stdout
    whole = cli("--db", db.url, "compact", "--all", "--dry-run", *LIMITS, env={"COLUMNS": "400"})
    assert max(len(line) for line in whole.stdout.splitlines()) > 80  # wider when it may be


def test_tokens_report_and_validate_fit_80_columns(sqlite_db, cli):
    db = sqlite_db
    _store(db)
    report = cli("--db", db.url, "tokens", "report", env=NARROW)
    assert report.exit_code == 0, report.output
    _fits(report.stdout)
    assert report.stdout.split()[:6] == [
        "session",
        "model",
        "msgs",
        "history",
        "context",
        "summary",
    ]
    rows = json.loads(cli("--db", db.url, "tokens", "report", "--json").stdout)
    assert {"encoding", "uncounted", "compression", "provider_context_tokens"} <= set(rows[0])

    found = cli("--db", db.url, "validate", *LIMITS[:4], env=NARROW)
    # over the window, waiting for compaction: warnings of the deploy gate (#44), exit 0
    assert found.exit_code == 0 and "over_window" in found.stdout, found.output
    _fits(found.stdout)
    _fits(found.stderr, skip_errors=True)
    issues = json.loads(cli("--db", db.url, "validate", *LIMITS[:4], "--json").stdout)
    assert set(issues[0]) == {
        "session_id",
        "severity",
        "rule",
        "compaction_id",
        "message_id",
        "message",
    }
    longest = max((i["message"] for i in issues), key=len)
    assert (
        len(longest) > 40
        and _words(longest)[-3:]
        == [w for w in _words(found.stdout) if w in _words(longest)[-3:]][-3:]
    )  # the message wraps in its column: its last words are there


def test_checkpoints_and_eval_fit_80_columns(sqlite_db, cli):
    db = sqlite_db
    add_session(db, 1, coding_session(12), model="gpt-4o")
    assert cli("--db", db.url, "compact", "1", *LIMITS).exit_code == 0
    listed = cli("--db", db.url, "context", "checkpoints", "1", "--details", env=NARROW)
    assert listed.exit_code == 0, listed.output
    _fits(listed.stdout)
    assert listed.stdout.split()[:2] == ["id", "summarizer"]
    rows = json.loads(cli("--db", db.url, "context", "checkpoints", "1", "--json").stdout)
    assert {"checkpoint_id", "parent_id", "created_at", "carry_over"} <= set(rows[0])

    evaluated = cli("--db", db.url, "eval", "1", env=NARROW)
    assert evaluated.exit_code == 0, evaluated.output
    _fits(evaluated.stdout)
    assert "Summary tokens by section:" in evaluated.stdout and "…" in evaluated.stdout


def test_the_fitter_cuts_paths_from_the_left_wraps_sentences_and_takes_columns_back():
    rows = [
        {
            "id": 1,
            "path": "/var/log/agents/2026/12/03/session-fe5e1c67.jsonl",
            "note": "a sentence that a person must read whole, so it wraps in its column",
            "created": "2026-12-03 10:00",
            "x": "a",
        }
    ]
    text = fit_table(
        rows,
        OutputFormat(),
        ["id", "path", "note", "created", "x"],
        60,
        ["path", "note"],
        optional=["created", "x"],
        from_left=["path"],
        wrapped=["note"],
        readable=20,
    )
    lines = text.splitlines()
    assert max(map(len, lines)) <= 60, text
    path = lines[2].split()[1]
    assert path.startswith("…") and path.endswith("/session-fe5e1c67.jsonl")
    note = slice(lines[0].index("note"), lines[0].rindex("x"))
    assert _words(" ".join(line[note] for line in lines[2:])) == _words(rows[0]["note"])
    # "created" could not stay; "x", left out before it, fits again and comes back.
    assert lines[0].split() == ["id", "path", "note", "x"]


def test_search_and_trace_lines_wrap_to_80_columns(sqlite_db, cli):
    db = sqlite_db
    add_session(db, 1, coding_session(12), model="gpt-4o")
    assert cli("--db", db.url, "compact", "1", *LIMITS).exit_code == 0
    found = cli("--db", db.url, "search", "ZeroDivisionError", "--limit", "3", env=NARROW)
    assert found.exit_code == 0, found.output
    _fits(found.stdout)
    hits = json.loads(cli("--db", db.url, "search", "ZeroDivisionError", "--json").stdout)
    assert len(hits[0]["snippet"]) > 80
    assert " ".join(_words(hits[0]["snippet"])) in " ".join(_words(found.stdout))  # all of it
    traced = cli("--db", db.url, "context", "trace", "1", "mod0", env=NARROW)
    assert traced.exit_code == 0, traced.output
    _fits(traced.stdout)
    assert "appeared in:" in traced.stdout and "now: " in traced.stdout


def test_fitting_from_column_statistics_equals_fitting_by_rendering():
    """fit_table fits a simple table from each column's statistics (terminal.ColumnStats, what
    context show's streamed table keeps of a million rows) and renders it once: the same text
    as rendering it at every width tried, optional columns, paths shortened from the left,
    cells with whitespace at their ends and controls included."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    headers = ["id", "file", "created", "title", "content", "parent"]
    text = st.text(alphabet=" ab\t\n\x1b…é/", max_size=40)
    row = st.fixed_dictionaries(
        {
            "id": st.none() | st.integers(0, 10**6),
            "file": text,
            "created": st.none() | st.sampled_from(["2026-12-03 14:00", " x "]),
            "title": st.none() | text,
            "content": text | st.integers(0, 99),
            "parent": st.none() | st.floats(0, 1000, allow_nan=False),
        }
    )

    @settings(max_examples=300, deadline=None)
    @given(
        st.lists(row, min_size=1, max_size=6),
        st.none() | st.integers(0, 120),
        st.sampled_from([[], ["parent"], ["created", "parent"]]),
        st.integers(8, 20),
    )
    def check(rows, width, optional, readable):
        def fitted(measured):
            return fit_table(
                rows,
                OutputFormat(),
                headers,
                width,
                ["content", "title", "file"],
                optional,
                from_left=["file"],
                readable=readable,
                measured=measured,
            )

        assert fitted(True) == fitted(False)

    check()
