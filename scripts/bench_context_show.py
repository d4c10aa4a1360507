#!/usr/bin/env python3
"""Benchmark `ctxtool context show` on the two contexts of issue #32 that took seconds and GBs.

Two sessions in a fresh SQLite store: one assistant message with 10,000 tool calls (half of
them answered, so the other half get synthetic results), and a long session (1M messages by
default, ``--messages``) with no checkpoint, so every message is in its context. Each output
(the table, ``--full``, ``--json``, ``--openai``) runs as its own ``ctxtool`` process, timed
with its peak RSS (``wait4``), next to a bare ``sqlite3`` SELECT of the same rows in a process
of its own, in the same run: the ratio is what the figures are. ``--old DIR`` runs every output
a second time with the ctxtool source tree in DIR (e.g. ``git archive`` of an earlier commit)
first on ``PYTHONPATH``: the code before a change against the code after it, in one run.

``--chart``: the long session's messages get stored token counts and times (a second apart), its
system prompt and summaries their kept counts (a store after ``tokens count``),
and ``--checkpoints N`` checkpoints of a runtime (a time each, no messages-through) at even
cuts; the outputs are then the HTML export with its chart and with ``--no-chart``, each run
``--repeat`` times in turn (issue #46: the chart may cost at most 1.1x), the ratios given for
each code (with ``--old``, the older code's too). On a loaded machine compare the CPU times:
the wall time waits for the other processes.

Example: .venv/bin/python scripts/bench_context_show.py --messages 200000
         .venv/bin/python scripts/bench_context_show.py --messages 100000 --old /tmp/old
         .venv/bin/python scripts/bench_context_show.py --messages 100000 --sessions 2 \\
             --chart --checkpoints 3 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from ctxtool.db import create_engine
from ctxtool.db.schema import agent_compaction, agent_message, agent_session
from ctxtool.migrate import Migrator

CALLS = 10_000
BATCH = 20_000


T0 = datetime(2026, 1, 1)


def populate(url: str, messages: int, counted: bool = False, checkpoints: int = 0) -> None:
    engine = create_engine(url)
    Migrator(engine).up()
    with engine.begin() as conn:
        conn.execute(
            agent_session.insert(),
            [
                {"session_id": 1, "model": "gpt-4o", "system_prompt": "You are a coding agent."},
                {"session_id": 2, "model": "gpt-4o", "system_prompt": "You are a coding agent."},
            ],
        )
        calls = [
            {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": f"tool{i % 7}", "arguments": json.dumps({"path": f"f{i}"})},
            }
            for i in range(CALLS)
        ]
        base = {"session_id": 1, "content": None, "tool_calls": None, "tool_call_id": None}
        conn.execute(
            agent_message.insert(),
            [
                {**base, "role": "user", "content": "read every file"},
                {**base, "role": "assistant", "tool_calls": calls},
                *(
                    {**base, "role": "tool", "tool_call_id": f"c{i}", "content": f"text of f{i}"}
                    for i in range(0, CALLS, 2)
                ),
            ],
        )
        rows = []
        for i in range(messages):
            role = ("user", "assistant")[i % 2]
            row = {"session_id": 2, "role": role, "content": f"message {i}: " + "w " * 20}
            if counted:  # what `tokens count` stores, and a time a second apart
                row |= {
                    "token_count": 27,
                    "token_encoding": "o200k_base",
                    "created_at": T0 + timedelta(seconds=i),
                }
            rows.append(row)
            if len(rows) == BATCH:
                conn.execute(agent_message.insert(), rows)
                rows = []
        if rows:
            conn.execute(agent_message.insert(), rows)
        first = conn.execute(
            sa.select(sa.func.min(agent_message.c.id)).where(agent_message.c.session_id == 2)
        ).scalar()
        for k in range(1, checkpoints + 1):  # a runtime's: cut at k/(n+1), written 50 later
            at = messages * k // (checkpoints + 1)
            conn.execute(
                agent_compaction.insert().values(
                    session_id=2,
                    summary=f"summary {k}: " + "s " * 400,
                    first_kept_message_id=first + at - 20,
                    tokens_before=27 * at,
                    parent_compaction_id=None,
                    summarizer="imported:bench",
                    created_at=T0 + timedelta(seconds=at + 0.5),
                )
            )
    engine.dispose()


def measured(argv: list[str], env: dict[str, str]) -> tuple[float, float, int, float]:
    """(seconds, peak RSS in MB, bytes written, CPU seconds) of one process, run outside the
    source tree (so that ``PYTHONPATH`` picks the code). The CPU time (user and system) is
    what to compare on a loaded machine: the wall time waits for the other processes."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir()
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        err = proc.stderr.read().decode() if proc.stderr else ""
        if status:
            sys.exit(f"{' '.join(argv)} failed: {err}")
        size = out.seek(0, 2)
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KB on Linux
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, usage.ru_maxrss * scale / 2**20, size, cpu


BARE_SELECT = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
cur = conn.execute("SELECT * FROM agent_message WHERE session_id = ? ORDER BY id", (int(sys.argv[2]),))
n = 0
while batch := cur.fetchmany(10000):
    n += len(batch)
print(n)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--dir", help="where the SQLite file goes (default: a temporary one)")
    parser.add_argument("--old", help="a ctxtool source tree to compare with (its parent dir)")
    parser.add_argument(
        "--outputs",
        default="table,--full,--json,--openai",
        help="which outputs to run, comma-separated (default: the four of `context show`; "
        "also export and export-redact: `context export --format jsonl`, with --redact)",
    )
    parser.add_argument(
        "--sessions", default="1,2", help="1: the 10,000 tool calls, 2: the long session"
    )
    parser.add_argument(
        "--chart",
        action="store_true",
        help="the HTML export with its chart against --no-chart (counts and times stored)",
    )
    parser.add_argument("--checkpoints", type=int, default=0, help="with --chart: how many")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each output, in turn")
    args = parser.parse_args()
    if args.chart:
        args.outputs = "export-html,export-html-no-chart"
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench_context_show."))
    path = base / "bench.db"
    path.unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    t0 = time.perf_counter()
    populate(url, args.messages, args.chart, args.checkpoints)
    print(f"store: {path} ({time.perf_counter() - t0:.0f}s to write)")
    env = {**os.environ, "CTXTOOL_DATABASE_URL": url, "COLUMNS": "160"}
    env.pop("PAGER", None)
    if args.chart:  # the heads' counts kept, as `tokens count` leaves a store; in a process of
        # its own: a child's peak RSS (wait4) starts at its parent's, and this one would load
        # the vocabulary
        subprocess.run(
            [sys.executable, "-m", "ctxtool", "tokens", "count", "--all"],
            env=env,
            cwd=tempfile.gettempdir(),
            check=True,
            stdout=subprocess.DEVNULL,
        )
    ctxtool = [sys.executable, "-m", "ctxtool"]
    codes = {"new": env}
    if args.old:
        codes = {"old": {**env, "PYTHONPATH": args.old}, **codes}
    cases = {1: f"1 message with {CALLS} tool calls", 2: f"{args.messages} messages"}
    outputs = args.outputs.split(",")
    print(
        f"{'session':<30} {'output':<9} {'code':<4} {'seconds':>8} {'peak MB':>8} "
        f"{'x SELECT':>9} {'MB out':>7}"
    )
    for sid, label in cases.items():
        if str(sid) not in args.sessions.split(","):
            continue
        bare_s, bare_mb, _, _ = measured(
            [sys.executable, "-c", BARE_SELECT, str(path), str(sid)], env
        )
        print(f"{label:<30} {'SELECT':<9} {'':<4} {bare_s:>8.2f} {bare_mb:>8.0f} {1:>9.1f}")
        walls: dict[tuple[str, str], list[float]] = {}
        cpus: dict[tuple[str, str], list[float]] = {}
        peaks: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeat):
            for name in outputs:
                argv = _command(name, sid)
                sizes = set()
                for code, code_env in codes.items():
                    seconds, mb, size, cpu = measured([*ctxtool, *argv], code_env)
                    walls.setdefault((name, code), []).append(seconds)
                    cpus.setdefault((name, code), []).append(cpu)
                    peaks.setdefault((name, code), []).append(mb)
                    sizes.add(size)
                    print(
                        f"{label:<30} {name:<9} {code:<4} {seconds:>8.2f} {mb:>8.0f} "
                        f"{seconds / bare_s:>9.1f} {size / 2**20:>7.1f}  cpu {cpu:.2f} s",
                        flush=True,
                    )
                if len(sizes) > 1 and not args.chart:
                    print(f"  the outputs differ in size: {sorted(sizes)}")
        if args.chart:
            for code in codes:
                on, off = ("export-html", code), ("export-html-no-chart", code)
                for how, pick in (("best", min), ("median", statistics.median)):
                    wall = pick(walls[on]) / pick(walls[off])
                    cpu = pick(cpus[on]) / pick(cpus[off])
                    print(
                        f"{label} ({code} code): with the chart / without, {how} of "
                        f"{args.repeat}: {wall:.3f}x wall, {cpu:.3f}x CPU"
                    )
                extra = statistics.median(peaks[on]) - statistics.median(peaks[off])
                print(f"{label} ({code} code): the chart's peak memory: {extra:+.0f} MB (median)")


def _command(output: str, session: int) -> list[str]:
    """The ctxtool arguments of one output: `context show` (table, --full, --json, --openai)
    or `context export` (export, export-redact)."""
    if output.startswith("export-html"):
        chart = ["--no-chart"] if output.endswith("no-chart") else []
        return ["context", "export", str(session), "--format", "html", *chart]
    if output.startswith("export"):
        redact = ["--redact"] if output == "export-redact" else []
        return ["context", "export", str(session), "--format", "jsonl", *redact]
    return ["context", "show", str(session), *([] if output == "table" else [output])]


if __name__ == "__main__":
    main()
