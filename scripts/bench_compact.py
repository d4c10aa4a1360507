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

``--compare DIR`` sets this checkout beside an older one (DIR: a checkout with its own
``.venv``, e.g. a ``git worktree`` of an older commit): each side runs in a process of its
own with its own database (this script, run by DIR's Python so it imports DIR's ctxtool),
both answered by the same test server, and the rounds alternate between them; it prints each
side's CPU per session (the least of ``--rounds``) and their ratio. The machine's load
moves both sides alike, so the ratio is what to read.

Example: .venv/bin/python scripts/bench_compact.py --delay 0 --sessions 300 --workers 4 \
    --compare /tmp/old --rounds 5

``--parts`` says where a compaction's CPU went: the thread CPU (``time.thread_time``) spent in
each of its steps (:data:`PARTS`, nested ones indented), per compaction, over the rounds after
the first (which imports the openai client). py-spy's ``--gil`` misses what runs outside the
GIL (tiktoken), and without it counts a thread waiting on a socket as busy on this machine.

Example: .venv/bin/python scripts/bench_compact.py --delay 0 --sessions 300 --workers 2 --parts
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import importlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import sqlalchemy as sa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchdb import fresh_database  # noqa: E402

from ctxtool.compaction import CompactionSettings  # noqa: E402

try:  # after #41's move; --compare also runs this script with older checkouts
    from ctxtool.compaction.compactor import Compactor
except ImportError:  # pragma: no cover - an older checkout
    from ctxtool.compaction.runner import Compactor  # type: ignore[no-redef]
from ctxtool.compaction.summarizers import OpenAISummarizer  # noqa: E402
from ctxtool.db.schema import agent_message, agent_session  # noqa: E402
from ctxtool.store import Store  # noqa: E402

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
    store = Store(engine)
    if hasattr(store, "count_tokens"):
        store.count_tokens()
    else:  # pragma: no cover - an older checkout (--compare): the function before #41's move
        from ctxtool.store.counts import count_tokens  # type: ignore[attr-defined]

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


def one_round(engine: sa.Engine, base_url: str, workers: int, sessions: int) -> dict:
    """Remove the checkpoints and compact every session once: wall and CPU seconds, outcomes."""
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM agent_compaction")
    summarizer = OpenAISummarizer("bench", base_url, "k", timeout=30, max_retries=2)
    compactor = Compactor(engine, summarizer, SETTINGS)
    t0, cpu0 = time.perf_counter(), time.process_time()
    outcomes = compactor.compact_all(workers=workers)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    done = sum(o.status == "compacted" for o in outcomes)
    assert done == sessions, {o.status for o in outcomes}
    return {"wall": wall, "cpu": cpu, "done": done, "outcomes": outcomes}


# Where a compaction's CPU goes: (module, function, what it is); nested steps indented.
PARTS = [
    ("ctxtool.compaction.compactor", "Compactor._take_many", "the batch's claim (2 statements)"),
    ("ctxtool.compaction.compactor", "Compactor._prepare", "reading and planning"),
    ("ctxtool.store.counts", "session_head", "  the session's head (1 statement)"),
    ("ctxtool.store.counts", "session_messages", "  the suffix's messages (1 statement)"),
    ("ctxtool.compaction.compactor", "prepare", "  the plan (prepare)"),
    ("ctxtool.compaction.summarizers.openai", "OpenAISummarizer._prompt", "the prompt"),
    ("ctxtool.compaction.summarizers.openai", "OpenAISummarizer._create", "the openai request"),
    ("ctxtool.compaction.compactor", "judge_summary", "the quality gate"),
    ("ctxtool.core.evaluator.probes", "signals_of", "  the span's signals"),
    ("ctxtool.core.evaluator.probes", "key_terms", "  the probes' key terms"),
    ("ctxtool.core.evaluator.evaluate", "fabrications", "  fabrications"),
    ("ctxtool.core.evaluator.answers", "ContextText.__init__", "  the context's text"),
    ("ctxtool.core.evaluator.evaluate", "section_costs", "  the sections' tokens"),
    ("ctxtool.compaction.compactor", "Compactor._write", "the append (4 statements)"),
    ("sqlalchemy.engine.base", "Connection._execute_context", "every statement (of the above)"),
]


def time_parts() -> collections.Counter:
    """Wrap each of :data:`PARTS` to add up its thread CPU (a part called within itself
    counted once); the totals by name, as the wrapped functions run."""
    spent: collections.Counter = collections.Counter()
    local = threading.local()
    for module, name, label in PARTS:
        owner = importlib.import_module(module)
        *path, attr = name.split(".")
        for step in path:
            owner = getattr(owner, step)
        timed = getattr(owner, attr)

        def wrapper(*a, _f=timed, _label=label, **k):
            active = local.__dict__.setdefault("active", set())
            if _label in active:
                return _f(*a, **k)
            active.add(_label)
            start = time.thread_time()
            try:
                return _f(*a, **k)
            finally:
                spent[_label] += time.thread_time() - start
                active.discard(_label)

        setattr(owner, attr, functools.wraps(timed)(wrapper))
    return spent


def child(args: argparse.Namespace) -> None:
    """One side of --compare: set up its database, then run a round per line read ("run URL"),
    answering each with a JSON line of its wall and CPU seconds."""
    engine = setup(args.db, args.sessions)
    print("ready", flush=True)
    for line in sys.stdin:
        _, base_url = line.split()
        r = one_round(engine, base_url, args.workers[0], args.sessions)
        print(json.dumps({"wall": r["wall"], "cpu": r["cpu"], "done": r["done"]}), flush=True)


def compare(args: argparse.Namespace) -> None:
    """This checkout against the one at --compare, rounds alternating, in one run."""
    sides = {
        "this": (sys.executable, args.db),
        "older": (os.path.join(args.compare, ".venv", "bin", "python"), args.db + "_older"),
    }
    procs = {}
    for name, (python, db) in sides.items():
        cmd = [python, os.path.abspath(__file__), "--child", "--db", db]
        cmd += ["--sessions", str(args.sessions), "--workers", str(args.workers[0])]
        procs[name] = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=args.compare if name == "older" else ROOT,
        )
    for proc in procs.values():
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    cpu: dict[str, list[float]] = {name: [] for name in procs}
    with llm_server(args.delay) as (base_url, _pid):
        print(
            f"{args.sessions} sessions, {args.workers[0]} workers, LLM answers after "
            f"{args.delay * 1000:.0f} ms; this checkout against {args.compare}"
        )
        for i in range(args.rounds):
            order = list(procs) if i % 2 == 0 else list(reversed(procs))
            for name in order:
                proc = procs[name]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(f"run {base_url}\n")
                proc.stdin.flush()
                r = json.loads(proc.stdout.readline())
                if not r["done"]:
                    sys.exit(f"round {i + 1} {name}: no compaction succeeded")
                cpu[name].append(r["cpu"] / r["done"] * 1000)
                print(f"round {i + 1} {name:5s}: CPU {cpu[name][-1]:.1f} ms a session")
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    best = {name: min(v) for name, v in cpu.items()}
    print(
        f"CPU a session, least of {args.rounds}: this {best['this']:.1f} ms, older "
        f"{best['older']:.1f} ms, ratio {best['this'] / best['older']:.2f}x (medians "
        f"{statistics.median(cpu['this']) / statistics.median(cpu['older']):.2f}x)"
    )


def parts(args: argparse.Namespace) -> None:
    """The thread CPU of each of :data:`PARTS` a compaction, ``--rounds`` rounds after one
    that warms up, at the first ``--workers``."""
    engine = setup(args.db, args.sessions)
    spent = time_parts()
    with llm_server(args.delay) as (base_url, _pid):
        one_round(engine, base_url, args.workers[0], args.sessions)
        spent.clear()
        cpu, done = 0.0, 0
        for _ in range(args.rounds):
            r = one_round(engine, base_url, args.workers[0], args.sessions)
            cpu, done = cpu + r["cpu"], done + r["done"]
    if not done:  # a round that compacted nothing has no CPU a compaction to divide
        sys.exit(f"no compaction succeeded in {args.rounds} rounds: nothing to divide by")
    print(f"CPU a compaction: {cpu / done * 1000:.2f} ms (the process), by part (thread CPU):")
    for _module, _name, label in PARTS:
        print(f"  {label:40s} {spent[label] / done * 1000:6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="mysql+pymysql://root@127.0.0.1:3306/ctxtool_bench_compact")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument(
        "--compare", metavar="DIR", help="an older checkout (with its .venv) to run beside this one"
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds for --compare")
    parser.add_argument(
        "--parts", action="store_true", help="the thread CPU of each step a compaction"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.compare:
        return compare(args)
    if args.parts:
        return parts(args)

    engine = setup(args.db, args.sessions)
    with llm_server(args.delay) as (base_url, _pid):
        print(
            f"{args.sessions} sessions over threshold, LLM answers after {args.delay * 1000:.0f} ms"
        )
        baseline = None
        for workers in args.workers:
            r = one_round(engine, base_url, workers, args.sessions)
            wall, cpu, done, outcomes = r["wall"], r["cpu"], r["done"], r["outcomes"]
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
