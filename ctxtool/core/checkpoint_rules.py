"""Consistency rules about checkpoints that ``validate`` checks (pure).

They use what a checkpoint records of itself in ``details``: how many messages it summarized
and the sum of their ids (``summarised_messages``, ``summarised_id_sum``), written by the
append that proved the span in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .plan import CompactionSettings
from .records import Compaction


def _recorded_span(checkpoint: Compaction) -> tuple[dict[str, Any], int, int] | None:
    """(details, count, id sum) of the span a checkpoint recorded summarizing; None when it
    recorded none (imported, or written before ctxtool recorded spans)."""
    details = checkpoint.details if isinstance(checkpoint.details, dict) else {}
    count, id_sum = details.get("summarised_messages"), details.get("summarised_id_sum")
    if not isinstance(count, int) or not isinstance(id_sum, int):
        return None
    return details, count, id_sum


def unsummarized_messages(checkpoint: Compaction, range_ids: Sequence[int]) -> list[int] | None:
    """Messages inside a checkpoint's summarized range that it did not summarize.

    ``range_ids``: the ids stored now in ``[previous cut, checkpoint.first_kept_message_id)``
    of its session. Returns [] when they are exactly what the checkpoint summarized; the late
    message's id when one arrived (the id sums tell which); with several, the ids outside the
    first..last summarized ids recorded when they account for the difference, else every id
    of the range (they cannot be told apart). None when the checkpoint recorded no span
    (imported, or written before ctxtool recorded spans): nothing to check.
    """
    span = _recorded_span(checkpoint)
    if span is None:
        return None
    details, count, id_sum = span
    ids = list(range_ids)
    if len(ids) == count and sum(ids) == id_sum:
        return []
    if len(ids) < count:
        return None  # fewer than it summarized: deleted history (deleted_from_span), not this
    if len(ids) == count + 1 and sum(ids) - id_sum in ids:
        return [sum(ids) - id_sum]
    first = details.get("summarised_from_message_id")
    last = details.get("summarised_to_message_id")
    if isinstance(first, int) and isinstance(last, int):
        outside = [i for i in ids if not first <= i <= last]
        if len(ids) - len(outside) == count and sum(ids) - sum(outside) == id_sum:
            return outside
    return ids


def deleted_from_span(checkpoint: Compaction, range_ids: Sequence[int]) -> tuple[int, int | None]:
    """How many of the messages a checkpoint summarized are no longer stored (history deleted,
    which nothing may do), and the id when it is one; (0, None) when none are, or when the
    checkpoint recorded no span. ``range_ids`` as for :func:`unsummarized_messages`."""
    span = _recorded_span(checkpoint)
    if span is None:
        return 0, None
    _, count, id_sum = span
    ids = list(range_ids)
    if len(ids) >= count:
        return 0, None
    gone = count - len(ids)
    return gone, (id_sum - sum(ids) if gone == 1 else None)


def over_window(
    context_tokens: int, model: str | None, settings: CompactionSettings | None = None
) -> str | None:
    """A warning when a restored context is larger than its model's threshold (window less the
    reserve); None when it fits."""
    settings = settings or CompactionSettings()
    threshold = settings.threshold(model)
    if context_tokens <= threshold:
        return None
    return (
        f"restored context of {context_tokens} tokens is over its threshold of {threshold} "
        f"tokens (window {threshold + settings.reserve(model)})"
    )
