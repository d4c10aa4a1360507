"""What compacting a session came to, one spelling for the store and the runner alike."""

from __future__ import annotations

from enum import StrEnum


class CompactionStatus(StrEnum):
    """A compaction's status: a ``str`` that compares, prints and serializes as its value."""

    COMPACTED = "compacted"
    PLANNED = "planned"  # dry run
    EVALUATED = "evaluated"  # dry run with --summarize: summarized, checked, not written
    BELOW_THRESHOLD = "below_threshold"
    NOTHING_TO_CUT = "nothing_to_cut"
    LEASE_HELD = "lease_held"  # another compactor holds the session
    # Another checkpoint was appended since the session was read (or a sibling was refused by
    # the unique key): nothing written.
    LOST_RACE = "lost_race"
    REJECTED = "rejected"  # the summary was unusable (empty, not smaller, ...); nothing written
    OVER_WINDOW = "over_window"  # no safe cut brings the context under its threshold
    FAILED = "failed"
    # A message arrived inside the summarized span before the append: plan again (the runner
    # retries; it ends as FAILED when they keep arriving).
    SPAN_CHANGED = "span_changed"

    @property
    def ok(self) -> bool:
        """Not a failure: a run that ends with only these exits 0."""
        return self in OK_STATUSES


OK_STATUSES = frozenset(
    {
        CompactionStatus.COMPACTED,
        CompactionStatus.PLANNED,
        CompactionStatus.EVALUATED,
        CompactionStatus.BELOW_THRESHOLD,
        CompactionStatus.NOTHING_TO_CUT,
        CompactionStatus.LEASE_HELD,
        CompactionStatus.LOST_RACE,
    }
)
