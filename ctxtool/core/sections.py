"""Summaries as sections of items, whoever wrote them (pure).

ctxtool's summaries use ``## Heading`` sections; Pi's too (``## Goal``, ``## Next Steps``,
older ones ``## Original Request``); Claude Code's use numbered titles (``1. Primary Request and
Intent:``) after an ``<analysis>`` scratchpad; Codex's compacted summaries are free text. Reading
every one of them as an ordered list of (heading, items), with the scratchpad and the
runtimes' continuation boilerplate dropped, lets the extractive summarizer convert a previous
summary into ctxtool's sections and lets the gate (``core.evaluator.gate``) count what a new
summary kept of it.
A fenced code block is one item: its fence lines are never items of their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .span_facts import BOILERPLATE

_MARKDOWN = re.compile(r"^(?P<level>#{1,6})\s+(?P<t>.+?)\s*#*$")
_BOLD = re.compile(r"^\*\*(?P<t>[^*]{2,80}?):?\*\*:?$")
_NUMBERED = re.compile(r"^\d{1,2}\.\s+(?P<t>[A-Z][^:]{2,60}):$")
_TITLED = re.compile(r"^(?P<t>[A-Z][A-Za-z0-9 &/'()-]{2,60}):$")
_FENCE = re.compile(r"^\s*(```|~~~)")
PREFACE = "Summary"

# ctxtool's sections, in the order a continuing agent reads them.
GOAL = "Goal"
LATEST_REQUEST = "Latest request"
OPEN_TASKS = "Open tasks"
CURRENT_WORK = "Current work"
ERRORS = "Errors and fixes"
FILES_CHANGED = "Files changed and why"
CONSTRAINTS = "Constraints"
DECISIONS = "Decisions"
DONE = "Done"
FINDINGS = "Findings"
EARLIER_WORK = "Earlier work"
LOG = "Log of earlier turns"
EARLIER_REQUESTS = "Earlier requests"
NEXT_STEP = "Next step"
FILES_READ = "Files read"
TOOL_USAGE = "Tool usage"
SECTIONS = (
    GOAL,
    LATEST_REQUEST,
    OPEN_TASKS,
    CURRENT_WORK,
    ERRORS,
    FILES_CHANGED,
    CONSTRAINTS,
    DECISIONS,
    DONE,
    FINDINGS,
    EARLIER_WORK,
    EARLIER_REQUESTS,
    LOG,
    NEXT_STEP,
)

# Our own placeholders and a writer's notes on how the summary was made ("(946 messages
# summarized extractively; no LLM was used)", "(clipped to 900 tokens)"): never items of a
# summary (their numbers change with every checkpoint). The one pattern: the gate's carry-over uses it.
_NOT_ITEMS = re.compile(
    r"^[-*]?\s*([\w ]{1,30}:\s*)?\(\s*(none|not stated|none in this span|"
    r"\d[\d,]* (messages?|older items)\b[^)]*|clipped to \d+ tokens)\)\.?$|"
    r"^\(\d[\d,]* messages? summarized",
    re.I,
)

# The tags a writer wraps its summary and its scratchpad in (the runtimes' notices around them
# are ``span_facts.BOILERPLATE``).
_WRAPPER_TAGS = re.compile(r"</?(summary|analysis)>", re.I)
# A scratchpad the writer reasoned in before its summary (Claude Code's <analysis>, a
# <thinking> block, a plain "Analysis:" part before "Summary:").
_SCRATCHPAD = (
    re.compile(r"<(analysis|thinking)>.*?(</\1>|(?=<summary>))", re.S | re.I),
    re.compile(r"^Analysis:\s*$.*?^(?=Summary:\s*$)", re.S | re.M),
)


@dataclass
class Section:
    heading: str
    items: list[str] = field(default_factory=list)


def without_scratchpad(summary: str | None) -> str:
    """The summary without the scratchpad its writer reasoned in."""
    text = summary or ""
    for pattern in _SCRATCHPAD:
        text = pattern.sub("", text)
    return text


def without_scaffolding(summary: str | None) -> str:
    """The summary without the scratchpad its writer reasoned in and the runtime's boilerplate
    (continuation notices, the injected "Please continue …" instruction, wrapper tags)."""
    return _WRAPPER_TAGS.sub("", BOILERPLATE.sub("", without_scratchpad(summary)))


def heading_of(line: str) -> str | None:
    """The title when ``line`` (unindented) is a section heading in any known style."""
    found = _heading(line)
    return found[0] if found else None


def _heading(line: str) -> tuple[str, int] | None:
    """(title, level): markdown headings have their level, a bold line is a sub-heading (4),
    every other style is level 2."""
    if not line or line[0].isspace():
        return None
    line = line.rstrip()
    match = _MARKDOWN.match(line)
    if match:
        return match.group("t").strip(), len(match.group("level"))
    for pattern, level in ((_BOLD, 4), (_NUMBERED, 2), (_TITLED, 2)):
        match = pattern.match(line)
        if match:
            return match.group("t").strip(), level
    return None


def parse_sections(summary: str | None) -> list[Section]:
    """The summary's sections in order, scaffolding dropped; text before the first heading is a
    ``Summary`` section. Items are the non-empty lines of each section (bullets kept as
    written, nesting kept); a fenced code block is one item, fences included. A deeper markdown heading that
    names none of ctxtool's sections (Pi's ``### WP14: …`` under ``## Next Steps``) stays an
    item of its section."""
    sections: list[Section] = []
    current: Section | None = None
    level = base = fence_indent = 0
    block: list[str] | None = None
    for raw in without_scaffolding(summary).splitlines():
        line = raw.rstrip()
        if block is not None:
            # the block's lines relative to its opening fence (a fence indented under a bullet)
            block.append(line[fence_indent:] if line[:fence_indent].isspace() else line.strip())
            if _FENCE.match(line):
                current.items.append("\n".join(block))  # type: ignore[union-attr]
                block = None
            continue
        found = _heading(raw)
        if found is not None:
            title, depth = found
            nested = current is not None and depth > level and level >= 2
            if not (nested and canonical_heading(title) is None):
                current, level = Section(title), depth
                sections.append(current)
                continue
        if not line.strip():
            continue
        if current is None:
            current, level = Section(PREFACE), 0
            sections.append(current)
        if _FENCE.match(line):
            block, fence_indent = [line.strip()], len(line) - len(line.lstrip())
            continue
        indent = len(line) - len(line.lstrip())
        if not current.items:
            base = indent
        # nesting kept relative to the section's first item ("  - detail" under "- file")
        current.items.append(" " * max(0, indent - base) + line.strip())
    if block is not None and current is not None:
        current.items.append("\n".join(block))
    return [s for s in sections if s.items or s.heading]


def summary_items(summary: str | None) -> list[str]:
    """Every item of a summary, normalised: no headings, fence lines, blank lines, scaffolding,
    placeholders or bookkeeping notes (a code block counts line by line), and no tool usage
    tally (recounted by every summary rather than carried)."""
    out: list[str] = []
    for s in parse_sections(summary):
        if canonical_heading(s.heading) == TOOL_USAGE:
            continue
        for item in s.items:
            out += [line.strip() for line in item.splitlines() if is_item(line)]
    return out


def is_item(line: str) -> bool:
    text = line.strip()
    return (
        bool(text)
        and not _NOT_ITEMS.match(text)
        and not set(text) <= set("|-: ")
        and not _FENCE.match(text)
    )


def normalise_heading(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", title.lower()).strip()


# Headings other writers (and earlier ctxtool versions) use for ctxtool's sections.
SYNONYMS: dict[str, tuple[str, ...]] = {
    GOAL: (
        "goal",
        "goals",
        "primary request and intent",
        "primary request",
        "original request",
        "original goal",
        "objective",
        "task",
        "user goal",
        "user intent",
    ),
    LATEST_REQUEST: ("latest request", "current request", "most recent request"),
    OPEN_TASKS: (
        "open tasks",
        "pending tasks",
        "pending",
        "todo",
        "todos",
        "remaining tasks",
        "remaining work",
        "open items",
        "in progress",
        "tasks",
    ),
    CURRENT_WORK: (
        "current work",
        "current state",
        "current status",
        "current task",
        "where we left off",
        "in progress the turn continues after this summary",
    ),
    ERRORS: (
        "errors",
        "last errors",
        "errors and fixes",
        "errors encountered",
        "errors and solutions",
        "blocked",
        "blockers",
        "known issues",
    ),
    FILES_CHANGED: (
        "files changed and why",
        "files and code sections",
        "files created modified",
        "files modified",
        "files changed",
        "modified files",
        "key files",
    ),
    CONSTRAINTS: (
        "constraints",
        "constraints preferences",
        "constraints and preferences",
        "user preferences",
        "preferences",
        "requirements",
        "user instructions",
    ),
    DECISIONS: ("decisions", "key decisions", "key decisions made", "decisions made"),
    DONE: (
        "done",
        "completed",
        "completed work",
        "completed tasks",
        "completed work packages",
        "accomplished",
    ),
    FINDINGS: ("findings", "key findings"),
    EARLIER_WORK: ("earlier work",),
    LOG: ("log of earlier turns", "log"),
    EARLIER_REQUESTS: (
        "earlier requests",
        "requests",
        "latest requests",
        "all user messages",
        "user messages",
    ),
    NEXT_STEP: ("next step", "next steps", "optional next step", "immediate next step"),
    TOOL_USAGE: ("tool usage",),
    FILES_READ: ("files read", "files"),
}
_CANONICAL = {alias: name for name, aliases in SYNONYMS.items() for alias in aliases}


def canonical_heading(title: str) -> str | None:
    """ctxtool's name for a section another writer titled ``title`` (None: keep it as theirs);
    a parenthesised remark ("Next Steps (WP14-WP20)") does not change what a section is."""
    return _CANONICAL.get(normalise_heading(title)) or _CANONICAL.get(
        normalise_heading(re.sub(r"\([^)]*\)", "", title))
    )


_DONE_MARK = re.compile(r"^([-*]\s*)?\[x\]|✅|✓|\(done\)|\bcompleted?\b\s*$|^~~", re.I)


def is_done(item: str) -> bool:
    """An item its writer marked finished (``[x]``, ✅, "(done)", struck through)."""
    return bool(_DONE_MARK.search(item))
