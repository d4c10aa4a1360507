"""What a summary keeps: deterministic facts of a summarized span, and how many of them the new
summary still holds (pure; no database, no model).

Facts of a span: files modified and read (from tool calls), error signatures of failed tool
results, the user's requests and stated constraints, and the items of the previous summary
(goal, decisions, next steps, critical context: whatever its writer called them). A fact is
*held* when the summary contains it verbatim (paths must be) or holds every number, path
and identifier in it and at least 60% of its other significant words. ``retention`` is held / all facts; ``carry_over`` is the same over the
previous summary's items only: an iterative summary must not lose what the last one knew.
A dump of every fact would score 100%, so the figures are always reported next to the
summary's size.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .compaction.calls import calls_of
from .compaction.sections import summary_items
from .compaction.touched_files import files_touched
from .output import shorten
from .records import Message

HELD_WORD_SHARE = 0.6
DEFAULT_WARNING_THRESHOLD = 0.5

# -- classifying messages -----------------------------------------------------------------------

# Text a runtime injects as a user message: instructions files, environment blocks, command
# wrappers and their output, slash commands, continuation notices. Never the user's goal.
_INJECTED = re.compile(
    r"^\s*(<[a-z_-]+[\s>]|# AGENTS\.md instructions|# CLAUDE\.md|Caveat: |/[a-z][\w:-]*(\s|$)|"
    r"\[Request interrupted|This session is being continued from a previous conversation|"
    r"The conversation history before this point was compacted|"
    r"The conversation came back from another branch)",
    re.I,
)
_INJECTED_ROLES = {"developer", "bashExecution", "custom", "hookMessage", "branch_summary"}
_ERROR_LINE = re.compile(
    r"(\b\w*(Error|Exception)\b|Traceback|\bFAILED\b|\bfatal\b|\bpanic\b|"
    r"\berror(\[\w+\])?:|command not found|No such file)",
    re.I,
)
_EXIT = re.compile(r"(exit code:?|exited with code|\"exit_code\":)\s*(-?\d+)", re.I)
_CONSTRAINT = re.compile(
    r"\b(must|never|don'?t|do not|always|prefer|avoid|only|should ?n[o']t|"
    r"make sure|instead of)\b",
    re.I,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def is_real_request(m: Message) -> bool:
    """A user message the user typed: not a runtime injection (the record's own flags first,
    text patterns second)."""
    content = m.content or ""
    if m.role != "user" or not content.strip():
        return False
    details = m.details if isinstance(m.details, dict) else {}
    if details.get("is_meta") or details.get("source_role") in _INJECTED_ROLES:
        return False
    return not _INJECTED.match(content)


def failed_result_signature(m: Message) -> str | None:
    """The error a failed tool result reports (its last error line: errors come at the end),
    or None when the result did not fail. Failure from the transcript's flags (``is_error``, a
    non-zero exit code stored at import) or an exit code in the text; never from a stray
    word "error" in a successful output."""
    details = m.details if isinstance(m.details, dict) else {}
    text = m.content or ""
    failed = bool(details.get("is_error"))
    code = details.get("exit_code")
    if isinstance(code, int) and code != 0:
        failed = True
    if not failed and m.role == "tool":
        exit_match = _EXIT.search(text[-2000:]) or _EXIT.search(text[:500])
        failed = bool(exit_match and exit_match.group(2) != "0")
    if not failed:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if _ERROR_LINE.search(line)]
    chosen = errors[-1] if errors else (lines[-1] if lines else "(no output)")
    return clip(chosen, 200)


def constraints_in(text: str) -> list[str]:
    """Sentences of a user request that state a constraint or preference."""
    return [
        clip(s, 200) for s in _SENTENCE.split(text or "") if s.strip() and _CONSTRAINT.search(s)
    ]


def clip(text: str, limit: int) -> str:
    return shorten(" ".join(text.split()), limit)


# -- facts and whether a summary holds them ------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    files_modified: tuple[str, ...] = ()
    files_read: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    requests: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    previous_items: tuple[str, ...] = ()

    def by_kind(self) -> dict[str, tuple[str, ...]]:
        return {
            k: getattr(self, k)
            for k in (
                "files_modified",
                "files_read",
                "errors",
                "requests",
                "constraints",
                "previous_items",
            )
        }


def extract_facts(messages: Sequence[Message], previous_summary: str | None) -> Facts:
    """The deterministic facts of a summarized span (its messages and the previous summary)."""
    read, modified = files_touched(calls_of(messages))
    requests = [m.content or "" for m in messages if is_real_request(m)]  # never empty
    return Facts(
        files_modified=tuple(modified),
        files_read=tuple(read),
        errors=_distinct(s for m in messages if (s := failed_result_signature(m))),
        requests=_distinct(clip(r, 300) for r in requests),
        constraints=_distinct(c for r in requests for c in constraints_in(r)),
        previous_items=_distinct(summary_items(previous_summary)),
    )


def _distinct(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


_WORD = re.compile(r"[a-z0-9_][a-z0-9_./-]{2,}")
_MARKUP = re.compile(r"^([-*+]|\d+\.|\[[ x]\]|\|)+\s*|\*\*|`", re.I)
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "from",
        "into",
        "was",
        "were",
        "are",
        "has",
        "have",
        "had",
        "not",
        "but",
        "you",
        "your",
        "its",
        "their",
        "then",
        "than",
        "them",
        "they",
        "will",
        "would",
        "can",
        "could",
        "should",
        "all",
        "any",
        "use",
        "used",
    ]
)


def _significant(text: str) -> set[str]:
    return {w.strip("./-") for w in _WORD.findall(text.lower())} - _STOP - {""}


def _distinctive(words: set[str]) -> set[str]:
    """The words that tell one fact from its neighbours (numbers, paths, identifiers): a
    summary holds a fact only with all of them, whatever share of the rest it has."""
    return {w for w in words if any(c.isdigit() or c in "_./" for c in w)}


class SummaryText:
    """A summary prepared once for many ``holds`` checks."""

    def __init__(self, summary: str):
        self.lower = " ".join(summary.lower().split())
        self.words = _significant(summary)

    def holds(self, fact: str, exact: bool = False) -> bool:
        text = " ".join(_MARKUP.sub("", fact.strip()).lower().split())
        if not text or text in self.lower:
            return True
        if exact:
            return False
        words = _significant(text)
        if not words or not _distinctive(words) <= self.words:
            return False  # a path, number or identifier of the fact is missing
        return len(words & self.words) / len(words) >= HELD_WORD_SHARE


def measure(facts: Facts, summary: str, summary_tokens: int | None = None) -> dict[str, Any]:
    """Retention figures for ``details["quality"]``: per kind [held, total], overall retention
    and carry-over (None where there was nothing to keep), and the summary's size."""
    text = SummaryText(summary)
    by_kind = {}
    for kind, items in facts.by_kind().items():
        exact = kind.startswith("files_")
        by_kind[kind] = [sum(text.holds(i, exact) for i in items), len(items)]
    held = sum(h for h, _ in by_kind.values())
    total = sum(n for _, n in by_kind.values())
    prev_held, prev_total = by_kind["previous_items"]
    return {
        "retention": _ratio(held, total),
        "facts_held": held,
        "facts": total,
        "carry_over": _ratio(prev_held, prev_total),
        "by_kind": by_kind,
        "summary_tokens": summary_tokens,
    }


def carry_over(previous_summary: str | None, summary: str) -> float | None:
    """Share of the previous summary's items the new summary still holds (None: no previous)."""
    items = _distinct(summary_items(previous_summary))
    if not items:
        return None
    text = SummaryText(summary)
    return round(sum(text.holds(i) for i in items) / len(items), 3)


def missing_items(previous_summary: str | None, summary: str) -> list[str]:
    """The previous summary's items the new summary does not hold, in their order."""
    text = SummaryText(summary)
    return [i for i in _distinct(summary_items(previous_summary)) if not text.holds(i)]


def _ratio(held: int, total: int) -> float | None:
    return round(held / total, 3) if total else None


# -- reporting, for `compact`, `context show` and `validate` ------------------------------------


def describe(quality: dict[str, Any] | None) -> str | None:
    """One line: ``retention 87% (47/54 facts), carry-over 100%, summary 812 tokens``."""
    if not isinstance(quality, dict):
        return None
    parts = []
    if quality.get("retention") is not None:
        parts.append(
            f"retention {quality['retention']:.0%} "
            f"({quality.get('facts_held')}/{quality.get('facts')} facts)"
        )
    if quality.get("carry_over") is not None:
        parts.append(f"carry-over {quality['carry_over']:.0%}")
    if quality.get("summary_tokens") is not None:
        parts.append(f"summary {quality['summary_tokens']} tokens")
    return ", ".join(parts) or None


def quality_of(details: dict[str, Any] | None) -> dict[str, Any] | None:
    """The retention figures a checkpoint stored (None for checkpoints written before them or
    imported from an agent)."""
    q = details.get("quality") if isinstance(details, dict) else None
    return q if isinstance(q, dict) else None


def retention_warning(
    details: dict[str, Any] | None, threshold: float = DEFAULT_WARNING_THRESHOLD
) -> str | None:
    """A warning when a checkpoint kept less than ``threshold`` of its facts or of the previous
    summary's items; None when it kept enough or has no figures."""
    q = quality_of(details)
    if q is None:
        return None
    low = [
        f"{name} {q[key]:.0%}"
        for key, name in (("retention", "retention"), ("carry_over", "carry-over"))
        if isinstance(q.get(key), (int, float)) and q[key] < threshold
    ]
    if not low:
        return None
    return f"summary keeps little of what it replaced: {', '.join(low)} (threshold {threshold:.0%})"
