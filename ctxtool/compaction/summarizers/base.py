"""What every summarizer takes and gives, and the conversation as text for a prompt."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from ...core.errors import CtxtoolError
from ...core.records import Message, call_arguments, call_name
from ...core.span_facts import UserText, is_user_shell_command, slash_command, user_text_kind
from ...redaction import mask_secrets

DEFAULT_MAX_SUMMARY_TOKENS = 4096
DEFAULT_TIMEOUT_S = 120.0
MAX_REQUEST_TIMEOUT_S = 86400.0  # a day: longer is a typo, and the lease it sizes must fit
DEFAULT_RETRIES = 4
TOOL_RESULT_CHARS = 2000  # a tool result is clipped to this (head and tail) for the LLM
CONTEXT_CHARS = 1000  # text the runtime injected (skills, AGENTS.md, reminders) is clipped more
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)


@dataclass(frozen=True)
class Summary:
    text: str
    summarizer: str
    model: str | None = None
    requests: int = 1  # calls made (chunked folding makes several)
    notes: tuple[str, ...] = ()
    details: dict | None = None  # for the checkpoint's details (the window requests fit)


@dataclass(frozen=True)
class SummaryRequest:
    """What a summarizer is asked to do: fold ``messages`` into ``previous_summary``.

    ``split_turn``: the cut falls inside a turn, so the request that started the turn is being
    summarized while the work on it stays verbatim; the summary must state it.
    ``max_tokens``: the summary's budget; every summarizer stays within it.
    ``transcript``: the span already rendered (and clipped) for a prompt, when it was folded.
    ``min_carry_over``: the least share of the previous summary's items the answer must hold
    (the judge refuses less); a summarizer that trims to its budget trims other items first.
    ``draft``, ``questions`` and ``missing``: a revision: the answer given, the questions a
    continuing agent has that it failed to answer (the quality gate's missed probes, each with
    what the history says), and the previous summary's items it dropped, to be put back.
    ``instructions``: what the operator wants the summary to focus on; it adds to the sections,
    it never replaces them.
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
    missing: tuple[str, ...] = ()  # the previous summary's items the draft dropped
    questions: tuple[str, ...] = ()  # the questions the draft failed to answer
    instructions: str | None = None  # the operator's focus (``--instructions``)
    turn_prefix: str | None = None  # the split turn's prefix rendered, ``transcript`` the rest
    # What set ``max_tokens``, for a message about a cut answer: the setting to raise.
    max_tokens_source: str = "--max-summary-tokens"
    # The messages kept verbatim after the cut: what they restate newer (a split turn's next
    # task-list update) the summary need not state as it stood at the cut.
    kept: Sequence[Message] = ()


class Summarizer(Protocol):
    name: str

    @property
    def model(self) -> str | None: ...

    @property
    def input_tokens(self) -> int | None:
        """Prompt tokens one request may carry (None: no bound, the span is read whole)."""
        ...

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


class ContextWindowExceeded(SummarizerError):
    """A request did not fit the summary model's window. ``window``: the window the server
    stated (None when it did not say); the summarizer has learned it, so a fold can carry on
    inside it with what is already summarized."""

    def __init__(self, message: str, window: int | None = None):
        super().__init__(message)
        self.window = window


_reporter = threading.local()


@contextmanager
def reporting(phase: Callable[[str], None]) -> Iterator[None]:
    """Within the block, a summarizer tells ``phase`` what it waits for (a server's queue) on
    this thread: workers share one summarizer, each its own session's progress line."""
    before = getattr(_reporter, "phase", None)
    _reporter.phase = phase
    try:
        yield
    finally:
        _reporter.phase = before


def report(what: str) -> None:
    """Tell this thread's progress line ``what`` (nothing when no one listens)."""
    phase = getattr(_reporter, "phase", None)
    if phase is not None:
        phase(what)


def render_message(m: Message, tool_result_chars: int = TOOL_RESULT_CHARS) -> str:
    """One message as plain text for a summarizer prompt, its credentials masked (the model
    cannot copy what it never reads, and no secret leaves for an endpoint). A long tool result
    keeps its head and its tail (a test run's failure is at the end); text the runtime injected
    as a user message (skill expansions, AGENTS.md, system reminders, continuation notices) is
    labelled as context, never as the user's words."""
    return mask_secrets(_rendered(m, tool_result_chars))


def _rendered(m: Message, tool_result_chars: int) -> str:
    if m.role == "assistant":
        lines = [f"[Assistant]: {m.content}"] if m.content else []
        lines += [f"[Assistant tool call {call_name(c)}]: {call_arguments(c)}" for c in m.calls()]
        return "\n\n".join(lines)
    if m.role == "tool":
        return f"[Tool result]: {head_and_tail(m.content or '', tool_result_chars)}"
    if is_user_shell_command(m):  # "$ cmd" and its output: what the user ran, and how it went
        return f"[User ran a shell command]: {head_and_tail(m.content or '', tool_result_chars)}"
    if m.role == "user":
        kind = user_text_kind(m)
        if kind is UserText.COMMAND:
            return f"[User command]: {slash_command(m.content or '')}"
        if kind is UserText.CONTEXT:
            text = head_and_tail(m.content or "", CONTEXT_CHARS)
            return f"[Context injected by the runtime, not the user's words]: {text}"
        return f"[User]: {_REMINDER.sub('', m.content or '').strip()}"
    return f"[{m.role.capitalize()}]: {m.content or ''}"


def head_and_tail(text: str, limit: int) -> str:
    """``text`` within about ``limit`` characters: its first third and its last two thirds,
    with the number of characters left out between them said."""
    if len(text) <= limit:
        return text
    head, tail = limit // 3, limit - limit // 3
    return f"{text[:head]}\n... [{len(text) - limit} characters left out] ...\n{text[-tail:]}"


def render_conversation(
    messages: Sequence[Message], tool_result_chars: int = TOOL_RESULT_CHARS
) -> str:
    """Messages as plain text for a summarizer prompt (tool results clipped)."""
    return "\n\n".join(t for t in (render_message(m, tool_result_chars) for m in messages) if t)


def turn_start(messages: Sequence[Message]) -> int:
    """Where the turn in progress starts: the index of the last request or slash command the
    user typed (0 when there is none: the whole span is that turn's prefix)."""
    for i in range(len(messages) - 1, -1, -1):
        if user_text_kind(messages[i]) in (UserText.REQUEST, UserText.COMMAND):
            return i
    return 0
