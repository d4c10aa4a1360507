"""A checkpoint's stored quality figures, read and described in one line: what `context show`,
`context checkpoints` and `validate` print of the figures the quality gate
(``core.evaluator``) stored. Apart from the evaluator so that printing them does not load its
rules (answers, sections, span facts)."""

from __future__ import annotations

from typing import Any


def describe_evaluation(figures: dict[str, Any] | None) -> str | None:
    """One line for a report: ``probes 83% (5/6), 0 fabrications, summary 812 tokens``
    (None for figures that are no evaluation's)."""
    if not isinstance(figures, dict) or "summary_only_probes" not in figures:
        return None
    score = figures.get("score")
    shown = "n/a" if score is None else f"{score:.0%}"
    fabricated = len(figures.get("fabrications") or ())
    return (
        f"probes {shown} ({figures.get('held')}/{figures.get('summary_only_probes')}), "
        f"{fabricated} fabrication{'' if fabricated == 1 else 's'}, "
        f"summary {figures.get('summary_tokens')} tokens"
    )


def quality_of(details: dict[str, Any] | None) -> dict[str, Any] | None:
    """The figures a checkpoint stored (None for checkpoints imported from an agent)."""
    q = details.get("quality") if isinstance(details, dict) else None
    return q if isinstance(q, dict) else None


def describe_quality(quality: dict[str, Any] | None) -> str | None:
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
