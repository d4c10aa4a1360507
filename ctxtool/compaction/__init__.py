"""Compacting sessions against a store: ``compactor`` (:class:`Compactor`, one session),
``batch`` (the cron batch over every session that needs it), ``fold`` (a summarizer's input kept
within its window, folded chunk by chunk) and ``summarizers`` (``openai``, ``extractive``).

The rules they apply are in ``ctxtool.core`` (``plan``, ``prepare``, ``durations``, ``status``,
``compaction_outcome``); their public names are re-exported here, and importing this package
loads only them: ``from ctxtool.compaction.compactor import Compactor`` brings the services.
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
