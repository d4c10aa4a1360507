"""A restored context on the terminal and as JSON: what `context show` prints.

``context show``'s table (fitted to the terminal, written row by row from a stream), ``--full``'s
plain text, ``--json``'s document and ``--openai``'s message list, each piece by piece from a
:class:`~ctxtool.core.inspection.ContextView` or a stream. Stored text in the human renderings
goes through ``output.visible``. The documents `context export` writes (Markdown, HTML, JSONL)
are :mod:`ctxtool.export`, which builds on the pieces here; apart, `context show` starts without
the chart, the Markdown renderer and the HTML page.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from .core.cells import display_width, pad, shorten
from .core.context_size import has_usable_count
from .core.inspection import ContextStream, ContextView, ViewItem, summary_text
from .core.records import NO_CALL_ID
from .output import OutputFormat, dumps, render_rows, visible
from .terminal import MIN_CELL, ColumnStats, fit_columns, table_cell, table_line, wrap


def visible_text(value: Any) -> str:
    return visible(value, newlines=True)


def item_time(item: ViewItem) -> str:
    return item.created_at.isoformat(sep=" ", timespec="seconds") if item.created_at else ""


def call_label(call: dict[str, Any] | None) -> str:
    """``name(arguments)`` of a tool call, as stored."""
    if not call:
        return "?"
    args = call.get("arguments")
    if args is not None and not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return f"{call.get('name') or '?'}({args or ''})"


def result_label(item: ViewItem) -> str:
    """What a tool result answers: the tool's name and its call id (never a bare id)."""
    call = item.answers
    call_id = item.openai.get("tool_call_id") or (item.message.tool_call_id if item.message else "")
    if item.kind == "orphan_result":
        return (
            f"result of call {call_id if call_id else NO_CALL_ID}, whose call is not in this "
            "context (sent as a user message)"
        )
    name = (call or {}).get("name") or "?"
    if item.kind == "synthetic_result":
        return f"no result was recorded for {name} ({call_id}): ctxtool sends a synthetic result"
    moved = ", recorded later and moved up to its call" if item.kind == "moved_result" else ""
    return f"result of {name} ({call_id}){moved}"


def item_title(item: ViewItem) -> str:
    """The heading of one message: id, role, what it is, time and tokens."""
    if item.kind == "system_prompt":
        return f"system prompt · {item.tokens} tokens"
    if item.kind == "summary":
        return f"summary (sent as a user message) · {item.tokens} tokens"
    ident = f"#{item.id}" if item.id is not None else "#-"
    role = item.openai.get("role")
    parts = [f"{ident} {role}"]
    if item.message is not None and item.message.role == "tool":
        parts.append(result_label(item))
    if item.kind == "foreign_role" and item.message is not None:
        parts.append(
            f"stored with role {item.message.role!r}, which is not a chat role "
            "(sent as a user message)"
        )
    if item_time(item):
        parts.append(item_time(item))
    parts.append(f"{item.tokens} tokens")
    return " · ".join(parts)


def describe_header(view: ContextView | ContextStream) -> list[tuple[str, str]]:
    """The header as (label, value) pairs for the human renderings."""
    return header_pairs(view.header())


def header_pairs(h: dict[str, Any]) -> list[tuple[str, str]]:
    """A view's header (:func:`~ctxtool.core.inspection.context_header`) as (label, value) pairs."""
    pairs = [
        ("session", f"{h['session_id']}" + (f" ({h['source']})" if h["source"] else "")),
        ("title", h["title"] or "-"),
        ("model", h["model"] or "-"),
        ("context", h["at"]),
        ("messages kept", str(h["messages_kept"])),
        ("context tokens", f"{h['context_tokens']}, counted with {h['encoding']}"),
    ]
    if h["synthetic_results"]:
        n = h["synthetic_results"]
        pairs.append(
            (
                "synthetic results",
                f"{n} tool call{'s have' if n > 1 else ' has'} no "
                'recorded result: answered with "no result was recorded" in every '
                "OpenAI-style output and counted",
            )
        )
    return pairs


def cut_line(view: ContextView | ContextStream) -> str | None:
    cp = view.point.checkpoint
    if cp is None:
        return None
    return (
        f"cut: messages from #{cp.first_kept_message_id} on are kept verbatim; everything "
        f"before is in the summary of checkpoint {cp.id}"
    )


# -- plain text (context show --full) --------------------------------------------------------


def render_text(view: ContextView) -> str:
    """Whole contents with real newlines, calls with their arguments, results with the tool's
    name and call: what ``context show --full`` prints (through a pager on a terminal)."""
    return "\n".join(text_lines(view))


def text_lines(view: ContextView | ContextStream) -> Iterator[str]:
    """:func:`render_text` line by line (a stored message may span many), from a view or a
    stream alike."""
    yield from (f"{label + ':':19}{visible_text(value)}" for label, value in describe_header(view))
    for item, cut in items_with_cut(view):
        if cut:
            yield from ("", f"──── {cut} ────")
        yield from ("", f"── {visible_text(item_title(item))} ──")
        content = summary_text(item) if item.kind == "summary" else item.openai.get("content")
        if content:
            yield visible_text(content)
        for call in item.openai.get("tool_calls") or ():
            fn = call.get("function") or {}
            yield visible_text(
                f"→ call {call_label({'name': fn.get('name'), 'arguments': fn.get('arguments')})}"
                f"  [{call.get('id')}]"
            )


def _items(view: ContextView | ContextStream) -> Iterable[ViewItem]:
    return view.items() if isinstance(view, ContextStream) else view.items


def items_with_cut(
    view: ContextView | ContextStream,
) -> Iterator[tuple[ViewItem, str | None]]:
    """Each item, with the cut line to show before it: before the first item after the system
    prompt and the summary, when that is a kept message of a checkpoint (every renderer marks
    the cut there)."""
    first = True
    for item in _items(view):
        cut = None
        if first and item.kind not in ("system_prompt", "summary"):
            first = False
            cut = cut_line(view) if item.kind == "message" else None
        yield item, cut


def message_rows(view: ContextView) -> list[dict[str, Any]]:
    """One row per message for the table view: whole values, one line each (the CLI fits them
    to the terminal)."""
    return [message_row(i) for i in message_items(view)]


def message_row(item: ViewItem) -> dict[str, Any]:
    """The table row of one message (not the system prompt or the summary)."""
    m = item.openai
    calls = [c.get("function") or {} for c in m.get("tool_calls") or ()]
    if item.message is not None and item.message.role == "tool":
        tool = ("⚠ no result " if item.kind == "synthetic_result" else "← ") + str(
            (item.answers or {}).get("name") or "?"
        )
    else:
        counts: dict[str, int] = {}
        for fn in calls:
            counts[str(fn.get("name"))] = counts.get(str(fn.get("name")), 0) + 1
        tool = ", ".join(f"→ {name}" + (f" ×{n}" if n > 1 else "") for name, n in counts.items())
    text = m.get("content") or ""
    if calls:
        text = " ".join(
            [text] * bool(text)
            + [
                call_label({"name": fn.get("name"), "arguments": fn.get("arguments")})
                for fn in calls
            ]
        )
    return {
        "id": item.id,
        "role": m.get("role"),
        "tokens": item.tokens,
        "tool": tool or None,
        "content": text,
    }


_MESSAGE_COLUMNS = ["id", "role", "tokens", "tool", "content"]
_SHRINKABLE = ["content", "tool"]


def render_table(view: ContextView, width: int | None) -> str:
    """``context show``: header, system prompt (its start), summary, then one line per message
    fitted to ``width``."""
    return "\n".join(table_lines(view, width))


def table_lines(view: ContextView | ContextStream, width: int | None) -> Iterator[str]:
    """:func:`render_table` line by line, from a view or a stream: the table is measured while
    the first pass counts the tokens, fitted once, then written row by row in the second
    (never held)."""
    table = StreamedTable(_MESSAGE_COLUMNS, _SHRINKABLE)
    uncounted = 0

    def measure(item: ViewItem) -> None:
        nonlocal uncounted
        table.add(message_row(item))
        uncounted += counted_now(item, view.encoding)

    if isinstance(view, ContextStream):
        view.first_pass(observe=measure)
    else:
        for item in message_items(view):
            measure(item)
    # Wrapped to the width under their value: a title or the synthetic-results note is long.
    yield from (
        wrap(f"{label + ':':19}{_line(value)}", width, " " * 19)
        for label, value in describe_header(view)
    )
    cp = view.point.checkpoint
    head = view.head_items() if isinstance(view, ContextStream) else view.items
    for item in head:
        if item.kind == "system_prompt":
            yield from ("", "[system prompt]", _wrapped(_head(item.openai["content"]), width))
        elif item.kind == "summary" and cp is not None:
            yield from (
                "",
                f"[summary of checkpoint {cp.id}, cut at message {cp.first_kept_message_id}]",
                _wrapped(visible_text(summary_text(item)), width),
            )
    yield ""
    if not table.rows:
        yield render_rows([], OutputFormat())
        return
    yield from table.lines((message_row(i) for i in message_items(view)), width)
    yield "(--full shows whole contents; --json adds ids, times and token counts)"
    if uncounted:
        yield wrap(
            f"({uncounted} of these messages had no stored count under {view.encoding} and "
            "were counted now, with its vocabulary: `ctxtool tokens count` stores their counts, "
            "as `import` does not)",
            width,
        )


def counted_now(item: ViewItem, encoding: str) -> bool:
    """Whether showing the message counted it: it has no stored count made with ``encoding``
    (a freshly imported store until `tokens count` runs). A synthetic result takes its fixed
    count."""
    message = item.message
    return (
        message is not None
        and item.kind != "synthetic_result"
        and not has_usable_count(message, encoding)
    )


def message_items(view: ContextView | ContextStream) -> Iterator[ViewItem]:
    return (i for i in _items(view) if i.kind not in ("system_prompt", "summary"))


class StreamedTable:
    """``terminal.fit_table`` for a table too long to hold (a million messages): the same text,
    line for line, in tabulate's ``simple`` format, fitted by the same rule
    (``terminal.fit_columns``) from what :meth:`add` measured of every row
    (``terminal.ColumnStats``: memory that does not grow with the rows), then written row by
    row. ``tests/test_context.py`` checks it against ``fit_table``."""

    def __init__(self, headers: Sequence[str], shrinkable: Sequence[str]):
        self.headers, self.shrinkable = list(headers), [k for k in shrinkable if k in headers]
        self.rows = 0
        self.columns = {k: ColumnStats(k) for k in self.headers}

    def add(self, row: dict[str, Any]) -> None:
        self.rows += 1
        for k in self.headers:
            self.columns[k].add(row.get(k))

    def measure(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            self.add(row)

    def widths(self, width: int | None) -> tuple[dict[str, int], int | None]:
        """The widths of the columns kept, in order, and the cap on the shrinkable cells
        (None: whole)."""

        def line(keys: list[str], cap: int | None) -> int:
            return table_line(self._width(k, cap) for k in keys)

        def longest(keys: list[str]) -> int:
            return max(
                (self.columns[k].longest for k in self.shrinkable if k in keys), default=MIN_CELL
            )

        keys, cap = fit_columns(self.headers, self.shrinkable, width, line, longest)
        return {k: self._width(k, cap) for k in keys}, cap

    def _width(self, key: str, cap: int | None) -> int:
        return self.columns[key].width(cap if key in self.shrinkable else None)

    def lines(self, rows: Iterable[dict[str, Any]], width: int | None) -> Iterator[str]:
        widths, cap = self.widths(width)
        yield "  ".join(pad(k, widths[k]) for k in widths).rstrip()
        yield "  ".join("-" * widths[k] for k in widths)
        for row in rows:
            cells = []
            for k in widths:
                value = row.get(k)
                cell = table_cell(value)
                if cap is not None and k in self.shrinkable and isinstance(value, str):
                    cell = shorten(cell, cap)
                cells.append(pad(cell.strip(), widths[k]))
            yield "  ".join(cells).rstrip()


def _wrapped(text: str, width: int | None) -> str:
    """Visible text with each of its lines broken at spaces to ``width`` (a summary's line
    is a paragraph), continuations under the text past its list marker. A line that fits is
    left as it is (a tab in it stays a tab)."""
    return "\n".join(
        line if width is None or display_width(line) <= width else wrap(line, width)
        for line in text.split("\n")
    )


def _line(value: Any) -> str:
    return visible(value)


def _head(text: str, max_lines: int = 12, max_chars: int = 1500) -> str:
    """The start of a long text (a system prompt is often thousands of words)."""
    head = "\n".join(text.splitlines()[:max_lines])[:max_chars]
    rest = len(text) - len(head)
    return visible_text(head) + (
        f"\n… ({rest} more characters: --full shows it whole)" if rest > 1 else ""
    )


def json_lines(view: ContextView | ContextStream) -> Iterator[str]:
    """``context show --json`` (the view's ``document()``) piece by piece: the same text as
    ``output.dumps`` of the whole document, one message at a time."""
    if isinstance(view, ContextView):
        head = {k: v for k, v in view.document().items() if k != "messages"}
    else:
        head = view.document_head()
    text = dumps({**head, "messages": []})
    tail = "[]\n}"
    assert text.endswith(tail), "messages is the document's last field"
    yield from _json_list(text[: -len(tail)], (i.as_dict() for i in _items(view)), 1, "\n}")


def openai_lines(view: ContextView | ContextStream) -> Iterator[str]:
    """``context show --openai`` (``dumps`` of the OpenAI list) piece by piece."""
    items = view.items(counted=False) if isinstance(view, ContextStream) else view.items
    yield from _json_list("", (i.openai for i in items), 0, "")


def _json_list(prefix: str, values: Iterable[Any], depth: int, tail: str) -> Iterator[str]:
    """``prefix``, a JSON list of ``values`` as ``dumps`` writes it at ``depth`` levels of
    indentation, then ``tail``: a piece per batch of values (``json`` sets up its indenting
    encoder at every call, which cost more than a message)."""
    outer = "  " * depth
    opening = prefix + "[\n"
    values = iter(values)
    while batch := list(islice(values, JSON_BATCH)):
        text = dumps(batch)[2:-2]  # "[\n  ...\n]": the values, indented once
        yield opening + outer + text.replace("\n", "\n" + outer)
        opening = ",\n"
    yield prefix + "[]" + tail if opening != ",\n" else "\n" + outer + "]" + tail


# Values per ``dumps`` call when a list is written piece by piece.
JSON_BATCH = 64
