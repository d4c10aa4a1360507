#!/usr/bin/env python3
"""Machine instructions per message of the import's parsing thread, stage by stage, no database.

Timings on a shared 2-core machine drift by 30% within minutes; an instruction count does not
(valgrind's cachegrind repeats to about 0.3%). This runs the work the import's parsing thread
does for a Claude Code transcript (read and decode each line, parse, reconcile, build rows,
pack them for prepared INSERTs) under cachegrind, for a small and a large file, and prints the
difference per message: start-up and imports cancel out. Each stage includes the ones before.

    apt-get install valgrind   # once
    .venv/bin/python scripts/bench_parse_instructions.py --messages 20000
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from datetime import datetime

STAGES = ("read", "decode", "parse", "reconcile", "rows", "pack")


def run_stage(path: str, stage: str) -> None:
    """The parsing thread's work on ``path`` up to ``stage``."""
    import orjson

    from ctxtool.core.import_rules import NewMessage, Reconciler, StoredSession
    from ctxtool.db.prepared import pack_rows
    from ctxtool.store.import_writes import MessageWriter
    from ctxtool.transcripts.discover import CountingStream
    from ctxtool.transcripts.lines import read_transcript

    with open(path, "rb") as f:
        if stage in ("read", "decode"):
            for raw in CountingStream(f):
                if stage == "decode":
                    orjson.loads(raw)
            return
        records = read_transcript(path, CountingStream(f), None).records
        if stage == "parse":
            for _ in records:
                pass
            return
        reconciler = Reconciler(path, StoredSession())
        writer = MessageWriter.__new__(MessageWriter)  # its row() only: no connection
        writer.session_id, writer.path = 1, path
        writer.max_row_bytes = writer._fits_any_chars = 16 << 20
        writer.last_time = datetime(2026, 1, 1)
        writer.last_time_text = writer.last_time.isoformat(" ", "microseconds")
        writer._bytes, batch = 0, []
        for rec in records:
            for action in reconciler.step(rec):
                if stage != "reconcile" and type(action) is NewMessage:
                    batch.append(writer.row(action.message))
            if len(batch) >= 1024:
                if stage == "pack":
                    pack_rows(batch, len(batch[0]), 1_000_000)
                batch = []


def instructions(path: str, stage: str) -> int:
    out = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--stage",
            stage,
            "--file",
            path,
        ],
        capture_output=True,
        text=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if out.returncode or not found:
        raise SystemExit(f"valgrind failed: {out.stderr.strip()[-500:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:  # the measured child
        run_stage(args.file, args.stage)
        return

    sys.path.insert(0, os.path.dirname(__file__))
    from bench_import import write_transcript

    with tempfile.TemporaryDirectory() as tmp:
        small, large = os.path.join(tmp, "small.jsonl"), os.path.join(tmp, "large.jsonl")
        write_transcript(small, 999)
        write_transcript(large, 999 + args.messages // 3 * 3)
        n = args.messages // 3 * 3  # whole turns of three messages
        print(
            f"instructions a message, {n} Claude Code messages (cachegrind; each stage "
            "includes the ones before)"
        )
        previous = 0
        for stage in STAGES:
            per = (instructions(large, stage) - instructions(small, stage)) / n
            print(f"  {stage:10s} {per:9,.0f}   (+{per - previous:,.0f})")
            previous = per


if __name__ == "__main__":
    main()
