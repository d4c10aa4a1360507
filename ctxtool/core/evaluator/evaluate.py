"""Evaluating a checkpoint: the probes of its span answered against the restored context, the
summary's fabrications, and what each section of the summary costs (pure).

The score counts only the probes the summary alone can answer (their key is not in the kept
messages): a probe the kept messages answer says nothing about the summary. A dump of every
path scores low because the probes ask for goals, requests, instructions and outcomes, not
only for paths; an invented goal is caught as fabrications; injected text the summary carries
(continuation notices, scratchpads, system reminders) is listed as boilerplate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..records import Message
from ..tokens import DEFAULT_ENCODING, count_text
from .answers import ContextText, Verdict, answer
from .boilerplate import boilerplate_in
from .fabrications import Fabrication, fabrications
from .probes import Probe, derive_probes

PREAMBLE = "(before the first heading)"
_HEADING = re.compile(r"^##\s+(.+?)\s*#*\s*$", re.M)


@dataclass(frozen=True)
class SectionCost:
    heading: str
    tokens: int


@dataclass
class Evaluation:
    """What :func:`evaluate` found for one summary."""

    verdicts: list[Verdict] = field(default_factory=list)
    fabrications: list[Fabrication] = field(default_factory=list)
    sections: list[SectionCost] = field(default_factory=list)
    boilerplate: list[str] = field(default_factory=list)  # injected text the summary carries

    @property
    def summary_only(self) -> list[Verdict]:
        """The verdicts on probes only the summary can answer."""
        return [v for v in self.verdicts if v.summary_only]

    @property
    def score(self) -> float | None:
        """Share of the summary-only probes the context holds, averaged over the probe kinds
        (None: no such probe). Per kind, so forty file paths do not outvote the goal."""
        shares = [held / total for held, total in self.by_kind().values()]
        return round(sum(shares) / len(shares), 3) if shares else None

    @property
    def missed(self) -> list[Verdict]:
        """The summary-only probes the context does not hold."""
        return [v for v in self.summary_only if not v.held]

    @property
    def summary_tokens(self) -> int:
        return sum(s.tokens for s in self.sections)

    def by_kind(self) -> dict[str, list[int]]:
        """Per probe kind: [held, summary-only probes]."""
        out: dict[str, list[int]] = {}
        for v in self.summary_only:
            counts = out.setdefault(v.probe.kind.value, [0, 0])
            counts[0] += v.held
            counts[1] += 1
        return out

    def as_dict(self) -> dict[str, Any]:
        """Everything, for ``--json``: the figures and every verdict."""
        return {**self.figures(), "verdicts": [v.as_dict() for v in self.verdicts]}

    def figures(self) -> dict[str, Any]:
        """The figures a checkpoint stores (``details["quality"]``): no verdict list."""
        return {
            "score": self.score,
            "probes": len(self.verdicts),
            "summary_only_probes": len(self.summary_only),
            "held": sum(v.held for v in self.summary_only),
            "by_kind": self.by_kind(),
            "missed": [v.probe.id for v in self.missed],
            "fabrications": [f.as_dict() for f in self.fabrications],
            "boilerplate": list(self.boilerplate),
            "summary_tokens": self.summary_tokens,
            "section_tokens": {s.heading: s.tokens for s in self.sections},
        }


def section_costs(summary: str, encoding: str = DEFAULT_ENCODING) -> list[SectionCost]:
    """Tokens of each ``## `` section of a summary (text before the first heading apart)."""
    return [
        SectionCost(heading, count_text(text, encoding)) for heading, text in _sections(summary)
    ]


def stored_section_costs(summary: str, stored: Any) -> list[SectionCost] | None:
    """The section costs a checkpoint stored for ``summary`` (``section_tokens``: heading to
    tokens, counted when it was written), in the summary's order; None when they cannot be
    its own: a heading missing or repeated (the mapping keeps one count per heading), or a
    count that is no number. Read instead of counting, so no vocabulary is loaded."""
    if not isinstance(stored, dict):
        return None
    headings = [heading for heading, _ in _sections(summary)]
    if len(set(headings)) != len(headings) or set(headings) != set(stored):
        return None
    counts = [stored[h] for h in headings]
    if not all(type(c) is int and c >= 0 for c in counts):
        return None
    return [SectionCost(h, c) for h, c in zip(headings, counts, strict=True)]


def _sections(summary: str) -> list[tuple[str, str]]:
    """Each ``## `` section of a summary as (heading, its text), the text before the first
    heading as :data:`PREAMBLE`; blank ones left out."""
    summary = summary or ""
    bounds = [(0, PREAMBLE)] + [(m.start(), m.group(1)) for m in _HEADING.finditer(summary)]
    out = []
    for n, (start, heading) in enumerate(bounds):
        end = bounds[n + 1][0] if n + 1 < len(bounds) else len(summary)
        text = summary[start:end]
        if text.strip():
            out.append((heading, text))
    return out


def evaluate(
    span: Sequence[Message],
    summary: str,
    kept: Sequence[Message] = (),
    *,
    probes: Sequence[Probe] | None = None,
    previous_summary: str | None = None,
    continued: bool = False,
    encoding: str = DEFAULT_ENCODING,
    known_paths: Sequence[str] = (),
    sections: Sequence[SectionCost] | None = None,
) -> Evaluation:
    """Evaluate a summary of ``span`` restored with ``kept``: by ``probes`` when given (hand
    keys), else by the probes derived from the span (``continued``: the span starts after an
    earlier checkpoint, see :func:`derive_probes`). ``known_paths``: files earlier spans read
    or changed (the checkpoints' lists), never fabrications. ``sections``: the summary's
    section costs when they are known (stored with its checkpoint), else counted in
    ``encoding``."""
    asked = list(probes) if probes is not None else derive_probes(span, continued=continued)
    context = ContextText(summary, kept)
    return Evaluation(
        verdicts=[answer(p, context) for p in asked],
        fabrications=fabrications(
            summary, span, previous_summary=previous_summary, kept=kept, known_paths=known_paths
        ),
        sections=list(sections) if sections is not None else section_costs(summary, encoding),
        boilerplate=boilerplate_in(summary),
    )
