"""Summarizers: turn (previous summary + messages to summarise) into a new summary.

``openai`` calls any OpenAI-compatible endpoint through the official client (timeouts, retries
with backoff on 429/5xx, a cap on summary tokens). ``extractive`` is deterministic and needs no
network: the embedded default, and the fallback when no endpoint is configured.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Protocol, Sequence

from .records import Message
from .db import mask_url
from .errors import CtxtoolError

DEFAULT_MAX_SUMMARY_TOKENS = 4096
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_RETRIES = 4
_TOOL_RESULT_CHARS = 2000  # a tool result is clipped to this in the transcript sent to the LLM


@dataclass(frozen=True)
class Summary:
    text: str
    summarizer: str
    model: str | None = None


@dataclass(frozen=True)
class SummaryRequest:
    """What a summarizer is asked to do: fold ``messages`` into ``previous_summary``.

    ``split_turn``: the cut falls inside a turn, so the request that started the turn is being
    summarised while the work on it stays verbatim; the summary must state it.
    """

    previous_summary: str | None
    messages: Sequence[Message]
    files: dict
    split_turn: bool = False


class Summarizer(Protocol):
    name: str
    model: str | None

    def summarize(self, request: SummaryRequest) -> Summary: ...

    def describe(self) -> str: ...


class SummarizerError(CtxtoolError):
    """The summarizer failed or answered with something unusable; nothing is written."""


# -- serialising a span of conversation -------------------------------------------------------


def render_conversation(messages: Sequence[Message], tool_result_chars: int = _TOOL_RESULT_CHARS) -> str:
    """Messages as plain text for a summarizer prompt (tool results clipped)."""
    lines: list[str] = []
    for m in messages:
        if m.role == "assistant":
            if m.content:
                lines.append(f"[Assistant]: {m.content}")
            for call in m.tool_calls or ():
                fn = call.get("function") or {}
                lines.append(f"[Assistant tool call {fn.get('name')}]: {fn.get('arguments')}")
        elif m.role == "tool":
            text = m.content or ""
            if len(text) > tool_result_chars:
                text = text[:tool_result_chars] + f"\n... [{len(text) - tool_result_chars} more characters]"
            lines.append(f"[Tool result]: {text}")
        else:
            lines.append(f"[{m.role.capitalize()}]: {m.content or ''}")
    return "\n\n".join(lines)


SYSTEM_PROMPT = (
    "You are a context summarization assistant. You read a conversation between a user and an "
    "AI coding agent and write a structured summary that another instance of the agent will use "
    "to continue the work. Do not continue the conversation and do not answer questions in it: "
    "only output the summary."
)

SUMMARY_FORMAT = """Use this exact format:

## Goal
[What the user is trying to accomplish]

## Constraints & Preferences
- [Requirements and preferences the user stated]

## Progress
### Done
- [x] [Completed work]
### In Progress
- [ ] [Current work]
### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Rationale]

## Next Steps
1. [What should happen next]

## Critical Context
- [Exact file paths, function names, identifiers, error messages and data needed to continue]

Keep each section concise. Preserve exact file paths, identifiers and error messages."""


def build_prompt(request: SummaryRequest) -> str:
    """The user prompt: the span to summarise, and the previous summary to update (iterative)."""
    previous_summary, files = request.previous_summary, request.files
    parts = [f"<conversation>\n{render_conversation(request.messages)}\n</conversation>"]
    if previous_summary:
        parts.append(f"<previous-summary>\n{previous_summary}\n</previous-summary>")
        parts.append(
            "The messages above are NEW since the previous summary. Update the previous summary "
            "with them: keep what is still relevant, move finished items to Done, add new "
            "decisions, next steps and critical context. " + SUMMARY_FORMAT)
    else:
        parts.append("Summarise the conversation above. " + SUMMARY_FORMAT)
    if request.split_turn:
        parts.append("The conversation continues after this point in the middle of the current "
                     "turn: the agent's work on the latest user request is kept verbatim, the "
                     "request itself is not. State that request exactly under Goal or In Progress.")
    if files.get("read_files") or files.get("modified_files"):
        parts.append("Files read: " + ", ".join(files.get("read_files") or []) +
                     "\nFiles modified: " + ", ".join(files.get("modified_files") or []))
    return "\n\n".join(parts)


# -- openai ---------------------------------------------------------------------------------------


class OpenAISummarizer:
    """Any OpenAI-compatible chat-completions endpoint, through the official ``openai`` client."""

    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, max_retries: int = DEFAULT_RETRIES,
                 max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS):
        import openai

        self.model = model
        self.max_summary_tokens = max_summary_tokens
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        # The client retries 408/409/429/5xx and connection errors with exponential backoff.
        self.client = openai.OpenAI(
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
            base_url=self.base_url, timeout=timeout, max_retries=max_retries)
        self._openai = openai

    def summarize(self, request: SummaryRequest) -> Summary:
        openai = self._openai
        try:
            response = self.client.chat.completions.create(
                model=self.model,
                messages=[{"role": "system", "content": SYSTEM_PROMPT},
                          {"role": "user", "content": build_prompt(request)}],
                max_tokens=self.max_summary_tokens,
                temperature=0,
            )
        except openai.APITimeoutError:
            raise SummarizerError(f"summarizer timed out ({self._where()})") from None
        except openai.APIStatusError as exc:
            raise SummarizerError(f"summarizer answered HTTP {exc.status_code} after retries "
                                  f"({self._where()}): {_clip(str(exc.message))}") from None
        except openai.APIConnectionError as exc:
            raise SummarizerError(f"cannot reach the summarizer ({self._where()}): {exc}") from None
        except (openai.APIError, ValueError, TypeError) as exc:
            raise SummarizerError(f"unusable summarizer response ({self._where()}): "
                                  f"{exc.__class__.__name__}: {_clip(str(exc))}") from None
        if not hasattr(response, "choices"):
            raise SummarizerError(f"unusable summarizer response ({self._where()}): not a chat "
                                  f"completion: {_clip(str(response), 80)}")
        choices = response.choices
        if not choices or not getattr(choices[0], "message", None):
            raise SummarizerError(f"summarizer response has no message ({self._where()})")
        text = choices[0].message.content
        if not isinstance(text, str) or not text.strip():
            raise SummarizerError(f"summarizer returned an empty summary ({self._where()})")
        if getattr(choices[0], "finish_reason", None) == "length":
            raise SummarizerError(f"summary was cut at max_tokens={self.max_summary_tokens} "
                                  f"({self._where()}); raise --max-summary-tokens")
        return Summary(text.strip(), self.name, getattr(response, "model", None) or self.model)

    def describe(self) -> str:
        """Which summarizer runs where, for reports (credentials in the URL masked)."""
        return f"openai ({self._where()})"

    def _where(self) -> str:
        return f"model {self.model} at {mask_url(self.base_url) if self.base_url else 'api.openai.com'}"


def _clip(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


# -- extractive -----------------------------------------------------------------------------------

_ERROR_LINE = re.compile(r"(error|exception|traceback|failed|fatal)", re.I)


class ExtractiveSummarizer:
    """A deterministic summary built from the messages themselves; no network, no model.

    It keeps the first goal the user stated (carried over from the previous summary), the latest
    requests, files touched, tool usage and the last errors seen.
    """

    name = "extractive"
    model = None

    def __init__(self, request_chars: int = 400, max_requests: int = 3, max_errors: int = 3):
        self.request_chars = request_chars
        self.max_requests = max_requests
        self.max_errors = max_errors

    def summarize(self, request: SummaryRequest) -> Summary:
        previous_summary, messages, files = request.previous_summary, request.messages, request.files
        users = [m.content.strip() for m in messages
                 if m.role == "user" and m.content and m.content.strip()
                 and not (m.details or {}).get("is_meta")]
        goal = _section(previous_summary, "Goal") or (self._clip(users[0]) if users else "(not stated)")
        requests = [self._clip(u) for u in users[-self.max_requests:]]
        tools = Counter((c.get("function") or {}).get("name") or "?"
                        for m in messages for c in (m.tool_calls or ()))
        previous_tools = _section(previous_summary, "Tool usage")
        errors = []
        for m in messages:
            if m.role == "tool" and m.content:
                errors.extend(line.strip() for line in m.content.splitlines()
                              if _ERROR_LINE.search(line) and line.strip())
        errors = [self._clip(e, 200) for e in errors[-self.max_errors:]]
        out = ["## Goal", goal, "", "## Latest requests"]
        out += [f"- {r}" for r in requests] or ["- (none in this span)"]
        out += ["", "## Files",
                "Read: " + (", ".join(files.get("read_files") or []) or "(none)"),
                "Modified: " + (", ".join(files.get("modified_files") or []) or "(none)"),
                "", "## Tool usage"]
        out += [", ".join(f"{name} x{n}" for name, n in tools.most_common(12)) or "(none in this span)"]
        if previous_tools and previous_tools not in ("(none in this span)",):
            out += [f"Earlier: {self._clip(previous_tools, 300)}"]
        out += ["", "## Last errors"] + ([f"- {e}" for e in errors] or ["- (none)"])
        if request.split_turn and users:
            out += ["", "## In progress (the turn continues after this summary)", self._clip(users[-1])]
        out += ["", f"({len(messages)} messages summarised extractively; no LLM was used)"]
        return Summary("\n".join(out), self.name, None)

    def describe(self) -> str:
        return "extractive (deterministic, no LLM)"

    def _clip(self, text: str, limit: int | None = None) -> str:
        limit = limit or self.request_chars
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 1] + "…"


def _section(summary: str | None, title: str) -> str | None:
    """The body of a ``## title`` section of a previous summary."""
    if not summary:
        return None
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", summary, re.S | re.M)
    return match.group(1).strip() if match else None


def endpoint_configured(base_url: str | None) -> bool:
    return bool(base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"))


def make_summarizer(kind: str = "auto", model: str | None = None, base_url: str | None = None,
                    api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT_S,
                    max_retries: int = DEFAULT_RETRIES,
                    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS) -> Summarizer:
    """``auto``: openai when an endpoint is configured (--base-url, OPENAI_BASE_URL or
    OPENAI_API_KEY), else extractive."""
    if kind == "auto":
        kind = "openai" if endpoint_configured(base_url) else "extractive"
    if kind == "extractive":
        return ExtractiveSummarizer()
    if kind == "openai":
        model = model or os.environ.get("CTXTOOL_SUMMARY_MODEL") or "gpt-4o-mini"
        return OpenAISummarizer(model, base_url, api_key, timeout, max_retries, max_summary_tokens)
    raise CtxtoolError(f"unknown summarizer {kind!r}: use auto, openai or extractive")

