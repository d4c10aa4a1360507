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
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

from .core.cells import cut_at_width, display_width, shorten
from .output import (
    TABLE_PADDING,
    Lines,
    OutputFormat,
    colour_enabled,
    dumps,
    is_terminal,
    print_rows,
    render_rows,
    visible,
    visible_cell,
)

MIN_CELL = 8  # a shortened cell keeps at least this many characters
READABLE_CELL = 16  # optional columns give way before a shortened cell gets narrower


def table_width(override: int | None = None, piped: int | None = None) -> int | None:
    """Characters a table may take: ``override`` (0: no limit), else the terminal's width
    (``COLUMNS`` when set), else ``piped`` (None: no limit) when the output is not a terminal."""
    if override is not None:
        return override or None
    if os.environ.get("COLUMNS", "").isdigit() or is_terminal(sys.stdout):
        return shutil.get_terminal_size((100, 24)).columns
    return piped


def clip(text: str, width: int | None, from_left: bool = False) -> str:
    """One line of at most ``width`` columns (None: whole), newlines shown as ``\\n``;
    ``from_left`` keeps the end (a path's file name)."""
    text = visible(text)
    return text if width is None else shorten(text, width, from_left=from_left)


class ColumnStats:
    """What fitting needs of one column's cells, in memory that does not grow with its rows:
    a table of a million messages is measured in one pass and fitted without being held.

    A cell is shown stripped (tabulate strips it) and padded to its column's width, at least
    the header's plus ``TABLE_PADDING``. A text cell is shortened to the cap with "…", from the
    right (or the left, for a path); a cell with whitespace at its ends changes width when
    shortened (the whitespace left at the kept end is stripped), so those are kept by length:
    the widest stripped one, and the least whitespace at each end, of each length."""

    def __init__(self, header: str):
        self.whole = len(header) + TABLE_PADDING  # the column unshortened
        self.header = self.whole
        self.other = 0  # the widest cell that is not text (never shortened)
        self.plain = 0  # the widest text cell with no whitespace at its ends
        self.edged: dict[int, tuple[int, int, int]] = {}  # length -> (stripped, lead, trail)
        self.longest = 0  # the longest value as str(): the cap's upper bound

    def add(self, value: Any) -> None:
        """Measure one cell (a row's value, as ``output.render_rows`` would show it), in
        terminal columns (``core.cells.display_width``)."""
        cell = table_cell(value)
        stripped = cell.strip()
        whole, shown = display_width(cell), display_width(stripped)
        self.whole = max(self.whole, shown)
        self.longest = max(
            self.longest, display_width(str(visible(value) if isinstance(value, str) else value))
        )
        if not isinstance(value, str):
            self.other = max(self.other, shown)
        elif len(stripped) == len(cell):
            self.plain = max(self.plain, whole)
        else:
            lead = len(cell) - len(cell.lstrip())  # whitespace: a column a character
            trail = len(cell) - len(cell.rstrip())
            known = self.edged.get(whole)
            if known is not None:
                shown, lead, trail = (
                    max(known[0], shown),
                    min(known[1], lead),
                    min(known[2], trail),
                )
            self.edged[whole] = (shown, lead, trail)

    def width(self, cap: int | None, from_left: bool = False) -> int:
        """The column's width with its text cells shortened to ``cap`` (None: whole)."""
        if cap is None:
            return self.whole
        widest = max(self.header, self.other, min(self.plain, cap))
        for length, (stripped, lead, trail) in self.edged.items():
            kept_end = trail if from_left else lead
            widest = max(widest, stripped if length <= cap else cap - min(kept_end, cap - 1))
        return widest


def table_cell(value: Any) -> str:
    """A table cell's text before tabulate strips it (as ``output.render_rows`` makes it)."""
    cell = visible_cell(value)
    return cell if isinstance(cell, str) else str(cell)


def table_line(widths: Iterable[int]) -> int:
    """The widest line of a table in tabulate's ``simple`` format: its rule under the header."""
    widths = list(widths)
    return sum(widths) + 2 * (len(widths) - 1)


def fit_columns(
    headers: Sequence[str],
    shrinkable: Sequence[str],
    width: int | None,
    line: Callable[[list[str], int | None], int],
    longest: Callable[[list[str]], int],
    optional: Sequence[str] = (),
    readable: int = READABLE_CELL,
) -> tuple[list[str], int | None]:
    """The one fitting rule: the columns kept and the cap on the ``shrinkable`` ones (None:
    whole) with which every line fits in ``width`` (None: as wide as it comes), ``line``
    (keys, cap) being the widest line so shown and ``longest`` (keys) the longest shrinkable
    value. One cap for all, as large as fits, never below MIN_CELL. The ``optional`` columns
    are left out, last first, while the shrinkable cells would have to be cut below
    ``readable`` characters; then those left out before the last one come back, first first,
    where they still fit. Where the table still does not fit at MIN_CELL (a narrow terminal,
    a format that draws borders), more columns go, the last first and the shrinkable
    ones last, whatever the format: every table command fits by this one rule."""
    keys = list(headers)
    if width is None:
        return keys, None
    least = max(readable, MIN_CELL)
    left_out = []
    for column in [c for c in reversed(optional) if c in keys]:  # left out, if cut too short
        if line(keys, least) <= width:
            break
        keys.remove(column)
        left_out.append(column)
    for column in left_out[-2::-1]:  # then take back, first first, a narrower one that fits
        back = [k for k in headers if k in keys or k == column]
        if line(back, least) <= width:
            keys = back
    # The last resort, for a width or a format's borders no table of these columns fits:
    # more columns go, the last first, those of figures before those of text (what the table
    # is read for); the first, which names the row, stays.
    rest = keys[1:]
    for column in [c for c in reversed(rest) if c not in shrinkable] + [
        c for c in reversed(rest) if c in shrinkable
    ]:
        if line(keys, MIN_CELL) <= width:
            break
        keys.remove(column)
    if line(keys, None) <= width:
        return keys, None
    # The largest cap on the shrinkable columns with which the table fits (binary search).
    low, high = MIN_CELL, max(longest(keys), MIN_CELL)
    while low < high:
        cap = (low + high + 1) // 2
        if line(keys, cap) <= width:
            low = cap
        else:
            high = cap - 1
    return keys, low


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
    measured: bool = True,
) -> str:
    """The table of ``rows`` fitted to ``width`` by :func:`fit_columns`. Text is shortened from
    the right, the ``from_left`` columns (paths) from the left, keeping the file name; the
    ``wrapped`` ones (a sentence that must be read whole, an error) are broken into lines of
    the cap instead. A table in tabulate's ``simple`` format with no wrapped column is fitted
    from its columns' :class:`ColumnStats` and rendered once; any other (a wrapped cell's width
    depends on where its words break, another format draws other borders) is rendered at
    each width tried (``measured=False`` forces that, for the tests)."""
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

    def render(keys: list[str], cap: int | None) -> str:
        limits = dict.fromkeys(shrinkable, cap) if cap is not None else {}
        shown = [
            {
                k: cell(k, v, limits[k]) if isinstance(v := r[k], str) and k in limits else v
                for k in keys
            }
            for r in cells
        ]
        return render_rows(shown, output, keys)

    if width is None or not rows:
        return render(headers, None)
    if measured and output.fmt == "simple" and not broken and not colour_enabled():
        stats = {k: ColumnStats(k) for k in headers}
        for r in cells:
            for k in headers:
                stats[k].add(r[k])

        def line(keys: list[str], cap: int | None) -> int:
            return table_line(
                stats[k].width(cap if k in shrinkable else None, k in left) for k in keys
            )

        def longest(keys: list[str]) -> int:
            return max((stats[k].longest for k in shrinkable if k in keys), default=MIN_CELL)

    else:

        def line(keys: list[str], cap: int | None) -> int:
            return max(display_width(text_line) for text_line in render(keys, cap).splitlines())

        def longest(keys: list[str]) -> int:
            return max(
                (display_width(str(r[k])) for r in cells for k in shrinkable if k in keys),
                default=MIN_CELL,
            )

    keys, cap = fit_columns(headers, shrinkable, width, line, longest, optional, readable)
    return render(keys, cap)


_MARKER = re.compile(r"\s*(?:[-*+>]|\d+[.)])?\s*")  # indentation and a list item's marker


def wrap(line: str, width: int | None, indent: str | None = None) -> str:
    """One line of text (made visible) broken at spaces into lines of at most ``width``
    columns (None: as it is). Continuation lines start with ``indent``; by default under
    the text of the line, past its indentation and its list marker ("- ", "2. ")."""
    line = visible(line)
    if width is None or display_width(line) <= width:
        return line
    if indent is None:
        indent = " " * len(_MARKER.match(line).group(0))  # type: ignore[union-attr]
    if len(indent) >= width // 2:
        indent = ""
    return "\n".join(_wrap(line, width, indent))


_SPACE = re.compile(r"\s")
_WORDS = re.compile(r"( *)([^ ]+)")


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` columns, as ``textwrap.wrap``
    does (whitespace is a space, the first line's indentation kept, spaces at a break
    dropped, a word longer than a line split where the line ends, the first line's
    indentation dropped if its first word fits a line but not with it), counting columns
    (``core.cells.display_width``): a line of CJK text takes twice its characters."""
    text = _SPACE.sub(" ", text.expandtabs())
    lines: list[str] = []
    line, filled = "", False  # the line being made; whether it holds a word yet
    for gap, word in _WORDS.findall(text):
        if filled and display_width(line + gap + word) > width:
            # A word longer than what a line may hold fills this one; a shorter one starts
            # the next (so does any when this one has no room left).
            room = width - (display_width(indent) if lines else 0)
            if display_width(word) <= room or display_width(line + gap) >= width:
                lines.append(line)
                line, gap = indent, ""
        elif not filled and display_width(gap + word) > width:
            # The first line's indentation gives way to a word that fits a line without it.
            gap = "" if display_width(word) <= width or display_width(gap) >= width else gap
        line += gap
        while display_width(line + word) > width:  # longer than a line: cut where it ends
            cut = cut_at_width(word, width - display_width(line))
            if cut == 0 and display_width(line) == display_width(indent):
                cut = 1  # a character wider than the line: alone on one
            lines.append(line + word[:cut] if cut else line.rstrip())
            line, word = indent, word[cut:]
        line, filled = line + word, True
    if filled:
        lines.append(line)
    return [x.rstrip() for x in lines]


def page(text: str | Iterable[str]) -> None:
    """Print ``text`` (or its lines, as they come) through a pager when stdout is a terminal
    (``$PAGER``, else less), as is when piped. The text must already be made visible
    (``output.visible``)."""
    lines = (line + "\n" for line in ([text] if isinstance(text, str) else text))
    if is_terminal(sys.stdout) and is_terminal(sys.stdin):
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


def print_result(
    doc: Any,
    rows: Sequence[dict],
    output: OutputFormat,
    headers: Sequence[str],
    shrinkable: Sequence[str],
    human: Callable[[], None],
) -> None:
    """A command's result that is one document holding rows (``document_output_options``):
    --json the document, --nl and --csv its rows, --fmt its rows as a table fitted to the
    terminal, and otherwise ``human()``, its rendering for a person."""
    if output.json:
        click.echo(dumps(doc))
    elif output.machine:
        print_rows(rows, output, headers)
    elif output.fmt != "simple":
        click.echo(fit_table(rows, output, headers, table_width(None), shrinkable))
    else:
        human()
