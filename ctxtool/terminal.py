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
from typing import Iterable, Sequence

import click

from .output import OutputFormat, render_rows, visible

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
    if width is None or len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + "…"


def fit_table(rows: Sequence[dict], output: OutputFormat, headers: Iterable[str],
              width: int | None, shrinkable: Sequence[str]) -> str:
    """The table of ``rows`` with the ``shrinkable`` columns' cells shortened until every line
    fits in ``width`` (None: as wide as it comes). Widest column first, never below MIN_CELL."""
    headers = list(headers)
    cells = [{k: (visible(r.get(k)) if isinstance(r.get(k), str) else r.get(k)) for k in headers}
             for r in rows]
    limits: dict[str, int] = {}
    while True:
        shown = [{k: clip(v, limits.get(k)) if isinstance(v, str) and k in limits else v
                  for k, v in r.items()} for r in cells]
        text = render_rows(shown, output, headers)
        if width is None or not rows:
            return text
        over = max(len(line) for line in text.splitlines()) - width
        if over <= 0:
            return text
        current = {k: max((len(str(r[k])) for r in shown if isinstance(r[k], str)), default=0)
                   for k in shrinkable}
        candidates = [k for k in shrinkable if current[k] > MIN_CELL]
        if not candidates:
            return text
        widest = max(candidates, key=lambda k: current[k])
        limits[widest] = max(MIN_CELL, current[widest] - over)


def page(text: str) -> None:
    """Print ``text`` through a pager when stdout is a terminal (``$PAGER``, else less), as is
    when piped. The text must already be made visible (``output.visible``)."""
    if sys.stdout.isatty() and sys.stdin.isatty():
        os.environ.setdefault("LESS", "FRX")  # quit if one screen, keep colours, no clearing
        click.echo_via_pager(text)
    else:
        click.echo(text)
