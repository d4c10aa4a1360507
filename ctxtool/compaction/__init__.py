"""Offline compaction: pure rules at the centre, the store and the summarizer at the edges.

- ``plan``: should a session compact, where is the cut (pure, plain lists)
- ``prepare``: the plan plus what to summarize and the budget; ``check_summary`` (pure)
- ``summarizers``: ``openai`` and ``extractive``; ``fold``: bounded input, chunked folding
- ``runner``: :class:`Compactor`, one session or the cron batch against a store
- ``rules``: checkpoint consistency rules ``validate`` uses; ``ctxtool.quality``: retention

The names below load on first use, so the pure modules (``ctxtool.quality`` reads ``calls``,
``files`` and ``sections``) import without the runner and the store.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "outcome": [
        "BELOW_THRESHOLD",
        "COMPACTED",
        "EVALUATED",
        "FAILED",
        "LEASE_HELD",
        "LOST_RACE",
        "NOTHING_TO_CUT",
        "OK_STATUSES",
        "OVER_WINDOW",
        "PLANNED",
        "REJECTED",
        "CompactionOutcome",
    ],
    "plan": [
        "DEFAULT_KEEP_RECENT_TOKENS",
        "DEFAULT_RESERVE_TOKENS",
        "CompactionPlan",
        "CompactionSettings",
        "PlanMessage",
        "context_window_for",
        "is_safe_cut",
        "plan_compaction",
        "should_compact",
    ],
    "batch": ["Batch", "Candidate"],
    "runner": ["Compactor"],
    "settings": ["lease_seconds_for", "parse_duration"],
    "summarizers": [
        "ExtractiveSummarizer",
        "OpenAISummarizer",
        "SummarizerSettings",
        "make_summarizer",
    ],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxtool.compaction' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
