#!/usr/bin/env python3
"""Regenerate the tables of docs/quality.md: the extractive summarizer on the hand-written
answer keys (tests/answer_keys; never on probes the code derives), its fabrications, the
boilerplate it carries and what each summary section costs (scripts/summary_sections.py); the
quality gate's verdict on every run of scripts/retention_table.py (each shared transcript
compacted twice at window 16,000); and how often the probes the evaluator derives are the ones
the hand keys ask (ctxtool.evaluation.keys.agreement).

Example: .venv/bin/python scripts/quality_table.py ../shared/transcripts
         .venv/bin/python scripts/quality_table.py ../shared/transcripts --check
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

import retention_table  # noqa: E402
import summary_sections  # noqa: E402

from ctxtool.evaluation.keys import agreement, keyed_span, load_key  # noqa: E402

PAGE = ROOT / "docs" / "quality.md"
# Keys kept from the summarizer's author: only their aggregate is ever printed (never a probe
# id, a question or a span's row), so the gap between them and the tuning keys stays a measure.
HOLDOUT = summary_sections.KEYS / "holdout"
# Held-out keys written in one sitting by a reader of the transcripts alone, after the earlier
# held-out aggregate had been used to choose between summarizer changes: reported on their own.
FRESH = "--fresh-"
WINDOWS = (16_000, 8_000)


def markers(name: str) -> tuple[str, str]:
    suffix = f" {name}" if name else ""
    return f"<!-- quality_table.py{suffix}: begin -->", f"<!-- quality_table.py{suffix}: end -->"


def page_with(table: str, page: str, name: str = "") -> str:
    """``page`` with the text between the markers of ``name`` replaced by ``table``."""
    begin, end = markers(name)
    head, rest = page.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{table}\n{end}{tail}"


def agreement_markdown(transcripts: Path, workdir: Path) -> str:
    workdir.mkdir()
    spans = [
        keyed_span(load_key(path), transcripts, workdir)
        for path in sorted(summary_sections.KEYS.glob("*.json"))
    ]
    rates = agreement(spans)
    out = ["| kind | hand probes a derived probe answers |", "| --- | --- |"]
    out += [f"| {kind.value} | {held}/{total} |" for kind, (held, total) in rates.items()]
    held = sum(h for h, _ in rates.values())
    total = sum(t for _, t in rates.values())
    out.append(f"\nAll kinds: {held}/{total}")
    return "\n".join(out)


def _aggregate(rows: list[dict], window: int) -> dict:
    """The figures of ``rows`` at ``window`` (the rows' own figures are at the first window)."""
    at = [r if window == WINDOWS[0] else {**r, **r["by_window"][window]} for r in rows]
    held = sum(r["held"] for r in at)
    total = sum(r["summary_only"] for r in at)
    return {
        "spans": len(at),
        "held": held,
        "total": total,
        "fabrications": sum(
            r["fabrications"] if isinstance(r["fabrications"], int) else len(r["fabrications"])
            for r in at
        ),
        "fixed_called_open": sum(r["state"]["fixed_called_open"] for r in at),
        "finished_pending": sum(r["state"]["finished_pending"] for r in at),
        "derived_faults": sum(
            r["state"]["derived_fixed_called_open"] + r["state"]["derived_finished_pending"]
            for r in at
        ),
        "state_held": sum(r["state"]["held"] for r in at),
        "state_total": sum(r["state"]["total"] for r in at),
        "tokens": sum(r["summary_tokens"] for r in at) // max(1, len(at)),
    }


def windows_markdown(tuning: list[dict], holdout: list[dict]) -> str:
    """The headline: the tuning keys and the held-out keys (aggregates only) at each window,
    where the work stands by the hand keys' state probes alone, and the summaries' size against
    the runtimes' own summaries of the same spans."""
    out = [
        "| keys | window | summary-only probes held | state probes held (hand keys) "
        "| fabrications | fixed errors called open (hand keys) "
        "| finished tasks listed as pending (hand keys) "
        "| both, by eval's derived probes | mean summary tokens |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    fresh = [r for r in holdout if FRESH in r["key"]]
    sets = [("tuning", tuning), ("holdout", [r for r in holdout if r not in fresh])]
    if fresh:
        sets.append(("fresh holdout", fresh))
    for name, rows in sets:
        for window in WINDOWS:
            a = _aggregate(rows, window)
            share = f"{a['held'] / a['total']:.0%}" if a["total"] else "–"
            state = f"{a['state_held'] / a['state_total']:.0%}" if a["state_total"] else "–"
            out.append(
                f"| {name} ({a['spans']} spans) | {window // 1000}k "
                f"(budget {summary_sections.window_budget(window)}) "
                f"| {share} ({a['held']}/{a['total']}) "
                f"| {state} ({a['state_held']}/{a['state_total']}) | {a['fabrications']} "
                f"| {a['fixed_called_open']} | {a['finished_pending']} "
                f"| {a['derived_faults']} | {a['tokens']} |"
            )
    own = [r for r in tuning + holdout if r.get("agent_summary")]
    if own:
        ours = sum(r["summary_tokens"] for r in own) // len(own)
        theirs = sum(r["agent_summary"]["tokens"] for r in own) // len(own)
        small = sum(r["by_window"][WINDOWS[1]]["summary_tokens"] for r in own) // len(own)
        out.append(
            f"\nOn the {len(own)} spans (both key sets) whose runtime wrote its own summary: "
            f"ctxtool's summary {ours} tokens at 16k and {small} at 8k on average, the "
            f"runtime's {theirs}."
        )
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("transcripts", type=Path, help="the shared transcripts directory")
    parser.add_argument("--check", action="store_true", help="fail when the page is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        (Path(workdir) / "keys").mkdir()
        budget = summary_sections.window_budget(WINDOWS[0])
        rows = summary_sections.measure(
            args.transcripts, Path(workdir) / "keys", budget, windows=WINDOWS[1:]
        )
        (Path(workdir) / "holdout").mkdir()
        held_out = summary_sections.measure(
            args.transcripts, Path(workdir) / "holdout", budget, keys=HOLDOUT, windows=WINDOWS[1:]
        )
        runs = retention_table.compact_twice(args.transcripts, Path(workdir))
        agreed = agreement_markdown(args.transcripts, Path(workdir) / "agreement")
    page = PAGE.read_text()
    fresh = page_with(summary_sections.markdown(rows), page)
    fresh = page_with(windows_markdown(rows, held_out), fresh, "windows")
    fresh = page_with(retention_table.gate_markdown(runs), fresh, "gate")
    fresh = page_with(agreed, fresh, "agreement")
    if args.check:
        if fresh != page:
            print(f"{PAGE.relative_to(ROOT)} is stale: run scripts/quality_table.py")
            return 1
        print(f"{PAGE.relative_to(ROOT)} matches the measurement")
        return 0
    PAGE.write_text(fresh)
    print(f"{PAGE.relative_to(ROOT)} rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
