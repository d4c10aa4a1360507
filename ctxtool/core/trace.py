"""Where a fact stands in a session's restored context, and which checkpoint dropped it (no I/O).

A fact is what a search matched: the messages it appeared in, and each checkpoint's summary
that does or does not still say it. Every checkpoint written after the fact appeared either
holds it (its summary says it, or its cut kept one of those messages verbatim) or drops it. The
restored context today is the latest checkpoint's, so the fact is there verbatim, held by the
latest summary, or lost; when lost, the first checkpoint of the run that ends at the latest one
without holding it is the answer to "why did the agent forget it".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from .inspection import ContextPoint
from .records import Compaction, Message


class Standing(StrEnum):
    """Where a fact stands in the session's restored context today."""

    KEPT = "kept"  # a message that says it is kept verbatim after the latest cut
    SUMMARIZED = "summarized"  # summarized, and the latest summary still says it
    LOST = "lost"  # neither: the restored context no longer says it


@dataclass(frozen=True)
class TextMatch:
    """The one test of "does this text say it", the same one the database runs: a substring
    or a regular expression, both case-insensitive (MySQL's ``_ci`` collations compare so)."""

    text: str
    regex: bool = False

    def __post_init__(self) -> None:
        if not self.text:
            raise ValueError("nothing to search for")
        if self.regex:
            re.compile(self.text)  # re.error names what is wrong in the pattern

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.text if self.regex else re.escape(self.text), re.IGNORECASE)

    def found_in(self, text: str | None) -> re.Match[str] | None:
        return self.pattern.search(text) if text else None


@dataclass(frozen=True)
class CheckpointStep:
    """One checkpoint written after the fact appeared, and whether it still holds it."""

    checkpoint_id: int
    first_kept_message_id: int
    in_summary: bool
    summarized_ids: tuple[int, ...]  # messages saying it that this checkpoint's cut put behind it
    kept_ids: tuple[int, ...]  # messages saying it that its cut kept verbatim

    @property
    def holds(self) -> bool:
        return self.in_summary or bool(self.kept_ids)

    def describe(self) -> str:
        parts = []
        if self.kept_ids:
            parts.append("keeps message " + ", ".join(map(str, self.kept_ids)) + " verbatim")
        parts.append("its summary says it" if self.in_summary else "its summary does not say it")
        verdict = "holds it" if self.holds else "DROPPED it"
        return f"checkpoint {self.checkpoint_id} (cut at {self.first_kept_message_id}): " + (
            f"{verdict}: {'; '.join(parts)}"
        )


@dataclass(frozen=True)
class FactTrace:
    """A fact through a session's checkpoints: where it appeared, then every checkpoint since."""

    message_ids: tuple[int, ...]
    summary_ids: tuple[int, ...]  # checkpoints whose summary says it
    steps: tuple[CheckpointStep, ...]

    @property
    def standing(self) -> Standing:
        if not self.steps:  # no checkpoint since it appeared: every message of it is there
            return Standing.KEPT
        latest = self.steps[-1]
        if latest.kept_ids:
            return Standing.KEPT
        return Standing.SUMMARIZED if latest.in_summary else Standing.LOST

    @property
    def summarized_by(self) -> int | None:
        """The first checkpoint that put a message saying it behind its cut."""
        return next((s.checkpoint_id for s in self.steps if s.summarized_ids), None)

    @property
    def dropped_by(self) -> CheckpointStep | None:
        """When lost: the checkpoint that dropped it (the first of those since that hold it no
        more); None while the restored context still says it."""
        if self.standing is not Standing.LOST:
            return None
        dropped = self.steps[-1]
        for step in reversed(self.steps):
            if step.holds:
                break
            dropped = step
        return dropped

    def describe(self) -> str:
        """One line: where the fact stands today."""
        if self.standing is Standing.KEPT:
            return "kept verbatim in the restored context"
        if self.standing is Standing.SUMMARIZED:
            by = self.summarized_by
            where = f"summarized by checkpoint {by}" if by is not None else "in a summary"
            return f"{where}, still held by the latest summary"
        dropped = self.dropped_by
        assert dropped is not None
        return f"summarized and lost at checkpoint {dropped.checkpoint_id}"

    def as_dict(self) -> dict[str, object]:
        dropped = self.dropped_by
        return {
            "standing": self.standing.value,
            "summarized_by": self.summarized_by,
            "lost_at": dropped.checkpoint_id if dropped else None,
            "message_ids": list(self.message_ids),
            "summary_ids": list(self.summary_ids),
            "checkpoints": [
                {
                    "checkpoint_id": s.checkpoint_id,
                    "first_kept_message_id": s.first_kept_message_id,
                    "holds": s.holds,
                    "in_summary": s.in_summary,
                    "kept_ids": list(s.kept_ids),
                    "summarized_ids": list(s.summarized_ids),
                }
                for s in self.steps
            ],
        }


def stored_when_written(message: Message, checkpoint: Compaction) -> bool:
    """Whether ``message`` was in the store when ``checkpoint`` was appended (summarized by it
    or an earlier one, or kept by it), as ``context show --at`` decides what a context held."""
    return ContextPoint(None, checkpoint).holds(message)


def trace_fact(
    messages: Sequence[Message],
    compactions: Sequence[Compaction],
    says_it: Callable[[str | None], object],
) -> FactTrace:
    """The trace of a fact that ``messages`` (of one session) say, through its ``compactions``
    in id order; ``says_it(summary)`` tells whether a summary says it too.

    The steps start at the first checkpoint written after the earliest of them appeared (or
    at the first summary that says it, for a fact only a summary holds); the latest one always
    holds the messages after its cut, however recent."""
    in_summary = [bool(says_it(cp.summary)) for cp in compactions]
    steps = []
    started = False
    last = len(compactions) - 1
    for i, (cp, said) in enumerate(zip(compactions, in_summary)):
        # The latest context grows: every message from its cut on is in it, written since too.
        seen = [m for m in messages if i == last or stored_when_written(m, cp)]
        started = started or bool(seen) or said
        if not started:
            continue
        steps.append(
            CheckpointStep(
                checkpoint_id=cp.id,
                first_kept_message_id=cp.first_kept_message_id,
                in_summary=said,
                summarized_ids=tuple(m.id for m in seen if m.id < cp.first_kept_message_id),
                kept_ids=tuple(m.id for m in seen if m.id >= cp.first_kept_message_id),
            )
        )
    return FactTrace(
        message_ids=tuple(m.id for m in messages),
        summary_ids=tuple(cp.id for cp, said in zip(compactions, in_summary) if said),
        steps=tuple(steps),
    )
