"""The restored context of a session, built from plain records (no I/O).

Restored context = system prompt + the latest checkpoint's summary + every message of the session
from that checkpoint's ``first_kept_message_id`` on, in id order. Never the whole history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

from .tokens import MessageText

SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n"
)


@dataclass
class Message:
    """One row of agent_message, as the library passes it around."""

    id: int
    session_id: int
    role: str
    content: str | None = None
    tool_calls: list[dict] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    token_count: int | None = None
    token_encoding: str | None = None
    created_at: datetime | None = None
    source_id: str | None = None
    details: dict | None = None

    def text(self) -> MessageText:
        return MessageText(self.role, self.content, self.name, self.tool_calls)

    def to_openai(self) -> dict[str, Any]:
        """This message as an OpenAI chat-completions message."""
        out: dict[str, Any] = {"role": self.role, "content": self.content or ""}
        if self.role == "assistant" and self.tool_calls:
            out["tool_calls"] = self.tool_calls
            if not self.content:
                out["content"] = None
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
        if self.name and self.role != "tool":
            out["name"] = self.name
        return out


@dataclass
class Compaction:
    """One checkpoint (row of agent_compaction)."""

    id: int
    session_id: int
    summary: str
    first_kept_message_id: int
    tokens_before: int | None = None
    parent_compaction_id: int = 0
    summary_tokens: int | None = None
    tokens_after: int | None = None
    summarizer: str | None = None
    summarizer_model: str | None = None
    source_id: str | None = None
    details: dict | None = None
    created_at: datetime | None = None


@dataclass
class Session:
    session_id: int
    user_id: str | None = None
    project_id: str | None = None
    title: str | None = None
    model: str | None = None
    system_prompt: str | None = None
    source_format: str | None = None
    source_id: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    details: dict | None = None


@dataclass
class RestoredContext:
    """What the model sees after a restart: built by :func:`restore_context`."""

    session_id: int
    system_prompt: str | None
    compaction: Compaction | None
    messages: list[Message] = field(default_factory=list)

    @property
    def summary(self) -> str | None:
        return self.compaction.summary if self.compaction else None

    def summary_message(self) -> dict[str, str] | None:
        if not self.compaction:
            return None
        return {"role": "user", "content": SUMMARY_PREFIX + self.compaction.summary}

    def to_openai(self) -> list[dict[str, Any]]:
        """The context as an OpenAI-style message list, ready to send back to an API."""
        out: list[dict[str, Any]] = []
        if self.system_prompt:
            out.append({"role": "system", "content": self.system_prompt})
        summary = self.summary_message()
        if summary:
            out.append(summary)
        out.extend(m.to_openai() for m in self.messages)
        return out

    def texts(self) -> list[MessageText]:
        """Everything the model reads, as countable texts (system prompt and summary included)."""
        out: list[MessageText] = []
        if self.system_prompt:
            out.append(MessageText("system", self.system_prompt))
        summary = self.summary_message()
        if summary:
            out.append(MessageText("user", summary["content"]))
        out.extend(m.text() for m in self.messages)
        return out


def restore_context(session_id: int, system_prompt: str | None,
                    latest_compaction: Compaction | None,
                    messages: Sequence[Message]) -> RestoredContext:
    """Select the restored context from a session's messages and its latest checkpoint.

    ``messages`` may be the whole history or already the suffix from the cut; either way only
    messages of this session with ``id >= first_kept_message_id`` are kept, in id order.
    """
    first_kept = latest_compaction.first_kept_message_id if latest_compaction else None
    kept = sorted(
        (m for m in messages
         if m.session_id == session_id and (first_kept is None or m.id >= first_kept)),
        key=lambda m: m.id,
    )
    return RestoredContext(session_id, system_prompt, latest_compaction, kept)
