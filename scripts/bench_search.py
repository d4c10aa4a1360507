#!/usr/bin/env python3
"""Benchmark `ctxtool search` at 1M messages, without and with the FULLTEXT index, and what the
index costs the runtime's inserts.

The store holds sessions of 1,000 messages (user requests, assistant replies, tool calls and
tool results of a coding agent, words drawn from a fixed vocabulary) and a few needles: a rare
phrase said early in the history (a search must look through nearly everything to find it), a
word that is everywhere (the newest --limit hits end the search at once), and a phrase no message
holds. Each search is timed through the library (``Store.search``, what the command
runs), the median of several runs. The inserts are timed as a runtime writes: one message per
autocommitted INSERT, and batches of 500 in one transaction, before and after the index.

Example: .venv/bin/python scripts/bench_search.py --messages 1000000
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import sqlalchemy as sa
from benchdb import fresh_database, settle

from ctxtool.core.trace import TextMatch
from ctxtool.store import Store

PER_SESSION = 1_000
WORDS = [
    "fix",
    "test",
    "file",
    "path",
    "error",
    "value",
    "compute",
    "module",
    "import",
    "function",
    "class",
    "return",
    "build",
    "run",
    "check",
    "parse",
    "config",
    "server",
    "client",
    "request",
    "response",
    "token",
    "cache",
    "index",
    "query",
    "table",
    "column",
    "render",
    "update",
    "delete",
    "create",
    "branch",
    "commit",
    "merge",
    "review",
    "deploy",
    "schema",
    "migrate",
    "session",
    "message",
    "summary",
    "context",
    "window",
    "budget",
    "retry",
    "timeout",
    "lock",
    "thread",
    "worker",
    "queue",
    "event",
]
RARE = "Light theme (white background)"
SEARCHES = {
    "rare phrase, said once early": TextMatch("light theme (white"),
    "common word (newest 50 hits)": TextMatch("compute"),
    "said nowhere": TextMatch("pastel unicorn"),
    "regex, said once early": TextMatch(r"light\s+theme \(white", regex=True),
}


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(WORDS, k=words))


def populate(engine: sa.Engine, messages: int, seed: int = 7) -> None:
    """``messages`` rows in sessions of PER_SESSION, through the driver's multi-row INSERT."""
    rng = random.Random(seed)
    sessions = max(1, messages // PER_SESSION)
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.executemany(
            "INSERT INTO agent_session (session_id, model) VALUES (%s, 'gpt-4o')",
            [(s,) for s in range(1, sessions + 1)],
        )
        rows = []
        written = 0
        for n in range(messages):
            session = n // PER_SESSION + 1
            kind = n % 4
            calls = None
            if kind == 0:
                content = _text(rng, 25)
                if n == PER_SESSION * 3:  # early in the history, once
                    content = f"Use a pleasant pastel color scheme. {RARE}. " + content
                role = "user"
            elif kind == 1:
                role, content = "assistant", None
                calls = json.dumps(
                    [
                        {
                            "id": f"c{n}",
                            "type": "function",
                            "function": {
                                "name": "bash",
                                "arguments": json.dumps({"cmd": f"grep -rn {_text(rng, 2)} src"}),
                            },
                        }
                    ]
                )
            elif kind == 2:
                role, content = "tool", "\n".join(_text(rng, 10) for _ in range(6))
            else:
                role, content = "assistant", _text(rng, 20)
            rows.append((session, role, content, calls, f"c{n - 1}" if kind == 2 else None))
            if len(rows) == 5_000:
                _insert(cur, rows)
                raw.commit()
                written += len(rows)
                rows = []
                if written % 100_000 == 0:
                    print(f"  {written:,} messages written", flush=True)
        if rows:
            _insert(cur, rows)
        raw.commit()
    finally:
        raw.close()


def _insert(cur, rows) -> None:
    cur.executemany(
        "INSERT INTO agent_message (session_id, role, content, tool_calls, tool_call_id) "
        "VALUES (%s, %s, %s, %s, %s)",
        rows,
    )


def time_searches(engine: sa.Engine, runs: int) -> dict[str, dict]:
    out = {}
    for label, match in SEARCHES.items():
        times, hits = [], 0
        for _ in range(runs):
            t0 = time.perf_counter()
            hits = len(Store(engine).search(match, limit=50))
            times.append(time.perf_counter() - t0)
        out[label] = {"seconds": statistics.median(times), "hits": hits}
    return out


def time_inserts(engine: sa.Engine, single: int, batches: int) -> dict[str, float]:
    """Per-row cost of a runtime's inserts: autocommitted one by one, and 500 per commit."""
    rng = random.Random(11)
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        t0 = time.perf_counter()
        for _ in range(single):
            cur.execute(
                "INSERT INTO agent_message (session_id, role, content) VALUES (1, 'user', %s)",
                (_text(rng, 25),),
            )
            raw.commit()
        one_by_one = (time.perf_counter() - t0) / single
        t0 = time.perf_counter()
        for _ in range(batches):
            _insert(cur, [(1, "tool", _text(rng, 60), None, None) for _ in range(500)])
            raw.commit()
        batched = (time.perf_counter() - t0) / (batches * 500)
    finally:
        raw.close()
    return {"ms_per_single_insert": one_by_one * 1000, "ms_per_batched_row": batched * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="mysql+pymysql://root@127.0.0.1:3306/ctxtool_bench_search")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--single-inserts", type=int, default=1_000)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()

    engine = fresh_database(args.url)
    t0 = time.perf_counter()
    populate(engine, args.messages)
    print(f"populated {args.messages:,} messages in {time.perf_counter() - t0:.0f} s", flush=True)
    settle(engine)
    result: dict = {"messages": args.messages}
    result["without_index"] = time_searches(engine, args.runs)
    result["inserts_without_index"] = time_inserts(engine, args.single_inserts, args.batches)
    settle(engine)
    t0 = time.perf_counter()
    Store(engine).create_fulltext_index()
    result["index_build_seconds"] = time.perf_counter() - t0
    settle(engine)
    result["with_index"] = time_searches(engine, args.runs)
    result["inserts_with_index"] = time_inserts(engine, args.single_inserts, args.batches)
    print(json.dumps(result, indent=2))
    print()
    print("| search (limit 50) | hits | without index | with FULLTEXT index |")
    print("|---|---:|---:|---:|")
    for label in SEARCHES:
        a, b = result["without_index"][label], result["with_index"][label]
        print(f"| {label} | {a['hits']} | {a['seconds']:.3f} s | {b['seconds']:.3f} s |")
    before, after = result["inserts_without_index"], result["inserts_with_index"]
    print()
    print("| insert | without index | with FULLTEXT index |")
    print("|---|---:|---:|")
    for key, label in (
        ("ms_per_single_insert", "one message per autocommit"),
        ("ms_per_batched_row", "per row, 500 per commit"),
    ):
        print(f"| {label} | {before[key]:.3f} ms | {after[key]:.3f} ms |")
    print(f"\nindex build: {result['index_build_seconds']:.1f} s")
    engine.dispose()


if __name__ == "__main__":
    main()
