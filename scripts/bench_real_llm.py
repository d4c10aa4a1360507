#!/usr/bin/env python3
"""Benchmark the LLM summarizer against a real OpenAI-compatible server (issue #43).

For each span size, one session whose summarized span holds about that many o200k tokens is
compacted (``--force``) in a throw-away SQLite store through Compactor and the real ``openai``
client. Prints, per size: the outcome, wall seconds, the seconds the server took (the requests'
own time), ctxtool's share of the wall time (reading, planning, counting, the quality gate,
the checkpoint), the requests (a fold makes several), the prompt and completion tokens the
server counted, and the window it learned. Before that, the server's prompt and generation
rates: a ~600-token prompt asked for one token, then the same prompt asked for 128.

Example (the local llama.cpp server with SmolLM2-135M):
    eval "$(scripts/local-llm.sh up)"
    .venv/bin/python scripts/bench_real_llm.py --base-url "$OPENAI_BASE_URL" --model smollm2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench_compact import session_messages  # noqa: E402

from ctxtool.compaction.compactor import Compactor  # noqa: E402
from ctxtool.compaction.summarizers import OpenAISummarizer  # noqa: E402
from ctxtool.core.plan import CompactionSettings  # noqa: E402
from ctxtool.core.tokens import count_text  # noqa: E402
from ctxtool.db import create_engine  # noqa: E402
from ctxtool.db.schema import agent_message, agent_session  # noqa: E402
from ctxtool.migrate import Migrator  # noqa: E402


def session_of(tokens: int) -> list[dict]:
    """A coding session (bench_compact's turns: a request, a file read, its content, a reply)
    of about ``tokens`` o200k tokens, and one turn more that stays verbatim."""
    turns = 1
    while (
        sum(count_text(m["content"] or "", "o200k_base") for m in session_messages(turns)) < tokens
    ):
        turns += 1
    return session_messages(turns + 1)


def rates(base_url: str, model: str) -> tuple[float, float]:
    """(prompt tokens/s, completion tokens/s) as the server counts them: a ~600-token prompt
    asked for one token, then the same prompt asked for 128 (llama.cpp keeps the prompt's
    cache, so the second request's time is the generation's)."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="not-needed", timeout=900, max_retries=0)
    prompt = " ".join(f"word{i} is the {i}th item of the list." for i in range(40))
    prompt += "\nWrite a long story about these words."
    timings = []
    for max_tokens in (1, 128):
        started = time.perf_counter()
        answer = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=max_tokens,
            temperature=0,
        )
        timings.append((time.perf_counter() - started, answer.usage))
    (prompt_s, first), (generation_s, second) = timings
    return first.prompt_tokens / prompt_s, second.completion_tokens / generation_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--spans", type=int, nargs="+", default=[1000, 2000, 4000, 8000, 16000])
    parser.add_argument("--max-summary-tokens", type=int, default=256)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument(
        "--estimate",
        type=int,
        nargs="*",
        default=[137_000],
        help="span sizes to extrapolate to, linearly from the largest span measured (a fold "
        "is one request per chunk: its time grows with the span)",
    )
    args = parser.parse_args()

    prompt_rate, completion_rate = rates(args.base_url, args.model)
    print(f"server: {prompt_rate:.0f} prompt tokens/s, {completion_rate:.1f} completion tokens/s")
    print(
        "| span (o200k tokens) | status | seconds | server seconds | ctxtool share | requests "
        "| prompt / completion tokens | window learned |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    summarizer = OpenAISummarizer(
        args.model,
        args.base_url,
        timeout=args.timeout,
        max_retries=2,
        max_summary_tokens=args.max_summary_tokens,
    )
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_engine(f"sqlite:///{tmp}/bench.db")
        Migrator(engine).up()
        for sid, size in enumerate(args.spans, start=1):
            with engine.begin() as conn:
                conn.execute(agent_session.insert().values(session_id=sid, model="gpt-4o"))
                for m in session_of(size):
                    conn.execute(agent_message.insert().values(session_id=sid, **m))
            settings = CompactionSettings(
                context_window=size * 2 + 8000, reserve_tokens=2000, keep_recent_tokens=400
            )
            before = dict(summarizer.totals)
            compactor = Compactor(
                engine, summarizer, settings, max_summary_tokens=args.max_summary_tokens
            )
            outcome = compactor.compact_session(sid, force=True)
            used = {k: summarizer.totals[k] - before[k] for k in before}
            share = (outcome.seconds - used["seconds"]) / outcome.seconds
            window = (
                f"{summarizer.window} ({summarizer.window_source})" if summarizer.window else "-"
            )
            status = outcome.status.value + (f": {outcome.error}" if outcome.error else "")
            print(
                f"| {size:,} | {status[:90]} | {outcome.seconds:.1f} | {used['seconds']:.1f} "
                f"| {share:.1%} | {used['requests']} "
                f"| {used['prompt_tokens']:,} / {used['completion_tokens']:,} | {window} |",
                flush=True,
            )
            largest = (size, outcome.seconds, used["requests"])
        engine.dispose()
    size, seconds, requests = largest
    for target in args.estimate:
        scale = target / size
        print(
            f"extrapolated to {target:,} tokens: about {requests * scale:.0f} requests, "
            f"{seconds * scale / 60:.0f} min (linearly from the {size:,}-token span)"
        )


if __name__ == "__main__":
    main()
