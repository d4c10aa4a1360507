"""Consistency rules about checkpoints that ``validate`` checks (pure).

They use what a checkpoint records of itself in ``details``: how many messages it summarized
and the sum of their ids (``summarised_messages``, ``summarised_id_sum``), written by the
append that proved the span in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from ..records import (
    NO_CALL_ID,
    NO_RESULT_TEXT,
    ORPHAN_RESULT_PREFIX,
    SUMMARY_PREFIX,
    Compaction,
    Message,
    answer_tool_calls,
)
from ..tokens import REPLY_PRIMING_TOKENS, TOKENS_PER_MESSAGE, MessageText, count_messages
from .plan import CompactionSettings

# The message framing of a context's head (the system prompt's and the summary's role and
# separators, the summary's preface), over and above the bytes of their texts.
HEAD_FRAMING_TOKENS = 2 * (TOKENS_PER_MESSAGE + 8) + len(SUMMARY_PREFIX.encode())
# The bytes a resent result's prefix adds besides its call id (the longer wording of a result
# without one included).
_RESEND_PREFIX_BYTES = len(ORPHAN_RESULT_PREFIX.format(call_id=NO_CALL_ID).encode())


def _recorded_span(checkpoint: Compaction) -> tuple[dict, int, int] | None:
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


@dataclass(frozen=True)
class SuffixTokens:
    """What the stored counts of a restored suffix say about its tokens, read without its text.

    ``tokens``: the stored counts that are what the model is sent (made with the encoding the
    session needs), plus the results ctxtool adds for calls without one. ``uncounted``:
    messages with no count under that encoding (none stored, or made with another one).
    ``resent``: tool results whose call is not in the context, and messages of no chat role,
    sent as a user message, so their stored count is not what is sent. ``unpaired``: from
    set-based sums, which know how many calls and results there are but not which answers which
    (:func:`summed_suffix`), the
    difference: where calls and results differ in number, some call goes unanswered or some
    result answers none, so the pairing must be read. Only with all three at 0 is ``tokens``
    exact; from sums, up to ``unread_pairing`` more."""

    tokens: int = 0
    uncounted: int = 0
    resent: int = 0
    synthetic: int = 0
    unpaired: int = 0
    # From sums, with as many calls as results: at most what is sent beyond the stored counts
    # if some of them do not answer each other (a placeholder for a call, a prefix on a resent
    # result), which the sums cannot see. Added to the upper bound, not to ``tokens``.
    unread_pairing: int = 0

    @property
    def known(self) -> bool:
        return not (self.uncounted or self.resent or self.unpaired)


def summed_suffix(
    tokens: int | None,
    uncounted: int | None,
    calls: int | None,
    results: int | None,
    longest_result_id_bytes: int | None,
    encoding: str,
    foreign: int | None = 0,
) -> SuffixTokens:
    """:class:`SuffixTokens` from set-based sums over a suffix: the stored counts made with
    ``encoding`` (the one the session needs), the rows without one, the tool calls, the tool
    results and the UTF-8 bytes of the longest result's call id. Calls and results equal in
    number may still not answer each other: each such pair is bounded by a placeholder result
    plus a resend prefix (its call id included, a token at most per byte, and the few tokens
    the prefix can change at its junction with the result's text). ``foreign``: messages of
    no chat role, resent as user messages."""
    calls, results = int(calls or 0), int(results or 0)
    per_pair = (
        synthetic_result_tokens(encoding)
        + _RESEND_PREFIX_BYTES
        + int(longest_result_id_bytes or 0)
        + 4
    )
    return SuffixTokens(
        int(tokens or 0),
        int(uncounted or 0),
        resent=int(foreign or 0),
        unpaired=abs(calls - results),
        unread_pairing=min(calls, results) * per_pair,
    )


def suffix_tokens(messages: Sequence[Message], encoding: str) -> SuffixTokens:
    """The :class:`SuffixTokens` of a restored suffix: records with roles, tool links and
    stored counts (their text is not needed), in id order."""
    tokens = uncounted = resent = synthetic = 0
    for entry in answer_tool_calls(messages):
        m = entry.message
        if entry.synthetic:
            synthetic += 1
            tokens += synthetic_result_tokens(encoding)
        elif entry.as_user:
            resent += 1
        elif m.token_count is None or m.token_encoding != encoding:
            uncounted += 1
        else:
            tokens += m.token_count
    return SuffixTokens(tokens, uncounted, resent, synthetic)


@cache
def synthetic_result_tokens(encoding: str) -> int:
    """Tokens of the result the restored context adds for a call that has none."""
    return count_messages([MessageText("tool", NO_RESULT_TEXT)], encoding)[0]


def context_bounds(suffix: SuffixTokens, head_bytes: int) -> tuple[int, int]:
    """(at least, at most) tokens of a restored context whose suffix counts are ``suffix`` and
    whose head (system prompt and summary, stored counts of which are not trusted) holds
    ``head_bytes`` UTF-8 bytes: a byte-level BPE token is at least one byte. Exact only for a
    suffix whose counts are all :attr:`SuffixTokens.known`."""
    low = suffix.tokens + REPLY_PRIMING_TOKENS
    return low, low + head_bytes + HEAD_FRAMING_TOKENS + suffix.unread_pairing


def needs_measuring(suffix: SuffixTokens, head_bytes: int, threshold: int) -> bool:
    """Whether only an exact count can tell if the context is over ``threshold``: counts the
    suffix cannot vouch for, or a threshold between its bounds."""
    low, high = context_bounds(suffix, head_bytes)
    return not suffix.known or low <= threshold < high
