#!/usr/bin/env python3
"""Compaction quality on real transcripts: compact each one twice with the extractive
summarizer at a small window and print the README's retention table (Markdown).

Every transcript under the directory is imported into a throw-away SQLite store and compacted
with the settings a new user tried (window 16,000, reserve 2,000, keep 4,000 recent tokens).
A transcript below that threshold first grows: its own user and assistant texts are replayed
as new messages of the same role until it is over (column "grown"). It then grows again the same way and is
compacted a second time, so the second summary is built on the first. Per transcript: tokens before and after, summary tokens, retention (share of the span's
facts the summary holds) and carry-over (share of the previous summary's items the next one
holds); a restored context still over its threshold shows as over_window.

Example: .venv/bin/python scripts/retention_table.py ../shared/transcripts
         .venv/bin/python scripts/retention_table.py ../shared/transcripts --gate
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ctxtool.compaction.compactor import Compactor  # noqa: E402
from ctxtool.compaction.summarizers import ExtractiveSummarizer  # noqa: E402
from ctxtool.core.plan import CompactionSettings  # noqa: E402
from ctxtool.core.sections import parse_sections  # noqa: E402
from ctxtool.core.tokens import count_text  # noqa: E402
from ctxtool.db import create_engine  # noqa: E402
from ctxtool.db.schema import agent_message  # noqa: E402
from ctxtool.importer import Importer  # noqa: E402
from ctxtool.migrate import Migrator  # noqa: E402
from ctxtool.store import Store  # noqa: E402

SETTINGS = CompactionSettings(context_window=16_000, reserve_tokens=2_000, keep_recent_tokens=4_000)


def grow(engine, store: Store, session_id: int, settings: CompactionSettings) -> int:
    """Append copies of the session's earliest texts as new messages until its context is over
    threshold again; returns how many were added. Each copy keeps its role and details: a
    slash command's expansion (``is_meta``) replayed as a typed request, or the agent's report
    replayed as the user's, would put instructions in the user's mouth that the user never
    gave, and the evaluator would ask the summary for them."""
    texts = [m for m in store.messages(session_id) if m.content and m.role in ("user", "assistant")]
    need = settings.threshold(None) - store.context_tokens(session_id) + 200
    if need <= 200:
        return 0
    added = 0
    size = settings.keep_recent_tokens * 2  # characters: a piece never outgrows the window
    with engine.begin() as conn:
        for m in itertools.islice(itertools.cycle(texts), 20_000):
            if need <= 0:
                break
            conn.execute(
                agent_message.insert().values(
                    session_id=session_id, role=m.role, content=m.content[:size], details=m.details
                )
            )
            need -= count_text(m.content[:size]) + 4
            added += 1
    return added


def compact_twice(directory: Path, workdir: Path) -> list[dict]:
    """One row per transcript: both runs' outcomes, the summaries and their quality figures."""
    engine = create_engine(f"sqlite:///{workdir / 'retention.db'}")
    Migrator(engine).up()
    files = sorted(
        p for p in directory.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".traj", ".json")
    )
    results = Importer(engine).import_paths([str(p) for p in files])
    store = Store(engine)
    rows = []
    for path, result in zip(files, results):
        if result.error or result.session_id is None:
            rows.append({"transcript": path.name, "error": result.error})
            continue
        sid = result.session_id
        settings = SETTINGS
        grown = grow(engine, store, sid, settings)
        first = Compactor(engine, ExtractiveSummarizer(), settings).compact_session(sid)
        summary_1 = store.latest_compaction(sid)
        grow(engine, store, sid, settings)
        second = Compactor(engine, ExtractiveSummarizer(), settings).compact_session(sid)
        summary_2 = store.latest_compaction(sid)
        rows.append(
            {
                "transcript": path.name,
                "format": path.parent.name,
                "session_id": sid,
                "run1": first,
                "run2": second,
                "summary1": summary_1 if first.compaction_id else None,
                "summary2": summary_2 if second.compaction_id else None,
                "context_tokens": store.context_tokens(sid),
                "threshold": settings.threshold(None),
                "grown": grown,
            }
        )
    engine.dispose()
    return rows


def goal_of(summary: str | None) -> str:
    for section in parse_sections(summary):
        if section.heading == "Goal" and section.items:
            return section.items[0]
    return ""


def _pct(value) -> str:
    return "–" if value is None else f"{value:.0%}"


def markdown(rows: list[dict]) -> str:
    out = [
        "| transcript | grown | run 1: tokens before → after | summary | probes "
        "| run 2: before → after | summary | probes | carry-over |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "run1" not in r:
            out.append(f"| {r['transcript']} | import failed: {r['error']} | | | | | | | |")
            continue
        a, b = r["run1"], r["run2"]
        first, second = _run(a), _run(b)
        out.append(
            f"| {r['format']}/{r['transcript'][:28]} | {r['grown'] or ''} | {first} | {a.summary_tokens or '–'} | "
            f"{_pct(a.score)} | {second} | {b.summary_tokens or '–'} | {_pct(b.score)} | "
            f"{_pct(b.carry_over)} |"
        )
    return "\n".join(out)


def gate_markdown(rows: list[dict]) -> str:
    """The quality gate's verdict on every run: written or not, and why."""
    out = [
        "| transcript | run | verdict | probes | carry-over | fabrications | boilerplate "
        "| missed, or why not written |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    verdicts: dict[str, int] = {}
    for r in rows:
        for n in (1, 2):
            o = r.get(f"run{n}")
            if o is None:
                continue
            verdicts[o.status.value] = verdicts.get(o.status.value, 0) + 1
            q = o.quality or {}
            probes = (
                f"{_pct(q.get('score'))} ({q.get('held')}/{q.get('summary_only_probes')})"
                if q
                else "–"
            )
            why = ", ".join(q.get("missed") or []) or "–"
            if o.status.value != "compacted":
                why = o.error or o.status.value
            out.append(
                f"| {r['format']}/{r['transcript'][:28]} | {n} | {o.status.value} | {probes} "
                f"| {_pct(o.carry_over)} | {len(q.get('fabrications') or ())} "
                f"| {len(q.get('boilerplate') or ())} | {why} |"
            )
    counted = ", ".join(f"{v} {k}" for k, v in sorted(verdicts.items()))
    out.append(f"\nRuns: {sum(verdicts.values())} ({counted})")
    return "\n".join(out)


def _run(o) -> str:
    text = (
        f"{o.tokens_before:,} → {o.tokens_after:,}"
        if o.tokens_after is not None
        else f"{o.tokens_before:,}"
    )
    return text if o.status == "compacted" else f"{text} ({o.status})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", default=str(ROOT.parent / "shared" / "transcripts"))
    parser.add_argument("--gate", action="store_true", help="the gate's verdict on every run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = compact_twice(Path(args.directory), Path(tmp))
    print(gate_markdown(rows) if args.gate else markdown(rows))


if __name__ == "__main__":
    main()
