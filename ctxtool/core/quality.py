"""Reading the quality figures a checkpoint stored (pure; no database, no model).

The figures themselves come from ``ctxtool.evaluation`` when a checkpoint is written
(``details["quality"]``: probe score, fabrications, missed probe ids, section costs and
carry-over). Checkpoints written before the evaluation existed carry the older retention
figures; they are still described, and judged by their own numbers.
"""

from __future__ import annotations

from typing import Any

from .evaluator import DEFAULT_MIN_QUALITY
from .evaluator import describe as describe_evaluation


def quality_of(details: dict[str, Any] | None) -> dict[str, Any] | None:
    """The figures a checkpoint stored (None for checkpoints imported from an agent)."""
    q = details.get("quality") if isinstance(details, dict) else None
    return q if isinstance(q, dict) else None


def describe(quality: dict[str, Any] | None) -> str | None:
    """One line: ``probes 83% (5/6), 0 fabrications, summary 812 tokens, carry-over 100%``
    (``retention 87% (47/54 facts), …`` for a checkpoint of the older figures)."""
    if not isinstance(quality, dict):
        return None
    parts = [describe_evaluation(quality)]
    if parts[0] is None and quality.get("retention") is not None:
        parts[0] = (
            f"retention {quality['retention']:.0%} "
            f"({quality.get('facts_held')}/{quality.get('facts')} facts)"
        )
    if quality.get("carry_over") is not None:
        parts.append(f"carry-over {quality['carry_over']:.0%}")
    if parts[0] is None and quality.get("summary_tokens") is not None:
        parts.append(f"summary {quality['summary_tokens']} tokens")
    return ", ".join(p for p in parts if p) or None


def quality_warning(
    details: dict[str, Any] | None, min_quality: float = DEFAULT_MIN_QUALITY
) -> str | None:
    """Why a stored checkpoint's figures fall short (under ``min_quality``, fabrications, or
    the older retention figures under it); None when they do not, or there are none."""
    q = quality_of(details)
    if q is None:
        return None
    low = [
        f"{name} {q[key]:.0%}"
        for key, name in (("score", "probes"), ("retention", "retention"))
        if isinstance(q.get(key), (int, float)) and q[key] < min_quality
    ]
    fabricated = [f.get("text") for f in q.get("fabrications") or () if isinstance(f, dict)]
    if fabricated:
        low.append(f"fabrications {', '.join(map(repr, fabricated[:3]))}")
    if not low:
        return None
    missed = q.get("missed") or []
    named = f"; missed: {', '.join(map(str, missed[:5]))}" if missed else ""
    return (
        f"summary answers too little of what it replaced: {', '.join(low)} "
        f"(floor {min_quality:.0%}){named}"
    )
