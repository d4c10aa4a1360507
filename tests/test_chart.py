"""The chart of a session's context size (``core.context_chart``) and its drawings
(``ctxtool.chart_drawings``), from plain lists: no database, no server."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from ctxtool.chart_drawings import histogram_lines, render_svg, text_chart
from ctxtool.core.context_chart import (
    ChartCheckpoint,
    column_of,
    columns,
    context_chart,
    sessions_histogram,
    window_histogram,
)
from ctxtool.core.tokens import REPLY_PRIMING_TOKENS as P

T0 = datetime(2026, 11, 2, 10, 0)


def times(n: int) -> list[datetime]:
    return [T0 + timedelta(minutes=i) for i in range(n)]


def test_without_a_checkpoint_the_context_grows_by_each_stored_count():
    chart = context_chart([1, 2, 3], [10, 20, None], times(3), [], system_tokens=7)
    assert chart.sizes == [7 + 10 + P, 7 + 30 + P, 7 + 30 + P]
    assert chart.in_force == [-1, -1, -1] and chart.drops == [] and chart.uncounted == 1
    assert chart.span(None) == (0, 3) and chart.peak == 37 + P


def test_each_checkpoint_drops_the_size_to_its_head_and_the_kept_messages():
    ids = list(range(101, 111))  # ten messages of 100 tokens
    counts = [100] * 10
    first = ChartCheckpoint(1, 104, head_tokens=50, messages_through=106, tokens_before=700)
    second = ChartCheckpoint(2, 108, head_tokens=60, messages_through=108)
    chart = context_chart(ids, counts, times(10), [first, second], system_tokens=5)
    # Before the first checkpoint: the system prompt and every message so far.
    assert chart.sizes[:6] == [5 + 100 * (i + 1) + P for i in range(6)]
    d1, d2 = chart.drops
    # Written after message 106 (the 6th), keeping 104..106: 50 + 300.
    assert (d1.index, d1.before, d1.after) == (6, 5 + 600 + P, 50 + 300 + P)
    assert (d1.recorded_before, d1.recorded_after) == (700, None)
    assert chart.sizes[6:8] == [50 + 400 + P, 50 + 500 + P]  # 107, 108 added
    # Written after message 108 (the 8th), keeping 108 alone.
    assert (d2.index, d2.before, d2.after) == (8, 50 + 500 + P, 60 + 100 + P)
    assert chart.sizes[8:] == [60 + 200 + P, 60 + 300 + P]
    assert chart.in_force == [-1] * 6 + [0, 0, 1, 1]
    assert chart.span(1) == (6, 8) and chart.span(2) == (8, 10) and chart.span(None) == (0, 6)


def test_a_checkpoint_without_a_recorded_last_message_is_placed_by_the_times():
    """A runtime's checkpoint records no message id: the messages written after its time come
    after it, those without a time before it (as ``ContextPoint.holds`` decides)."""
    ts: list[datetime | None] = times(6)
    ts[3] = None
    cp = ChartCheckpoint(9, 3, head_tokens=10, created_at=T0 + timedelta(minutes=3, seconds=30))
    chart = context_chart([1, 2, 3, 4, 5, 6], [1] * 6, ts, [cp], system_tokens=0)
    assert chart.drops[0].index == 4 and chart.drops[0].after == 10 + 2 + P  # keeps 3 and 4
    no_time = ChartCheckpoint(9, 3, head_tokens=10)
    assert context_chart([1, 2], [1, 1], ts[:2], [no_time], 0).drops[0].index == 2


def test_two_checkpoints_written_together_drop_one_after_the_other():
    a = ChartCheckpoint(1, 3, head_tokens=40, messages_through=4)
    b = ChartCheckpoint(2, 4, head_tokens=20, messages_through=4)
    chart = context_chart([1, 2, 3, 4, 5], [10] * 5, times(5), [a, b], system_tokens=0)
    assert [(d.index, d.before, d.after) for d in chart.drops] == [
        (4, 40 + P, 40 + 20 + P),
        (4, 40 + 20 + P, 20 + 10 + P),
    ]
    assert chart.sizes[-1] == 20 + 20 + P and chart.span(1) == (4, 4)


def test_columns_keep_each_drop_and_peak_however_many_messages():
    ids = list(range(1, 10_001))
    cps = [
        ChartCheckpoint(k, 1000 * k, head_tokens=0, messages_through=1000 * k + 500) for k in (1, 5)
    ]
    chart = context_chart(ids, [3] * 10_000, [None] * 10_000, cps, system_tokens=0)
    cols = columns(chart, 80)
    assert len(cols) == 80 and cols[0].start == 0 and cols[-1].end == 10_000
    assert max(c.high for c in cols) == chart.peak
    holding = cols[column_of(chart.drops[0].index, 10_000, 80)]
    assert holding.low < holding.high  # the drop is inside the column
    assert len(columns(chart, 20_000)) == 10_000  # one message a column when they fit


def test_the_histogram_counts_sessions_by_share_of_the_window():
    buckets = window_histogram([0.05, 0.3, 0.86, 0.9, 0.95, 1.0, 1.4])
    assert len(buckets) == 11 and buckets[-1].high is None and buckets[-1].sessions == 1
    assert [b.sessions for b in buckets][:10] == [1, 0, 0, 1, 0, 0, 0, 0, 1, 3]
    lines = histogram_lines(buckets, 0.87, 80)
    assert all(len(line) <= 80 for line in lines)
    assert lines[8].endswith("threshold in here") and lines[-1].endswith("over the window")
    assert "█" not in "".join(histogram_lines(buckets, 0.87, 80, unicode=False))


def test_the_sessions_histogram_counts_near_over_and_the_common_threshold():
    """(tokens, window, threshold) per session, as `tokens report --chart` reads them: near is
    within a tenth of the window below the threshold, the threshold inclusive."""
    contexts = [(5, 100, 80), (30, 100, 80), (75, 100, 80), (80, 100, 80), (85, 100, 80)]
    histogram = sessions_histogram([*contexts, (240, 200, 160)])
    assert (histogram.sessions, histogram.threshold_share) == (6, 0.8)
    assert (histogram.near_threshold, histogram.over_threshold, histogram.over_window) == (2, 2, 1)
    assert [b.sessions for b in histogram.buckets] == [1, 0, 0, 1, 0, 0, 0, 1, 2, 0, 1]
    doc = histogram.as_doc()
    assert doc["near_share"] == 0.1 and doc["buckets"][3] == {
        "low": 0.3,
        "high": 0.4,
        "sessions": 1,
        "holds_threshold": False,
    }
    assert [b["holds_threshold"] for b in doc["buckets"]] == [i == 8 for i in range(11)]
    mixed = sessions_histogram([*contexts, (10, 100, 90)])  # two thresholds: none is drawn
    assert mixed.threshold_share is None and not any(b.holds(None) for b in mixed.buckets)
    assert sessions_histogram([]).as_doc()["sessions"] == 0


def sample_chart():
    ids = list(range(1, 301))
    cps = [
        ChartCheckpoint(4, 90, head_tokens=900, messages_through=120, tokens_before=11_000),
        ChartCheckpoint(7, 200, head_tokens=1200, messages_through=230),
    ]
    return context_chart(ids, [95] * 300, times(300), cps, 400, window=16_000, threshold=12_000)


def test_the_terminal_chart_fits_its_width_in_blocks_and_in_plain_characters():
    chart = sample_chart()
    for width in (80, 50):
        for unicode in (True, False):
            lines = text_chart(chart, width, unicode)
            assert all(len(line) <= width for line in lines), (width, unicode)
            text = "\n".join(lines)
            assert text.isascii() != unicode
            marks = next(line for line in lines if line.strip() and set(line.strip()) <= set("12 "))
            assert marks.count("1") == 1 and marks.count("2") == 1
            assert "threshold 12,000" in text and "window 16,000" in text


def test_the_svg_has_a_mark_per_checkpoint_the_lines_and_the_shown_span():
    chart = sample_chart()
    svg = render_svg(chart, {4: "#checkpoint-4", 7: "#summary"}, shown=4)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    marks = re.findall(r'<a class="checkpoint" href="([^"]+)" data-checkpoint="(\d+)"', svg)
    assert marks == [("#checkpoint-4", "4"), ("#summary", "7")]
    assert svg.count('class="threshold"') == 1 and svg.count('class="window"') == 1
    assert 'class="shown"' in svg and "shown: --at 4" in svg
    assert "11,000" in svg  # the recorded figure, in the mark's title
    assert "<script" not in svg and "url(" not in svg


def test_a_short_session_fills_the_width_each_message_over_several_columns():
    cp = ChartCheckpoint(1, 8, head_tokens=50, messages_through=12)
    chart = context_chart(list(range(1, 21)), [100] * 20, {}, [cp], 10, 4000, 3000)
    cols = columns(chart, 70, stretch=True)
    assert len(cols) == 70 and all(c.end - c.start == 1 for c in cols)
    assert cols[0].start == 0 and cols[-1].start == 19
    lines = text_chart(chart, 80)
    bottom = next(line for line in lines if line.startswith("        0"))
    assert len(bottom) == 80
    marks = lines[lines.index(bottom) + 1]
    # Under the first column of message 13, the first written after the checkpoint.
    assert (
        marks.index("1") - 10
        == column_of(12, 20, 70)
        == next(i for i, c in enumerate(cols) if c.start == 12)
    )
    assert "no time" in lines[lines.index(bottom) + 2]  # no times read: said so
