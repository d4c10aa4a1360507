"""The ``extractive`` summarizer: deterministic, no network, no model.

It writes ctxtool's sections (goal, constraints, requests, files, tool usage, errors, the open
request of a split turn) from the span, and carries the previous summary forward whoever wrote
it: its sections are merged with the new ones (ctxtool's under their names, anyone else's under
their own headings), deduplicated, and trimmed oldest-first to the budget with a note saying
how much was trimmed. The goal and the modified files are never trimmed.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ...quality import carry_over, clip, constraints_in, failed_result_signature, is_real_request
from ...tokens import count_text, get_encoding, token_lengths
from ..calls import call_name, calls_of
from ..sections import canonical_heading, is_item, parse_sections
from .base import Summary, SummaryRequest

MAX_READ_FILES = 40
MAX_MODIFIED_FILES = 120
MAX_NEW_ERRORS = 5
MAX_TOOLS = 12
_TOOL_COUNT = re.compile(r"([^\s,]+) x(\d+)")
OUR_SECTIONS = ("Goal", "Constraints & Preferences", "Requests", "Errors")
READ = "Read"  # read paths: the first items trimmed (the checkpoint's details keep them all)


@dataclass
class _Item:
    section: str
    text: str
    age: int  # lower is older: trimmed first
    protected: bool = False
    previous: bool = False  # carried from the previous summary (the carry-over floor guards it)


class ExtractiveSummarizer:
    """A deterministic summary built from the messages themselves and the previous summary."""

    name = "extractive"
    model = None
    input_tokens = None
    revises = False  # deterministic: it trims with the carry-over floor in mind instead

    def __init__(self, request_chars: int = 400):
        self.request_chars = request_chars

    def seconds_per_request(self) -> float:
        return 60.0

    def describe(self) -> str:
        return "extractive (deterministic, no LLM)"

    def summarize(self, request: SummaryRequest) -> Summary:
        items, foreign_order, tools = self._previous(request.previous_summary)
        items += self._new_items(
            request, has_goal=any(i.section == "Goal" for i in items), age=len(items)
        )
        tools.update(call_name(c) for c in calls_of(request.messages))
        read = list(request.files.get("read_files") or [])
        shown = read[-MAX_READ_FILES:]
        items += [_Item(READ, path, i - len(shown) - len(items)) for i, path in enumerate(shown)]
        modified = _capped(
            list(request.files.get("modified_files") or []),
            MAX_MODIFIED_FILES,
            request.files.get("modified_files_omitted"),
        )
        fixed = [
            "",
            "## Files",
            "Modified: " + (modified or "(none)"),
            "",
            "## Tool usage",
            _tool_line(tools) or "(none)",
        ]
        left_out = len(read) - len(shown) + int(request.files.get("read_files_omitted") or 0)
        items = _dedupe(items)
        floor = request.min_carry_over if request.previous_summary else None
        # How many of the previous summary's items may go before this span's own: as many as
        # the floor allows, fewer while the result still holds less than the floor (the
        # measure also counts the Files and Tool usage lines, which are rebuilt, not carried).
        allowed = None if floor is None else int(sum(i.previous for i in items) * (1 - floor))
        while True:
            text = self._render(request, items, foreign_order, fixed, left_out, allowed)
            if not allowed or carry_over(request.previous_summary, text) >= floor:
                return Summary(text, self.name, None)
            allowed //= 2

    def _render(
        self,
        request: SummaryRequest,
        items: list[_Item],
        foreign_order: list[str],
        fixed: list[str],
        left_out: int,
        allowed: int | None,
    ) -> str:
        text, trimmed = _fit(
            items, foreign_order, fixed, request.max_tokens, request.encoding, left_out, allowed
        )
        notes = [f"({len(request.messages)} messages summarized extractively; no LLM was used)"]
        if trimmed:
            notes.insert(
                0, f"({trimmed} older items trimmed to stay within {request.max_tokens} tokens)"
            )
        text = _clip_to(text, request.max_tokens - 24 * len(notes), request.encoding)
        return text + "\n\n" + "\n".join(notes)

    def _new_items(self, request: SummaryRequest, has_goal: bool, age: int) -> list[_Item]:
        """The span's own items, newer than every previous one: the goal (when the previous
        summary had none), requests, constraints, the last distinct errors, the open request."""
        items: list[_Item] = []
        real = [m for m in request.messages if is_real_request(m)]
        if not has_goal:
            goal = (
                clip(real[0].content, self.request_chars)
                if real
                else (request.title or "(not stated)")
            )
            items.append(_Item("Goal", goal, age, protected=True))
        for m in real:
            age += 1
            items.append(_Item("Requests", "- " + clip(m.content, self.request_chars), age))
            items += [
                _Item("Constraints & Preferences", "- " + c, age) for c in constraints_in(m.content)
            ]
        errors = list(
            dict.fromkeys(s for m in request.messages if (s := failed_result_signature(m)))
        )
        if len(errors) > MAX_NEW_ERRORS:
            age += 1
            items.append(
                _Item(
                    "Errors",
                    f"- (and {len(errors) - MAX_NEW_ERRORS} earlier distinct errors in this span)",
                    age,
                )
            )
        for e in errors[-MAX_NEW_ERRORS:]:
            age += 1
            items.append(_Item("Errors", "- " + e, age))
        if request.split_turn and real:
            items.append(
                _Item(
                    "In Progress (the turn continues after this summary)",
                    clip(real[-1].content, self.request_chars),
                    age + 1,
                    protected=True,
                )
            )
        return items

    def _previous(self, summary: str | None) -> tuple[list[_Item], list[str], Counter]:
        """The previous summary's items (any writer), its foreign headings in order, and the
        tool counts it recorded."""
        items: list[_Item] = []
        foreign: list[str] = []
        tools: Counter = Counter()
        for section in parse_sections(summary):
            ours = canonical_heading(section.heading)
            if ours == "Files":
                continue  # rebuilt from the checkpoint's accumulated file lists
            if ours == "Tool usage":
                for line in section.items:
                    tools.update({n: int(c) for n, c in _TOOL_COUNT.findall(line)})
                continue
            name = ours or section.heading
            if ours is None and name not in foreign:
                foreign.append(name)
            for line in section.items:
                if is_item(line):
                    items.append(
                        _Item(name, line, len(items), protected=ours == "Goal", previous=True)
                    )
        return items, foreign, tools


def _capped(paths: list[str], limit: int, omitted_before: int | None) -> str:
    """The newest ``limit`` paths, with the number left out said."""
    left_out = max(0, len(paths) - limit) + int(omitted_before or 0)
    shown = ", ".join(paths[-limit:])
    return shown + (f" (and {left_out} more)" if left_out else "")


def _tool_line(tools: Counter) -> str:
    shown = tools.most_common(MAX_TOOLS)
    rest = len(tools) - len(shown)
    return ", ".join(f"{n} x{c}" for n, c in shown) + (f" (and {rest} more tools)" if rest else "")


def _dedupe(items: list[_Item]) -> list[_Item]:
    """One item per (section, text), keeping the newest occurrence's age."""
    seen: dict[tuple[str, str], _Item] = {}
    for item in items:
        key = (item.section, " ".join(item.text.lower().split()))
        if key in seen:
            older = seen.pop(key)
            item.protected = item.protected or older.protected
            item.previous = item.previous or older.previous
        seen[key] = item
    return list(seen.values())


def _trim_order(items: list[_Item], allowed: int | None) -> list[_Item]:
    """Which items go first when over budget: read paths, then the oldest items. With a
    carry-over floor, only ``allowed`` of the previous summary's items go before this span's
    own (oldest first), and the rest of them last."""
    by_age = sorted((i for i in items if not i.protected), key=lambda i: i.age)
    if allowed is None:
        return by_age
    read = [i for i in by_age if i.section == READ]
    previous = [i for i in by_age if i.previous and i.section != READ]
    own = [i for i in by_age if not i.previous and i.section != READ]
    return read + previous[:allowed] + own + previous[allowed:]


def _fit(
    items: list[_Item],
    foreign: list[str],
    fixed: list[str],
    budget: int,
    encoding: str,
    read_left_out: int,
    allowed: int | None = None,
) -> tuple[str, int]:
    """Render within ``budget`` tokens, dropping items in :func:`_trim_order`."""
    enc = get_encoding(encoding)
    cost = {id(i): n + 1 for i, n in zip(items, token_lengths([i.text for i in items], enc))}
    reserve = 48  # the notes under the summary, the Read line's frame
    total = (
        sum(cost.values())
        + count_text("\n".join(fixed), encoding)
        + reserve
        + 4 * (len(OUR_SECTIONS) + len(foreign) + 1)
    )
    dropped: set[int] = set()
    for item in _trim_order(items, allowed):
        if total <= budget:
            break
        dropped.add(id(item))
        total -= cost[id(item)]
    kept = [i for i in items if id(i) not in dropped]
    read = [i.text for i in kept if i.section == READ]
    read_trimmed = sum(1 for i in items if i.section == READ) - len(read)
    more = read_left_out + read_trimmed
    read_line = "Read: " + (", ".join(read) or "(none)") + (f" (and {more} more)" if more else "")
    out: list[str] = []
    for heading in ("Goal", "Constraints & Preferences", "Requests"):
        out += _section(heading, kept)
    out += fixed[:3] + [read_line] + fixed[3:]
    tail = (
        ["Errors"]
        + [
            h
            for h in dict.fromkeys(i.section for i in kept)
            if h not in OUR_SECTIONS and h not in foreign and h != READ
        ]
        + foreign
    )
    for heading in tail:
        out += _section(heading, kept)
    return "\n".join(out).strip(), len(dropped) - read_trimmed


def _clip_to(text: str, budget: int, encoding: str) -> str:
    """The last resort when what is never trimmed (goal, modified files, tool usage) is itself
    over the budget: the text is cut at the budget, and says so."""
    enc = get_encoding(encoding)
    tokens = enc.encode_ordinary(text)
    if len(tokens) <= budget:
        return text
    return enc.decode(tokens[: max(0, budget - 12)]).rstrip() + f"\n(clipped to {budget} tokens)"


def _section(heading: str, kept: list[_Item]) -> list[str]:
    lines = [i.text for i in kept if i.section == heading]
    if not lines:
        return []
    return ["", f"## {heading}"] + lines
