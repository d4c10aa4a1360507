#!/usr/bin/env python3
"""Benchmark `compact --all` from several processes at once: one MariaDB, or a Galera cluster.

Creates N sessions over threshold (counts filled first) in a throw-away database through the
first URL, starts the local OpenAI-compatible test server answering after a fixed delay
(default 200 ms), then runs real `ctxtool compact --all` processes, one layout after the other
(default: 1 process x 1 worker on a sample, the baseline; 1 x 16; 4 x 4), the checkpoints
removed before each, the processes spread over the URLs in turn (one URL: one server; three: a
process per node). For each layout it prints wall time (process start-up included, as cron
pays it), sessions/s, the speed-up against the baseline (1 x 1's compactions alone: the sum of
their own seconds, no start-up) and its share of the ideal P x W, the CPU
seconds the ctxtool processes and the LLM server spent per session, the SQL statements the
processes sent per compacted session (all of them, and the lease UPDATEs among them: each
process runs the real entry point, ``ctxtool.cli.main``, with a SQLAlchemy event counting what
it sends), and the machine's load average (``os.getloadavg()``) before and after: on a small
machine the ideal is out of reach once the processes' CPU per second approaches its cores.
What the CPU allows is printed too: the compactions a second the two cores could sustain at
the CPU a compaction cost (ctxtool's, the LLM server's and the database server's, start-up
spread over the sessions), against the ideal's rate. Every session must be compacted exactly
once and every process exit 0.

Examples:
  .venv/bin/python scripts/bench_cluster.py --sessions 400
  .venv/bin/python scripts/bench_cluster.py --sessions 400 --delay 1.0 --layouts 1x1 4x4
  scripts/cluster.sh up   # then, with the three URLs it prints (database name added):
  .venv/bin/python scripts/bench_cluster.py --url mysql+pymysql://root@127.0.0.1:3311/b \\
      mysql+pymysql://root@127.0.0.1:3312/b mysql+pymysql://root@127.0.0.1:3313/b
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from bench_compact import llm_server, setup  # noqa: E402

LIMITS = ["--context-window", "6000", "--reserve-tokens", "1000", "--keep-recent-tokens", "1500"]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The processes' bytecode, written once (warm_bytecode) and read by every process, as an
# installed package's is: with PYTHONDONTWRITEBYTECODE set in the environment and no
# __pycache__ in a source checkout, each process compiled ctxtool's modules again (about
# 0.2 s of CPU a process, counted as the compactions').
BYTECODE = tempfile.mkdtemp(prefix="bench_cluster_pyc_")


def process_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": BYTECODE, **extra}


def warm_bytecode() -> None:
    subprocess.run(
        [sys.executable, "-c", "import ctxtool.cli, ctxtool.compaction.compactor, openai"],
        check=True,
        env=process_env(),
    )


# `ctxtool` as cron runs it, counting the statements it sends (on stderr's last line).
COUNTING_CTXTOOL = """
import atexit, json, sys
from collections import Counter
from sqlalchemy import event
from sqlalchemy.engine import Engine
sent = Counter()
@event.listens_for(Engine, "before_cursor_execute")
def _sent(conn, cursor, statement, parameters, context, executemany):
    sent["all"] += 1
    if statement.lstrip().upper().startswith("UPDATE") and "lease_owner" in statement:
        sent["lease"] += 1
atexit.register(lambda: print("STATEMENTS " + json.dumps(sent), file=sys.stderr))
from ctxtool.cli import main
main(prog_name="ctxtool")
"""


@dataclass(frozen=True)
class Run:
    """One layout's run: wall seconds, every outcome's status, CPU seconds of its processes
    (user + system, start-up included) and of the LLM server meanwhile, load before/after."""

    processes: int
    workers: int
    wall: float
    statuses: list[str]
    session_seconds: float  # the compactions' own time, summed (no start-up, no batch query)
    cpu: float
    llm_cpu: float
    db_cpu: float  # the database servers' (local mariadbd processes), meanwhile
    load: tuple[float, float]
    statements: dict[str, int]

    @property
    def compacted(self) -> int:
        return self.statuses.count("compacted")

    @property
    def rate(self) -> float:
        return self.compacted / self.wall


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def db_server_pids(urls: list[str]) -> list[int]:
    """The local mariadbd/mysqld processes listening on the URLs' ports (none found: [])."""
    from sqlalchemy.engine import make_url

    ports = {make_url(u).port or 3306 for u in urls}
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) in ports:
                    inodes.add(fields[9])
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in fds}
        except OSError:
            continue
        if any(f"socket:[{inode}]" in links for inode in inodes):
            pids.append(int(pid))
    return pids


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(
    urls: list[str],
    base_url: str,
    llm_pid: int,
    db_pids: list[int],
    processes: int,
    workers: int,
    limit: int | None,
) -> Run:
    """Start the processes together and wait for all of them."""
    extra = ["--limit", str(limit)] if limit else []
    env = process_env(OPENAI_API_KEY="sk-bench")
    load_before = os.getloadavg()[0]
    cpu_before, llm_before = children_cpu(), process_cpu(llm_pid)
    db_before = sum(process_cpu(p) for p in db_pids)
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                COUNTING_CTXTOOL,
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
    rows = [row for out, _ in outs for row in json.loads(out)]
    statements: dict[str, int] = {}
    for _, err in outs:
        counted = json.loads(err.rsplit("STATEMENTS ", 1)[1])
        for kind, n in counted.items():
            statements[kind] = statements.get(kind, 0) + n
    return Run(
        processes,
        workers,
        wall,
        [row["status"] for row in rows],
        sum(row["seconds"] for row in rows if row["status"] == "compacted"),
        children_cpu() - cpu_before,
        process_cpu(llm_pid) - llm_before,
        sum(process_cpu(p) for p in db_pids) - db_before,
        (load_before, os.getloadavg()[0]),
        statements,
    )


def start_up_cpu() -> float:
    """CPU seconds a `ctxtool compact` process spends on its imports before any work (its
    bytecode written already)."""
    before = children_cpu()
    subprocess.run(
        [sys.executable, "-c", "import ctxtool.cli.app, openai"],
        check=True,
        env=process_env(),
    )
    return children_cpu() - before


def layout(text: str) -> tuple[int, int]:
    processes, _, workers = text.partition("x")
    return int(processes), int(workers)


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
    parser.add_argument(
        "--layouts",
        nargs="+",
        type=layout,
        default=[(1, 1), (1, 16), (4, 4)],
        metavar="PxW",
        help="processes x workers, in order; the first is the baseline, run on "
        "--baseline-sessions (default 1x1 1x16 4x4)",
    )
    parser.add_argument("--delay", type=float, default=0.2)
    args = parser.parse_args()

    engine = setup(args.url[0], args.sessions)
    warm_bytecode()
    cores = os.cpu_count() or 1
    db_pids = db_server_pids(args.url)
    try:
        with llm_server(args.delay) as (base_url, llm_pid):
            where = f"{len(args.url)} node(s)" if len(args.url) > 1 else "one server"
            print(
                f"{args.sessions} sessions over threshold on {where}, LLM answers after "
                f"{args.delay * 1000:.0f} ms; {cores} cores; a process's start-up costs "
                f"{start_up_cpu():.2f} s CPU"
            )
            baseline = None
            for processes, workers in args.layouts:
                with engine.begin() as conn:
                    conn.exec_driver_sql("DELETE FROM agent_compaction")
                limit = args.baseline_sessions if baseline is None else None
                r = run(args.url, base_url, llm_pid, db_pids, processes, workers, limit)
                expected = limit or args.sessions
                assert r.compacted == expected, {s: r.statuses.count(s) for s in set(r.statuses)}
                with engine.connect() as conn:
                    twice = conn.exec_driver_sql(
                        "SELECT COUNT(*) FROM (SELECT session_id FROM agent_compaction "
                        "GROUP BY session_id HAVING COUNT(*) > 1) t"
                    ).scalar()
                assert twice == 0, f"{twice} sessions compacted twice"
                if baseline is None:
                    # One worker compacts one session after the other: its rate without the
                    # start-up and the batch query, so that no layout gains by amortizing them.
                    baseline = r.compacted / r.session_seconds
                    print(
                        f"baseline, 1 worker's compactions alone: {baseline:.2f} sessions/s "
                        f"({r.session_seconds / r.compacted * 1000:.0f} ms a session)"
                    )
                ideal = processes * workers
                speed_up = r.rate / baseline
                others = sorted(set(r.statuses) - {"compacted"})
                # What the cores allow at this CPU a compaction, all three parties' included.
                per_session = (r.cpu + r.llm_cpu + r.db_cpu) / r.compacted
                allowed = cores / per_session / baseline
                print(
                    f"{processes} x {workers:2d}: {r.compacted} sessions in {r.wall:.1f}s, "
                    f"{r.rate:.2f} sessions/s, speed-up {speed_up:.2f}x of ideal {ideal}x "
                    f"({speed_up / ideal:.2f} of ideal); CPU per session: ctxtool "
                    f"{r.cpu / r.compacted * 1000:.1f} ms, LLM server "
                    f"{r.llm_cpu / r.compacted * 1000:.1f} ms, database "
                    f"{r.db_cpu / r.compacted * 1000:.1f} ms"
                    f"{'' if db_pids else ' (server not found here)'}; the {cores} cores allow "
                    f"{allowed:.1f}x ({min(allowed, ideal) / ideal:.2f} of ideal); CPU busy "
                    f"{(r.cpu + r.llm_cpu + r.db_cpu) / r.wall / cores:.0%}; statements per "
                    f"session {r.statements.get('all', 0) / r.compacted:.1f}, lease UPDATEs "
                    f"{r.statements.get('lease', 0) / r.compacted:.2f}; load "
                    f"{r.load[0]:.1f} -> {r.load[1]:.1f}"
                    + (
                        f"; also {', '.join(f'{s} {r.statuses.count(s)}' for s in others)}"
                        if others
                        else ""
                    )
                )
    finally:
        engine.dispose()
        shutil.rmtree(BYTECODE, ignore_errors=True)


if __name__ == "__main__":
    main()
