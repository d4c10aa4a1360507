#!/usr/bin/env python3
"""Benchmark `tokens count --all` against bare tiktoken on the same texts, in one run.

Generates a corpus of N messages in a throw-away MariaDB database, then measures:
  baseline  encoding.encode_batch(texts) over the texts already in memory
  ctxtool   count_tokens(engine, recount=True): read from MariaDB, encode, write counts back
and prints messages/s and MB/s for both and their ratio (target: ctxtool >= 0.6x baseline).

Example: .venv/bin/python scripts/bench_tokens.py --messages 200000
"""

from __future__ import annotations

import argparse
import random
import resource
import time

import sqlalchemy as sa

from benchdb import fresh_database
from ctxtool.db.schema import agent_message, agent_session
from ctxtool.store.counts import count_tokens
from ctxtool.tokens import get_encoding

WORDS = ("the agent reads src/app.py and runs pytest -x; error: ZeroDivisionError at line 42 "
         "refactor function handler returns JSON {\"ok\": true} Grüße café 日本語 テスト 数据库 "
         "🚀 deploy migration rollback SELECT * FROM agent_message WHERE id > 10 ORDER BY id").split()


def make_text(rng: random.Random) -> str:
    n = int(rng.lognormvariate(5.0, 1.0)) + 5  # median ~150 words, long tail
    return " ".join(rng.choice(WORDS) for _ in range(min(n, 20000)))


def setup(url: str, n: int, seed: int = 7) -> tuple[sa.Engine, list[str]]:
    engine = fresh_database(url)
    rng = random.Random(seed)
    texts = [make_text(rng) for _ in range(n)]
    sessions = max(1, n // 500)
    with engine.begin() as conn:
        conn.execute(agent_session.insert(), [{"session_id": s, "model": "gpt-4o"}
                                              for s in range(1, sessions + 1)])
        for i in range(0, n, 5000):
            conn.execute(agent_message.insert(), [
                {"session_id": 1 + (j % sessions), "role": "user" if j % 2 else "assistant",
                 "content": texts[j]} for j in range(i, min(n, i + 5000))])
    return engine, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="mysql+pymysql://root@127.0.0.1:3306/ctxtool_bench_tokens")
    parser.add_argument("--messages", type=int, default=200_000)
    args = parser.parse_args()

    engine, texts = setup(args.db, args.messages)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    enc = get_encoding("o200k_base")
    enc.encode_batch(texts[:1000])  # warm up

    # ctxtool first, so its peak RSS is not hidden by the baseline's token lists.
    rss_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    result = count_tokens(engine, recount=True)
    t_ours = time.perf_counter() - t0
    rss_ours = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    t0 = time.perf_counter()
    bare = enc.encode_batch(texts)
    t_bare = time.perf_counter() - t0
    bare_tokens = sum(len(t) for t in bare)
    del bare
    # The call ctxtool itself makes (special-token text is ordinary text), with its threads.
    t0 = time.perf_counter()
    enc.encode_ordinary_batch(texts, num_threads=2)
    t_ordinary = time.perf_counter() - t0

    n = args.messages
    print(f"corpus: {n} messages, {mb:.1f} MB, {bare_tokens} content tokens (o200k_base)")
    print(f"baseline encode_batch : {n / t_bare:10.0f} msg/s  {mb / t_bare:7.2f} MB/s  ({t_bare:.2f}s)")
    print(f"ctxtool tokens count  : {n / t_ours:10.0f} msg/s  {mb / t_ours:7.2f} MB/s  ({t_ours:.2f}s,"
          f" DB read+write included)")
    print(f"bare encode_ordinary_batch (ctxtool's call, 2 threads): {n / t_ordinary:10.0f} msg/s  "
          f"{mb / t_ordinary:7.2f} MB/s  ({t_ordinary:.2f}s)")
    print(f"ratio ctxtool/baseline: {t_bare / t_ours:.2f}x  (target >= 0.6x); "
          f"against encode_ordinary_batch: {t_ordinary / t_ours:.2f}x (target >= 0.9x)")
    print(f"peak RSS: {rss_start:.0f} MB with the corpus in memory, {rss_ours:.0f} MB after "
          f"ctxtool's count (+{rss_ours - rss_start:.0f} MB)")
    assert result.messages_counted == n


if __name__ == "__main__":
    main()
