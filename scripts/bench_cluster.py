#!/usr/bin/env python3
"""Benchmark `compact --all` from several processes at once: one MariaDB, or a Galera cluster.

Creates N sessions over threshold (counts filled first) in a throw-away database through the
first URL, starts the local OpenAI-compatible test server answering after a fixed delay
(default 200 ms), then runs real `ctxtool compact --all` processes: first one process with one
worker on a sample (the baseline rate), then P processes x W workers at once on every session,
the processes spread over the URLs in turn (one URL: one server; three: a process per node).
Prints wall time, sessions/s, the speed-up against the baseline and its share of the ideal
P x W. Every session must be compacted exactly once and every process exit 0.

Examples:
  .venv/bin/python scripts/bench_cluster.py --sessions 400
  scripts/cluster.sh up   # then, with the three URLs it prints (database name added):
  .venv/bin/python scripts/bench_cluster.py --url mysql+pymysql://root@127.0.0.1:3311/b \\
      mysql+pymysql://root@127.0.0.1:3312/b mysql+pymysql://root@127.0.0.1:3313/b
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from bench_compact import llm_server, setup  # noqa: E402

LIMITS = ["--context-window", "6000", "--reserve-tokens", "1000", "--keep-recent-tokens", "1500"]


def run(urls: list[str], base_url: str, processes: int, workers: int, limit: int | None):
    """Start the processes together; (wall seconds, statuses of every outcome)."""
    extra = ["--limit", str(limit)] if limit else []
    env = dict(os.environ, OPENAI_API_KEY="sk-bench")
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ctxtool",
                "--db",
                urls[i % len(urls)],
                "compact",
                "--all",
                "--workers",
                str(workers),
                "--summarizer",
                "openai",
                "--base-url",
                base_url,
                "--model",
                "bench",
                "--json",
                *LIMITS,
                *extra,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    outs = [p.communicate() for p in procs]
    wall = time.perf_counter() - started
    codes = [p.returncode for p in procs]
    if codes != [0] * processes:
        raise SystemExit(f"exit codes {codes}: {[err[-500:] for _, err in outs]}")
    return wall, [row["status"] for out, _ in outs for row in json.loads(out)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url",
        nargs="+",
        default=["mysql+pymysql://root@127.0.0.1:3306/ctxtool_bench_cluster"],
        help="database URLs (one per node), the same database name on each",
    )
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--baseline-sessions", type=int, default=40)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--delay", type=float, default=0.2)
    args = parser.parse_args()

    engine = setup(args.url[0], args.sessions)
    try:
        with llm_server(args.delay) as base_url:
            where = f"{len(args.url)} node(s)" if len(args.url) > 1 else "one server"
            print(
                f"{args.sessions} sessions over threshold on {where}, LLM answers after "
                f"{args.delay * 1000:.0f} ms"
            )
            wall, statuses = run(args.url[:1], base_url, 1, 1, args.baseline_sessions)
            baseline = statuses.count("compacted") / wall
            print(
                f"1 process x 1 worker: {baseline:.2f} sessions/s ({args.baseline_sessions} sessions)"
            )
            with engine.begin() as conn:
                conn.exec_driver_sql("DELETE FROM agent_compaction")
            wall, statuses = run(args.url, base_url, args.processes, args.workers, None)
            done = statuses.count("compacted")
            assert done == args.sessions, {s: statuses.count(s) for s in set(statuses)}
            with engine.connect() as conn:
                twice = conn.exec_driver_sql(
                    "SELECT COUNT(*) FROM (SELECT session_id FROM agent_compaction "
                    "GROUP BY session_id HAVING COUNT(*) > 1) t"
                ).scalar()
            assert twice == 0, f"{twice} sessions compacted twice"
            ideal = args.processes * args.workers
            rate = done / wall
            print(
                f"{args.processes} processes x {args.workers} workers: {wall:.1f}s, {rate:.2f} "
                f"sessions/s, speed-up {rate / baseline:.2f}x of ideal {ideal}x "
                f"({rate / baseline / ideal:.2f} of ideal); outcomes "
                f"{ {s: statuses.count(s) for s in sorted(set(statuses))} }"
            )
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
