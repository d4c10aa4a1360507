"""Renderings of a :class:`~ctxtool.core.inspection.ContextView`: plain text, Markdown, HTML, JSONL.

Pure functions from a view to a string, so `context show --full`, `context export` and library
callers print the same thing. Stored text in the human renderings (text, Markdown, HTML) goes
through ``output.visible``: a transcript can hold terminal escape sequences, and a bug report or
a page must neither carry nor hide them. JSONL stays exact: it is the OpenAI message list that
``ctxtool import`` reads back to the same restored context.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from pathlib import Path
from typing import Any

from .chart_drawings import SVG_CSS, html_figure
from .core.cells import display_width, pad
from .core.context_chart import ContextChart
from .core.errors import InvalidSettings
from .core.inspection import (
    CheckpointDiff,
    ContextStream,
    ContextView,
    ViewItem,
    shorten,
    side_by_side,
    summary_text,
)
from .core.records import NO_CALL_ID, Compaction
from .markdown_to_html import markdown_to_html
from .output import OutputFormat, dumps, render_rows, visible
from .terminal import MIN_CELL, ColumnStats, fit_columns, fit_table, table_cell, table_line, wrap

FORMATS = ("markdown", "md", "html", "jsonl")


def _text(value: Any) -> str:
    return visible(value, newlines=True)


def _time(item: ViewItem) -> str:
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
    if _time(item):
        parts.append(_time(item))
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


def _cut_line(view: ContextView | ContextStream) -> str | None:
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
    yield from (f"{label + ':':19}{_text(value)}" for label, value in describe_header(view))
    for item, cut in _items_with_cut(view):
        if cut:
            yield from ("", f"──── {cut} ────")
        yield from ("", f"── {_text(item_title(item))} ──")
        content = summary_text(item) if item.kind == "summary" else item.openai.get("content")
        if content:
            yield _text(content)
        for call in item.openai.get("tool_calls") or ():
            fn = call.get("function") or {}
            yield _text(
                f"→ call {call_label({'name': fn.get('name'), 'arguments': fn.get('arguments')})}"
                f"  [{call.get('id')}]"
            )


def _items(view: ContextView | ContextStream) -> Iterable[ViewItem]:
    return view.items() if isinstance(view, ContextStream) else view.items


def _items_with_cut(
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
            cut = _cut_line(view) if item.kind == "message" else None
        yield item, cut


def message_rows(view: ContextView) -> list[dict[str, Any]]:
    """One row per message for the table view: whole values, one line each (the CLI fits them
    to the terminal)."""
    return [message_row(i) for i in _message_items(view)]


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
    if isinstance(view, ContextStream):
        view.first_pass(observe=lambda item: table.add(message_row(item)))
    else:
        table.measure(message_row(i) for i in _message_items(view))
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
                _wrapped(_text(summary_text(item)), width),
            )
    yield ""
    if not table.rows:
        yield render_rows([], OutputFormat())
        return
    yield from table.lines((message_row(i) for i in _message_items(view)), width)
    yield "(--full shows whole contents; --json adds ids, times and token counts)"


def _message_items(view: ContextView | ContextStream) -> Iterator[ViewItem]:
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
    return _text(head) + (
        f"\n… ({rest} more characters: --full shows it whole)" if rest > 1 else ""
    )


_CHECKPOINT_LABELS = {
    "checkpoint_id": "id",
    "parent_id": "parent",
    "created_at": "created",
    "summarizer": "summarizer",
    "summarizer_model": "model",
    "first_kept_message_id": "cut at",
    "messages_summarised": "summarized",
    "tokens_before": "before",
    "tokens_after": "after",
    "summary_tokens": "summary",
    "score": "probes",
    "fabrications": "fabricated",
    "carry_over": "carry-over",
}


def render_checkpoints(rows: list[dict[str, Any]], output: OutputFormat, width: int | None) -> str:
    """``context checkpoints`` as a table with short labels, fitted to ``width``: the stored
    quality figures as ``probes`` (the score, and the summary-only probes answered of all)
    and ``fabricated``."""

    def cell(key: str, row: dict[str, Any]) -> Any:
        value = row[key]
        if key == "score" and row["probes_total"] is not None:  # n/a: no summary-only probe
            score = "n/a" if value is None else f"{value:.0%}"
            return f"{score} ({row['probes_answered']}/{row['probes_total']})"
        if value is None:
            return None
        if key == "created_at":
            return value.isoformat(sep=" ", timespec="seconds")
        return f"{value:.0%}" if key == "carry_over" else value

    table = [{label: cell(key, r) for key, label in _CHECKPOINT_LABELS.items()} for r in rows]
    text = fit_table(
        table,
        output,
        _CHECKPOINT_LABELS.values(),
        width,
        ["summarizer", "model"],
        optional=["summarized", "fabricated", "carry-over", "created", "parent"],
    )
    if rows:
        text += "\n(before / after: the context's tokens; summary: its own; --json: every field)"
    return text


def render_diff(d: CheckpointDiff, width: int | None, columns: bool = False) -> str:
    """``context diff``: the cut, the summaries (unified, or in ``columns``), and the messages
    that went from kept to summarized."""
    a_name = f"checkpoint {d.a.id}" if d.a else "before the first checkpoint"
    moved = (
        " (moved BACK)"
        if d.as_dict()["cut_moved_back"]
        else f", {len(d.newly_summarised)} messages went from kept to summarized"
    )
    lines = [
        f"from {a_name} to checkpoint {d.b.id}",
        f"cut: message {d.a.first_kept_message_id if d.a else '(start)'} -> "
        f"{d.b.first_kept_message_id}{moved}",
        "",
    ]
    if columns:
        rule = "─" * 20
        lines += side_by_side(
            _text(f"{a_name}\n{rule}\n" + (d.a.summary if d.a else "")),
            _text(f"checkpoint {d.b.id}\n{rule}\n{d.b.summary}"),
            width or 160,
        )
    else:
        # A long line goes on under its marker (+, -, a space), indented: still read as one.
        lines += [
            wrap(line, width, line[:1].strip().ljust(1) + "   ") for line in d.summary_diff
        ] or ["(summaries are identical)"]
    if d.newly_summarised:
        rows = [
            {
                "id": m.id,
                "role": m.role,
                "tokens": m.token_count,
                "content": m.content or " ".join("→ " + c["function"]["name"] for c in m.calls()),
            }
            for m in d.newly_summarised
        ]
        lines += [
            "",
            "now summarized:",
            fit_table(
                rows, OutputFormat(), ["id", "role", "tokens", "content"], width, ["content"]
            ),
        ]
    return "\n".join(lines)


# -- Markdown (a bug report) -----------------------------------------------------------------


def _fence(text: str, lang: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def render_markdown(view: ContextView) -> str:
    return "\n".join(markdown_lines(view)) + "\n"


def markdown_lines(view: ContextView | ContextStream) -> Iterator[str]:
    """:func:`render_markdown` piece by piece (joined with newlines), from a view or a stream
    alike: ``context export`` writes a context of any length in the memory of a page."""
    h = view.header()
    yield from (f"# Session {h['session_id']}: {_text(h['title'] or 'untitled')}", "")
    yield from (f"- **{label}:** {_text(value)}" for label, value in describe_header(view))
    for item, cut in _items_with_cut(view):
        if cut:
            yield from ("", "---", "", f"> ✂ **{cut}**")
        yield from ("", f"## {_text(item_title(item))}", "")
        content = summary_text(item) if item.kind == "summary" else item.openai.get("content")
        if item.kind == "summary":
            checkpoint = view.point.checkpoint
            assert checkpoint is not None, "a summary is a checkpoint's"
            yield f"> Summary of checkpoint {checkpoint.id}, written by {_text(checkpoint.summarizer or 'unknown')}:"
            yield ""
        if content:
            yield _fence(_text(content))
        for call in item.openai.get("tool_calls") or ():
            fn = call.get("function") or {}
            yield from (
                "",
                f"**→ call `{_text(fn.get('name'))}`** `{_text(call.get('id'))}`",
                "",
                _fence(_text(_pretty(fn.get("arguments"))), "json"),
            )


def _pretty(arguments: Any) -> str:
    """Arguments as indented JSON when they parse, else as stored."""
    if isinstance(arguments, str):
        try:
            return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
        except ValueError:
            return arguments
    return json.dumps(arguments, indent=2, ensure_ascii=False)


# -- HTML (one self-contained page) ----------------------------------------------------------

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f6f7f9;color:#1d2127}
main{max-width:980px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 12px}
table.meta{border-collapse:collapse;margin-bottom:20px;font-size:14px}
table.meta th{text-align:left;color:#5b6470;padding:2px 14px 2px 0;font-weight:600;vertical-align:top}
.msg{background:#fff;border:1px solid #dde1e6;border-left:5px solid #9aa4b1;border-radius:6px;margin:10px 0;padding:8px 12px}
.msg .head{font-size:13px;color:#5b6470;display:flex;gap:10px;flex-wrap:wrap}
.msg .head b{color:#1d2127}
.tokens{margin-left:auto;background:#eef1f4;border-radius:10px;padding:0 8px}
.user{border-left-color:#2f6fde}.assistant{border-left-color:#1f9d55}.tool{border-left-color:#b7791f}
.system{border-left-color:#6b46c1}
.summary{border:2px dashed #6b46c1;background:#f7f3ff}
.synthetic{border-left-color:#d64545;background:#fff6f6}
pre{white-space:pre-wrap;word-wrap:break-word;font:13px/1.4 ui-monospace,Menlo,Consolas,monospace;margin:6px 0;background:#f8f9fb;padding:6px 8px;border-radius:4px}
details{margin:6px 0}
summary{cursor:pointer;font-size:13px;color:#374151}
.cut{margin:22px 0;border-top:3px double #d64545;text-align:center}
.cut span{position:relative;top:-12px;background:#f6f7f9;padding:0 10px;color:#d64545;font-weight:600;font-size:13px}
nav.toc{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:8px 14px;margin-bottom:16px;font-size:14px}
nav.toc ol{margin:4px 0;padding-left:22px}
nav.toc a{color:#2f6fde;text-decoration:none}
nav.toc .here{font-weight:600}
.md h2,.md h3,.md h4,.md h5,.md h6{font-size:15px;margin:10px 0 4px}
.md p,.md ul,.md ol{margin:4px 0}
.md code{font:13px ui-monospace,Menlo,Consolas,monospace;background:#efeaff;padding:0 3px;border-radius:3px}
"""
# A message longer than this folds (any role), as tool results always do.
FOLD_LINES = 24
FOLD_CHARS = 3000


def _esc(value: Any) -> str:
    return html.escape(_text(value), quote=True)


def render_html(
    view: ContextView, checkpoints: Sequence[Compaction] = (), chart: ContextChart | None = None
) -> str:
    """A single page with no external resource: inline CSS, no script. A table of contents
    links the summary, the cut and the session's ``checkpoints``; tool calls and results and
    every long message collapse in ``<details>`` (closed); the summary is rendered as
    Markdown (escaped first) and folds too (open). With ``chart`` (the session's), an inline
    SVG of its context size over time stands above the messages (``ctxtool.chart_drawings``), each
    checkpoint's mark linked to its entry in the contents."""
    return "".join(html_pieces(view, checkpoints, chart))


def html_pieces(
    view: ContextView | ContextStream,
    checkpoints: Sequence[Compaction] = (),
    chart: ContextChart | None = None,
) -> Iterator[str]:
    """:func:`render_html` piece by piece, from a view or a stream alike (the contents list
    takes what the stream's first pass learned)."""
    h = view.header()
    title = f"Session {h['session_id']}: {h['title'] or 'untitled'}"
    meta = "".join(
        f"<tr><th>{_esc(label)}</th><td>{_esc(value)}</td></tr>"
        for label, value in describe_header(view)
    )
    yield (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_CSS}{SVG_CSS if chart else ''}</style></head>\n"
        f'<body><main><h1>{_esc(title)}</h1><table class="meta">{meta}</table>\n'
        + _html_toc(view, checkpoints)
    )
    if chart is not None:
        yield _chart_figure(view, chart)
    separator = ""
    for item, cut in _items_with_cut(view):
        if cut:
            yield f'{separator}<div class="cut" id="cut"><span>✂ {_esc(cut)}</span></div>'
            separator = "\n"
        yield separator + _html_item(view, item)
        separator = "\n"
    yield "\n</main></body></html>\n"


def _chart_figure(view: ContextView | ContextStream, chart: ContextChart) -> str:
    """The chart's figure, each checkpoint linked to its entry in the contents (the one shown,
    to its summary), the span of the context shown marked."""
    cp, replaced = view.point.checkpoint, view.point.replaced_by
    links = {d.checkpoint_id: f"#checkpoint-{d.checkpoint_id}" for d in chart.drops}
    if cp is not None:
        links[cp.id] = "#summary"
    shown = cp.id if cp is not None else None
    return html_figure(chart, links, shown, before_first=cp is None and replaced is not None)


def _contents(view: ContextView | ContextStream) -> tuple[bool, bool, int | None, int, int | None]:
    """What the contents list links: (a summary, any message, the first message's id, how
    many messages, the id of the one sent last: None for a synthetic result)."""
    if isinstance(view, ContextStream):
        first = view.first_pass()
        count = first.messages_kept + first.synthetic_results
        return (
            view.head.summary is not None,
            count > 0,
            first.first_id,
            count,
            first.last_sent[1],
        )
    messages = list(_message_items(view))
    return (
        any(i.kind == "summary" for i in view.items),
        bool(messages),
        messages[0].id if messages else None,
        len(messages),
        messages[-1].id if messages else None,
    )


def _html_toc(view: ContextView | ContextStream, checkpoints: Sequence[Compaction]) -> str:
    """Links within the page: the summary, the cut, the messages; then every checkpoint of the
    session, the one shown marked (the others are other pages: ``--at N``)."""
    links = []
    has_summary, any_message, first_id, count, last_id = _contents(view)
    if has_summary:
        links.append('<li><a href="#summary">Summary</a></li>')
    if any_message and _cut_line(view):
        links.append(f'<li><a href="#cut">The cut: kept verbatim from message #{first_id}</a></li>')
    if any_message and last_id is not None:
        links.append(
            f'<li><a href="#m{last_id}">The newest message (#{last_id})</a>'
            f" — {count} in this context</li>"
        )
    shown = view.point.checkpoint
    rows = []
    for cp in checkpoints:
        text = (
            f"checkpoint {cp.id}: cut at message #{cp.first_kept_message_id}, "
            f"{_esc(cp.summarizer or 'unknown')}"
            + (f", {cp.created_at:%Y-%m-%d %H:%M}" if cp.created_at else "")
        )
        here = shown is not None and cp.id == shown.id
        rows.append(
            f'<li class="here" id="checkpoint-{cp.id}"><a href="#summary">{text}</a> (shown)</li>'
            if here
            else f'<li id="checkpoint-{cp.id}">{text} (<code>--at {cp.id}</code>)</li>'
        )
    checkpoints_part = f"<div>Checkpoints</div><ol>{''.join(rows)}</ol>" if rows else ""
    return (
        f'<nav class="toc"><div>Contents</div><ol>{"".join(links)}</ol>{checkpoints_part}</nav>\n'
    )


def _size(text: str) -> str:
    lines = text.count("\n") + 1
    return f"{lines} line{'s' * (lines > 1)}, {len(text)} characters"


def _preview(text: str, width: int = 90) -> str:
    """The first non-blank line, shortened: what a collapsed call or result shows."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return shorten(line, width)


def _html_item(view: ContextView | ContextStream, item: ViewItem) -> str:
    role = item.openai.get("role") or ""
    classes = ["msg", role]
    if item.kind == "summary":
        classes.append("summary")
    if item.kind == "synthetic_result":
        classes.append("synthetic")
    ident = f"#{item.id}" if item.id is not None else ""
    if item.kind == "system_prompt":
        label = "system prompt"
    elif item.kind == "summary":
        cp = view.point.checkpoint
        label = f"summary of checkpoint {cp.id} ({cp.summarizer or 'unknown'})"  # type: ignore[union-attr]
    elif item.message is not None and item.message.role == "tool":
        label = result_label(item)
    else:
        label = role
    head = (
        f'<div class="head"><b>{_esc(ident)} {_esc(label)}</b>'
        f"<span>{_esc(_time(item))}</span>"
        f'<span class="tokens">{item.tokens} tokens</span></div>'
    )
    content = summary_text(item) if item.kind == "summary" else item.openai.get("content")
    parts = [head]
    is_result = item.message is not None and item.message.role == "tool"
    if content and item.kind == "summary":
        parts.append(
            f"<details open><summary>{_esc(_size(content))}</summary>"
            f'<div class="md">{markdown_to_html(_text(content))}</div></details>'
        )
    elif content:
        pre = f"<pre>{_esc(content)}</pre>"
        if is_result or content.count("\n") + 1 > FOLD_LINES or len(content) > FOLD_CHARS:
            pre = (
                f"<details><summary>{_esc(_preview(content))} <i>({_esc(_size(content))})</i>"
                f"</summary>{pre}</details>"
            )
        parts.append(pre)
    for call in item.openai.get("tool_calls") or ():
        fn = call.get("function") or {}
        parts.append(
            f'<details class="call"><summary>→ call <b>{_esc(fn.get("name"))}</b> '
            f"<code>{_esc(_preview(str(fn.get('arguments') or '')))}</code> "
            f"<i>{_esc(call.get('id'))}</i></summary>"
            f"<pre>{_esc(_pretty(fn.get('arguments')))}</pre></details>"
        )
    msg_id = ' id="summary"' if item.kind == "summary" else f' id="m{item.id}"' if item.id else ""
    return f'<section class="{" ".join(classes)}"{msg_id}>{"".join(parts)}</section>'


# -- JSONL (OpenAI chat, re-importable) ------------------------------------------------------


def render_jsonl(view: ContextView) -> str:
    """The OpenAI message list, one message per line: ``ctxtool import --format openai-chat``
    reads it back to the same restored context (system prompt, summary as a user message, tool
    calls all answered)."""
    return "".join(jsonl_lines(view))


def jsonl_lines(view: ContextView | ContextStream) -> Iterator[str]:
    """:func:`render_jsonl` line by line (each ends with a newline), from a view or a stream
    (which counts no tokens for it)."""
    items = view.items(counted=False) if isinstance(view, ContextStream) else view.items
    return (dumps(item.openai, indent=None) + "\n" for item in items)


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


# What -o's extension says, and the short spelling --format also takes.
_EXTENSIONS = {".html": "html", ".htm": "html", ".md": "markdown", ".jsonl": "jsonl"}
FORMAT_ALIASES = {"md": "markdown"}


def export_format(fmt: str | None, path: str | None) -> str:
    """The format of an export: --format when given (``md`` is markdown), else the one the
    output file's extension names, else (no extension, or standard output) markdown. An
    extension that names no format (``out.pdf``) is refused: writing Markdown into it would
    be a file its name lies about."""
    if fmt:
        return FORMAT_ALIASES.get(fmt, fmt)
    suffix = Path(path).suffix.lower() if path else ""
    if suffix and suffix not in _EXTENSIONS:
        known = ", ".join(sorted(_EXTENSIONS))
        raise InvalidSettings(
            f"{path}: {suffix} names no export format ({known}); give --format to write "
            "one into it anyway"
        )
    return _EXTENSIONS.get(suffix, "markdown")


def export_pieces(
    view: ContextView | ContextStream,
    fmt: str,
    checkpoints: Sequence[Compaction] = (),
    chart: ContextChart | None = None,
) -> Iterator[str]:
    """The context in ``fmt`` (markdown, md, html, jsonl) piece by piece: a stream's in the
    memory of a page, whatever its length. The HTML page lists ``checkpoints`` (the session's)
    in its contents and draws ``chart`` above the messages. Joined, the pieces are
    :func:`render`'s text."""
    fmt = FORMAT_ALIASES.get(fmt, fmt)
    if fmt == "html":
        return html_pieces(view, checkpoints, chart)
    if fmt == "jsonl":
        return jsonl_lines(view)
    return chain(joined_lines(markdown_lines(view)), ["\n"])


def joined_lines(lines: Iterable[str]) -> Iterator[str]:
    """Lines as pieces of one text (newlines between them)."""
    for i, line in enumerate(lines):
        yield ("\n" if i else "") + line


def render(
    view: ContextView,
    fmt: str,
    checkpoints: Sequence[Compaction] = (),
    chart: ContextChart | None = None,
) -> str:
    """The view in ``fmt``; the HTML page lists ``checkpoints`` (the session's) in its contents
    and draws ``chart`` above the messages."""
    fmt = FORMAT_ALIASES.get(fmt, fmt)
    if fmt == "html":
        return render_html(view, checkpoints, chart)
    return {"markdown": render_markdown, "jsonl": render_jsonl}[fmt](view)
