"""Summaries as sections of items, whoever wrote them (pure).

ctxtool's summaries use ``## Heading`` sections; Pi's too (``## Goal``, ``## Next Steps``);
Claude Code's use numbered titles (``1. Primary Request and Intent:``); Codex's compacted
summaries are free text. Reading every one of them as an ordered list of (heading, items) lets
the extractive summarizer carry a previous summary forward and lets ``ctxtool.quality`` count
what a new summary kept of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_MARKDOWN = re.compile(r"^#{1,6}\s+(?P<t>.+?)\s*#*$")
_BOLD = re.compile(r"^\*\*(?P<t>[^*]{2,80}?):?\*\*:?$")
_NUMBERED = re.compile(r"^\d{1,2}\.\s+(?P<t>[A-Z][^:]{2,60}):$")
_TITLED = re.compile(r"^(?P<t>[A-Z][A-Za-z0-9 &/'()-]{2,60}):$")
PREFACE = "Summary"

# Our own placeholder and bookkeeping lines: never counted as items of a summary.
_NOT_ITEMS = re.compile(
    r"^[-*]?\s*([\w ]{1,30}:\s*)?\((none|not stated|none in this span|\d+ "
    r"(messages|older items)[^)]*)\)\.?$|^\(\d+ messages summarized|"
    r"^\(clipped to \d+ tokens\)$",
    re.I,
)


@dataclass
class Section:
    heading: str
    items: list[str] = field(default_factory=list)


def heading_of(line: str) -> str | None:
    """The title when ``line`` (unindented) is a section heading in any known style."""
    if not line or line[0].isspace():
        return None
    for pattern in (_MARKDOWN, _BOLD, _NUMBERED, _TITLED):
        match = pattern.match(line.rstrip())
        if match:
            return match.group("t").strip()
    return None


def parse_sections(summary: str | None) -> list[Section]:
    """The summary's sections in order; text before the first heading is a ``Summary`` section.
    Items are the non-empty lines of each section (bullets kept as written)."""
    sections: list[Section] = []
    current: Section | None = None
    for raw in (summary or "").splitlines():
        title = heading_of(raw)
        if title is not None:
            current = Section(title)
            sections.append(current)
            continue
        line = raw.rstrip()
        if not line.strip():
            continue
        if current is None:
            current = Section(PREFACE)
            sections.append(current)
        current.items.append(line.strip())
    return [s for s in sections if s.items or s.heading]


def summary_items(summary: str | None) -> list[str]:
    """Every item of a summary (headings, placeholders and bookkeeping notes left out; so is
    the tool usage tally, recounted by every summary rather than carried)."""
    return [
        item
        for s in parse_sections(summary)
        if canonical_heading(s.heading) != "Tool usage"
        for item in s.items
        if is_item(item)
    ]


def is_item(line: str) -> bool:
    text = line.strip()
    return bool(text) and not _NOT_ITEMS.match(text) and not set(text) <= set("|-: ")


def normalise_heading(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", title.lower()).strip()


# Headings other writers use for the sections ctxtool's extractive summary keeps itself.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "Goal": ("goal", "goals", "primary request and intent", "objective", "task", "user goal"),
    "Constraints & Preferences": (
        "constraints preferences",
        "constraints",
        "user preferences",
        "preferences",
        "requirements",
        "constraints and preferences",
    ),
    "Requests": (
        "requests",
        "latest requests",
        "all user messages",
        "user messages",
        "in progress the turn continues after this summary",
    ),
    "Errors": ("errors", "last errors", "errors and fixes", "errors encountered"),
    "Tool usage": ("tool usage",),
    "Files": ("files",),
}
_CANONICAL = {alias: name for name, aliases in SYNONYMS.items() for alias in aliases}


def canonical_heading(title: str) -> str | None:
    """ctxtool's name for a section another writer titled ``title`` (None: keep it as theirs)."""
    return _CANONICAL.get(normalise_heading(title))
