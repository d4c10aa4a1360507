#!/usr/bin/env python3
"""Benchmark `compact --all`: sessions/second at several worker counts, and ctxtool's overhead.

Creates N sessions over threshold in a throw-away MariaDB database (token counts filled first,
so the run measures compaction), starts the local OpenAI-compatible test server in its own
process answering after a fixed delay (default 200 ms), then for each worker count removes the
checkpoints and runs Compactor.compact_all through the real openai client. Prints wall time,
sessions/s, speed-up against 1 worker, and ctxtool's own time per session: the time each
compaction spent outside the LLM call (reads, planning, token counting, the checkpoint write),
and the CPU seconds this process spent per session (``--delay 0`` makes it the whole story).
Targets: near-linear speed-up, overhead < 20 ms per session.

Example: .venv/bin/python scripts/bench_compact.py --sessions 1000 --workers 1 4 16
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator

import sqlalchemy as sa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchdb import fresh_database  # noqa: E402

from ctxtool.compaction.compactor import Compactor  # noqa: E402
from ctxtool.compaction.summarizers import OpenAISummarizer  # noqa: E402
from ctxtool.core.plan import CompactionSettings  # noqa: E402
from ctxtool.db.schema import agent_message, agent_session  # noqa: E402
from ctxtool.store.counts import count_tokens  # noqa: E402

SETTINGS = CompactionSettings(context_window=6000, reserve_tokens=1000, keep_recent_tokens=1500)


def session_messages(turns: int) -> list[dict]:
    out = []
    for t in range(turns):
        out.append(
            {"role": "user", "content": f"turn {t}: fix the failing test in src/m{t}.py " * 8}
        )
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{t}",
                        "type": "function",
                        "function": {
                            "name": "read",
                            "arguments": json.dumps({"path": f"src/m{t}.py"}),
                        },
                    }
                ],
            }
        )
        out.append(
            {
                "role": "tool",
                "tool_call_id": f"c{t}",
                "content": "\n".join(f"line {i}: value = compute({i})" for i in range(40)),
            }
        )
        out.append({"role": "assistant", "content": f"Fixed m{t}."})
    return out


def setup(url: str, sessions: int) -> sa.Engine:
    engine = fresh_database(url, pool_size=40, max_overflow=10)
    msgs = session_messages(12)
    with engine.begin() as conn:
        conn.execute(
            agent_session.insert(),
            [{"session_id": s, "model": "gpt-4o"} for s in range(1, sessions + 1)],
        )
        for s in range(1, sessions + 1):
            # One set of keys for every row: executemany takes its columns from the first row
            # (before this, the tool calls and their links were silently left out).
            conn.execute(
                agent_message.insert(),
                [
                    {
                        "session_id": s,
                        "content": None,
                        "tool_calls": None,
                        "tool_call_id": None,
                        **m,
                    }
                    for m in msgs
                ],
            )
    count_tokens(engine)
    return engine


@contextlib.contextmanager
def llm_server(delay: float) -> Iterator[tuple[str, int]]:
    """The local OpenAI-compatible test server (tests/llm_server.py) in a process of its own,
    answering after ``delay`` seconds: its base URL and process id, until the block ends."""
    server = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "tests", "llm_server.py"), "--delay", str(delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        yield server.stdout.readline().strip(), server.pid
    finally:
        server.stdin.close()  # the server stops at the end of its input
        server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="mysql+pymysql://root@127.0.0.1:3306/ctxtool_bench_compact")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--delay", type=float, default=0.2)
    args = parser.parse_args()

    engine = setup(args.db, args.sessions)
    with llm_server(args.delay) as (base_url, _pid):
        print(
            f"{args.sessions} sessions over threshold, LLM answers after {args.delay * 1000:.0f} ms"
        )
        baseline = None
        for workers in args.workers:
            with engine.begin() as conn:
                conn.exec_driver_sql("DELETE FROM agent_compaction")
            summarizer = OpenAISummarizer("bench", base_url, "k", timeout=30, max_retries=2)
            compactor = Compactor(engine, summarizer, SETTINGS)
            t0, cpu0 = time.perf_counter(), time.process_time()
            outcomes = compactor.compact_all(workers=workers)
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            done = sum(o.status == "compacted" for o in outcomes)
            assert done == args.sessions, {o.status for o in outcomes}
            overhead = [(o.seconds - o.summarizer_seconds) * 1000 for o in outcomes]
            rate = done / wall
            baseline = baseline or rate
            print(
                f"workers={workers:3d}: {wall:7.1f}s  {rate:7.1f} sessions/s  speed-up {rate / baseline:5.2f}x "
                f"(ideal {workers}x)  overhead/session median {statistics.median(overhead):.1f} ms, "
                f"p95 {sorted(overhead)[int(len(overhead) * 0.95)]:.1f} ms, CPU {cpu / done * 1000:.1f} "
                f"ms a session (this process: the batch query, every step but the LLM's answer)"
            )


if __name__ == "__main__":
    main()
