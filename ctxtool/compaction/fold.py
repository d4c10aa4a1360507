"""Bounded summarizer input: a span too large for one request is folded in chunks (pure
chunking; the fold calls the summarizer once per chunk).

The first chunk is summarized onto the previous summary, the next chunk folded onto that, and
so on, each request within ``input_tokens``: compaction works exactly when a conversation is
longest. A single message larger than a chunk is clipped, head and tail (errors come at the
end), and the clip is stated in the text the summarizer reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from ..core.records import Message
from ..core.tokens import get_encoding
from .summarizers.base import (
    ContextWindowExceeded,
    Summary,
    SummaryRequest,
    render_message,
    turn_start,
)
from .summarizers.prompt import SYSTEM_PROMPT, build_prompt

SAFETY = 0.97  # token counts of joined pieces are not exactly additive
MIN_CHUNK_TOKENS = 512
MIN_ANSWER_BUDGET = 256  # as prepare's MIN_SUMMARY_BUDGET: the least a summary is given


def chunk_transcript(
    messages: Sequence[Message], chunk_tokens: int, encoding: str
) -> list[tuple[list[Message], str]]:
    """The span as (messages, rendered text) chunks of at most ``chunk_tokens`` tokens each."""
    return [
        (members, "\n\n".join(pieces))
        for members, pieces in _chunks(messages, chunk_tokens, encoding)
    ]


def _chunks(
    messages: Sequence[Message], chunk_tokens: int, encoding: str
) -> list[tuple[list[Message], list[str]]]:
    """The span as (messages, their rendered pieces) chunks; a message renders to one piece
    (none when it renders to nothing)."""
    enc = get_encoding(encoding)
    limit = max(MIN_CHUNK_TOKENS, int(chunk_tokens * SAFETY))
    chunks: list[tuple[list[Message], list[str]]] = []
    members: list[Message] = []
    pieces: list[str] = []
    used = 0
    for m in messages:
        text = render_message(m)
        if not text:
            continue
        tokens = enc.encode_ordinary(text)
        if len(tokens) > limit:
            text, tokens = clip_tokens(enc, tokens, limit)
        cost = len(tokens) + 2  # the blank line joining pieces
        if pieces and used + cost > limit:
            chunks.append((members, pieces))
            members, pieces, used = [], [], 0
        members.append(m)
        pieces.append(text)
        used += cost
    if pieces:
        chunks.append((members, pieces))
    return chunks


def _rendered(
    request: SummaryRequest, members: list[Message], pieces: list[str], split_turn: bool
) -> SummaryRequest:
    """``request`` for one chunk, its text already rendered: the turn's prefix apart when the
    chunk ends in a split turn."""
    if not split_turn:
        return replace(request, messages=members, transcript="\n\n".join(pieces), split_turn=False)
    start = turn_start(members)
    return replace(
        request,
        messages=members,
        transcript="\n\n".join(pieces[:start]),
        turn_prefix="\n\n".join(pieces[start:]),
        split_turn=True,
    )


def clip_tokens(enc, tokens: list[int], limit: int) -> tuple[str, list[int]]:
    """Head (a third) and tail (the rest) of an oversized message, with the clip stated."""
    note_room = 40
    keep = max(2, limit - note_room)
    head, tail = keep // 3, keep - keep // 3
    note = f"\n... [clipped: {len(tokens) - keep} tokens of {len(tokens)} left out] ...\n"
    text = enc.decode(tokens[:head]) + note + enc.decode(tokens[-tail:])
    return text, enc.encode_ordinary(text)


FRAME_TOKENS = 6000  # more than instructions, format and the files lines ever take


def _surely_fits(request: SummaryRequest, input_tokens: int, estimated_tokens: int) -> bool:
    """Far below the bound without rendering or counting anything: the rendered span is never
    larger than its stored counts by more than the labels (tool results are clipped), and a
    text has no more tokens than characters."""
    return (
        estimated_tokens * 1.25
        + 16 * len(request.messages)
        + FRAME_TOKENS
        + max(len(request.previous_summary or ""), request.max_tokens)
    ) < input_tokens


def frame_tokens(request: SummaryRequest, brief: bool = False) -> int:
    """Tokens of one request less its conversation and previous summary: the system prompt,
    the instructions (the format the summarizer sends: ``brief`` for a small window) and the
    files lines, with a margin."""
    enc = get_encoding(request.encoding)
    frame = build_prompt(
        replace(request, transcript="", turn_prefix="", previous_summary=None), brief=brief
    )
    return len(enc.encode_ordinary(SYSTEM_PROMPT)) + len(enc.encode_ordinary(frame)) + 64


def previous_summary_limit(request: SummaryRequest, input_tokens: int, brief: bool = False) -> int:
    """The most a previous summary may take of one request and still leave a chunk of
    conversation room beside it."""
    frame = frame_tokens(request, brief)
    return max(MIN_CHUNK_TOKENS, input_tokens - frame - 200 - MIN_CHUNK_TOKENS)


def _bounded_previous(request: SummaryRequest, limit: int) -> tuple[SummaryRequest, str | None]:
    """The request with a previous summary too large for any request (one another writer made,
    larger than ctxtool's budgets ever allow) clipped head and tail, saying so; and a note for
    the outcome. Clipping loses items: the carry-over check, made against the whole previous
    summary, then refuses a summary that lost too many."""
    if not request.previous_summary:
        return request, None
    enc = get_encoding(request.encoding)
    tokens = enc.encode_ordinary(request.previous_summary)
    if len(tokens) <= limit:
        return request, None
    note = (
        f"the previous summary ({len(tokens)} tokens) was clipped to {limit} tokens to fit "
        "the summarizer's input bound (--summary-input-tokens)"
    )
    return replace(request, previous_summary=clip_tokens(enc, tokens, limit)[0]), note


def chunk_budget(request: SummaryRequest, input_tokens: int, brief: bool = False) -> int:
    """Tokens left for conversation in one request: the bound (the whole prompt: the
    summarizer's ``input_tokens`` keeps no frame of its own) less the frame around it (system
    prompt, instructions, files) and the previous summary at its largest (the budget)."""
    enc = get_encoding(request.encoding)
    previous = len(enc.encode_ordinary(request.previous_summary or ""))
    frame = frame_tokens(request, brief)
    return input_tokens - frame - max(previous, request.max_tokens) - 200


def fold(
    summarize: Callable[[SummaryRequest], Summary],
    request: SummaryRequest,
    input_tokens: int | None,
    estimated_tokens: int | None = None,
    bound: Callable[[], int | None] | None = None,
    brief: Callable[[], bool] | None = None,
) -> Summary:
    """Summarize ``request`` in one call when it fits ``input_tokens``, else chunk by chunk.

    ``estimated_tokens`` (the span's stored counts) skips rendering and counting the span when
    it is far below the bound: the rendered span is never larger than its counts by more than
    the labels, and tool results are clipped.

    ``bound`` gives the summarizer's input bound as it stands: when a request did not fit the
    model's window (:class:`ContextWindowExceeded`) and the summarizer learned a smaller
    bound from it, the messages not yet summarized are folded again inside it, onto the
    summary the chunks before made (kept, not asked again). A request (a chunk) a server
    failed part-way is retried by the client on its own; what failed for good ends the fold.

    ``brief`` says whether the summarizer sends the brief format (a small window's), whose
    frame is then the one reserved."""
    if input_tokens is None:
        return summarize(request)
    # A bound the summarizer learned from the server's own figure (after the compactor sized
    # the budget) holds the answer, and the previous summary it becomes, to a third of it.
    request = _within(request, input_tokens)
    if estimated_tokens is not None and _surely_fits(request, input_tokens, estimated_tokens):
        try:
            return summarize(request)
        except ContextWindowExceeded as exc:
            input_tokens = _smaller_bound(exc, input_tokens, bound)
            request = _within(request, input_tokens)
            notes = [_refolded(input_tokens)]
            return _folded(summarize, request, input_tokens, bound, brief, notes)
    return _folded(summarize, request, input_tokens, bound, brief, [])


def _refolded(input_tokens: int) -> str:
    return (
        "a request did not fit the summary model's window: the rest of the span was folded "
        f"again in requests of at most {input_tokens} tokens"
    )


def _folded(
    summarize: Callable[[SummaryRequest], Summary],
    request: SummaryRequest,
    input_tokens: int,
    bound: Callable[[], int | None] | None,
    brief: Callable[[], bool] | None,
    notes: list[str],
) -> Summary:
    remaining = list(request.messages)
    previous = request.previous_summary
    summary: Summary | None = None
    requests = chunk_count = 0
    while True:
        short = bool(brief and brief())
        current = replace(request, messages=remaining, previous_summary=previous)
        limit = previous_summary_limit(current, input_tokens, short)
        current, clipped = _bounded_previous(current, limit)
        if clipped:
            notes.append(clipped)
        budget = chunk_budget(current, input_tokens, short)
        chunks = _chunks(current.messages, budget, request.encoding)
        try:
            if len(chunks) <= 1 and summary is None:
                members, pieces = chunks[0] if chunks else (list(current.messages), [])
                summary = summarize(_rendered(current, members, pieces, request.split_turn))
                requests += summary.requests
                chunk_count = 1
                break
            for i, (members, pieces) in enumerate(chunks):
                last = i == len(chunks) - 1
                chunk = _rendered(current, members, pieces, request.split_turn and last)
                summary = summarize(replace(chunk, previous_summary=current.previous_summary))
                requests += summary.requests
                chunk_count += 1
                notes.extend(n for n in summary.notes if n not in notes)
                # Kept: a later chunk's failure refolds from here, not from the start.
                current = replace(current, previous_summary=summary.text)
                previous = summary.text
                end = next(j for j, m in enumerate(remaining) if m is members[-1])
                remaining = remaining[end + 1 :]
            break
        except ContextWindowExceeded as exc:
            input_tokens = _smaller_bound(exc, input_tokens, bound)
            request = _within(request, input_tokens)
            notes.append(_refolded(input_tokens))
    assert summary is not None
    if chunk_count > 1:
        notes.append(f"summarized in {chunk_count} chunks of at most {input_tokens} tokens")
    notes.extend(n for n in summary.notes if n not in notes)
    return replace(summary, requests=requests, notes=tuple(notes))


def _smaller_bound(
    exc: ContextWindowExceeded, input_tokens: int, bound: Callable[[], int | None] | None
) -> int:
    """The bound the summarizer learned from ``exc``, when smaller than the one that failed;
    else ``exc`` itself (its message names what to set)."""
    learned = bound() if bound is not None else None
    if learned is None or learned >= input_tokens:
        raise exc
    return learned


def _within(request: SummaryRequest, input_tokens: int) -> SummaryRequest:
    """``request`` with an answer budget that leaves a chunk room within ``input_tokens``: a
    third of it at most, as the compactor sizes it for a bound known from the start."""
    budget = max(MIN_ANSWER_BUDGET, input_tokens // 3)
    if request.max_tokens <= budget:
        return request
    return replace(
        request,
        max_tokens=budget,
        max_tokens_source=f"a third of the {input_tokens}-token input bound the summary "
        "model's window allows (a model, or a server started, with a larger window raises it)",
    )
