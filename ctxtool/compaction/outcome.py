"""What compacting one session came to: a status and the figures a report shows."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..store.checkpoints import LOST_RACE
from ..store.leases import HELD as LEASE_HELD

COMPACTED = "compacted"
PLANNED = "planned"  # dry run
EVALUATED = "evaluated"  # dry run with --summarize: summarized, checked, not written
BELOW_THRESHOLD = "below_threshold"
NOTHING_TO_CUT = "nothing_to_cut"
# LEASE_HELD (another compactor holds the session) and LOST_RACE (another checkpoint was
# appended first; nothing written) are what the store answers: one spelling, the store's.
REJECTED = "rejected"  # the summary was unusable (empty, not smaller, ...); nothing written
OVER_WINDOW = "over_window"  # no safe cut brings the context under its threshold
FAILED = "failed"
OK_STATUSES = {
    COMPACTED,
    PLANNED,
    EVALUATED,
    BELOW_THRESHOLD,
    NOTHING_TO_CUT,
    LEASE_HELD,
    LOST_RACE,
}


@dataclass
class CompactionOutcome:
    session_id: int
    status: str
    tokens_before: int | None = None
    tokens_after: int | None = None
    tokens_kept: int | None = None  # tokens after, before the new summary is added (the plan)
    threshold: int | None = None
    summarised_messages: int | None = None
    kept_messages: int | None = None
    first_kept_message_id: int | None = None
    split_turn: bool | None = None
    compaction_id: int | None = None
    summarizer: str | None = None
    model: str | None = None
    summary_tokens: int | None = None
    retention: float | None = None
    carry_over: float | None = None
    summarizer_requests: int | None = None
    error: str | None = None
    seconds: float = 0.0
    summarizer_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def message(self) -> str:
        """One line for an error report: the session, then what went wrong."""
        detail = self.error or self.status
        if detail.startswith(f"session {self.session_id} "):
            return detail
        return (
            f"session {self.session_id}: {self.status}: {detail}"
            if self.error
            else f"session {self.session_id}: {detail}"
        )

    def as_dict(self) -> dict:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 3)
        d["summarizer_seconds"] = round(self.summarizer_seconds, 3)
        return d
