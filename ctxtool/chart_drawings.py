"""Drawings of a session's context size over time (``core.context_chart``): an inline SVG for the
HTML export, block characters for the terminal, and the store's histogram of sessions by the
share of their window their context takes.

Pure functions from a chart to text: no script, no fetched asset, no colour. The SVG's parts
carry classes a test (or a stylesheet) can find: ``series``, ``window``, ``threshold``, one
``checkpoint`` link per checkpoint, ``shown`` for the context the page shows.
"""

from __future__ import annotations

import codecs
import html
import os
from collections.abc import Sequence
from datetime import datetime

from .core.context_chart import Bucket, ChartDrop, Column, ContextChart, column_of, columns

# -- shared ----------------------------------------------------------------------------------


def short_tokens(n: float) -> str:
    """12, 8.4k, 120k, 1.05M: a token figure in a few characters."""
    if n < 1000:
        return f"{n:.0f}"
    if n < 10_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{n / 1000:.0f}k"
    return f"{n / 1_000_000:.2f}M"


def _time(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M") if t else "no time"


def scale_top(chart: ContextChart) -> int:
    """The y axis's top: the peak, the window and the threshold, with room above them (the
    threshold is at least three quarters of the window, so both are always drawn)."""
    return int(max(chart.peak, chart.threshold or 0, chart.window or 0, 1) * 1.08) + 1


def drop_text(drop: ChartDrop) -> str:
    """``checkpoint 5: 150,234 → 32,100 tokens``, with the checkpoint's own figures where it
    recorded different ones."""
    text = f"checkpoint {drop.checkpoint_id}: {drop.before:,} → {drop.after:,} tokens"
    recorded = (drop.recorded_before, drop.recorded_after)
    if recorded != (None, None) and recorded != (drop.before, drop.after):
        shown = " → ".join(f"{n:,}" if n is not None else "?" for n in recorded)
        text += f" (recorded {shown})"
    return text


def drop_time(chart: ContextChart, drop: ChartDrop) -> datetime | None:
    """When a checkpoint was written: its own time, else the time of the last message before
    it."""
    if drop.created_at is not None:
        return drop.created_at
    return chart.time(drop.index - 1) if drop.index else None


# -- SVG (the HTML export) -------------------------------------------------------------------

SVG_WIDTH, SVG_HEIGHT = 932, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 58, 92, 34, 250  # the plot's box inside the picture
_LABEL_GAP = 96  # pixels between two time labels on the x axis

SVG_CSS = """
figure.chart{margin:0 0 16px;background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:8px 10px}
figure.chart svg{width:100%;height:auto;display:block;font:11px system-ui,sans-serif}
figure.chart figcaption{font-size:13px;color:#5b6470;margin-top:4px}
.chart .grid{stroke:#eef1f4}.chart .axis{stroke:#9aa4b1}
.chart .series{fill:none;stroke:#2f6fde;stroke-width:1.5}.chart .area{fill:#2f6fde;fill-opacity:.10;stroke:none}
.chart .window{stroke:#d64545;stroke-width:1.5}.chart .threshold{stroke:#b7791f;stroke-width:1.5;stroke-dasharray:6 4}
.chart .checkpoint line{stroke:#6b46c1;stroke-width:1.5}.chart .checkpoint circle{fill:#6b46c1}
.chart .checkpoint text{fill:#6b46c1;font-weight:600}.chart a.checkpoint:hover text{text-decoration:underline}
.chart .shown{fill:#2f6fde;fill-opacity:.07;stroke:#2f6fde;stroke-opacity:.35;stroke-dasharray:3 3}
.chart text{fill:#5b6470}.chart .label-window{fill:#d64545}.chart .label-threshold{fill:#b7791f}
"""


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def render_svg(
    chart: ContextChart,
    links: dict[int, str] | None = None,
    shown: int | None = None,
    before_first: bool = False,
) -> str:
    """The chart as an inline ``<svg>``: the size at each message (a line over a light area,
    one column a message, or per column the range of the messages it holds), the window and
    the threshold, each checkpoint a mark with its tokens before → after linked to
    ``links[checkpoint_id]`` (a fragment of the page), and the span of the context the page
    shows (checkpoint ``shown``'s, or the one before the first) marked."""
    links = links or {}
    n = len(chart.sizes)
    top = scale_top(chart)
    plot_w = SVG_WIDTH - _RIGHT - _LEFT
    count = min(n, plot_w) or 1

    def x(position: float) -> float:  # a message position (0..n) on the plot
        return _LEFT + plot_w * position / max(n, 1)

    def y(tokens: float) -> float:
        return _BOTTOM - (_BOTTOM - _TOP) * min(tokens, top) / top

    out = [
        f'<svg class="context-chart" viewBox="0 0 {SVG_WIDTH} {SVG_HEIGHT}" role="img" '
        f'aria-label="context tokens at each message, {len(chart.drops)} checkpoints">'
    ]
    for tick in _ticks(top):
        out.append(
            f'<line class="grid" x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{y(tick):.1f}" '
            f'y2="{y(tick):.1f}"/><text x="{_LEFT - 6}" y="{y(tick) + 4:.1f}" '
            f'text-anchor="end">{short_tokens(tick)}</text>'
        )
    span = _shown_span(chart, shown, before_first)
    if span is not None:
        (start, end), label = span
        out.append(
            f'<rect class="shown" x="{x(start):.1f}" y="{_TOP}" '
            f'width="{max(x(end) - x(start), 2):.1f}" height="{_BOTTOM - _TOP}">'
            f"<title>{_esc(label)}</title></rect>"
            f'<text x="{x(start) + 4:.1f}" y="{_TOP + 12}">{_esc(label)}</text>'
        )
    if n:
        points = _series_points(chart, columns(chart, plot_w), x, y)
        line = " ".join(points)
        out.append(
            f'<path class="area" d="M{x(0):.1f},{_BOTTOM} L{line} L{x(n):.1f},{_BOTTOM} Z"/>'
            f'<polyline class="series" points="{line}"/>'
        )
    for cls, value, name in (
        ("window", chart.window, "window"),
        ("threshold", chart.threshold, "threshold"),
    ):
        if value is None or value > top:
            continue
        out.append(
            f'<line class="{cls}" x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{y(value):.1f}" '
            f'y2="{y(value):.1f}"><title>{name} {value:,} tokens</title></line>'
            f'<text class="label-{cls}" x="{_LEFT + plot_w + 4}" y="{y(value) + 4:.1f}">'
            f"{name} {short_tokens(value)}</text>"
        )
    out.append(
        f'<line class="axis" x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{_BOTTOM}" y2="{_BOTTOM}"/>'
    )
    out.extend(_marks(chart, links, x, y))
    out.extend(_time_labels(chart, x, count))
    out.append(
        f'<text x="{_LEFT + plot_w / 2:.0f}" y="{SVG_HEIGHT - 4}" text-anchor="middle">'
        f"messages in order ({n:,}); tokens of the restored context at each</text></svg>"
    )
    return "".join(out)


def _ticks(top: int) -> list[int]:
    """Round values for 3 to 6 grid lines under ``top``."""
    step = 1
    while top / step > 6:
        for m in (2, 5, 10):
            if top / (step * m) <= 6:
                step *= m
                break
        else:
            step *= 10
    return [i * step for i in range(int(top // step) + 1)]


def _series_points(chart: ContextChart, cols: list[Column], x, y) -> list[str]:
    """The line's vertices: each message at its middle, a drop as a vertical step at the
    boundary before the first message after the checkpoint; when messages outnumber the
    pixels, per column its first, highest, lowest and last size."""
    n = len(chart.sizes)
    if len(cols) == n:
        drops_at: dict[int, list[ChartDrop]] = {}
        for d in chart.drops:
            drops_at.setdefault(d.index, []).append(d)
        pts = []
        for i, size in enumerate(chart.sizes):
            for d in drops_at.get(i, ()):
                pts += [f"{x(i):.1f},{y(d.before):.1f}", f"{x(i):.1f},{y(d.after):.1f}"]
            pts.append(f"{x(i + 0.5):.1f},{y(size):.1f}")
        return pts
    pts = []
    for c in cols:
        mid = x((c.start + c.end) / 2)
        for v in dict.fromkeys((c.first, c.high, c.low, c.last)):
            pts.append(f"{mid:.1f},{y(v):.1f}")
    return pts


def _shown_span(
    chart: ContextChart, shown: int | None, before_first: bool
) -> tuple[tuple[int, int], str] | None:
    """The messages of the context the page shows, and what to call it."""
    if before_first and chart.drops:
        return chart.span(None), "shown: before the first checkpoint"
    if shown is None or not chart.drops:
        return None
    latest = shown == chart.drops[-1].checkpoint_id
    try:
        return chart.span(shown), "shown: the latest" if latest else f"shown: --at {shown}"
    except KeyError:
        return None


def _marks(chart: ContextChart, links: dict[int, str], x, y) -> list[str]:
    """One link per checkpoint: a line from before to after, a dot at after, and its figures
    above (in two rows, left out where they would overlap: the title always has them)."""
    out = []
    ends = [-1e9, -1e9]  # where the labels of each row end
    for d in chart.drops:
        px = x(d.index)
        href = links.get(d.checkpoint_id)
        title = _esc(f"{drop_text(d)}, {_time(drop_time(chart, d))}")
        label = f"#{d.checkpoint_id} {short_tokens(d.before)}→{short_tokens(d.after)}"
        width = 6.2 * len(label)
        row = 0 if px - width / 2 > ends[0] + 4 else 1
        text = ""
        if px - width / 2 > ends[row] + 4:
            ends[row] = px + width / 2
            ty = _TOP - 18 + 12 * row
            text = f'<text x="{px:.1f}" y="{ty}" text-anchor="middle">{_esc(label)}</text>'
        opening = f'<a class="checkpoint" href="{_esc(href)}"' if href else '<g class="checkpoint"'
        closing = "</a>" if href else "</g>"
        out.append(
            f'{opening} data-checkpoint="{d.checkpoint_id}" data-before="{d.before}" '
            f'data-after="{d.after}"><title>{title}</title>'
            f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y(d.before):.1f}" y2="{_BOTTOM}" '
            f'stroke-dasharray="2 2"/>'
            f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y(d.before):.1f}" y2="{y(d.after):.1f}"/>'
            f'<circle cx="{px:.1f}" cy="{y(d.after):.1f}" r="4"/>{text}{closing}'
        )
    return out


def _time_labels(chart: ContextChart, x, count: int) -> list[str]:
    """The times under the axis: the first message's, the last's, and each checkpoint's where
    there is room (every checkpoint's time is in its mark's title)."""
    n = len(chart.sizes)
    if not n:
        return []
    wanted = [(0.0, chart.time(0), "start")]
    wanted += [(float(d.index), drop_time(chart, d), "middle") for d in chart.drops]
    last = (float(n), chart.time(n - 1), "end")
    out, placed = [], [x(n) - _LABEL_GAP]  # the last label's room is kept
    for pos, t, anchor in [*wanted, last]:
        px = x(pos)
        if anchor != "end" and any(abs(px - p) < _LABEL_GAP for p in placed if pos):
            continue
        if anchor != "end":
            placed.append(px)
        out.append(
            f'<text class="time" x="{px:.1f}" y="{_BOTTOM + 16}" text-anchor="{anchor}">'
            f"{_esc(_time(t))}</text>"
        )
    return out


def chart_caption(chart: ContextChart) -> str:
    """What the figure says in words, under it."""
    parts = [
        f"Peak {chart.peak:,} tokens",
        f"{len(chart.drops)} checkpoint{'s' * (len(chart.drops) != 1)}",
    ]
    if chart.window is not None:
        parts.append(f"window {chart.window:,}")
    if chart.threshold is not None:
        parts.append(f"compaction threshold {chart.threshold:,}")
    text = ", ".join(parts) + ". From the stored token counts."
    if chart.uncounted:
        text += (
            f" {chart.uncounted:,} message(s) have no stored count: estimated from their "
            "length (`ctxtool tokens count` stores exact counts)."
        )
    return text


def html_figure(
    chart: ContextChart,
    links: dict[int, str] | None = None,
    shown: int | None = None,
    before_first: bool = False,
) -> str:
    """The chart as the export's figure: the SVG and its caption."""
    return (
        f'<figure class="chart" id="chart">{render_svg(chart, links, shown, before_first)}'
        f"<figcaption>{_esc(chart_caption(chart))}</figcaption></figure>\n"
    )


# -- terminal ----------------------------------------------------------------------------------


def unicode_allowed(stream: object) -> bool:
    """Whether a terminal chart may use block characters on ``stream``: its encoding is UTF-8
    and ``NO_COLOR`` is not set (plain characters then, as for colour)."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name == "utf-8"
    except LookupError:
        return False


CHART_ROWS = 8
_EIGHTHS = " ▁▂▃▄▅▆▇█"
_ASCII_EIGHTHS = " ..::||##"


def text_chart(chart: ContextChart, width: int, unicode: bool = True) -> list[str]:
    """The chart in ``width`` columns (at least 40): rows of block characters (``#``, ``:``,
    ``.`` when not ``unicode``), each column the highest size of its messages; the window and
    the threshold drawn through the empty cells of their rows; the checkpoints marked under
    the axis and numbered in the legend, with the times at the ends."""
    width = max(width, 40)
    label_w = 9
    plot_w = width - label_w - 1
    n = len(chart.sizes)
    if n == 0:
        return ["no messages: nothing to chart"]
    cols = columns(chart, plot_w, stretch=True)
    top = scale_top(chart)
    levels = _EIGHTHS if unicode else _ASCII_EIGHTHS
    window_row = _row_of(chart.window, top) if chart.window else None
    threshold_row = _row_of(chart.threshold, top) if chart.threshold else None
    lines = []
    for r in range(CHART_ROWS - 1, -1, -1):
        fill = (
            ("═" if unicode else "=")
            if r == window_row
            else ("╌" if unicode else "-")
            if r == threshold_row
            else " "
        )
        cells = []
        for c in cols:
            eighths = max(0, min(8, round((c.high * CHART_ROWS / top - r) * 8)))
            cells.append(levels[eighths] if eighths else fill)
        label = short_tokens(top) if r == CHART_ROWS - 1 else ""
        if r == window_row and chart.window:
            label = f"{short_tokens(chart.window)} win"
        elif r == threshold_row and chart.threshold:
            label = f"{short_tokens(chart.threshold)} thr"
        axis = "┤" if unicode else "|"
        lines.append(f"{label:>{label_w}}{axis}{''.join(cells)}".rstrip())
    marks = [" "] * len(cols)
    for k, d in enumerate(chart.drops):
        at = column_of(min(d.index, n - 1), n, len(cols))
        # Checkpoints close together: the next free column at most 3 away, else stacked.
        free = [c for c in (at, at + 1, at - 1, at + 2, at - 2, at + 3) if 0 <= c < len(cols)]
        at = next((c for c in free if marks[c] == " "), at)
        marks[at] = _mark(k) if marks[at] == " " else "+"
    corner, rule = ("└", "─") if unicode else ("+", "-")
    lines.append(f"{'0':>{label_w}}{corner}{rule * len(cols)}")
    lines.append((" " * (label_w + 1) + "".join(marks)).rstrip())
    first, last = _time(chart.time(0)), _time(chart.time(n - 1))
    gap = max(1, len(cols) - len(first) - len(last))
    lines.append(" " * (label_w + 1) + first + " " * gap + last)
    lines += _legend(chart, width, unicode)
    return lines


def _row_of(value: int, top: int) -> int | None:
    row = int(value * CHART_ROWS / top)
    return row if 0 <= row < CHART_ROWS else None


def _mark(k: int) -> str:
    """The mark of the k-th checkpoint under the axis: 1-9, then a-z, then *."""
    marks = "123456789abcdefghijklmnopqrstuvwxyz"
    return marks[k] if k < len(marks) else "*"


def _legend(chart: ContextChart, width: int, unicode: bool) -> list[str]:
    block, win, thr, arrow = ("█", "═", "╌", "→") if unicode else ("#", "=", "-", "->")
    parts = [f"{block} context tokens at each message, peak {chart.peak:,}"]
    if chart.window is not None:
        parts.append(f"{win} window {chart.window:,}")
    if chart.threshold is not None:
        parts.append(f"{thr} threshold {chart.threshold:,}")
    entries = [
        f"{_mark(k)}: #{d.checkpoint_id} {short_tokens(d.before)}{arrow}{short_tokens(d.after)}"
        f" {_time(drop_time(chart, d))}"
        for k, d in enumerate(chart.drops)
    ]
    if chart.uncounted:
        parts.append(
            f"{chart.uncounted:,} message(s) without a stored count: estimated from their length"
        )
    return _flow(parts, width) + _flow(entries, width)


def _flow(parts: Sequence[str], width: int, sep: str = "   ") -> list[str]:
    """Parts on as few lines of ``width`` as they fit (a part longer than a line is cut)."""
    lines: list[str] = []
    for part in parts:
        part = part[:width]
        if lines and len(lines[-1]) + len(sep) + len(part) <= width:
            lines[-1] += sep + part
        else:
            lines.append(part)
    return lines


def histogram_lines(
    buckets: Sequence[Bucket], threshold_share: float | None, width: int, unicode: bool = True
) -> list[str]:
    """The store's sessions by their context's share of their window, a bar a line, fitted
    to ``width``: the bar holding the threshold (``threshold_share`` of the window, when all
    sessions share one) and the one over the window said so."""
    width = max(width, 40)
    most = max((b.sessions for b in buckets), default=0) or 1
    label_w, count_w = 10, max(len(str(most)), 1)
    note_w = 20
    bar_w = max(10, width - label_w - count_w - note_w - 3)
    block = "█" if unicode else "#"
    lines = []
    for b in buckets:
        label = f"{b.low:>4.0%}-{b.high:.0%}" if b.high is not None else "over 100%"
        bar = block * round(b.sessions * bar_w / most)
        if b.sessions and not bar:
            bar = "▏" if unicode else "|"
        note = ""
        if b.high is None:
            note = "over the window"
        elif b.holds(threshold_share):
            note = "threshold in here"
        lines.append(f"{label:>{label_w}} {b.sessions:>{count_w}} {bar:<{bar_w}} {note}".rstrip())
    return lines
