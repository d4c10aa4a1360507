"""The quality gate's rules (pure): does a summary meet the floor, and how much of the previous
summary does the new one carry over.

Carry-over compares normalised items: fence lines, blank lines, headings, continuation
boilerplate and a summary's note about itself are no items (a carried fence, "Please continue
the conversation…" or "(946 messages summarized…)" is not knowledge), list markers and emphasis
are dropped, repeats counted once. A pending item the span finished (``overtaken_items``) is
not held against the new summary: it may be retired rather than carried.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..checkpoint_quality import quality_of
from ..records import Message
from ..sections import (
    CURRENT_WORK,
    EARLIER_WORK,
    NEXT_STEP,
    OPEN_TASKS,
    canonical_heading,
    is_item,
    parse_sections,
    without_scratchpad,
)
from ..span_facts import BOILERPLATE, signals_of, successful_actions, work_calls
from ..touched_files import files_touched
from ..work_state import done_by_action, done_by_file, retired
from .answers import Verdict, normalise
from .evaluate import Evaluation

DEFAULT_MIN_QUALITY = 0.6
ITEM_WORD_SHARE = 0.6  # of an item's significant words the new summary must hold
MISSING_ITEM_CHARS = 300  # of a missed probe's answer, in a revision request


class FloorCheck(NamedTuple):
    ok: bool
    missed: list[Verdict]

    def missing_items(self, limit: int = MISSING_ITEM_CHARS) -> tuple[str, ...]:
        """What a revision must put in: each missed probe's kind and reference answer (what
        the history says), for the summarizer's list of missing items."""
        out = []
        for verdict in self.missed:
            answer = " ".join(verdict.probe.answer.split())
            answer = answer if len(answer) <= limit else answer[: limit - 1] + "…"
            out.append(f"{verdict.probe.kind.value.replace('_', ' ')}: {answer}")
        return tuple(out)


def meets_floor(evaluation: Evaluation, min_quality: float = DEFAULT_MIN_QUALITY) -> FloorCheck:
    """Whether a summary may be written: its score reaches ``min_quality`` (a span with no
    summary-only probe has nothing to miss) and it states no fabrication. ``missed`` names
    the probes to list in a revision request."""
    score = evaluation.score
    ok = (score is None or score >= min_quality) and not evaluation.fabrications
    return FloorCheck(ok, evaluation.missed)


# -- carry-over -----------------------------------------------------------------------------------

_HEADING_LINE = re.compile(r"^\s*(#{1,6}\s|[A-Z][\w /&-]{0,40}:\s*$|\*\*[^*]+\*\*:?\s*$)")
_MARKER = re.compile(r"^\s*(?:[-*+>]|\d+[.)]|\[[ xX]\])+\s*")
_WORD = re.compile(r"[a-z0-9_][a-z0-9_./-]{2,}")


def normalised_items(summary: str | None) -> list[str]:
    """The knowledge items of a summary, one per line, normalised and distinct."""
    text = without_scratchpad(summary)
    items = []
    for line in text.splitlines():
        bare = _MARKER.sub("", line).strip()
        # a fence, a placeholder or a note (``sections.is_item``) is no item, nor a heading
        if not is_item(bare) or not is_item(line) or _HEADING_LINE.match(bare):
            continue
        line = BOILERPLATE.sub("", line)
        item = normalise(_MARKER.sub("", line).replace("**", ""))
        item = re.sub(r"^\[[ x]\]\s*", "", item)
        if len(_WORD.findall(item)) >= 1 and item not in ("(none)", "none"):
            items.append(item)
    return list(dict.fromkeys(items))


@dataclass(frozen=True)
class CarryOver:
    share: float | None  # None: the previous summary had no items
    items: int
    missing: tuple[str, ...]


def carry_over(
    previous_summary: str | None, summary: str, overtaken: frozenset[str] = frozenset()
) -> CarryOver:
    """How many of the previous summary's items the new summary still holds. An item is held
    verbatim, or with every path, number and identifier of it and most of its other words.
    ``overtaken`` (normalised items, :func:`overtaken_items`) are left out of the count: the
    span finished them, so a summary that retires them drops nothing."""
    items = [i for i in normalised_items(previous_summary) if i not in overtaken]
    text = normalise(summary.replace("**", ""))  # emphasis is no content: items drop it too
    words = _words(text)
    missing = tuple(i for i in items if not _held(i, text, words))
    share = round(1 - len(missing) / len(items), 3) if items else None
    return CarryOver(share, len(items), missing)


def _words(text: str) -> set[str]:
    """The words of a text, without the sentence's punctuation after them ("search." is the
    word "search", not a distinctive one)."""
    return {w.rstrip("./-") for w in _WORD.findall(text)} - {""}


def _held(item: str, text: str, words: set[str]) -> bool:
    if item in text:
        return True
    mine = _words(item)
    if not mine:
        return False
    distinctive = {w for w in mine if any(c.isdigit() or c in "_./" for c in w)}
    if not distinctive <= words:
        return False
    return len(mine & words) / len(mine) >= ITEM_WORD_SHARE


# What a previous summary left pending (its own headings or a runtime's, read as ctxtool's).
_PENDING = (OPEN_TASKS, CURRENT_WORK, NEXT_STEP, EARLIER_WORK)


@dataclass(frozen=True)
class SpanProgress:
    """What a span got done, as plain strings: the tasks it completed, what its successful
    runs did (command and purpose), the files it changed."""

    completed: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.completed or self.actions or self.changed)

    @classmethod
    def of(cls, messages: Sequence[Message]) -> SpanProgress:
        signals = signals_of(messages)
        calls = [c for m in messages if m.role == "assistant" for c in work_calls(m)]
        changed = [c.path for c in signals.files_changed] + files_touched(calls)[1]
        return cls(
            tuple(t.content for t in signals.tasks if t.status == "completed" and t.content),
            tuple(successful_actions(messages)),
            tuple(dict.fromkeys(changed)),
        )

    def finished(self, item: str) -> bool:
        """A pending item that names the same work as a task the span completed, that a
        successful run of the span carried out, or that makes a file the span changed."""
        return (
            any(retired([item], self.completed))
            or done_by_action(item, self.actions)
            or done_by_file(item, self.changed)
        )


def overtaken_items(
    previous_summary: str | None, span: Sequence[Message] | SpanProgress
) -> frozenset[str]:
    """The previous summary's pending items (open tasks, current work, next steps) that the
    span finished, normalised as :func:`carry_over` counts them. ``span``: its messages, or
    what they got done (a summarizer that read them already)."""
    if not previous_summary or not span:
        return frozenset()
    pending = [
        line
        for section in parse_sections(previous_summary)
        if canonical_heading(section.heading) in _PENDING
        for line in section.items
        if is_item(line)
    ]
    if not pending:
        return frozenset()
    progress = span if isinstance(span, SpanProgress) else SpanProgress.of(span)
    return frozenset(
        item for line in pending if progress.finished(line) for item in normalised_items(line)
    )


# The figures a checkpoint stored (details["quality"]), read back. Checkpoints written before
# the evaluator existed carry the older retention figures; they are still described, and judged
# by their own numbers.


def quality_warning(
    details: dict[str, Any] | None, min_quality: float = DEFAULT_MIN_QUALITY
) -> str | None:
    """Why a stored checkpoint's figures fall short (under ``min_quality``, fabrications, or
    the older retention figures under it); None when they do not, or there are none."""
    q = quality_of(details)
    if q is None:
        return None
    low = [
        f"{name} {q[key]:.0%}"
        for key, name in (("score", "probes"), ("retention", "retention"))
        if isinstance(q.get(key), (int, float)) and q[key] < min_quality
    ]
    fabricated = [f.get("text") for f in q.get("fabrications") or () if isinstance(f, dict)]
    if fabricated:
        low.append(f"fabrications {', '.join(map(repr, fabricated[:3]))}")
    if not low:
        return None
    missed = q.get("missed") or []
    named = f"; missed: {', '.join(map(str, missed[:5]))}" if missed else ""
    return (
        f"summary answers too little of what it replaced: {', '.join(low)} "
        f"(floor {min_quality:.0%}){named}"
    )
