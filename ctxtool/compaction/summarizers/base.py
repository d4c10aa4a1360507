"""What every summarizer takes and gives, and the conversation as text for a prompt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ...errors import CtxtoolError
from ...records import Message
from ..calls import call_arguments, call_name

DEFAULT_MAX_SUMMARY_TOKENS = 4096
DEFAULT_TIMEOUT_S = 120.0
MAX_REQUEST_TIMEOUT_S = 86400.0  # a day: longer is a typo, and the lease it sizes must fit
DEFAULT_RETRIES = 4
TOOL_RESULT_CHARS = 2000  # a tool result is clipped to this in the transcript sent to the LLM


@dataclass(frozen=True)
class Summary:
    text: str
    summarizer: str
    model: str | None = None
    requests: int = 1  # calls made (chunked folding makes several)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SummaryRequest:
    """What a summarizer is asked to do: fold ``messages`` into ``previous_summary``.

    ``split_turn``: the cut falls inside a turn, so the request that started the turn is being
    summarized while the work on it stays verbatim; the summary must state it.
    ``max_tokens``: the summary's budget; every summarizer stays within it.
    ``transcript``: the span already rendered (and clipped) for a prompt, when it was folded.
    ``min_carry_over``: the least share of the previous summary's items the answer must hold
    (the judge refuses less); a summarizer that trims to its budget trims other items first.
    ``draft`` and ``missing``: a revision: the answer given, and the previous summary's items
    it dropped, to be put back (see :meth:`Summarizer.revise`).
    """

    previous_summary: str | None
    messages: Sequence[Message]
    files: dict
    split_turn: bool = False
    max_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS
    title: str | None = None
    encoding: str = "o200k_base"
    transcript: str | None = None
    min_carry_over: float | None = None
    draft: str | None = None
    missing: tuple[str, ...] = ()


class Summarizer(Protocol):
    name: str
    model: str | None
    # Prompt tokens one request may carry (None: no bound, the span is read whole).
    input_tokens: int | None

    def summarize(self, request: SummaryRequest) -> Summary: ...

    # Summarizers that can revise a draft (``request.draft``, ``request.missing``) say so:
    # the runner then asks once more when an answer dropped the previous summary's items.
    revises: bool

    def describe(self) -> str: ...

    def seconds_per_request(self) -> float:
        """The longest one summarize call may take (retries included): sizes the lease."""
        ...


class SummarizerError(CtxtoolError):
    """The summarizer failed or answered with something unusable; nothing is written."""


def render_message(m: Message, tool_result_chars: int = TOOL_RESULT_CHARS) -> str:
    """One message as plain text for a summarizer prompt (tool results clipped)."""
    if m.role == "assistant":
        lines = [f"[Assistant]: {m.content}"] if m.content else []
        lines += [f"[Assistant tool call {call_name(c)}]: {call_arguments(c)}" for c in m.calls()]
        return "\n\n".join(lines)
    if m.role == "tool":
        text = m.content or ""
        if len(text) > tool_result_chars:
            text = (
                text[:tool_result_chars]
                + f"\n... [{len(text) - tool_result_chars} more characters]"
            )
        return f"[Tool result]: {text}"
    return f"[{m.role.capitalize()}]: {m.content or ''}"


def render_conversation(
    messages: Sequence[Message], tool_result_chars: int = TOOL_RESULT_CHARS
) -> str:
    """Messages as plain text for a summarizer prompt (tool results clipped)."""
    return "\n\n".join(t for t in (render_message(m, tool_result_chars) for m in messages) if t)
