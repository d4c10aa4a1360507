"""The documents `context export` writes of a :class:`~ctxtool.core.inspection.ContextView`:
Markdown (a bug report), one HTML page, JSONL; and `context checkpoints`' and `context diff`'s
tables.

Pure functions from a view to a string or its pieces, built on :mod:`ctxtool.context_text`
(what `context show` prints), so the terminal and an export say the same thing. Stored text
in the human renderings (Markdown, HTML) goes through ``output.visible``: a transcript can hold
terminal escape sequences, and a bug report or a page must neither carry nor hide them. JSONL
stays exact: it is the OpenAI message list that ``ctxtool import`` reads back to the same
restored context.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from .chart_drawings import SVG_CSS, html_figure
from .context_text import (
    cut_line,
    describe_header,
    item_time,
    item_title,
    items_with_cut,
    message_items,
    result_label,
    visible_text,
)
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
from .core.records import Compaction
from .markdown_to_html import markdown_to_html
from .output import OutputFormat, dumps
from .terminal import fit_table, wrap

FORMATS = ("markdown", "md", "html", "jsonl")


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
            visible_text(f"{a_name}\n{rule}\n" + (d.a.summary if d.a else "")),
            visible_text(f"checkpoint {d.b.id}\n{rule}\n{d.b.summary}"),
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
    yield from (f"# Session {h['session_id']}: {visible_text(h['title'] or 'untitled')}", "")
    yield from (f"- **{label}:** {visible_text(value)}" for label, value in describe_header(view))
    for item, cut in items_with_cut(view):
        if cut:
            yield from ("", "---", "", f"> ✂ **{cut}**")
        yield from ("", f"## {visible_text(item_title(item))}", "")
        content = summary_text(item) if item.kind == "summary" else item.openai.get("content")
        if item.kind == "summary":
            checkpoint = view.point.checkpoint
            assert checkpoint is not None, "a summary is a checkpoint's"
            yield f"> Summary of checkpoint {checkpoint.id}, written by {visible_text(checkpoint.summarizer or 'unknown')}:"
            yield ""
        if content:
            yield _fence(visible_text(content))
        for call in item.openai.get("tool_calls") or ():
            fn = call.get("function") or {}
            yield from (
                "",
                f"**→ call `{visible_text(fn.get('name'))}`** `{visible_text(call.get('id'))}`",
                "",
                _fence(visible_text(_pretty(fn.get("arguments"))), "json"),
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
    return html.escape(visible_text(value), quote=True)


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
    for item, cut in items_with_cut(view):
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
    messages = list(message_items(view))
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
    if any_message and cut_line(view):
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
        f"<span>{_esc(item_time(item))}</span>"
        f'<span class="tokens">{item.tokens} tokens</span></div>'
    )
    content = summary_text(item) if item.kind == "summary" else item.openai.get("content")
    parts = [head]
    is_result = item.message is not None and item.message.role == "tool"
    if content and item.kind == "summary":
        parts.append(
            f"<details open><summary>{_esc(_size(content))}</summary>"
            f'<div class="md">{markdown_to_html(visible_text(content))}</div></details>'
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
