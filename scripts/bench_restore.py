#!/usr/bin/env python3
"""Benchmark restoring a session's context at 1k, 10k and 100k messages of history.

Each session has a checkpoint that keeps its last ~50 messages. For each size it prints the time
of `Store.restored_context` (median of several runs) and the InnoDB handler reads it made
(``SHOW SESSION STATUS LIKE 'Handler_read%'`` on the same connection), then loads the 100k
history whole (`Store.messages`) next to a bare PyMySQL fetch of the same rows (a plain
``pymysql.connect``, default converters), in the same run.

Targets: handler reads independent of history length; restore >= 100x faster than the full
load; the full load <= 1.2x the bare fetch.

Example: .venv/bin/python scripts/bench_restore.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import sqlalchemy as sa
from benchdb import bare_fetch, fresh_database

from ctxtool.db.schema import agent_compaction, agent_message, agent_session
from ctxtool.store import Store

SIZES = (1_000, 10_000, 100_000)
KEPT = 50


def populate(engine: sa.Engine) -> dict[int, int]:
    """One session per size (id = size), tool calls and results among the messages."""
    for sid, size in enumerate(SIZES, start=1):
        with engine.begin() as conn:
            conn.execute(
                agent_session.insert().values(
                    session_id=sid, model="gpt-4o", system_prompt="You are a coding agent."
                )
            )
            rows = []
            for i in range(size):
                kind = i % 4
                if kind == 0:
                    rows.append(
                        {"session_id": sid, "role": "user", "content": f"request {i}: " + "x " * 60}
                    )
                elif kind == 1:
                    rows.append(
                        {
                            "session_id": sid,
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": f"c{i}",
                                    "type": "function",
                                    "function": {
                                        "name": "read",
                                        "arguments": json.dumps({"path": f"src/f{i}.py"}),
                                    },
                                }
                            ],
                        }
                    )
                elif kind == 2:
                    rows.append(
                        {
                            "session_id": sid,
                            "role": "tool",
                            "tool_call_id": f"c{i - 1}",
                            "content": "line\n" * 40,
                        }
                    )
                else:
                    rows.append({"session_id": sid, "role": "assistant", "content": "done " * 30})
                rows[-1] = {
                    "content": None,
                    "tool_calls": None,
                    "tool_call_id": None,
                    **rows[-1],
                }  # one set of keys: executemany takes the first row's
                if len(rows) == 5000:
                    conn.execute(agent_message.insert(), rows)
                    rows = []
            if rows:
                conn.execute(agent_message.insert(), rows)
            ids = [
                r[0]
                for r in conn.execute(
                    sa.select(agent_message.c.id)
                    .where(agent_message.c.session_id == sid)
                    .order_by(agent_message.c.id.desc())
                    .limit(KEPT + 3)
                )
            ]
            # Keep from a user message near the end (a turn boundary).
            users = [
                r[0]
                for r in conn.execute(
                    sa.select(agent_message.c.id)
                    .where(
                        agent_message.c.session_id == sid,
                        agent_message.c.role == "user",
                        agent_message.c.id >= ids[-1],
                    )
                    .order_by(agent_message.c.id)
                    .limit(1)
                )
            ]
            conn.execute(
                agent_compaction.insert().values(
                    session_id=sid,
                    summary="## Goal\nkeep going",
                    first_kept_message_id=users[0],
                    parent_compaction_id=0,
                )
            )
    return dict(enumerate(SIZES, start=1))


def handler_reads(conn) -> int:
    return sum(int(v) for _, v in conn.execute(sa.text("SHOW SESSION STATUS LIKE 'Handler_read%'")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="mysql+pymysql://root@127.0.0.1:3306/ctxtool_bench_restore")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    engine = fresh_database(args.db)
    sizes = populate(engine)
    # Fresh statistics, and let InnoDB settle after the bulk insert (its background flushing
    # otherwise lands in the first measurements and makes the largest session look slower).
    with engine.connect() as conn:
        for table in ("agent_session", "agent_message", "agent_compaction"):
            conn.exec_driver_sql(f"ANALYZE TABLE {table}").all()
    time.sleep(3)
    store = Store(engine)
    print(f"{'history':>8} {'kept':>5} {'restore ms':>11} {'handler reads':>14}")
    restore_ms = {}
    for sid, size in sizes.items():
        with engine.connect() as conn:
            for _ in range(20):  # warm the buffer pool and the statement cache
                store.restored_context(sid, conn)
            times, reads = [], []
            for _ in range(args.repeat):
                before = handler_reads(conn)
                t0 = time.perf_counter()
                ctx = store.restored_context(sid, conn)
                times.append(time.perf_counter() - t0)
                reads.append(handler_reads(conn) - before - 1)  # less SHOW STATUS's own read
        restore_ms[size] = statistics.median(times) * 1000
        print(
            f"{size:>8} {len(ctx.messages):>5} {restore_ms[size]:>11.2f} {statistics.median(reads):>14.0f}"
        )

    big = max(sizes, key=sizes.get)
    t_bare, t_ours, t_driver = [], [], []

    def ours_once() -> None:
        t0 = time.perf_counter()
        loaded = store.messages(big)
        t_ours.append(time.perf_counter() - t0)
        assert len(loaded) == sizes[big]

    for i in range(args.repeat):  # interleaved, each going first in turn
        if i % 2:
            ours_once()
        rows, seconds = bare_fetch(engine, "WHERE session_id = %s ORDER BY id", (big,))
        t_bare.append(seconds)
        assert rows == sizes[big]
        t_driver.append(
            bare_fetch(engine, "WHERE session_id = %s ORDER BY id", (big,), ctxtool_driver=True)[1]
        )
        if not i % 2:
            ours_once()
    bare, ours = min(t_bare), min(t_ours)
    paired = sorted(o / b for o, b in zip(t_ours, t_bare))
    print(
        f"full history of {sizes[big]} messages: bare PyMySQL fetch {bare:.3f}s, "
        f"Store.messages {ours:.3f}s (best of {args.repeat}); ratio best {ours / bare:.2f}x, "
        f"median of pairs {paired[len(paired) // 2]:.2f}x (target <= 1.2x)"
    )
    print(
        f"  the same fetch on ctxtool's driver settings (its timestamp converter) "
        f"{min(t_driver):.3f}s: SQLAlchemy and the records cost {ours / min(t_driver):.2f}x that"
    )
    print(
        f"restore at {sizes[big]} vs the full load: {ours * 1000 / restore_ms[sizes[big]]:.0f}x "
        f"faster (target >= 100x)"
    )


if __name__ == "__main__":
    main()
