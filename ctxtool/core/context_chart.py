"""A session's restored-context size over time: the points of its chart, from plain lists.

At each message the agent was sent the system prompt, the summary of the latest checkpoint
written by then and the messages from that checkpoint's cut up to this one: the size grows
message by message and drops at each checkpoint to its summary plus the messages it kept. The
sizes are sums of the stored counts (a message without a usable count adds its estimate, or
nothing, and is counted in :attr:`ContextChart.uncounted`), with the head counted as sent and the reply
priming, as :func:`ctxtool.core.context_size.restored_context_tokens` measures a context whose
tool calls are all answered. No I/O: the store reads the lists (``store.chart``), the export
and the terminal draw the result.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from itertools import accumulate, repeat
from operator import eq
from typing import TYPE_CHECKING, Any, SupportsIndex, cast, overload

from .context_size import total_tokens

if TYPE_CHECKING:
    _Int64Array = array[int]
else:
    _Int64Array = array


class Series(_Int64Array):
    """Integers in a row, 8 bytes each: a chart holds several per message, and a session's
    100,000 as Python ints would take 3.6 MB a list. It equals any sequence of the same values
    (a list, a tuple, another series), and a slice of it is a series."""

    def __new__(cls, values: Iterable[int] = ()) -> Series:
        return cast(Series, super().__new__(cls, "q", values))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (array, list, tuple, range)):
            return NotImplemented
        return len(self) == len(other) and all(map(eq, self, other))

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None

    @overload
    def __getitem__(self, index: SupportsIndex) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> Series: ...
    def __getitem__(self, index: SupportsIndex | slice) -> int | Series:
        if isinstance(index, slice):
            return Series(super().__getitem__(index))
        return super().__getitem__(index)

    def __repr__(self) -> str:
        return f"Series({list(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return Series, (list(self),)


@dataclass(frozen=True)
class ChartCheckpoint:
    """What the chart needs of one checkpoint. ``head_tokens``: the system prompt and its
    summary as sent (each message's framing included). ``messages_through``: the newest message
    id stored when it was written, where it was recorded (ctxtool's own); else its time and the
    messages' times place it. ``tokens_before`` / ``tokens_after``: the figures it recorded."""

    id: int
    first_kept_message_id: int
    head_tokens: int
    created_at: datetime | None = None
    messages_through: int | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None


@dataclass(frozen=True)
class ChartDrop:
    """One checkpoint on the chart: written after the first ``index`` messages, it took the
    context from ``before`` to ``after`` tokens (by the stored counts); ``recorded_*`` are the
    figures the checkpoint itself stored (a runtime's, counted its own way), None if none."""

    checkpoint_id: int
    index: int
    before: int
    after: int
    created_at: datetime | None
    recorded_before: int | None
    recorded_after: int | None


@dataclass(frozen=True)
class ContextChart:
    """The chart of one session: ``sizes[i]`` is the restored context's tokens when message
    ``ids[i]`` had just been written, under the checkpoint ``drops[in_force[i]]`` (-1: before
    the first); ``times`` the messages' times by index, those known (the store reads the ones
    a drawing shows: the ends, and before each checkpoint). ``window`` and ``threshold``: the
    model's context window and the compaction threshold, None when unknown."""

    ids: Sequence[int]
    times: Mapping[int, datetime | None]
    sizes: Sequence[int]
    in_force: Sequence[int]
    drops: list[ChartDrop]
    window: int | None = None
    threshold: int | None = None
    uncounted: int = 0

    @cached_property
    def peak(self) -> int:
        """The largest size (read by the scale, the caption and the legend: found once)."""
        return max(self.sizes, default=0)

    def time(self, index: int) -> datetime | None:
        """Message ``index``'s time, None when it has none or it was not read."""
        return self.times.get(index)

    def shown_indices(self) -> list[int]:
        """The messages whose times a drawing shows: the first, the last, and the last before
        each checkpoint."""
        n = len(self.sizes)
        wanted = {0, n - 1} | {d.index - 1 for d in self.drops if d.index}
        return sorted(i for i in wanted if 0 <= i < n)

    def points(self) -> list[dict[str, int | None]]:
        """One row a message: its id, the context's tokens when it had just been written, and
        the checkpoint in force then (None: before the first)."""
        checkpoint = [d.checkpoint_id for d in self.drops] + [None]  # [-1]: before the first
        return [
            {"message_id": i, "tokens": size, "checkpoint_id": checkpoint[k]}
            for i, size, k in zip(self.ids, self.sizes, self.in_force)
        ]

    def as_dict(self) -> dict[str, Any]:
        """The chart as one document: the window, the threshold, each checkpoint's drop (after
        which message, the tokens before and after by the stored counts and by its own
        record), then :meth:`points`."""
        return {
            "window": self.window,
            "threshold": self.threshold,
            "peak": self.peak,
            "uncounted": self.uncounted,
            "checkpoints": [
                {
                    "checkpoint_id": d.checkpoint_id,
                    "after_message_id": self.ids[d.index - 1] if d.index else None,
                    "tokens_before": d.before,
                    "tokens_after": d.after,
                    "recorded_before": d.recorded_before,
                    "recorded_after": d.recorded_after,
                    "created_at": d.created_at,
                }
                for d in self.drops
            ],
            "points": self.points(),
        }

    def span(self, checkpoint_id: int | None) -> tuple[int, int]:
        """Message indices ``[start, end)`` while checkpoint ``checkpoint_id`` was the latest
        (None: before the first checkpoint)."""
        if checkpoint_id is None:
            return 0, self.drops[0].index if self.drops else len(self.sizes)
        for k, drop in enumerate(self.drops):
            if drop.checkpoint_id == checkpoint_id:
                end = self.drops[k + 1].index if k + 1 < len(self.drops) else len(self.sizes)
                return drop.index, end
        raise KeyError(checkpoint_id)


def context_chart(
    ids: Sequence[int],
    counts: Sequence[int | None],
    times: Sequence[datetime | None] | Mapping[int, datetime | None],
    checkpoints: Sequence[ChartCheckpoint],
    system_tokens: int,
    window: int | None = None,
    threshold: int | None = None,
    estimates: Sequence[float | None] | None = None,
) -> ContextChart:
    """The chart of a session whose messages are ``ids`` (ascending) with their stored
    ``counts`` (None: no usable count) and ``times``, and whose ``checkpoints`` are in id
    order (``times``: every message's, or by index those known: a checkpoint that recorded
    its newest message needs none). ``system_tokens``: the system prompt as sent (0 without
    one), the head before the first checkpoint. ``estimates``: what a message without a count is taken to cost (from
    its length), else nothing."""
    n = len(ids)
    known = times if isinstance(times, Mapping) else dict(enumerate(times))
    uncounted = 0 if isinstance(counts, array) else list(counts).count(None)
    if not uncounted:  # every message counted: summed at C speed
        prefix = Series(accumulate(cast(Sequence[int], counts), initial=0))
    else:
        filled = counts if estimates is None else map(_or, counts, estimates)
        prefix = Series(accumulate((int(c or 0) for c in filled), initial=0))
    # prefix[i]: the tokens of the messages before i
    sizes, in_force = Series(), Series()
    drops: list[ChartDrop] = []
    start, head, cut = 0, system_tokens, 0  # the context in force: its head and its cut index

    def grow(until: int, k: int) -> None:
        """The sizes of messages ``start..until-1`` under the context in force."""
        base = total_tokens([head]) - prefix[cut]
        sizes.extend(map(base.__add__, prefix[start + 1 : until + 1]))
        in_force.extend(repeat(k, until - start))

    for k, cp in enumerate(checkpoints):
        cp_cut = bisect_left(ids, cp.first_kept_message_id)
        at = max(start, written_after(ids, known, cp, cp_cut))
        grow(at, k - 1)
        before = sizes[at - 1] if at > start else _at_start(drops, head)
        head, cut, start = cp.head_tokens, min(cp_cut, at), at
        after = total_tokens([head, prefix[at] - prefix[cut]])
        drops.append(
            ChartDrop(cp.id, at, before, after, cp.created_at, cp.tokens_before, cp.tokens_after)
        )
    grow(n, len(checkpoints) - 1)
    kept_ids = ids if isinstance(ids, Series) else Series(ids)
    return ContextChart(kept_ids, known, sizes, in_force, drops, window, threshold, uncounted)


def _or(count: int | None, estimate: float | None) -> float | None:
    return estimate if count is None else count


def _at_start(drops: list[ChartDrop], head: int) -> int:
    """The size just before a checkpoint written before any message of its span: the previous
    checkpoint's after, or the bare head."""
    return drops[-1].after if drops else total_tokens([head])


def written_after(
    ids: Sequence[int], times: Mapping[int, datetime | None], cp: ChartCheckpoint, cut: int
) -> int:
    """How many of the messages were stored when ``cp`` was written: every one before its cut,
    then those up to the newest it recorded, or else those not written after its time (a
    message or a checkpoint without a time counts as before, as ``inspection.ContextPoint``
    decides what a context holds)."""
    if cp.messages_through is not None:
        return max(cut, bisect_left(ids, cp.messages_through + 1))
    if cp.created_at is None:
        return len(ids)
    for i in range(cut, len(ids)):
        t = times.get(i)
        if t is not None and t > cp.created_at:
            return i
    return len(ids)


@dataclass(frozen=True)
class Column:
    """One column of a drawn chart: messages ``[start, end)``, the size after the first and
    the last of them, and the least and the most between."""

    start: int
    end: int
    first: int
    last: int
    low: int
    high: int


def columns(chart: ContextChart, width: int, stretch: bool = False) -> list[Column]:
    """The chart's sizes in at most ``width`` columns of consecutive messages (one message a
    column when they fit; with ``stretch``, exactly ``width``, a message over several):
    what a column of a picture shows, drops included."""
    n = len(chart.sizes)
    if n == 0 or width < 1:
        return []
    count = width if stretch else min(n, width)
    out = []
    for c in range(count):
        start = c * n // count
        end = max(start + 1, (c + 1) * n // count)
        values = chart.sizes[start:end]
        out.append(Column(start, end, values[0], values[-1], min(values), max(values)))
    return out


def column_of(index: int, n: int, count: int) -> int:
    """The column (of ``count`` over ``n`` messages, as :func:`columns` splits them) where
    message ``index`` starts; ``n`` itself falls in the last."""
    if n == 0:
        return 0
    if count >= n:  # a message over one or more columns: its first
        return min(count - 1, -(-index * count // n))
    return min(count - 1, index * count // n)


@dataclass(frozen=True)
class Bucket:
    """A bar of the store's histogram: sessions whose context is ``low`` to ``high`` (a share
    of their window; None: no upper bound) and how many there are."""

    low: float
    high: float | None
    sessions: int

    def holds(self, threshold_share: float | None) -> bool:
        """Whether the threshold (a share of the window; None: no common one) is in this bar."""
        return (
            self.high is not None
            and threshold_share is not None
            and self.low <= threshold_share < self.high
        )

    def as_row(self, threshold_share: float | None) -> dict[str, Any]:
        """The bar as a row: its range (shares of the window, rounded so a tenth reads 0.3,
        not 0.30000000000000004), its sessions, and whether it holds the threshold."""
        return {
            "low": round(self.low, 6),
            "high": None if self.high is None else round(self.high, 6),
            "sessions": self.sessions,
            "holds_threshold": self.holds(threshold_share),
        }


# Below the threshold by at most this share of the window: "near" it.
NEAR_THRESHOLD = 0.1


@dataclass(frozen=True)
class WindowHistogram:
    """The store's sessions by their restored context's share of their window: the bars, the
    threshold's share when every session has the same, and how many sessions are near the
    threshold (within :data:`NEAR_THRESHOLD` of the window below it), over it, over the window."""

    sessions: int
    threshold_share: float | None
    near_threshold: int
    over_threshold: int
    over_window: int
    buckets: list[Bucket]

    def as_doc(self) -> dict[str, Any]:
        """The histogram as a document, its shares rounded as :meth:`Bucket.as_row` rounds."""
        common = self.threshold_share
        return {
            "sessions": self.sessions,
            "threshold_share": None if common is None else round(common, 6),
            "near_threshold": self.near_threshold,
            "near_share": NEAR_THRESHOLD,
            "over_threshold": self.over_threshold,
            "over_window": self.over_window,
            "buckets": [b.as_row(common) for b in self.buckets],
        }


def sessions_histogram(contexts: Iterable[tuple[int, int, int]]) -> WindowHistogram:
    """The histogram of sessions given as (restored context's tokens, window, threshold)."""
    shares: list[float] = []
    threshold_shares: set[float] = set()
    over_window = over = near = 0
    for tokens, window, threshold in contexts:
        shares.append(tokens / window)
        threshold_shares.add(threshold / window)
        over_window += tokens > window
        over += tokens > threshold
        near += threshold - NEAR_THRESHOLD * window < tokens <= threshold
    common = threshold_shares.pop() if len(threshold_shares) == 1 else None
    return WindowHistogram(len(shares), common, near, over, over_window, window_histogram(shares))


def window_histogram(shares: Sequence[float], step: float = 0.1) -> list[Bucket]:
    """Sessions by their restored context as a share of their window, in bars of ``step``
    from 0 to the window, then one bar for every session over it."""
    bars = round(1 / step)
    counts = [0] * (bars + 1)
    for share in shares:
        counts[bars if share > 1 else min(bars - 1, int(share * bars + 1e-9))] += 1
    return [Bucket(i * step, (i + 1) * step if i < bars else None, n) for i, n in enumerate(counts)]
