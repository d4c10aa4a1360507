"""Fitting human output to the terminal: its width, tables shortened to it, and a pager.

Tables of stored text (titles, source ids, message contents) are as wide as their longest cell;
on a terminal that wraps into an unreadable mess, so the longest cells are shortened (with "…")
until the table fits. ``--json`` keeps the whole values. Long text goes through a pager on a
terminal, as ``git log`` does, and straight out when piped.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
from collections.abc import Iterable, Sequence

import click

from .output import Lines, OutputFormat, render_rows, shorten, visible

MIN_CELL = 8  # a shortened cell keeps at least this many characters
READABLE_CELL = 16  # optional columns give way before a shortened cell gets narrower


def table_width(override: int | None = None, piped: int | None = None) -> int | None:
    """Characters a table may take: ``override`` (0: no limit), else the terminal's width
    (``COLUMNS`` when set), else ``piped`` (None: no limit) when the output is not a terminal."""
    if override is not None:
        return override or None
    if os.environ.get("COLUMNS", "").isdigit() or sys.stdout.isatty():
        return shutil.get_terminal_size((100, 24)).columns
    return piped


def clip(text: str, width: int | None, from_left: bool = False) -> str:
    """One line of at most ``width`` characters (None: whole), newlines shown as ``\\n``;
    ``from_left`` keeps the end (a path's file name)."""
    text = visible(text)
    return text if width is None else shorten(text, width, from_left=from_left)


def fit_table(
    rows: Sequence[dict],
    output: OutputFormat,
    headers: Iterable[str],
    width: int | None,
    shrinkable: Sequence[str],
    optional: Sequence[str] = (),
    *,
    from_left: Sequence[str] = (),
    wrapped: Sequence[str] = (),
    readable: int = READABLE_CELL,
) -> str:
    """The table of ``rows`` with the ``shrinkable`` columns' cells shortened until every line
    fits in ``width`` (None: as wide as it comes): one cap for all of them, as large as fits,
    never below MIN_CELL. Text is shortened from the right, the ``from_left`` columns (paths)
    from the left, keeping the file name; the ``wrapped`` ones (a sentence that must be read
    whole, an error) are broken into lines of the cap instead. The ``optional`` columns are
    left out, last first, while the shrinkable cells would have to be cut below ``readable``
    characters (a message column needs more than a title to say anything); then those left
    out before the last one come back, first first, where they still fit."""
    headers = list(headers)
    cells = [
        {k: (visible(r.get(k)) if isinstance(r.get(k), str) else r.get(k)) for k in headers}
        for r in rows
    ]
    left, broken = set(from_left), set(wrapped)

    def cell(key: str, value: str, limit: int) -> str:
        if key in broken:
            return Lines("\n".join(_wrap(value, limit)) or value)
        return clip(value, limit, key in left)

    def render(keys: list[str], limits: dict[str, int]) -> tuple[str, int]:
        shown = [
            {
                k: cell(k, v, limits[k]) if isinstance(v := r[k], str) and k in limits else v
                for k in keys
            }
            for r in cells
        ]
        text = render_rows(shown, output, keys)
        return text, max(len(line) for line in text.splitlines())

    if width is None or not rows:
        return render(headers, {})[0]
    keys = list(headers)
    least = dict.fromkeys(shrinkable, max(readable, MIN_CELL))
    left_out = []
    for column in [c for c in reversed(optional) if c in keys]:  # left out, if cut too short
        if render(keys, least)[1] <= width:
            break
        keys.remove(column)
        left_out.append(column)
    for column in left_out[-2::-1]:  # then take back, first first, a narrower one that fits
        back = [k for k in headers if k in keys or k == column]
        if render(back, least)[1] <= width:
            keys = back
    text, widest_line = render(keys, {})
    if widest_line <= width:
        return text
    # The largest cap on the shrinkable columns with which the table fits (binary search).
    longest = [len(str(r[k])) for r in cells for k in shrinkable if k in keys]
    low, high = MIN_CELL, max(longest, default=MIN_CELL)
    while low < high:
        cap = (low + high + 1) // 2
        if render(keys, dict.fromkeys(shrinkable, cap))[1] <= width:
            low = cap
        else:
            high = cap - 1
    return render(keys, dict.fromkeys(shrinkable, low))[0]


_MARKER = re.compile(r"\s*(?:[-*+>]|\d+[.)])?\s*")  # indentation and a list item's marker


def wrap(line: str, width: int | None, indent: str | None = None) -> str:
    """One line of text (made visible) broken at spaces into lines of at most ``width``
    characters (None: as it is). Continuation lines start with ``indent``; by default under
    the text of the line, past its indentation and its list marker ("- ", "2. ")."""
    line = visible(line)
    if width is None or len(line) <= width:
        return line
    if indent is None:
        indent = " " * len(_MARKER.match(line).group(0))  # type: ignore[union-attr]
    if len(indent) >= width // 2:
        indent = ""
    return "\n".join(_wrap(line, width, indent))


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    return textwrap.wrap(
        text, width, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False
    )


def page(text: str | Iterable[str]) -> None:
    """Print ``text`` (or its lines, as they come) through a pager when stdout is a terminal
    (``$PAGER``, else less), as is when piped. The text must already be made visible
    (``output.visible``)."""
    lines = (line + "\n" for line in ([text] if isinstance(text, str) else text))
    if sys.stdout.isatty() and sys.stdin.isatty():
        os.environ.setdefault("LESS", "FRX")  # quit if one screen, keep colours, no clearing
        click.echo_via_pager(lines)
    else:
        echo_pieces(lines)


def echo_pieces(pieces: Iterable[str], chunk: int = 1 << 16) -> None:
    """Write ``pieces`` as they come, in chunks of about ``chunk`` characters (one write per
    piece costs more than the piece when there are a million)."""
    buffer: list[str] = []
    size = 0
    for piece in pieces:
        buffer.append(piece)
        size += len(piece)
        if size >= chunk:
            click.echo("".join(buffer), nl=False)
            buffer, size = [], 0
    if buffer:
        click.echo("".join(buffer), nl=False)
