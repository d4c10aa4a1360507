"""A small, safe Markdown renderer for summaries in the HTML export (no I/O).

Summaries are written by models and runtimes: everything in them is escaped first, so no tag,
attribute or link of theirs reaches the page; only the few shapes summaries use become markup:
headings, bullet and numbered lists, fenced code, ``inline code``, **bold** and paragraphs.
"""

from __future__ import annotations

import html
import re

_HEADING = re.compile(r"(#{1,6})\s+(.*)")
_BULLET = re.compile(r"\s*[-*+]\s+(.*)")
_NUMBERED = re.compile(r"\s*\d+[.)]\s+(.*)")
_FENCE = re.compile(r"\s*(`{3,}|~{3,})")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")


def inline(text: str) -> str:
    """One line's text escaped, with its inline code and bold marked up."""
    parts = _CODE.split(text)  # odd indexes: code spans, whose content stays literal
    out = []
    for i, part in enumerate(parts):
        escaped = html.escape(part, quote=True)
        out.append(f"<code>{escaped}</code>" if i % 2 else _BOLD.sub(r"<b>\1</b>", escaped))
    return "".join(out)


def markdown_to_html(text: str) -> str:
    """``text`` as HTML made only of h2-h6, p, ul/ol/li, pre, code and b; all else escaped."""
    out: list[str] = []
    paragraph: list[str] = []
    list_tag: str | None = None
    fence: str | None = None
    code: list[str] = []

    def close_paragraph() -> None:
        if paragraph:
            out.append("<p>" + "<br>".join(inline(line) for line in paragraph) + "</p>")
            paragraph.clear()

    def close_list() -> None:
        nonlocal list_tag
        if list_tag:
            out.append(f"</{list_tag}>")
            list_tag = None

    for line in text.splitlines():
        if fence is not None:
            if line.strip().startswith(fence):
                out.append("<pre><code>" + html.escape("\n".join(code)) + "</code></pre>")
                fence, code = None, []
            else:
                code.append(line)
            continue
        opening = _FENCE.match(line)
        if opening:
            close_paragraph()
            close_list()
            fence = opening.group(1)
            continue
        heading = _HEADING.fullmatch(line.strip())
        item = _BULLET.fullmatch(line) or _NUMBERED.fullmatch(line)
        if heading:
            close_paragraph()
            close_list()
            level = min(6, len(heading.group(1)) + 1)  # the page's h1 is the session's title
            out.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif item:
            close_paragraph()
            tag = "ul" if _BULLET.fullmatch(line) else "ol"
            if list_tag != tag:
                close_list()
                out.append(f"<{tag}>")
                list_tag = tag
            out.append(f"<li>{inline(item.group(1))}</li>")
        elif not line.strip():
            close_paragraph()
            close_list()
        else:
            close_list()
            paragraph.append(line.strip())
    if fence is not None:  # an unclosed fence: what followed it is code
        out.append("<pre><code>" + html.escape("\n".join(code)) + "</code></pre>")
    close_paragraph()
    close_list()
    return "\n".join(out)
