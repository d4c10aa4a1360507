"""Fitting human output to the terminal: its width, tables shortened to it, and a pager.

Tables of stored text (titles, source ids, message contents) are as wide as their longest cell;
on a terminal that wraps into an unreadable mess, so the longest cells are shortened (with "…")
until the table fits. ``--json`` keeps the whole values. Long text goes through a pager on a
terminal, as ``git log`` does, and straight out when piped.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Sequence

import click

from .output import OutputFormat, render_rows, shorten, visible

MIN_CELL = 8  # a shortened cell keeps at least this many characters


def table_width(override: int | None = None, piped: int | None = None) -> int | None:
    """Characters a table may take: ``override`` (0: no limit), else the terminal's width
    (``COLUMNS`` when set), else ``piped`` (None: no limit) when the output is not a terminal."""
    if override is not None:
        return override or None
    if os.environ.get("COLUMNS", "").isdigit() or sys.stdout.isatty():
        return shutil.get_terminal_size((100, 24)).columns
    return piped


def clip(text: str, width: int | None) -> str:
    """One line of at most ``width`` characters (None: whole), newlines shown as ``\\n``."""
    text = visible(text)
    return text if width is None else shorten(text, width)


def fit_table(
    rows: Sequence[dict],
    output: OutputFormat,
    headers: Iterable[str],
    width: int | None,
    shrinkable: Sequence[str],
    optional: Sequence[str] = (),
) -> str:
    """The table of ``rows`` with the ``shrinkable`` columns' cells shortened until every line
    fits in ``width`` (None: as wide as it comes): one cap for all of them, as large as fits,
    never below MIN_CELL. When that is not enough, the ``optional`` columns are left out, last
    first."""
    headers = list(headers)
    cells = [
        {k: (visible(r.get(k)) if isinstance(r.get(k), str) else r.get(k)) for k in headers}
        for r in rows
    ]

    def render(keys: list[str], limits: dict[str, int]) -> tuple[str, int]:
        shown = [
            {
                k: clip(v, limits[k]) if isinstance(v := r[k], str) and k in limits else v
                for k in keys
            }
            for r in cells
        ]
        text = render_rows(shown, output, keys)
        return text, max(len(line) for line in text.splitlines())

    if width is None or not rows:
        return render(headers, {})[0]
    keys = list(headers)
    narrowest = dict.fromkeys(shrinkable, MIN_CELL)
    for column in reversed(list(optional)):  # leave out what cannot fit even when shortened
        if render(keys, narrowest)[1] <= width:
            break
        keys.remove(column)
    text, widest_line = render(keys, {})
    if widest_line <= width:
        return text
    # The largest cap on the shrinkable columns with which the table fits (binary search).
    low, high = MIN_CELL, max(len(str(r[k])) for r in cells for k in shrinkable if k in keys)
    while low < high:
        cap = (low + high + 1) // 2
        if render(keys, dict.fromkeys(shrinkable, cap))[1] <= width:
            low = cap
        else:
            high = cap - 1
    return render(keys, dict.fromkeys(shrinkable, low))[0]


def page(text: str) -> None:
    """Print ``text`` through a pager when stdout is a terminal (``$PAGER``, else less), as is
    when piped. The text must already be made visible (``output.visible``)."""
    if sys.stdout.isatty() and sys.stdin.isatty():
        os.environ.setdefault("LESS", "FRX")  # quit if one screen, keep colours, no clearing
        click.echo_via_pager(text)
    else:
        click.echo(text)
