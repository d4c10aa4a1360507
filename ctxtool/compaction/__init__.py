"""Offline compaction: pure rules at the centre, the store and the summarizer at the edges.

- ``plan``: should a session compact, where is the cut (pure, plain lists)
- ``prepare``: the plan plus what to summarize and the budget; ``check_summary`` (pure)
- ``rules``: checkpoint consistency rules ``validate`` uses; ``ctxtool.core.quality``: retention
- ``status``, ``outcome``: what compacting a session came to (pure)
- ``summarizers``: ``openai`` and ``extractive``; ``fold``: bounded input, chunked folding
- ``runner``: :class:`~ctxtool.compaction.compactor.Compactor`, one session or the cron batch
  (``batch``) against a store

Importing this package loads the pure rules only (no store, no database, no summarizer): the
services are imported from their modules, ``from ctxtool.compaction.compactor import Compactor``.
"""

from __future__ import annotations

from ..core.compaction_outcome import CompactionOutcome
from ..core.durations import lease_seconds_for, parse_duration
from ..core.plan import (
    DEFAULT_KEEP_RECENT_TOKENS,
    DEFAULT_RESERVE_TOKENS,
    CompactionPlan,
    CompactionSettings,
    PlanMessage,
    context_window_for,
    is_safe_cut,
    plan_compaction,
    should_compact,
)
from ..core.status import OK_STATUSES, CompactionStatus

__all__ = [
    "DEFAULT_KEEP_RECENT_TOKENS",
    "DEFAULT_RESERVE_TOKENS",
    "OK_STATUSES",
    "CompactionOutcome",
    "CompactionPlan",
    "CompactionSettings",
    "CompactionStatus",
    "PlanMessage",
    "context_window_for",
    "is_safe_cut",
    "lease_seconds_for",
    "parse_duration",
    "plan_compaction",
    "should_compact",
]
