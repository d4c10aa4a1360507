#!/usr/bin/env python3
"""Benchmark `validate` over a large store with planted faults, next to a full table scan.

Builds N messages in S sessions (most never compacted, so their restored context is their whole
history; the rest with a checkpoint chain), plants faults of every rule ctxtool checks, then
times the library's `validate` against a full scan of agent_message (every column fetched) in
the same run. Checks that every planted fault is found and nothing else is reported.

The store's token counts are filled first (as `tokens count --all` from cron keeps them): a
restored context whose messages were never counted is measured exactly by validate, in memory,
which is tokenising, not checking (`--uncounted` times that too).

Target: validate <= 3x the scan.

Example: .venv/bin/python scripts/bench_validate.py --messages 1000000 --sessions 1100
"""

from __future__ import annotations

import argparse
import json
import random
import time

import sqlalchemy as sa
from benchdb import bare_fetch, fresh_database

from ctxtool.db.schema import agent_compaction, agent_message, agent_session
from ctxtool.store import Store

TEXT = [
    "the",
    "agent",
    "reads",
    "src/app.py",
    "and",
    "runs",
    "pytest",
    "-x;",
    "error:",
    "ZeroDivisionError",
    "at",
    "line",
    "42",
    "refactor",
    "handler",
    "returns",
    "JSON",
]


ROW = {"content": None, "tool_calls": None, "tool_call_id": None}


def turn(rng: random.Random, sid: int, n: int) -> list[dict]:
    """A user request, a tool call with its result, an answer: four messages (every row with
    the same keys: an executemany takes its columns from the first row)."""
    call = f"call_{sid}_{n}"
    words = " ".join(rng.choice(TEXT) for _ in range(30))
    return [
        {**ROW, **row}
        for row in (
            {"session_id": sid, "role": "user", "content": f"request {n}: {words}"},
            {
                "session_id": sid,
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {
                            "name": "read",
                            "arguments": json.dumps({"path": f"src/m{n}.py"}),
                        },
                    }
                ],
            },
            {"session_id": sid, "role": "tool", "tool_call_id": call, "content": words * 3},
            {"session_id": sid, "role": "assistant", "content": "done: " + words},
        )
    ]


def populate(engine: sa.Engine, messages: int, sessions: int, seed: int = 11):
    rng = random.Random(seed)
    per_session = max(8, messages // sessions)
    compacted = set(rng.sample(range(1, sessions + 1), k=max(2, sessions // 10)))
    with engine.begin() as conn:
        conn.execute(
            agent_session.insert(),
            [{"session_id": s, "model": "gpt-4o"} for s in range(1, sessions + 1)],
        )
    rows: list[dict] = []
    for sid in range(1, sessions + 1):
        for n in range(per_session // 4):
            rows.extend(turn(rng, sid, n))
        if len(rows) >= 20_000:
            with engine.begin() as conn:
                conn.execute(agent_message.insert(), rows)
            rows = []
    if rows:
        with engine.begin() as conn:
            conn.execute(agent_message.insert(), rows)
    # Two consistent checkpoints on every compacted session, cut at user messages.
    with engine.begin() as conn:
        users = {}
        for sid, mid in conn.execute(
            sa.select(agent_message.c.session_id, agent_message.c.id)
            .where(agent_message.c.role == "user", agent_message.c.session_id.in_(compacted))
            .order_by(agent_message.c.id)
        ):
            users.setdefault(sid, []).append(mid)
        for sid in sorted(compacted):
            ids = users[sid]
            first = conn.execute(
                agent_compaction.insert().values(
                    session_id=sid,
                    summary="## Goal\nfirst",
                    parent_compaction_id=0,
                    first_kept_message_id=ids[len(ids) // 3],
                )
            ).inserted_primary_key[0]
            conn.execute(
                agent_compaction.insert().values(
                    session_id=sid,
                    summary="## Goal\nsecond",
                    parent_compaction_id=first,
                    first_kept_message_id=ids[2 * len(ids) // 3],
                )
            )
    return sorted(compacted)


def plant_faults(
    engine: sa.Engine, sessions: int, compacted: list[int], per_rule: int, seed: int = 5
) -> set[tuple[int, str]]:
    """Each fault in its own session; returns {(session_id, rule)} that validate must find."""
    rng = random.Random(seed)
    plain = [s for s in range(1, sessions + 1) if s not in set(compacted)]
    rng.shuffle(plain)
    chained = list(compacted)
    rng.shuffle(chained)
    planted: set[tuple[int, str]] = set()
    M, C = agent_message, agent_compaction
    with engine.begin() as conn:
        for sid in (plain.pop() for _ in range(per_rule)):  # a tool result whose call is gone
            victim = conn.execute(
                sa.select(M.c.id)
                .where(M.c.session_id == sid, M.c.role == "tool")
                .order_by(M.c.id)
                .limit(1)
            ).scalar()
            conn.execute(M.update().where(M.c.id == victim).values(tool_call_id="no_such_call"))
            planted.add((sid, "orphan_tool_result"))
            planted.add((sid, "unanswered_tool_call"))  # the call it answered now has no result
        for sid in (plain.pop() for _ in range(per_rule)):  # tool_calls a runtime garbled
            victim = conn.execute(
                sa.select(M.c.id)
                .where(M.c.session_id == sid, M.c.role == "assistant", M.c.tool_calls.is_not(None))
                .order_by(M.c.id.desc())
                .limit(1)
            ).scalar()
            conn.execute(M.update().where(M.c.id == victim).values(tool_calls=42))
            planted.add((sid, "malformed_tool_calls"))
            planted.add((sid, "orphan_tool_result"))  # its result now answers nothing
        for sid in (plain.pop() for _ in range(per_rule)):  # a checkpoint cut at a tool result
            tool = conn.execute(
                sa.select(M.c.id)
                .where(M.c.session_id == sid, M.c.role == "tool")
                .order_by(M.c.id.desc())
                .limit(1)
            ).scalar()
            conn.execute(
                C.insert().values(
                    session_id=sid, summary="s", parent_compaction_id=0, first_kept_message_id=tool
                )
            )
            planted.add((sid, "cut_orphans_tool_result"))
            planted.add((sid, "orphan_tool_result"))
        for sid in (plain.pop() for _ in range(per_rule)):  # a cut at a missing message
            conn.execute(
                C.insert().values(
                    session_id=sid,
                    summary="s",
                    parent_compaction_id=0,
                    first_kept_message_id=10**12,
                )
            )
            planted.add((sid, "first_kept_missing"))
        for sid in (chained.pop() for _ in range(per_rule)):  # a broken chain
            latest = conn.execute(
                sa.select(sa.func.max(C.c.id)).where(C.c.session_id == sid)
            ).scalar()
            conn.execute(
                C.update().where(C.c.id == latest).values(parent_compaction_id=latest + 10**9)
            )
            planted.add((sid, "chain_broken"))
        for sid in (chained.pop() for _ in range(per_rule)):  # an empty summary
            latest = conn.execute(
                sa.select(sa.func.max(C.c.id)).where(C.c.session_id == sid)
            ).scalar()
            conn.execute(C.update().where(C.c.id == latest).values(summary=" "))
            planted.add((sid, "empty_summary"))
    return planted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db", default="mysql+pymysql://root@127.0.0.1:3306/ctxtool_bench_validate"
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=1_100)
    parser.add_argument("--faults-per-rule", type=int, default=50)
    parser.add_argument(
        "--uncounted",
        action="store_true",
        help="also time validate before the token counts are filled",
    )
    args = parser.parse_args()

    engine = fresh_database(args.db)
    t0 = time.perf_counter()
    compacted = populate(engine, args.messages, args.sessions)
    planted = plant_faults(engine, args.sessions, compacted, args.faults_per_rule)
    total = engine.connect().execute(sa.select(sa.func.count()).select_from(agent_message)).scalar()
    print(
        f"store: {total} messages in {args.sessions} sessions ({len(compacted)} compacted), "
        f"{len(planted)} planted findings; built in {time.perf_counter() - t0:.0f}s"
    )
    if args.uncounted:
        t0 = time.perf_counter()
        uncounted = {(i.session_id, i.rule) for i in Store(engine).validate()[0]}
        print(
            f"validate with no token counts yet (every context measured in memory): "
            f"{time.perf_counter() - t0:.2f}s, same findings: {uncounted == planted}"
        )
    t0 = time.perf_counter()
    Store(engine).count_tokens()
    print(f"token counts filled in {time.perf_counter() - t0:.0f}s (not timed below)")

    scans, runs = [], []
    for _ in range(2):
        scans.append(bare_fetch(engine)[1])
        t0 = time.perf_counter()
        issues, checked = Store(engine).validate()
        runs.append(time.perf_counter() - t0)
    scan, ours = min(scans), min(runs)
    found = {(i.session_id, i.rule) for i in issues}
    missed, extra = planted - found, found - planted
    print(
        f"full scan of agent_message: {scan:.2f}s; validate: {ours:.2f}s over {checked} "
        f"sessions; ratio {ours / scan:.2f}x (target <= 3x)"
    )
    print(
        f"planted {len(planted)}, found {len(found & planted)}, missed {len(missed)}, "
        f"false findings {len(extra)}"
    )
    if missed or extra:
        print("missed:", sorted(missed)[:10], "extra:", sorted(extra)[:10])
        raise SystemExit(1)


if __name__ == "__main__":
    main()
