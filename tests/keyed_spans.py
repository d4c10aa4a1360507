"""What the tests of the summary rules ask of a keyed real span (tests/answer_keys): the
extractive summary a compaction at its cut writes, and one section's items."""

from __future__ import annotations

import sys
from pathlib import Path

from ctxtool.core.sections import parse_sections
from ctxtool.evaluation.keys import KeyedSpan, keyed_span, load_key

from .conftest import TRANSCRIPTS

KEYS = Path(__file__).parent / "answer_keys"


def keyed_span_named(name: str, workdir: Path) -> KeyedSpan:
    """The tuning key ``name``'s span of its shared transcript, imported under ``workdir``."""
    return keyed_span(load_key(KEYS / f"{name}.json"), TRANSCRIPTS, workdir)


def extractive_summary(span: KeyedSpan, budget: int = 3500) -> str:
    """The summary scripts/summary_sections.py (and quality_table.py) measures, at ``budget``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import summary_sections

    return summary_sections.summary_of(span, [], budget)


def section(text: str, heading: str) -> list[str]:
    """The items of the summary's sections under ``heading``."""
    return [i for s in parse_sections(text) if s.heading == heading for i in s.items]
