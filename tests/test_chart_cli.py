"""`context checkpoints --chart` and `tokens report --chart` through the real entry point
(``python -m ctxtool``, so the output's encoding is the process's own), at 80 columns, in
block characters and in plain ones, on MariaDB and SQLite."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from ctxtool.store import Store

from .builders import add_session, coding_session
from .test_inspect_cli import PROJECT, compacted_twice, run

CHART_WINDOW = ["--context-window", "6000", "--reserve-tokens", "1000"]


def ctxtool(db, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``python -m ctxtool ARGS`` at 80 columns, piped, with ``env`` added."""
    full = {
        **os.environ,
        "PYTHONPATH": str(PROJECT),
        "CTXTOOL_DATABASE_URL": db.url,
        "COLUMNS": "80",
        **env,
    }
    full.pop("NO_COLOR", None) if "NO_COLOR" not in env else None
    return subprocess.run(
        [sys.executable, "-m", "ctxtool", *args],
        env=full,
        capture_output=True,
        timeout=120,
    )


def chart_part(stdout: bytes, encoding: str = "utf-8") -> list[str]:
    """The lines after the checkpoint table (and the blank line between them)."""
    lines = stdout.decode(encoding).splitlines()
    return lines[lines.index("") + 1 :]


def test_the_checkpoint_chart_fits_80_columns_in_blocks_and_in_plain_characters(db, cli):
    cps, _ = compacted_twice(db, cli)
    run(cli, db, "tokens", "count", "1")
    utf8 = ctxtool(
        db, "context", "checkpoints", "1", "--chart", *CHART_WINDOW, PYTHONIOENCODING="utf-8"
    )
    assert utf8.returncode == 0, utf8.stderr
    lines = chart_part(utf8.stdout)
    assert all(len(line) <= 80 for line in utf8.stdout.decode().splitlines())
    text = "\n".join(lines)
    assert "█" in text and "═" in text and "╌" in text and "└" in text
    assert "window 6,000" in text and "threshold 5,000" in text
    marks = next(
        line
        for line in lines
        if line.strip() in ("1 2", "12") or set(line.strip()) <= {"1", "2", " "} and line.strip()
    )
    assert marks.count("1") == 1 and marks.count("2") == 1  # one mark a checkpoint
    for cp in cps:  # the legend names each, with its tokens before and after
        assert f"#{cp['id']} " in text

    for env in ({"NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}, {"PYTHONIOENCODING": "ascii"}):
        plain = ctxtool(db, "context", "checkpoints", "1", "--chart", *CHART_WINDOW, **env)
        assert plain.returncode == 0, plain.stderr
        plain_lines = chart_part(plain.stdout, "ascii")
        assert all(line.isascii() and len(line) <= 80 for line in plain_lines), env
        assert "#" in "".join(plain_lines) and "threshold 5,000" in "\n".join(plain_lines)
        # The same picture: the same rows, in other characters.
        assert len(plain_lines) == len(lines)


def test_chart_options_refuse_what_they_cannot_draw(db, cli):
    add_session(db, 1, coding_session(2), model="gpt-4o")
    for args in (  # (--chart --json gives the chart's data: see below)
        ("context", "export", "1", "--chart", "--format", "jsonl"),
    ):
        result = run(cli, db, *args, code=2)
        assert result.output.strip().splitlines()[-1].startswith("Error:"), args


def test_the_report_histogram_counts_sessions_near_and_over_the_threshold(db, cli):
    # Contexts of about 0.6k, 1.7k, 4.5k, 5.6k and 6.2k tokens against a 6000-token window
    # whose threshold is 5000: one near the threshold, two over it, one over the window.
    for sid, turns in ((1, 1), (2, 3), (3, 8), (4, 10), (5, 11)):
        add_session(db, sid, coding_session(turns), model="gpt-4o")
    run(cli, db, "tokens", "count", "--all")
    rows = {r["session_id"]: r["effective_tokens"] for r in _report(cli, db)}
    near = sum(4400 < t <= 5000 for t in rows.values())
    over = sum(t > 5000 for t in rows.values())
    over_window = sum(t > 6000 for t in rows.values())
    assert (near, over, over_window) == (1, 2, 1), rows
    result = ctxtool(db, "tokens", "report", "--chart", *CHART_WINDOW, PYTHONIOENCODING="utf-8")
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode()
    assert all(len(line) <= 80 for line in out.splitlines())
    assert (
        f"5 session(s): {near} near the threshold (within 10% of the window below it), "
        f"{over} over it, {over_window} over the window"
    ) in " ".join(out.split())
    bars = out[out.index("sessions by restored context") :].splitlines()[1:12]
    assert len(bars) == 11 and "threshold in here" in bars[8] and "over the window" in bars[10]
    assert sum(int(re.match(r"\s*(over 100%|\S+) (\d+)", b).group(2)) for b in bars) == 5
    ascii_out = ctxtool(db, "tokens", "report", "--chart", *CHART_WINDOW, NO_COLOR="1")
    assert ascii_out.stdout.decode().isascii()

    # --json: the buckets the bars draw, the threshold's share, the same counts.
    doc = json.loads(run(cli, db, "tokens", "report", "--chart", "--json", *CHART_WINDOW).output)
    assert (doc["near_threshold"], doc["over_threshold"], doc["over_window"]) == (1, 2, 1)
    assert doc["sessions"] == 5 and abs(doc["threshold_share"] - 5000 / 6000) < 1e-6
    buckets = doc["buckets"]
    drawn = [int(re.match(r"\s*(over 100%|\S+) (\d+)", b).group(2)) for b in bars]
    assert [b["sessions"] for b in buckets] == drawn
    assert [(b["low"], b["high"]) for b in buckets[7:]] == [
        (0.7, 0.8),
        (0.8, 0.9),
        (0.9, 1.0),
        (1.0, None),
    ]
    assert [b["holds_threshold"] for b in buckets].index(True) == 8
    shares = sorted(t / 6000 for t in rows.values())
    for b in buckets:  # each bucket counts the sessions whose share falls in its range
        inside = (
            [x for x in shares if x > 1]
            if b["high"] is None
            else [x for x in shares if b["low"] <= x < b["high"]]
        )
        assert b["sessions"] == len(inside), (b, shares)
    # --nl / --csv: a row a bucket.
    nl = run(cli, db, "tokens", "report", "--chart", "--nl", *CHART_WINDOW).output.splitlines()
    assert [json.loads(line) for line in nl] == buckets
    csv_rows = run(cli, db, "tokens", "report", "--chart", "--csv", *CHART_WINDOW).output
    assert csv_rows.splitlines()[0] == "low,high,sessions,holds_threshold"
    assert len(csv_rows.splitlines()) == 1 + len(buckets)


def _report(cli, db) -> list[dict]:
    import json

    return json.loads(run(cli, db, "tokens", "report", "--json", *CHART_WINDOW).output)


def test_the_checkpoint_chart_as_json_and_csv(db, cli):
    """`context checkpoints N --chart --json`: a point a message, whose tokens at the newest
    message are what ``Store.context_tokens`` counts, and a drop a checkpoint after the message it
    followed; --csv gives the points as rows."""
    cps, _ = compacted_twice(db, cli)
    run(cli, db, "tokens", "count", "1")
    doc = json.loads(run(cli, db, "context", "checkpoints", "1", "--chart", "--json").output)
    ids = [r["id"] for r in db.rows("SELECT id FROM agent_message ORDER BY id")]
    assert [p["message_id"] for p in doc["points"]] == ids
    assert doc["points"][-1]["tokens"] == Store(db.engine).context_tokens(1) <= doc["peak"]
    assert [c["checkpoint_id"] for c in doc["checkpoints"]] == [c["id"] for c in cps]
    for drop in doc["checkpoints"]:
        assert drop["tokens_before"] > drop["tokens_after"] and drop["after_message_id"] in ids
    first = doc["checkpoints"][0]
    at = ids.index(first["after_message_id"])
    assert doc["points"][at]["checkpoint_id"] is None
    # Compacted twice in a row: the second is in force from the next message on.
    together = [c for c in doc["checkpoints"] if c["after_message_id"] == ids[at]]
    assert doc["points"][at + 1]["checkpoint_id"] == together[-1]["checkpoint_id"]
    assert doc["points"][at]["tokens"] == first["tokens_before"]
    rows = run(cli, db, "context", "checkpoints", "1", "--chart", "--csv").output.splitlines()
    assert rows[0] == "message_id,tokens,checkpoint_id" and len(rows) == 1 + len(ids)


def test_the_chart_of_a_counted_store_loads_no_vocabulary(db, cli, tmp_path):
    """After `tokens count` (messages, system prompt and summaries counted), the HTML export
    with its chart reuses the kept counts of each checkpoint's head as the page does: a fresh
    process loads no vocabulary (it took 0.5 s of CPU and 70 MB, the chart's whole cost)."""
    compacted_twice(db, cli)
    run(cli, db, "tokens", "count", "1")
    page = tmp_path / "page.html"
    loaded = subprocess.run(
        [sys.executable, "-c", LOADED_AFTER, "--db", db.url, "context", "export", "1"]
        + ["-o", str(page), *CHART_WINDOW],
        env={k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(loaded.stderr.strip().splitlines()[-1]) == {"vocabularies": [], "code": 0}
    assert page.read_text().count('class="checkpoint"') == 2  # the chart was drawn


# The real entry point in a fresh process; then the vocabularies it loaded, on stderr.
LOADED_AFTER = """
import json, sys
from ctxtool.cli import main
try:
    main(sys.argv[1:], prog_name="ctxtool")
except SystemExit as stop:
    code = stop.code
from ctxtool.core import tokens
print(json.dumps({"vocabularies": sorted(tokens._cache), "code": code}), file=sys.stderr)
"""
