#!/usr/bin/env python3
"""What the extractive summary of each hand-keyed span answers, and what each section costs.

For every answer key under tests/answer_keys (written by hand from the shared transcripts), the
keyed span is imported, summarized as a compaction would summarize it (on top of the latest
runtime checkpoint inside the span, if any), and scored with the key's probes: the share of the
probes only the summary can answer that it holds (per kind, averaged), its fabrications, the
boilerplate phrases it carries (continuation notices, scratchpads, system reminders), its size,
and the tokens of each of its sections. The transcript's own summary of the span, where
the key names one, is scored beside it for calibration.

Example: .venv/bin/python scripts/summary_sections.py ../shared/transcripts
         .venv/bin/python scripts/summary_sections.py ../shared/transcripts --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ctxtool.compaction.summarizers import ExtractiveSummarizer, SummaryRequest  # noqa: E402
from ctxtool.core.evaluator import derive_probes, evaluate  # noqa: E402
from ctxtool.core.evaluator.probes import OPEN_STATE, PENDING_STATE  # noqa: E402
from ctxtool.core.plan import CompactionSettings  # noqa: E402
from ctxtool.core.prepare import grown_budget, scaled_floor, summary_budget  # noqa: E402
from ctxtool.core.records import (  # noqa: E402
    Compaction,
    Message,
    calls_of,  # noqa: E402
)
from ctxtool.core.tokens import count_text  # noqa: E402
from ctxtool.core.touched_files import files_touched  # noqa: E402
from ctxtool.core.windows import DEFAULT_MAX_SUMMARY_GROWTH  # noqa: E402
from ctxtool.db import create_engine  # noqa: E402
from ctxtool.evaluation.keys import KeyedSpan, keyed_span, load_key, state_held  # noqa: E402
from ctxtool.store import Store  # noqa: E402

KEYS = ROOT / "tests" / "answer_keys"
BUDGET = 4096
RESERVE = 2_000  # the reserve a new user's settings keep (scripts/retention_table.py)


def window_budget(window: int) -> int:
    """The summary budget a compaction at ``window`` tokens gives (the default
    --max-summary-tokens, capped at a quarter of the threshold): 3,500 at 16k, 1,500 at 8k."""
    threshold = CompactionSettings(context_window=window, reserve_tokens=RESERVE).threshold(None)
    return summary_budget(threshold, BUDGET)


def state_faults(span: KeyedSpan, summary: str) -> dict[str, int]:
    """How often the summary misstates where the work stands: fixed errors it calls open and
    finished tasks it lists as pending, by the hand keys' state phrases, and apart
    (``derived_…``) by the probes eval derives from the span's task list and runs (their
    ``open:``/``pending:`` none_of), which read the same span facts the summarizer reads; and
    the hand keys' state probes it holds (``held``/``total``, no derived probe among them)."""
    hand = span.evaluate(summary)
    held, total = state_held(hand)
    derived = evaluate(span.summarized, summary, span.kept, probes=derive_probes(span.summarized))
    out = {"held": held, "total": total}
    for prefix, verdicts in (("", hand.verdicts), ("derived_", derived.verdicts)):
        out[prefix + "fixed_called_open"] = out[prefix + "finished_pending"] = 0
        for v in verdicts:
            for phrase in v.contradicted:
                if phrase.lower().startswith(OPEN_STATE):
                    out[prefix + "fixed_called_open"] += 1
                elif phrase.lower().startswith(PENDING_STATE):
                    out[prefix + "finished_pending"] += 1
    return out


def summary_of(
    span: KeyedSpan, held: list[Compaction], max_tokens: int = BUDGET, log: bool = False
) -> str:
    """The extractive summary a compaction at the key's cut would write: of the messages after
    the latest checkpoint the span holds (``held``), on top of that checkpoint's summary."""
    messages: list[Message] = span.summarized
    previous = None
    floor = 0.9
    if held:
        previous = held[-1].summary
        messages = [m for m in messages if m.id >= held[-1].first_kept_message_id]
        # the budget grown for the carried summary, and the floor of what it holds of it, as
        # core.prepare gives a compaction
        carried, base = count_text(previous), max_tokens
        max_tokens = grown_budget(base, carried, DEFAULT_MAX_SUMMARY_GROWTH)
        floor = scaled_floor(floor, carried, max(base, max_tokens - base))
    read, modified = files_touched(calls_of(span.summarized))
    files = {"read_files": read, "modified_files": modified}
    request = SummaryRequest(previous, messages, files, max_tokens=max_tokens, min_carry_over=floor)
    return ExtractiveSummarizer(condensed_log=log).summarize(request).text


def measure(
    transcripts: Path,
    workdir: Path,
    max_tokens: int = BUDGET,
    log: bool = False,
    keys: Path = KEYS,
    windows: tuple[int, ...] = (),
) -> list[dict]:
    """A row per key file of ``keys``: the summary at ``max_tokens`` scored on the key, and
    for each of ``windows`` the score at that window's budget (``by_window``)."""
    rows = []
    for path in sorted(keys.glob("*.json")):
        key = load_key(path)
        span = keyed_span(key, transcripts, workdir)
        held = _held(workdir / f"{key.name}-span.db")
        summary = summary_of(span, held, max_tokens, log)
        evaluation = span.evaluate(summary)
        row = {
            "key": key.name,
            "summary_tokens": evaluation.summary_tokens,
            "score": evaluation.score,
            "held": sum(v.held for v in evaluation.summary_only),
            "summary_only": len(evaluation.summary_only),
            "missed": [v.probe.id for v in evaluation.missed],
            "fabrications": [f.as_dict() for f in evaluation.fabrications],
            "boilerplate": evaluation.boilerplate,
            "sections": {s.heading: s.tokens for s in evaluation.sections},
            "summary": summary,
            "state": state_faults(span, summary),
            "by_window": {},
        }
        for window in windows:
            small = summary_of(span, held, window_budget(window), log)
            scored = span.evaluate(small)
            row["by_window"][window] = {
                "score": scored.score,
                "held": sum(v.held for v in scored.summary_only),
                "summary_only": len(scored.summary_only),
                "fabrications": len(scored.fabrications),
                "summary_tokens": scored.summary_tokens,
                "state": state_faults(span, small),
            }
        if span.checkpoint is not None:
            own = span.evaluate(span.checkpoint.summary)
            row["agent_summary"] = {"score": own.score, "tokens": own.summary_tokens}
        rows.append(row)
    return rows


def _held(database: Path) -> list[Compaction]:
    """The runtime checkpoints inside the span (the store keyed_span imported it into)."""
    engine = create_engine(f"sqlite:///{database}")
    store = Store(engine)
    [session_id] = store.session_ids()
    held = store.compactions(session_id)
    engine.dispose()
    return held


def _pct(value) -> str:
    return "–" if value is None else f"{value:.0%}"


def markdown(rows: list[dict]) -> str:
    windows = sorted({w for r in rows for w in r.get("by_window", {})}, reverse=True)
    out = [
        "| span | summary tokens | score | held | "
        + "".join(f"score at {w // 1000}k | " for w in windows)
        + "fabrications | boilerplate | missed | agent's own summary |",
        "| --- | --- | --- | --- | " + "--- | " * len(windows) + "--- | --- | --- | --- |",
    ]
    for r in rows:
        own = r.get("agent_summary")
        own_text = f"{_pct(own['score'])} ({own['tokens']} tokens)" if own else "–"
        small = "".join(f"{_pct(r['by_window'][w]['score'])} | " for w in windows)
        out.append(
            f"| {r['key']} | {r['summary_tokens']} | {_pct(r['score'])} "
            f"| {r['held']}/{r['summary_only']} | {small}{len(r['fabrications'])} "
            f"| {len(r['boilerplate'])} | {', '.join(r['missed']) or '–'} "
            f"| {own_text} |"
        )
    held = sum(r["held"] for r in rows)
    total = sum(r["summary_only"] for r in rows)
    out.append(
        f"\nSummary-only probes held: {held}/{total} ({_pct(held / total if total else None)})"
    )
    out.append(f"Fabrications: {sum(len(r['fabrications']) for r in rows)}")
    out.append(f"Boilerplate phrases: {sum(len(r['boilerplate']) for r in rows)}")
    costs: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        for heading, tokens in r["sections"].items():
            costs[heading].append(tokens)
    out += [
        "",
        "| section | spans with it | tokens (total) | tokens (mean) |",
        "| --- | --- | --- | --- |",
    ]
    for heading, tokens in sorted(costs.items(), key=lambda kv: -sum(kv[1])):
        out.append(f"| {heading} | {len(tokens)} | {sum(tokens)} | {sum(tokens) // len(tokens)} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("transcripts", type=Path, help="the shared transcripts directory")
    parser.add_argument("--json", action="store_true", help="every figure as JSON")
    parser.add_argument("--show-summaries", action="store_true", help="print each summary too")
    parser.add_argument("--max-tokens", type=int, default=BUDGET, help="the summary budget")
    parser.add_argument(
        "--log", action="store_true", help="keep the older turns as a condensed log too"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        rows = measure(args.transcripts, Path(workdir), args.max_tokens, args.log)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if args.show_summaries:
        for r in rows:
            print(f"===== {r['key']}\n{r['summary']}\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
