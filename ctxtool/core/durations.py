"""Rules about running compaction that every caller gets, not only the CLI: durations and how
long a lease must last for the summarizer in use."""

from __future__ import annotations

import re
from typing import Protocol

from .errors import InvalidSettings

LEASE_MARGIN_S = 60
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# Longer than any session lives; beyond it a server's date arithmetic overflows (MySQL) or
# gives NULL (SQLite), and a filter would quietly match nothing.
MAX_DURATION_S = 3650 * 86400


def parse_duration(text: str | None) -> int | None:
    """``90s``, ``10m``, ``2h``, ``1d``, ``2w`` as seconds (ASCII digits, up to ten years). A
    bare number is refused: ``10`` could mean seconds or minutes, and a cron line that guesses
    wrong compacts live sessions."""
    if text is None or not str(text).strip():
        return None
    match = re.fullmatch(r"\s*([0-9]+)\s*([smhdw])\s*", str(text))
    if not match:
        raise InvalidSettings(
            f"invalid duration {text!r}: a number and a unit, e.g. 90s, 10m, 2h, 1d, 2w"
        )
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if seconds > MAX_DURATION_S:
        raise InvalidSettings(f"invalid duration {text!r}: at most ten years")
    return seconds


def lease_seconds_for(
    seconds_per_request: float, requests: int = 1, requested: int | None = None
) -> int:
    """How long to hold a session: the summarizer's worst case for the requests it will make
    (timeout x attempts for an LLM, per chunk when folding) plus a margin, or the requested
    figure if that is longer. Sized from the summarizer actually used: an extractive run holds
    a session for a minute or two, not for an LLM's eleven."""
    needed = seconds_per_request * max(1, requests) + LEASE_MARGIN_S
    # Never past what a server's date arithmetic takes (MySQL's 1441/1916, SQLite's NULL):
    # many chunks of long timeouts, or a library caller's figure, are held that long instead.
    if not needed <= MAX_DURATION_S:  # nan too
        needed = MAX_DURATION_S
    return int(min(max(needed, requested or 0), MAX_DURATION_S))


class SummarizerCost(Protocol):
    """What sizing a lease needs of a summarizer (a rule knows no summarizer class)."""

    @property
    def input_tokens(self) -> int | None: ...

    def seconds_per_request(self) -> float: ...


def lease_for_plan(
    summarizer: SummarizerCost, summarized_tokens: int, requested: int | None = None
) -> int:
    """The lease a compaction needs: one summarizer request, or one per chunk (estimated
    generously) when a span larger than the summarizer's input bound will be folded."""
    requests, bound = 1, summarizer.input_tokens
    if bound and summarized_tokens > bound // 2:
        requests = -(-summarized_tokens // (bound // 2)) + 1
    return lease_seconds_for(summarizer.seconds_per_request(), requests, requested)


def lease_covers(held: int, elapsed: float, needed: int) -> bool:
    """Whether a lease taken ``elapsed`` seconds ago (timed from before its take) for ``held``
    seconds still covers a plan that needs ``needed`` (:func:`lease_for_plan`), so that taking
    it again after the plan would be a transaction for nothing: what is left must cover the
    plan's summarizer requests and half the margin, the other half having gone to reading and
    planning since the take. A plan that folds (more requests), or a read that took longer,
    takes the lease again for the plan's own length."""
    return held - elapsed >= needed - LEASE_MARGIN_S / 2
