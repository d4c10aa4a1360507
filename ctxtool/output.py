"""The one output formatter: every read command prints rows the same ways.

A human table (tabulate, ``--fmt`` picks its style) by default; ``--json`` (an array),
``--nl`` (one JSON object per line) or ``--csv`` for machines. The options that choose are
``ctxtool.cli.options.output_options`` (rows) and ``json_option`` (one document).
"""

from __future__ import annotations

import csv
import functools
import importlib
import io
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from itertools import chain
from types import ModuleType
from typing import Any

import click

from .core.cells import display_width
from .escapes import visible as visible

# The style of a human table unless --fmt chooses another.
DEFAULT_TABLE_FORMAT = "simple"
# tabulate widens every column to its header plus two spaces; the gap between columns already
# sets them apart, and at 80 columns those spaces cost a whole column.
TABLE_PADDING = 0


class _Columns:
    """tabulate's measure of a cell (it asks ``wcwidth.wcswidth`` when wide characters are
    on): the terminal columns ``terminal.fit_table`` fits by, so a CJK cell is padded by
    the columns it takes, whether or not the wcwidth package is installed."""

    wcswidth = staticmethod(display_width)


@functools.cache
def tabulate_module() -> ModuleType:
    """tabulate, set up as every table here is drawn. Loaded by name when the first table is
    drawn or its styles are listed (start-up: a command that prints no table, such as
    `context show` or any --json output, runs without it; tabulate also loads
    importlib.metadata)."""
    module: Any = importlib.import_module("tabulate")
    module.MIN_PADDING = TABLE_PADDING
    module.wcwidth = _Columns
    module.WIDE_CHARS_MODE = True
    return module


def table_formats() -> list[str]:
    """The table styles --fmt takes: tabulate's."""
    return sorted(tabulate_module().tabulate_formats)


@dataclass(frozen=True)
class OutputFormat:
    json: bool = False
    nl: bool = False
    csv: bool = False
    fmt: str = "simple"

    @property
    def machine(self) -> bool:
        return self.json or self.nl or self.csv


def echo_text(text: str, newlines: bool = True, err: bool = False) -> None:
    """Print human text that may hold stored data (titles, prompts, summaries, contents)."""
    click.echo(visible(text, newlines=newlines), err=err)


def to_jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


# What json.dumps leaves raw that a terminal would run or that would reorder the text shown:
# DEL, the C1 controls (U+009B is a CSI) and the bidi overrides and isolates. Only inside
# strings can they occur, where \uXXXX is the same character: the JSON stays exact.
_JSON_RAW_CONTROLS = re.compile("[\u007f-\u009f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def dumps(value: Any, indent: int | None = 2) -> str:
    text = json.dumps(to_jsonable(value), indent=indent, ensure_ascii=False)
    return _JSON_RAW_CONTROLS.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def render_rows(
    rows: Sequence[dict], output: OutputFormat, headers: Iterable[str] | None = None
) -> str:
    """Rows (dicts sharing keys) as text in the chosen format."""
    rows = list(rows)
    keys = list(headers) if headers is not None else (list(rows[0]) if rows else [])
    if output.json:
        return dumps([{k: r.get(k) for k in keys} for r in rows])
    if output.nl:
        return "\n".join(dumps({k: r.get(k) for k in keys}, indent=None) for r in rows)
    if output.csv:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(keys)
        for r in rows:
            writer.writerow([visible_cell(r.get(k), csv_mode=True) for k in keys])
        return buf.getvalue().rstrip("\n")
    if not rows:
        return "(no rows)"
    colour = colour_enabled()
    cells = [[_coloured(k, visible_cell(r.get(k)), colour) for k in keys] for r in rows]
    if output.fmt == DEFAULT_TABLE_FORMAT and not _spans_lines(keys, cells):
        return simple_table(keys, cells)
    return tabulate_module().tabulate(
        cells, headers=keys, tablefmt=output.fmt, disable_numparse=True
    )


# The colours of _coloured (click.style): no columns on a terminal.
_COLOUR_CODES = re.compile(r"\x1b\[[0-9;]*m")


def _spans_lines(headers: Sequence[str], cells: Sequence[Sequence[Any]]) -> bool:
    """Whether a header or cell holds a line break (tabulate lays such a row out on several
    lines)."""
    return any(isinstance(c, str) and ("\n" in c or "\r" in c) for c in chain(headers, *cells))


def simple_table(headers: Sequence[str], cells: Sequence[Sequence[Any]]) -> str:
    """Rows of one-line cells in tabulate's ``simple`` style as :func:`render_rows` has tabulate
    draw it (every column left-aligned, cells stripped, no padding, two spaces between columns,
    trailing spaces cut), the same text without loading tabulate: the default table of every
    command (`sessions list`, `migrate status`) starts in less time. tests/test_output.py checks
    it against tabulate."""
    texts = [[str(c).strip() for c in row] for row in cells]
    widths = [_columns(h) for h in headers]
    for row in texts:
        widths = [max(w, _columns(c)) for w, c in zip(widths, row)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c + " " * (w - _columns(c)) for c, w in zip(row, widths)).rstrip()

    return "\n".join(
        [line(headers), "  ".join("-" * w for w in widths), *(line(row) for row in texts)]
    )


def _columns(text: str) -> int:
    """The columns a cell takes, its colours left out (tabulate's visible width)."""
    return display_width(_COLOUR_CODES.sub("", text) if "\x1b" in text else text)


# Columns whose values are a verdict, and the colour of each verdict on a terminal.
_VERDICT_COLUMNS = {"status", "severity", "state"}
_VERDICT_COLOURS = {
    "red": {"error", "failed", "rejected", "over_window", "checksum changed", "file missing"},
    "yellow": {
        "warning",
        "pending",
        "running",
        "lease_held",
        "lost_race",
        "planned",
        "nothing_to_cut",
    },
    "green": {"ok", "applied", "baseline", "compacted", "below_threshold"},
}


def is_terminal(stream) -> bool:
    """Whether ``stream`` is a terminal: False too when it is closed or missing (``>&-`` leaves
    ``sys.stdout`` None)."""
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):
        return False


def colour_enabled() -> bool:
    """Colour only for a person at a terminal: never when piped, with NO_COLOR set, or on a
    dumb terminal."""
    return (
        is_terminal(sys.stdout)
        and not os.environ.get("NO_COLOR")
        and os.environ.get("TERM") != "dumb"
    )


def verdict_colour(value: str) -> str | None:
    for colour, values in _VERDICT_COLOURS.items():
        if value in values:
            return colour
    return None


def _coloured(key: str, cell: Any, enabled: bool) -> Any:
    if not enabled or key not in _VERDICT_COLUMNS or not isinstance(cell, str):
        return cell
    colour = verdict_colour(cell)
    return click.style(cell, fg=colour, bold=True if colour == "red" else None) if colour else cell


class Lines(str):
    """A table cell already made visible and broken into lines (``terminal.fit_table``): its
    line breaks are layout, shown as they are."""


def visible_cell(value: Any, csv_mode: bool = False) -> Any:
    """A table or CSV cell: stored text made visible (a CSV opened in a terminal, or a table,
    must not carry escape sequences)."""
    if isinstance(value, Lines):
        return str(value)
    if value is None:
        return "" if csv_mode else "-"
    if isinstance(value, (dict, list)):
        return visible(dumps(value, indent=None))
    if isinstance(value, float):
        return f"{value:.2f}"
    value = to_jsonable(value)
    return visible(value) if isinstance(value, str) else value


def print_rows(
    rows: Sequence[dict], output: OutputFormat, headers: Iterable[str] | None = None
) -> None:
    click.echo(render_rows(rows, output, headers))


def print_with_rows(document: dict, rows: str, output: OutputFormat) -> None:
    """A machine-read document: whole with --json; its ``rows`` list with --nl/--csv/--fmt
    (a chart's points, a histogram's buckets)."""
    if output.json:
        click.echo(dumps(document))
    else:
        print_rows(document[rows], output)


def print_document(doc: Any, output: OutputFormat, human: str) -> None:
    """A single object (commands with :func:`json_option`): JSON for machines, the given human
    rendering otherwise."""
    if output.json:
        click.echo(dumps(doc))
    else:
        click.echo(human)


class Progress:
    """How far a long run got, on stderr: a bar on a terminal (unless ``bar`` is False); off
    one (cron, a log file) a line every ``CTXTOOL_PROGRESS_INTERVAL`` seconds (default 10; 0:
    none), so a run that takes minutes is never silent. ``phase`` says what it does now
    (waiting for the LLM). ``enabled``: something is shown, worth feeding ``update``."""

    def __init__(self, total: int | None, label: str, show_pos: bool = True, bar: bool = True):
        self.total = total
        self.label = label
        self.show_pos = show_pos
        self.position = 0
        terminal = self.on_terminal()
        self.bar: Any = None  # click's ProgressBar, on a terminal only
        self.interval = None if terminal else progress_interval()
        self.enabled = (terminal and bar) or bool(self.interval)
        self._phase: tuple[str, float] | None = None
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._reporter: threading.Thread | None = None
        if terminal and bar:
            self.bar = click.progressbar(
                length=total,
                label=label,
                file=sys.stderr,
                show_pos=show_pos,
                show_percent=total is not None,
                show_eta=total is not None,
            )

    @staticmethod
    def on_terminal() -> bool:
        return is_terminal(sys.stderr)

    @classmethod
    def shown(cls) -> bool:
        """Whether a run reports its progress at all (worth counting its total first)."""
        return cls.on_terminal() or bool(progress_interval())

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        if self.bar is not None:
            self.bar.__enter__()
        elif self.interval:
            self._reporter = threading.Thread(target=self._report, daemon=True)
            self._reporter.start()
        return self

    def update(self, n: int) -> None:
        self.position += n
        if self.bar is not None:
            self.bar.update(n)

    def phase(self, text: str | None) -> None:
        """What the run does now (None: nothing in particular), shown with how long it has."""
        self._phase = (text, time.monotonic()) if text else None

    def line(self) -> str:
        """The periodic line: the label, how far, the phase and for how long, the time so far."""
        return progress_line(
            self.label,
            self.position,
            self.total,
            self.show_pos,
            self._phase[0] if self._phase else None,
            time.monotonic() - self._phase[1] if self._phase else None,
            time.monotonic() - self._started,
        )

    def _report(self) -> None:
        assert self.interval
        while not self._stop.wait(self.interval):
            click.echo(self.line(), err=True)

    def __exit__(self, *exc):
        self._stop.set()
        if self._reporter is not None:
            self._reporter.join()
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False


PROGRESS_INTERVAL_ENV = "CTXTOOL_PROGRESS_INTERVAL"
DEFAULT_PROGRESS_INTERVAL = 10.0


def progress_interval() -> float:
    """Seconds between two progress lines off a terminal (``CTXTOOL_PROGRESS_INTERVAL``)."""
    raw = os.environ.get(PROGRESS_INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_PROGRESS_INTERVAL
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise click.UsageError(f"{PROGRESS_INTERVAL_ENV}={raw!r} is not a number of seconds")
    return seconds


def progress_line(
    label: str,
    position: int,
    total: int | None,
    show_pos: bool,
    phase: str | None,
    phase_seconds: float | None,
    seconds: float,
) -> str:
    """``compacting: 3/20 (15%), 1 min 5 s`` or ``compacting session 7: summarizing (waiting
    for the LLM) for 40 s, 1 min 2 s in all``."""
    parts = []
    if total:
        share = f"{min(position / total, 1):.0%}"
        parts.append(f"{position}/{total} ({share})" if show_pos else share)
    elif position:
        parts.append(f"{position} so far")
    if phase is not None:
        parts.append(f"{phase} for {duration(phase_seconds or 0)}")
    parts.append(f"{duration(seconds)}{' in all' if phase is not None else ''}")
    return f"{label}: " + ", ".join(parts)


def duration(seconds: float) -> str:
    """``45 s``, ``4 min 40 s``, ``2 h 5 min``: a time a person reads in a log."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"
