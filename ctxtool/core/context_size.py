"""How big a restored context is: the one owner of that measure (pure, no database).

A context costs what its messages cost as sent (system prompt, summary, then the entries of
:meth:`~ctxtool.core.records.RestoredContext.entries`, synthetic results included) plus the reply
priming. A message's stored count is reused only when it is usable: made with the encoding the
session needs, and for what is sent (a result resent as a user message is counted as sent).
Without the text, stored counts only bound the size (:class:`SuffixTokens`,
:func:`context_bounds`); the store sums them in SQL with ``store.reads.usable_count_sums``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from .records import (
    NO_CALL_ID,
    NO_RESULT_TEXT,
    ORPHAN_RESULT_PREFIX,
    SUMMARY_PREFIX,
    ContextEntry,
    Message,
    RestoredContext,
    answer_tool_calls,
)
from .tokens import REPLY_PRIMING_TOKENS, TOKENS_PER_MESSAGE, MessageText, count_messages

# The message framing of a context's head (the system prompt's and the summary's role and
# separators, the summary's preface), over and above the bytes of their texts.
HEAD_FRAMING_TOKENS = 2 * (TOKENS_PER_MESSAGE + 8) + len(SUMMARY_PREFIX.encode())
# The bytes a resent result's prefix adds besides its call id (the longer wording of a result
# without one included).
_RESEND_PREFIX_BYTES = len(ORPHAN_RESULT_PREFIX.format(call_id=NO_CALL_ID).encode())


def has_usable_count(message: Message, encoding: str) -> bool:
    """Whether the message's stored count is what the model reads under ``encoding``. A count
    no message can have was read as None already (``store.reads.TRUSTED_COUNT``)."""
    return message.token_count is not None and message.token_encoding == encoding


def fill_missing_counts(messages: Sequence[Message], encoding: str) -> list[Message]:
    """Count the messages without a usable count under ``encoding`` and set the counts on the
    records; returns those it counted (the store writes them where the caller may write)."""
    missing = [m for m in messages if not has_usable_count(m, encoding)]
    for m, n in zip(missing, count_messages([m.text() for m in missing], encoding)):
        m.token_count, m.token_encoding = n, encoding
    return missing


def total_tokens(message_counts: Iterable[int]) -> int:
    """Tokens a model reads for a list of already-counted messages: their sum plus reply priming."""
    return sum(message_counts) + REPLY_PRIMING_TOKENS


def restored_context_tokens(
    ctx: RestoredContext, encoding: str, entries: Sequence[ContextEntry] | None = None
) -> int:
    """Tokens of a restored context under ``encoding``, reusing stored counts that match it
    (synthetic tool results and the summary included: they are sent too). ``entries``:
    ``ctx.entries()`` when the caller has them already."""
    return total_tokens(context_token_counts(ctx, encoding, entries))


def context_token_counts(
    ctx: RestoredContext, encoding: str, entries: Sequence[ContextEntry] | None = None
) -> list[int]:
    """Tokens of each message of ``ctx.to_openai()`` (system prompt, summary, then entries),
    stored counts reused where they were made with ``encoding``, the rest counted now.
    ``entries``: ``ctx.entries()`` when the caller has them already."""
    head = ctx.texts(head_only=True)
    if entries is None:
        entries = ctx.entries()
    return count_messages(head, encoding) + entry_token_counts(entries, encoding)


# Where a session's details keep the count of its system prompt, and a checkpoint's details the
# count of its summary as sent: {encoding: {"tokens": n, "digest": of the text counted}}.
# Written by `tokens count` and by compaction, so that showing a context whose every message is
# counted loads no vocabulary. The digest ties a count to the text it was made of: a text
# changed since (a re-import, a runtime's edit) is counted again, and a count a runtime wrote
# under this key without ctxtool's digest is never taken.
HEAD_COUNTS_KEY = "ctxtool_counts"
_MOST_TOKENS = 1 << 30  # as store.reads.MAX_MESSAGE_TOKENS: more is no count


def text_digest(text: str) -> str:
    """What a stored head count records of the text it counted (a change of it is seen)."""
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def stored_head_count(details: Any, encoding: str, text: str) -> int | None:
    """The count ``details`` keeps of ``text`` as sent under ``encoding``, or None: none kept,
    one of another text, or no count (below 1, over 2**30, not an int)."""
    counts = details.get(HEAD_COUNTS_KEY) if isinstance(details, dict) else None
    entry = counts.get(encoding) if isinstance(counts, dict) else None
    if not isinstance(entry, dict) or entry.get("digest") != text_digest(text):
        return None
    tokens = entry.get("tokens")
    return tokens if type(tokens) is int and 0 < tokens <= _MOST_TOKENS else None


def with_head_count(
    details: Any, encoding: str, text: str, tokens: int, summary_tokens: int | None = None
) -> dict[str, Any] | None:
    """``details`` with the count of ``text`` under ``encoding`` kept (others kept too), or
    None when ``details`` is not an object a count can be added to (a runtime's list or text).
    A checkpoint's entry may also keep ``summary_tokens``, its summary's own size (see
    :func:`stored_summary_count`)."""
    if details is None:
        details = {}
    if not isinstance(details, dict):
        return None
    counts = details.get(HEAD_COUNTS_KEY)
    counts = dict(counts) if isinstance(counts, dict) else {}
    entry: dict[str, Any] = {"tokens": tokens, "digest": text_digest(text)}
    if summary_tokens is not None:
        entry[SUMMARY_TOKENS_KEY] = summary_tokens
    counts[encoding] = entry
    return {**details, HEAD_COUNTS_KEY: counts}


# In a checkpoint's entry under HEAD_COUNTS_KEY: count_text of the summary alone (no preface, no
# framing), the size `context checkpoints` shows of a summary whose transcript gave none. It is
# ctxtool's count under that entry's encoding, tied to the summary by the entry's digest, so it
# is read under that encoding only; the summary_tokens column keeps what the runtime (or the
# compaction that wrote the checkpoint) said, and is never filled in with ctxtool's count.
SUMMARY_TOKENS_KEY = "summary_tokens"


def stored_summary_count(details: Any, encoding: str, summary: str) -> int | None:
    """The size of ``summary`` alone that a checkpoint's ``details`` keep under ``encoding``,
    or None: none kept, one of another summary or another encoding, or no count."""
    if stored_head_count(details, encoding, SUMMARY_PREFIX + summary) is None:
        return None
    tokens = details[HEAD_COUNTS_KEY][encoding].get(SUMMARY_TOKENS_KEY)
    return tokens if type(tokens) is int and 0 <= tokens <= _MOST_TOKENS else None


def head_token_counts(ctx: RestoredContext, session_details: Any, encoding: str) -> list[int]:
    """Tokens of the context's head as sent (system prompt, summary: those it has), the counts
    kept in the session's and the checkpoint's details reused, the rest counted now."""
    texts = ctx.texts(head_only=True)
    owners = [session_details] if ctx.system_prompt else []
    if ctx.compaction is not None:
        owners.append(ctx.compaction.details)
    counts = [stored_head_count(d, encoding, t.content or "") for d, t in zip(owners, texts)]
    missing = [i for i, c in enumerate(counts) if c is None]
    for i, n in zip(missing, count_messages([texts[i] for i in missing], encoding)):
        counts[i] = n
    return [c or 0 for c in counts]


def entry_token_counts(entries: Sequence[ContextEntry], encoding: str) -> list[int]:
    """Tokens of each entry as sent, stored counts reused where they were made with
    ``encoding``: any run of a context's entries (``context show`` counts it page by page)."""
    # Only what has no stored count is turned into text and encoded: this runs for every
    # session compact --all measures, so it must cost next to nothing when all is counted.
    counts: list[int | None] = []
    for entry in entries:
        if entry.synthetic:  # one fixed sentence, its count known without a vocabulary
            counts.append(synthetic_result_tokens(encoding))
            continue
        usable = not entry.as_user and has_usable_count(entry.message, encoding)
        counts.append(entry.message.token_count if usable else None)
    missing = [i for i, c in enumerate(counts) if c is None]
    for i, n in zip(missing, count_messages([entries[i].text() for i in missing], encoding)):
        counts[i] = n
    return [c or 0 for c in counts]


@dataclass(frozen=True)
class SuffixTokens:
    """What the stored counts of a restored suffix say about its tokens, read without its text.

    ``tokens``: the stored counts that are what the model is sent (made with the encoding the
    session needs), plus the results ctxtool adds for calls without one. ``uncounted``:
    messages with no count under that encoding (none stored, or made with another one).
    ``resent``: tool results whose call is not in the context, and messages of no chat role,
    sent as a user message, so their stored count is not what is sent. ``unpaired``: from
    set-based sums, which know how many calls and results there are but not which answers which
    (:func:`summed_suffix`), the difference: where calls and results differ in number, some
    call goes unanswered or some result answers none, so the pairing must be read. Only with
    all three at 0 is ``tokens`` exact; from sums, up to ``unread_pairing`` more."""

    tokens: int = 0
    uncounted: int = 0
    resent: int = 0
    synthetic: int = 0
    unpaired: int = 0
    # From sums: at most what is sent beyond the stored counts if calls and results do not
    # all answer each other (a placeholder for a call, a prefix on a resent result), which the
    # sums cannot see. Added to the upper bound, not to ``tokens``.
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
    the prefix can change at its junction with the result's text). Calls and results unequal
    in number are bounded the same way, a pair's worth for each of the more numerous: a call
    gets at most one placeholder, a result at most one prefix. ``foreign``: messages of no
    chat role, resent as user messages."""
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
        unread_pairing=max(calls, results) * per_pair,
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
        elif not has_usable_count(m, encoding):
            uncounted += 1
        else:
            tokens += m.token_count or 0
    return SuffixTokens(tokens, uncounted, resent, synthetic)


# synthetic_result_tokens of the shipped encodings, as counted (tests/test_startup.py checks):
# a batch sums stored counts with this in every bound, and loading a vocabulary to count one
# fixed sentence would cost a dry run more than the sums.
_SYNTHETIC_RESULT_TOKENS = {"o200k_base": 13, "cl100k_base": 13}


@cache
def synthetic_result_tokens(encoding: str) -> int:
    """Tokens of the result the restored context adds for a call that has none."""
    if encoding in _SYNTHETIC_RESULT_TOKENS:
        return _SYNTHETIC_RESULT_TOKENS[encoding]
    return count_messages([MessageText("tool", NO_RESULT_TEXT)], encoding)[0]


def context_bounds(suffix: SuffixTokens, head_bytes: int) -> tuple[int, int]:
    """(at least, at most) tokens of a restored context whose suffix counts are ``suffix`` and
    whose head (system prompt and summary, stored counts of which are not trusted) holds
    ``head_bytes`` UTF-8 bytes: a byte-level BPE token is at least one byte. Exact only for a
    suffix whose counts are all :attr:`SuffixTokens.known`; bounds for one without uncounted
    or resent messages."""
    low = suffix.tokens + REPLY_PRIMING_TOKENS
    return low, low + head_bytes + HEAD_FRAMING_TOKENS + suffix.unread_pairing


def needs_measuring(suffix: SuffixTokens, head_bytes: int, threshold: int) -> bool:
    """Whether only an exact count can tell if the context is over ``threshold``: counts the
    suffix cannot vouch for (none, made with another encoding, a message resent as a user
    message), or a threshold between its bounds. Calls and results that differ in number are
    within the bounds (:func:`summed_suffix`): a session far from its threshold is decided
    without reading its pairing."""
    low, high = context_bounds(suffix, head_bytes)
    return bool(suffix.uncounted or suffix.resent) or low <= threshold < high


def surely_fits(suffix: SuffixTokens, head_bytes: int, threshold: int) -> bool:
    """Whether the stored counts alone prove the context is at most ``threshold`` tokens."""
    return suffix.known and context_bounds(suffix, head_bytes)[1] <= threshold
