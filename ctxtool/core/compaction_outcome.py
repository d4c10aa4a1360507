"""What compacting one session came to: a status and the figures a report shows."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .status import CompactionStatus


@dataclass
class CompactionOutcome:
    session_id: int
    status: CompactionStatus
    tokens_before: int | None = None
    tokens_after: int | None = None
    tokens_kept: int | None = None  # tokens after, before the new summary is added (the plan)
    threshold: int | None = None
    # The report's key, spelt as stored in a checkpoint's details (a format, not prose).
    summarised_messages: int | None = None
    kept_messages: int | None = None
    first_kept_message_id: int | None = None
    split_turn: bool | None = None
    compaction_id: int | None = None
    summarizer: str | None = None
    model: str | None = None
    summary_tokens: int | None = None
    # The quality gate's figures (details["quality"]): score, fabrications, missed probes.
    quality: dict[str, Any] | None = None
    score: float | None = None
    fabrications: int | None = None
    carry_over: float | None = None
    summarizer_requests: int | None = None
    error: str | None = None
    seconds: float = 0.0
    summarizer_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    summary: str | None = None  # the summary's text, kept by a dry run for --show-summary
    # Why the LLM's summary was not the one written (--fallback extractive), or None.
    fell_back: str | None = None

    @property
    def ok(self) -> bool:
        return self.status.ok

    def message(self) -> str:
        """One line for an error report: the session, then what went wrong."""
        detail = self.error or self.status.value
        if detail.startswith(f"session {self.session_id} "):
            return detail
        return (
            f"session {self.session_id}: {self.status.value}: {detail}"
            if self.error
            else f"session {self.session_id}: {detail}"
        )

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        d["seconds"] = round(self.seconds, 3)
        d["summarizer_seconds"] = round(self.summarizer_seconds, 3)
        return d
