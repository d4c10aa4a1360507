"""Summaries as HTML for the export, through markdown-it-py (CommonMark). No I/O.

Summaries are written by models and runtimes in full Markdown: numbered lists, lists nested
under them, ``**`path`**``. A CommonMark parser reads them as their writers meant. What is
theirs never becomes markup of its own: raw HTML is escaped (a transcript may hold
``<script>``), images are off (the page fetches nothing) and so are links (a page of someone
else's text links nowhere); a heading is one level under the page's title.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token


@cache
def _parser() -> MarkdownIt:
    """The parser, made at the first summary (a command that renders none never imports it)."""
    from markdown_it import MarkdownIt

    # breaks: a summary's single newline is a new line, as the runtimes show it.
    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "xhtmlOut": False})
    md.disable(["image", "link", "autolink"])
    return md


def _shift_headings(tokens: Sequence[Token]) -> None:
    """h1 becomes h2 (the page's h1 is the session's title), to h6 at most; bold is ``b``."""
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + 1)}"
        for child in token.children or ():
            if child.type in ("strong_open", "strong_close"):
                child.tag = "b"


def markdown_to_html(text: str) -> str:
    """``text`` (Markdown) as HTML; every tag, attribute and link of the text escaped."""
    md = _parser()
    tokens = md.parse(text)
    _shift_headings(tokens)
    return md.renderer.render(tokens, md.options, {}).rstrip("\n")
