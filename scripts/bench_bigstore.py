#!/usr/bin/env python3
"""Benchmark the reads that walk a whole store, on 100k sessions and 10M messages.

Builds (once: a later run with the same shape reuses it) a store in its own MariaDB/MySQL
database, shaped like a runtime's: most sessions small, some large, one of 600k messages; turns
of a request, a tool call, its result and an answer; token counts stored as ``tokens count``
stores them (a few sessions left uncounted, as a runtime leaves new ones); a checkpoint on a
fifth of the sessions. The rows are made by the server (INSERT ... SELECT over a table of
numbers), not sent from Python. Each session's messages are contiguous in id order, as
``ctxtool import`` writes them.

Then times, beside a full scan of agent_message's counts in the same run (``SELECT COUNT(*),
SUM(token_count)``, which InnoDB answers from the smallest index that holds them):
- the sums over every session's suffix alone (``candidates.effective_contexts``, one walk of
  the message index: what the next two start with);
- finding `compact --all`'s candidates (``compaction.batch.find_batch``, what the CLI calls);
- `sessions list --over-window` (``Store.list_sessions``, what the CLI calls);
- `compact SESSION --dry-run` on the 600k-message session (``Compactor.compact_session``).

Each run times these twice: first as a store nobody ran `compact --all` on reads them (every
suffix summed from the messages: one walk of the index), then after a real run's read kept the
sums and the pairings its measures proved (``store.context_sums``; ``keep_s``: that run's
finding, with its counting of the uncounted sessions, as a cron run would have done) and
another 1% of the sessions got a turn of four messages since (summed on their ranges, added to
what was kept). After each run the store is put back as built.

Targets: the first two under 10 s, the dry run under 2 s (at 10M messages).

Example: .venv/bin/python scripts/bench_bigstore.py --messages 10000000 --sessions 100000
         .venv/bin/python scripts/bench_bigstore.py --drop
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import sqlalchemy as sa
from benchdb import fresh_database

from ctxtool.compaction.batch import counted_batch, find_batch
from ctxtool.compaction.compactor import Compactor
from ctxtool.compaction.summarizers import SummarizerSettings, make_summarizer
from ctxtool.core.plan import CompactionSettings
from ctxtool.db import create_engine, read_connection
from ctxtool.migrate import Migrator
from ctxtool.store import Store
from ctxtool.store.candidates import effective_contexts

GIANT_ID = 1  # the 600k-message session
WORDS = (
    "the agent reads src/app.py and runs pytest -x; error: ZeroDivisionError at line 42 in "
    "handler.py, refactor the handler so it returns JSON with a status field, then check the "
    "migration in sql/0003 and the tests under tests/unit; the build passes on CI after the "
    "fix to the retry loop, which waited forever when the server closed the connection early "
) * 8


def session_sizes(sessions: int, messages: int, giant: int, seed: int = 7) -> list[int]:
    """Messages per session: session 1 has ``giant``, the rest a heavy-tailed spread (most
    small, some large) summing to ``messages``."""
    rng = random.Random(seed)
    rest = messages - giant
    weights = [rng.paretovariate(1.3) for _ in range(sessions - 1)]
    scale = rest / sum(weights)
    # Whole turns, but every 50th session ends on a call not answered yet (a turn in flight).
    sizes = [
        max(4, int(w * scale) // 4 * 4) + (2 if i % 50 == 49 else 0) for i, w in enumerate(weights)
    ]
    # The exact total: the largest of the rest takes the rounding in whole turns, the first
    # what is left of it.
    left = rest - sum(sizes)
    sizes[sizes.index(max(sizes))] += left // 4 * 4
    sizes[0] += left % 4
    return [giant, *sizes]


def build(url: str, sessions: int, messages: int, giant: int) -> sa.Engine:
    """The store, built afresh unless the database already holds one of this shape."""
    shape = {"sessions": sessions, "messages": messages, "giant": giant, "version": 2}
    try:
        engine = create_engine(url)
        with engine.connect() as conn:
            stored = conn.exec_driver_sql("SELECT shape FROM bench_shape").scalar()
        if stored is not None and json.loads(stored) == shape:
            print(f"reusing {sa.engine.make_url(url).database}: {shape}")
            Migrator(engine).up()  # a store built before a later migration
            restore(engine, sessions, messages)
            return engine
        engine.dispose()
    except sa.exc.SQLAlchemyError:
        pass
    started = time.perf_counter()
    engine = fresh_database(url)
    sizes = session_sizes(sessions, messages, giant)
    rng = random.Random(3)
    plan, first = [], 1
    for sid, n in enumerate(sizes, start=1):
        # A checkpoint on a fifth of the sessions of 40 messages and more (never the giant),
        # cut at the request that starts the second half.
        cut = first + 4 * (n // 8) if sid != GIANT_ID and n >= 40 and rng.random() < 0.2 else 0
        plan.append((sid, first, n, cut, rng.randrange(90 * 86400)))
        first += n
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE bench_plan (session_id BIGINT PRIMARY KEY, first_id BIGINT NOT NULL,"
            " n INT NOT NULL, cut BIGINT NOT NULL, start_s INT NOT NULL)"
        )
        conn.exec_driver_sql("CREATE TABLE bench_numbers (i INT PRIMARY KEY)")
        conn.exec_driver_sql("CREATE TABLE bench_shape (shape TEXT NOT NULL)")
        conn.exec_driver_sql("SET @words = %s", (WORDS,))
        for i in range(0, len(plan), 10_000):
            conn.exec_driver_sql(
                "INSERT INTO bench_plan VALUES (%s, %s, %s, %s, %s)", plan[i : i + 10_000]
            )
        conn.exec_driver_sql(
            "INSERT INTO bench_numbers VALUES " + ",".join(f"({i})" for i in range(1000))
        )
        conn.exec_driver_sql(
            "INSERT INTO bench_numbers SELECT a.i + 1000 * b.i FROM bench_numbers a "
            f"CROSS JOIN bench_numbers b WHERE b.i BETWEEN 1 AND {max(sizes) // 1000}"
        )
        conn.exec_driver_sql(
            "INSERT INTO agent_session (session_id, title, model, system_prompt, source_format,"
            " source_id, created_at, updated_at) SELECT session_id,"
            " CONCAT('fix the handler, part ', session_id),"
            " IF(MOD(session_id, 3) = 0, 'gpt-4o', 'claude-sonnet-4-5'),"
            " 'You are a coding agent. Be brief.', 'claude-code',"
            " CONCAT('bench-', LPAD(session_id, 8, '0')),"
            " TIMESTAMP('2026-09-01') + INTERVAL start_s SECOND,"
            " TIMESTAMP('2026-09-01') + INTERVAL start_s SECOND FROM bench_plan"
        )
    # The messages, a slice of sessions at a time (transactions of about 500k rows). Turn
    # position k = i % 4: a request, a tool call, its result, an answer. A session whose size
    # is not a multiple of 4 ends inside a turn (an unanswered call when k = 1 was last).
    ids = [p[0] for p in plan]
    low = 0
    while low < len(ids):
        high, total = low, 0
        while high < len(ids) and (total == 0 or total + plan[high][2] <= 500_000):
            total += plan[high][2]
            high += 1
        with engine.begin() as conn:
            conn.exec_driver_sql("SET @words = %s", (WORDS,))
            conn.exec_driver_sql(_MESSAGES_SQL, (ids[low], ids[high - 1]))
        low = high
        print(f"  {plan[high - 1][1] + plan[high - 1][2] - 1:>10} messages", flush=True)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO agent_compaction (session_id, summary, first_kept_message_id,"
            " tokens_before, parent_compaction_id, summary_tokens, tokens_after, summarizer,"
            " created_at) SELECT session_id, CONCAT('## Goal\\n', SUBSTRING(@words, 1, 1500)),"
            " cut, 50000, 0, 400, 20000, 'extractive',"
            " TIMESTAMP('2026-09-01') + INTERVAL start_s + n SECOND"
            " FROM bench_plan WHERE cut > 0"
        )
        conn.exec_driver_sql("INSERT INTO bench_shape VALUES (%s)", (json.dumps(shape),))
    print(f"built in {time.perf_counter() - started:.0f} s")
    return engine


# Message i of a session (i from 0): its id is the session's first_id + i; written a minute
# apart from the session's start; counted with o200k_base (as `tokens count` stores it) except
# in every thousandth session. Contents are slices of WORDS of a few lengths by role.
_MESSAGES_SQL = """
INSERT INTO agent_message (id, session_id, role, content, tool_calls, tool_call_id,
    token_count, token_encoding, source_id, created_at)
SELECT id, session_id, role, content, tool_calls, tool_call_id,
    IF(counted, 4 + CEIL(COALESCE(LENGTH(content), 0) / 4) + IF(tool_calls IS NULL, 0, 20),
       NULL),
    IF(counted, 'o200k_base', NULL), CONCAT('m', id), created_at
FROM (
    SELECT p.first_id + x.i AS id, p.session_id, MOD(p.session_id, 1000) <> 999 AS counted,
        ELT(1 + MOD(x.i, 4), 'user', 'assistant', 'tool', 'assistant') AS role,
        CASE MOD(x.i, 4)
            WHEN 0 THEN CONCAT('request ', x.i, ': ',
                SUBSTRING(@words, 1 + MOD((p.first_id + x.i), 400), 40 + MOD((p.first_id + x.i), 200)))
            WHEN 1 THEN NULL
            WHEN 2 THEN SUBSTRING(@words, 1 + MOD((p.first_id + x.i), 300),
                100 + MOD((p.first_id + x.i) * 7, 800))
            ELSE CONCAT('done: ',
                SUBSTRING(@words, 1 + MOD((p.first_id + x.i), 500), 20 + MOD((p.first_id + x.i), 380)))
        END AS content,
        IF(MOD(x.i, 4) = 1, CONCAT('[{"id":"call_', p.first_id + x.i,
            '","type":"function","function":{"name":"Read","arguments":',
            '"{\\\\"file_path\\\\":\\\\"src/m', MOD(x.i, 97), '.py\\\\"}"}}]'), NULL) AS tool_calls,
        IF(MOD(x.i, 4) = 2, CONCAT('call_', p.first_id + x.i - 1), NULL) AS tool_call_id,
        TIMESTAMP('2026-09-01') + INTERVAL p.start_s + 60 * x.i SECOND AS created_at
    FROM bench_plan p JOIN bench_numbers x ON x.i < p.n
    WHERE p.session_id BETWEEN %s AND %s
    ORDER BY p.session_id, x.i
) rows_
"""


def restore(engine: sa.Engine, sessions: int, messages: int) -> None:
    """The store as built, whatever an earlier run left: no sums kept, no message added, every
    1000th session uncounted again (a real run's read counts them)."""
    uncounted = ", ".join(str(s) for s in range(999, sessions + 1, 1000)) or "0"
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM ctxtool_context_sums")
        conn.exec_driver_sql(f"DELETE FROM agent_message WHERE id > {messages}")
        conn.exec_driver_sql(
            "UPDATE agent_message SET token_count = NULL, token_encoding = NULL"
            f" WHERE session_id IN ({uncounted}) AND token_count IS NOT NULL"
        )


def insert_cost(url: str, rounds: int, versions: tuple[str, str] = ("0011", "0012")) -> None:
    """What a migration's indexes cost a runtime's inserts (0009's wider index, 0012's call
    ids): the same rows (turns with tool calls) into a store migrated to the version before
    and one migrated to the version, autocommitted one by one and 500 a commit, rounds
    interleaved; per-row milliseconds, medians."""
    import statistics

    from ctxtool.migrate import Migrator

    parsed = sa.engine.make_url(url)
    engines = {}
    for version in versions:
        name = f"{parsed.database}_ins{version}"
        server = sa.create_engine(parsed.set(database=""), isolation_level="AUTOCOMMIT")
        with server.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
            conn.exec_driver_sql(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
        server.dispose()
        engines[version] = create_engine(
            parsed.set(database=name).render_as_string(hide_password=False)
        )
        Migrator(engines[version]).up(to=version)
    call = '[{"id":"call_%d","type":"function","function":{"name":"Read","arguments":"{}"}}]'
    rows = [
        (1, ("user", "assistant", "tool", "assistant")[i % 4], WORDS[i % 300 : i % 300 + 200])
        + (
            (call % i, None)
            if i % 4 == 1
            else (None, f"call_{i - 1}")
            if i % 4 == 2
            else (None, None)
        )
        for i in range(500)
    ]
    sql = (
        "INSERT INTO agent_message (session_id, role, content, tool_calls, tool_call_id)"
        " VALUES (%s, %s, %s, %s, %s)"
    )
    times: dict[str, dict[str, list[float]]] = {v: {"single": [], "batched": []} for v in engines}
    for _ in range(rounds):
        for version, engine in engines.items():
            raw = engine.raw_connection()
            try:
                cur = raw.cursor()
                t0 = time.perf_counter()
                for row in rows[:200]:
                    cur.execute(sql, row)
                    raw.commit()
                times[version]["single"].append((time.perf_counter() - t0) / 200 * 1000)
                t0 = time.perf_counter()
                for _ in range(20):
                    cur.executemany(sql, rows)
                    raw.commit()
                times[version]["batched"].append((time.perf_counter() - t0) / 10_000 * 1000)
            finally:
                raw.close()
    for kind in ("single", "batched"):
        before, after = (statistics.median(times[v][kind]) for v in versions)
        print(
            f"insert cost, {kind}: {versions[0]} {before:.3f} ms/row, {versions[1]} "
            f"{after:.3f} ms/row, ratio {after / before:.2f}"
        )
    for engine in engines.values():
        with engine.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE {engine.url.database}")
        engine.dispose()


def timed(fn):
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("BENCH_URL", "mysql+pymysql://root@127.0.0.1:3306/ctxtool_big"),
    )
    parser.add_argument("--messages", type=int, default=10_000_000)
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--giant", type=int, default=600_000, help="messages of session 1")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--context-window", type=int, help="default: each model's (a tiny store needs less)"
    )
    parser.add_argument("--drop", action="store_true", help="drop the database and exit")
    parser.add_argument(
        "--insert-cost",
        type=int,
        metavar="ROUNDS",
        help="time inserts before/after a migration, exit",
    )
    parser.add_argument(
        "--insert-versions",
        default="0011,0012",
        metavar="BEFORE,AFTER",
        help="the two versions --insert-cost compares (0008,0009 for 0009's index)",
    )
    args = parser.parse_args()
    if args.insert_cost:
        before, after = args.insert_versions.split(",")
        insert_cost(args.url, args.insert_cost, (before, after))
        return
    if args.drop:
        parsed = sa.engine.make_url(args.url)
        server = sa.create_engine(parsed.set(database=""), isolation_level="AUTOCOMMIT")
        with server.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {parsed.database}")
        print(f"dropped {parsed.database}")
        return
    engine = build(args.url, args.sessions, args.messages, args.giant)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    settings = CompactionSettings(context_window=args.context_window)
    compactor = Compactor(engine, make_summarizer(SummarizerSettings(kind="extractive")), settings)
    for run in range(1, args.repeat + 1):
        for kept in (False, True):
            if kept:  # what a real `compact --all` run's read keeps, then a turn in 1%
                with engine.begin() as conn:
                    conn.exec_driver_sql("DELETE FROM ctxtool_context_sums")
                # A real run's finding: it counts the uncounted sessions (as a cron run
                # would have), keeps the sums it read and the pairings its measures proved.
                keep, _ = timed(lambda: counted_batch(Store(engine), settings, None))
                grow(engine, args.sessions, run)
            with engine.connect() as conn:
                scan, (n, _) = timed(
                    lambda c=conn: c.exec_driver_sql(
                        "SELECT COUNT(*), SUM(token_count) FROM agent_message"
                    ).one()
                )
            with read_connection(engine) as conn:
                sums, _ = timed(lambda c=conn: effective_contexts(c))
            find, batch = timed(lambda: find_batch(Store(engine), settings, None))
            listing, listed = timed(
                lambda: Store(engine).list_sessions(limit=50, over_window=settings)
            )
            dry, outcome = timed(lambda: compactor.compact_session(GIANT_ID, dry_run=True))
            print(
                json.dumps(
                    {
                        "run": run,
                        "kept_sums": kept,
                        **({"keep_s": round(keep, 3)} if kept else {}),
                        "messages": n,
                        "scan_s": round(scan, 3),
                        "sums_s": round(sums, 3),
                        "sums_vs_scan": round(sums / scan, 2),
                        "candidates_s": round(find, 3),
                        "candidates": len(batch.candidates),
                        "candidates_vs_scan": round(find / scan, 2),
                        "over_window_list_s": round(listing, 3),
                        "listed": len(listed),
                        "over_window_list_vs_scan": round(listing / scan, 2),
                        "dry_run_s": round(dry, 3),
                        "dry_run_status": outcome.status.value,
                        "dry_run_summarised": outcome.summarised_messages,
                        "dry_run_vs_scan": round(dry / scan, 2),
                    }
                ),
                flush=True,
            )
        restore(engine, args.sessions, args.messages)  # as built, for the next run


def grow(engine: sa.Engine, sessions: int, seed: int) -> None:
    """A counted turn of four messages (request, call, result, answer) in 1% of the sessions,
    written as a runtime writes them: after every message there is, so summed on their ranges
    from the sums kept."""
    rng = random.Random(seed)
    chosen = rng.sample(range(2, sessions + 1), max(1, sessions // 100))
    rows = []
    for sid in chosen:
        call = f"call_grow_{sid}_{seed}"
        calls = (
            f'[{{"id":"{call}","type":"function","function":{{"name":"Read","arguments":"{{}}"}}}}]'
        )
        rows += [
            (sid, "user", "and the tests?", None, None),
            (sid, "assistant", None, calls, None),
            (sid, "tool", "4 passed", None, call),
            (sid, "assistant", "all green", None, None),
        ]
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO agent_message (session_id, role, content, tool_calls, tool_call_id,"
            " token_count, token_encoding) VALUES (%s, %s, %s, %s, %s, 12, 'o200k_base')",
            rows,
        )


if __name__ == "__main__":
    main()
