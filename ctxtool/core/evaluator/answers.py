"""Answering a probe by its key against a restored context (pure).

The context is what the agent reads after a restart: the summary and the kept messages. A probe
is held when every group of its key has an alternative in the context; a path alternative is
also found by its basename (a summary writes relative paths); a prohibition must be stated as
one (a negation in the same sentence before one of its phrases). The verdict says where each part was
found, so a probe the kept messages answer alone is told from one only the summary can answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..outcomes import failed_turn_error
from ..records import Message
from ..sections import (
    CURRENT_WORK,
    ERRORS,
    NEXT_STEP,
    OPEN_TASKS,
    canonical_heading,
    is_done,
    parse_sections,
)
from .probes import OPEN, OPEN_STATE, PENDING, PENDING_STATE, SAME_LINE, Probe

SUMMARY = "summary"
_NEGATION = re.compile(
    r"\b(no|not|never|don'?t|do not|does not|doesn'?t|must not|mustn'?t|should ?n[o']t|stop|"
    r"avoid|without|forbid\w*|prohibit\w*|nothing|neither|nor|refuse\w*|cannot|can'?t|won'?t)\b"
)
_SENTENCE_END = re.compile(r"[.!?\n]")
NEGATION_WINDOW = 80  # characters before a phrase searched for its negation


def normalise(text: str) -> str:
    """Lower case, one space for any whitespace, plain quotes: how keys and contexts compare."""
    return " ".join(lowered(text).split())


def lowered(text: str) -> str:
    """:func:`normalise` but for the whitespace: lower case, plain quotes, no backticks."""
    return (text or "").replace("\u2019", "'").replace("\u2018", "'").replace("`", "").lower()


def message_text(m: Message) -> str:
    """Everything of a message a model reads: its text and its tool calls, their arguments as
    the values they carry (a command's quotes as typed, not JSON-escaped), and the error a
    model turn ended with (:func:`failed_turn_error`)."""
    parts = [m.content or ""]
    if error := failed_turn_error(m):
        parts.append(error)
    for call in m.calls():
        raw = call["function"]["arguments"] or ""
        try:
            values = "\n".join(_strings(json.loads(raw)))
        except ValueError:
            values = raw
        parts.append(f"{call['function']['name']} {values}")
    return "\n".join(parts)


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [str(value)] if value is not None else []


def alternatives_of(alternative: str) -> tuple[str, ...]:
    """An alternative and, for a file's path, its basename."""
    alt = normalise(alternative)
    if "/" in alt.strip("/") and " " not in alt:
        base = alt.rstrip("/").rsplit("/", 1)[-1]
        if "." in base[1:] and len(base) >= 4:
            return (alt, base)
    return (alt,)


def _alternatives(group: tuple[str, ...]) -> list[str]:
    """Every alternative of a group as compared (:func:`alternatives_of`), none empty."""
    return [alt for alternative in group for alt in alternatives_of(alternative) if alt]


def _found(text: str, alternatives: list[str], negated: bool) -> bool:
    """Whether the text holds one of a group's ``alternatives`` (:func:`_alternatives`),
    stated as a prohibition when ``negated``."""
    for alt in alternatives:
        if not negated or _NEGATION.search(alt):
            if alt in text:
                return True
            continue
        start = text.find(alt)
        while start >= 0:
            if _negated_at(text, start):
                return True
            start = text.find(alt, start + 1)
    return False


def _negated_at(text: str, start: int) -> bool:
    """A negation before ``start`` in the same sentence (within a window)."""
    before = text[max(0, start - NEGATION_WINDOW) : start]
    ends = list(_SENTENCE_END.finditer(before))
    if ends:
        before = before[ends[-1].end() :]
    return bool(_NEGATION.search(before))


# A ``none_of`` phrase may state the state it contradicts: ``open: X`` is contradicted by a
# summary line that names X and calls it open (an error fixed since), ``pending: X`` by X listed
# among the open tasks or as the next step (a task finished since). Plain phrases are
# contradicted anywhere in the summary.
_CALLED_OPEN = re.compile(
    r"still open|unresolved|not (yet )?fixed|remains? open|open error|still fail"
)
_PENDING_MARK = re.compile(r"\[ \]|\[in progress\]|\bpending\b|\bin progress\b")
_PENDING_SECTIONS = (OPEN_TASKS, NEXT_STEP, CURRENT_WORK)
# A line that says an error is open, in so many words (``_CALLED_OPEN`` first: "not fixed"),
# and one that says it was fixed; an errors section's line that says neither lists it as open.
_SAID_OPEN = re.compile(r"\bopen\b|\bfailing\b|\bunfixed\b|\bblock(ed|er|ing)\b|\bpersists?\b")
_SAID_FIXED = re.compile(r"\bfix(ed|es)?\b|\bresolv|\bsolved\b|\bsucceed|\bnow pass")


def _stated_lines(summary: str) -> tuple[list[str], list[str], list[str]]:
    """(every normalised line of a summary, the lines it lists as pending work: the items of
    its open tasks, next step and current work sections, and lines marked pending elsewhere
    but in its errors, none marked done; and the lines that call an error open)."""
    lines: list[str] = []
    pending: list[str] = []
    called_open: list[str] = []
    for section in parse_sections(summary):
        heading = canonical_heading(section.heading)
        for item in section.items:
            for line in item.splitlines():
                text = normalise(line)
                lines.append(text)
                if not is_done(text) and (
                    heading in _PENDING_SECTIONS
                    or (heading != ERRORS and _PENDING_MARK.search(text))
                ):
                    pending.append(text)
                if _CALLED_OPEN.search(text) or (
                    not _SAID_FIXED.search(text) and (heading == ERRORS or _SAID_OPEN.search(text))
                ):
                    called_open.append(text)
    return lines, pending, called_open


class ContextText:
    """A restored context prepared once for many probes: the summary and each kept message,
    normalised."""

    def __init__(self, summary: str | None, kept: Sequence[Message] = ()):
        self.summary = normalise(summary or "")
        self.kept = [(m.id, normalise(message_text(m))) for m in kept]
        self.lines, self.pending, self.called_open = _stated_lines(summary or "")

    def in_state(self, group: tuple[str, ...], state: str | None) -> bool:
        """The summary gives an alternative of ``group`` the state an ``open`` or ``pending``
        key asks (named on a line that calls the error open, or lists the task as to do);
        other states ask nothing more of it."""
        lines = {OPEN: self.called_open, PENDING: self.pending}.get(state or "")
        if lines is None:
            return True
        return any(alt in line for alt in _alternatives(group) for line in lines)

    def states(self, phrase: str) -> bool:
        """The summary states a ``none_of`` phrase (an ``open:``/``pending:`` one in that
        state, see ``OPEN_STATE``)."""
        text = normalise(phrase)
        if text.startswith(OPEN_STATE):
            # every part of it (``SAME_LINE``) on one line that calls it open
            parts = [p.strip() for p in text.removeprefix(OPEN_STATE).split(SAME_LINE.strip())]
            return all(parts) and any(
                _CALLED_OPEN.search(line) and all(p in line for p in parts) for line in self.lines
            )
        if text.startswith(PENDING_STATE):
            alt = text.removeprefix(PENDING_STATE).strip()
            return bool(alt) and any(alt in line for line in self.pending)
        return bool(text) and text in self.summary

    def places(self, group: tuple[str, ...], negated: bool) -> list[str]:
        """Where a group is found: ``summary`` and/or ``message <id>`` (the first kept one)."""
        alternatives = _alternatives(group)  # once, not once a kept message
        out = [SUMMARY] if _found(self.summary, alternatives, negated) else []
        for message_id, text in self.kept:
            if _found(text, alternatives, negated):
                out.append(f"message {message_id}")
                break
        return out


@dataclass(frozen=True)
class Verdict:
    """How a context answers one probe."""

    probe: Probe
    held: bool  # every group found in the context, no ``none_of`` phrase in the summary
    where: tuple[str, ...]  # where the groups were found: summary first, else a kept message
    missing: tuple[tuple[str, ...], ...]  # the groups found nowhere
    contradicted: tuple[str, ...]  # ``none_of`` phrases the summary states
    in_kept: bool  # the kept messages alone hold the key: the summary is not needed for it
    in_summary: bool  # the summary alone holds the key

    @property
    def summary_only(self) -> bool:
        """A probe only the summary can answer (its key is not in the kept messages)."""
        return not self.in_kept

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.probe.id,
            "kind": self.probe.kind.value,
            "question": self.probe.question,
            "answer": self.probe.answer,
            "held": self.held,
            "where": list(self.where),
            "missing": [list(g) for g in self.missing],
            "contradicted": list(self.contradicted),
            "summary_only": self.summary_only,
        }


def answer(probe: Probe, context: ContextText) -> Verdict:
    """The verdict of the context on one probe, by its key."""
    found = [context.places(group, probe.negated) for group in probe.all_of]
    if probe.negated and any(found):
        # The prohibition is stated when the forbidden part is negated ("invalid themes must
        # NEVER explode"); its subject need not be ("never" before "invalid themes").
        found = [places or context.places(g, False) for g, places in zip(probe.all_of, found)]
    if SUMMARY in found[0] and not context.in_state(probe.all_of[0], probe.state):
        # The summary names the subject but not in the state the key gives it at the cut.
        found[0] = [p for p in found[0] if p != SUMMARY]
    missing = tuple(g for g, places in zip(probe.all_of, found, strict=True) if not places)
    in_summary = all(SUMMARY in places for places in found)
    in_kept = all(any(p != SUMMARY for p in places) for places in found)
    phrases = probe.none_of + probe.state_phrases()
    contradicted = tuple(n for n in phrases if context.states(n))
    where: list[str] = []
    if in_summary:
        where = [SUMMARY]
    else:
        for places in found:
            for place in places[:1] if SUMMARY in places else places[-1:]:
                if place not in where:
                    where.append(place)
    return Verdict(
        probe,
        held=not missing and not contradicted,
        where=tuple(where),
        missing=missing,
        contradicted=contradicted,
        in_kept=in_kept,
        in_summary=in_summary,
    )
