#!/usr/bin/env python3
"""Regenerate the table of docs/quality.md: the extractive summarizer on the hand-written
answer keys (tests/answer_keys; never on probes the code derives), its fabrications and what
each summary section costs, measured by scripts/summary_sections.py.

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

import summary_sections  # noqa: E402

PAGE = ROOT / "docs" / "quality.md"
BEGIN = "<!-- quality_table.py: begin -->"
END = "<!-- quality_table.py: end -->"


def page_with(table: str, page: str) -> str:
    """``page`` with the text between its markers replaced by ``table``."""
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("transcripts", type=Path, help="the shared transcripts directory")
    parser.add_argument("--check", action="store_true", help="fail when the page is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        rows = summary_sections.measure(args.transcripts, Path(workdir))
    page = PAGE.read_text()
    fresh = page_with(summary_sections.markdown(rows), page)
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
