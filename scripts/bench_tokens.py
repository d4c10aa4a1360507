#!/usr/bin/env python3
"""Benchmark `tokens count --all` against bare tiktoken on the same texts, in one run.

Generates a corpus of N messages in a throw-away MariaDB database, then measures:
  baseline  encoding.encode_batch(texts) over the texts already in memory
  ctxtool   Store(engine).count_tokens(recount=True): read from MariaDB, encode, write counts back
  issue #13 encoding.encode_ordinary_batch(texts, num_threads=2) (target: ctxtool >= 0.9x)
  ceiling   ctxtool.core.tokens.token_lengths(texts) in memory: the counting without the database
and prints messages/s and MB/s for each and the ratios.

Example: .venv/bin/python scripts/bench_tokens.py --messages 200000
"""

from __future__ import annotations

import argparse
import random
import resource
import time

import benchdb
import sqlalchemy as sa
from benchdb import fresh_database

from ctxtool.core.tokens import TOKENS_PER_MESSAGE, get_encoding, token_lengths
from ctxtool.db.schema import agent_message, agent_session
from ctxtool.store import Store

WORDS = [
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
    "function",
    "handler",
    "returns",
    "JSON",
    '{"ok":',
    "true}",
    "Grüße",
    "café",
    "日本語",
    "テスト",
    "数据库",
    "🚀",
    "deploy",
    "migration",
    "rollback",
    "SELECT",
    "*",
    "FROM",
    "agent_message",
    "WHERE",
    "id",
    ">",
    "10",
    "ORDER",
    "BY",
    "id",
]


def make_text(rng: random.Random) -> str:
    n = int(rng.lognormvariate(5.0, 1.0)) + 5  # median ~150 words, long tail
    return " ".join(rng.choice(WORDS) for _ in range(min(n, 20000)))


def setup(url: str, n: int, seed: int = 7) -> tuple[sa.Engine, list[str]]:
    engine = fresh_database(url)
    rng = random.Random(seed)
    texts = [make_text(rng) for _ in range(n)]
    sessions = max(1, n // 500)
    with engine.begin() as conn:
        conn.execute(
            agent_session.insert(),
            [{"session_id": s, "model": "gpt-4o"} for s in range(1, sessions + 1)],
        )
        for i in range(0, n, 5000):
            conn.execute(
                agent_message.insert(),
                [
                    {
                        "session_id": 1 + (j % sessions),
                        "role": "user" if j % 2 else "assistant",
                        "content": texts[j],
                    }
                    for j in range(i, min(n, i + 5000))
                ],
            )
    return engine, texts


def settle(engine: sa.Engine) -> None:
    """Fresh statistics, then let InnoDB finish flushing what was just written (the bulk
    insert, the previous count's updates), which otherwise lands in whatever is measured next."""
    with engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE TABLE agent_message").all()
    benchdb.settle(engine)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="mysql+pymysql://root@127.0.0.1:3306/ctxtool_bench_tokens")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    engine, texts = setup(args.db, args.messages)
    settle(engine)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    enc = get_encoding("o200k_base")
    enc.encode_batch(texts[:1000])  # warm up
    bare_tokens = sum(token_lengths(texts, enc))
    assert bare_tokens == sum(len(t) for t in enc.encode_ordinary_batch(texts[:2000])) + sum(
        token_lengths(texts[2000:], enc)
    )

    # ctxtool first, so its peak RSS is not hidden by the baseline's token lists.
    rss_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = Store(engine).count_tokens(recount=True)
    rss_ours = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert result.messages_counted == args.messages
    # Every message's count is its content's tokens plus the recipe's overhead.
    overhead = args.messages * (TOKENS_PER_MESSAGE + 1)  # "user" and "assistant": one token each
    assert result.tokens == bare_tokens + overhead, (result.tokens, bare_tokens + overhead)

    runs: dict[str, list[float]] = {"ours": [], "batch": [], "ordinary": [], "lengths": []}
    for _ in range(args.repeat):  # interleaved, so drifting machine load touches each alike
        settle(engine)  # the previous count's page flushing done, for whichever runs next
        runs["ours"].append(timed(lambda: Store(engine).count_tokens(recount=True)))
        settle(engine)
        runs["batch"].append(timed(lambda: enc.encode_batch(texts)))
        runs["ordinary"].append(timed(lambda: enc.encode_ordinary_batch(texts, num_threads=2)))
        runs["lengths"].append(timed(lambda: token_lengths(texts, enc, num_threads=2)))
    best = {k: min(v) for k, v in runs.items()}
    ratios = sorted(o / t for o, t in zip(runs["ordinary"], runs["ours"]))

    n = args.messages

    def line(label: str, seconds: float) -> str:
        return f"{label:58s}: {n / seconds:8.0f} msg/s {mb / seconds:7.2f} MB/s ({seconds:.2f}s)"

    print(
        f"corpus: {n} messages, {mb:.1f} MB, {bare_tokens} content tokens (o200k_base); "
        f"best of {args.repeat}, interleaved"
    )
    print(line("ctxtool tokens count (DB read + write included)", best["ours"]))
    print(line("baseline encode_batch", best["batch"]))
    print(line("baseline encode_ordinary_batch, 2 threads (issue #13)", best["ordinary"]))
    print(line("ctxtool token_lengths in memory, 2 threads (no DB)", best["lengths"]))
    print(
        f"the database adds {(best['ours'] - best['lengths']) / best['lengths']:.0%} to the "
        f"in-memory count"
    )
    print(
        f"ratio ctxtool / encode_batch: {best['batch'] / best['ours']:.2f}x; ctxtool / "
        f"encode_ordinary_batch: best {best['ordinary'] / best['ours']:.2f}x, median "
        f"{ratios[len(ratios) // 2]:.2f}x (target >= 0.9x)"
    )
    print(
        f"peak RSS: {rss_start:.0f} MB with the corpus in memory, {rss_ours:.0f} MB after "
        f"ctxtool's count (+{rss_ours - rss_start:.0f} MB)"
    )


if __name__ == "__main__":
    main()
