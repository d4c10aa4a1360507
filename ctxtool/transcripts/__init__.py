"""Agent transcript formats, each parsed into one normalised stream of records.

One module per format (``claude_code``, ``codex``, ``pi``, ``openai_chat``) turns its file into
a :class:`Transcript`: session metadata plus an iterator of :class:`SourceMessage` and
:class:`SourceCompaction` in conversation order. Parsing streams line by line; nothing here
touches the database (that is ``ctxtool.importer``).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator

from ..errors import CtxtoolError

# A MEDIUMTEXT holds 16 MiB - 1 bytes; a larger message cannot be stored.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024 - 1


class TranscriptError(CtxtoolError):
    """Bad input, with the file and line it was found at."""

    def __init__(self, path: str, line: int | None, message: str):
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")
        self.path, self.line = path, line


@dataclass
class SourceSession:
    """What a transcript says about its session; filled in while it is read."""

    source_format: str
    source_id: str | None = None
    title: str | None = None
    model: str | None = None
    system_prompt: str | None = None
    created_at: datetime | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class SourceMessage:
    """One message, already in the OpenAI shape (roles system/user/assistant/tool)."""

    source_id: str
    role: str
    content: str | None
    line: int
    tool_calls: list[dict] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    created_at: datetime | None = None
    details: dict[str, Any] | None = None


@dataclass
class SourceCompaction:
    """A checkpoint the agent itself made.

    ``first_kept_source_id`` names the first message kept verbatim; None means "the next
    message in the transcript" (Claude Code and Codex keep nothing from before the boundary).
    """

    source_id: str
    summary: str
    line: int
    first_kept_source_id: str | None = None
    tokens_before: int | None = None
    details: dict[str, Any] | None = None


Record = SourceMessage | SourceCompaction


class BranchedTranscript(Exception):
    """A tree-shaped transcript (Claude Code, Pi v2+) turned out not to be linear.

    Parsers assume a linear file (the common case, one pass); on meeting a record whose parent
    is not the record before it they raise this, and the importer parses again with the main
    line found by a first pass (:func:`main_line`).
    """


class MainLineFilter:
    """Keeps a tree-format parser on the session's main line.

    Without a known main line it checks that the file is linear (each record's parent is the
    record before it) and raises BranchedTranscript otherwise; with one (from :func:`main_line`)
    it drops, and counts, the records of abandoned branches.
    """

    def __init__(self, main: set[str] | None):
        self.main = main
        self.previous: str | None = None

    def keeps(self, link: tuple[str, str | None] | None, kind: str | None, skipped: Counter) -> bool:
        if link is None:
            return True
        record_id, parent_id = link
        if self.main is None:
            if parent_id is not None and self.previous is not None and parent_id != self.previous:
                raise BranchedTranscript(record_id)
            self.previous = record_id
            return True
        if record_id in self.main:
            return True
        skipped[f"abandoned_branch:{kind}"] += 1
        return False


def main_line(lines: Iterable[Line], link: Callable[[dict], tuple[str, str | None] | None]) -> set[str]:
    """First pass over a branched tree file: the ids on the path from its newest record back to
    the root (``link`` gives a record's (id, parent id), or None for records outside the tree).
    Abandoned branches (a rewind, an edited message) are not on it. Safe against cycles."""
    links: dict[str, str | None] = {}
    leaf = None
    for line in lines:
        found = link(line.obj)
        if found:
            links[found[0]] = found[1]
            leaf = found[0]
    path: set[str] = set()
    node = leaf
    while node is not None and node not in path:
        path.add(node)
        node = links.get(node)
    return path


@dataclass
class Line:
    """A parsed JSONL line: its number and its object."""

    number: int
    obj: Any


class Transcript:
    """A parsed transcript: ``session`` (complete once ``records`` is exhausted), the records,
    and ``skipped``, a count of source records that map to no message, by kind."""

    def __init__(self, session: SourceSession, records: Iterator[Record], skipped: Counter):
        self.session = session
        self.records = records
        self.skipped = skipped


def text_of(content: Any, skipped: Counter | None = None, kinds: tuple[str, ...] = ("text",)) -> str:
    """Plain text of a string or a list of content blocks (only blocks of ``kinds``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                kind = block.get("type")
                if kind in kinds or (kind is None and "text" in block):
                    parts.append(str(block.get("text") or ""))
                elif skipped is not None:
                    skipped[f"block:{kind}"] += 1
        return "\n".join(p for p in parts if p)
    return json.dumps(content, ensure_ascii=False)


def parse_time(value: Any) -> datetime | None:
    """ISO-8601 text or epoch milliseconds as naive UTC; None for anything unparseable."""
    try:
        if isinstance(value, (int, float)):
            seconds = value / 1000 if value > 1e11 else value
            return datetime.fromtimestamp(seconds, timezone.utc).replace(tzinfo=None)
        if isinstance(value, str) and value:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if parsed.tzinfo is not None:
                parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
            return parsed
    except (ValueError, OverflowError, OSError):
        return None
    return None


def tool_call(call_id: str, name: str, arguments: Any) -> dict:
    """An OpenAI-style tool call; non-string arguments are serialised as JSON."""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def normalise_usage(input_tokens: Any = None, output_tokens: Any = None, cache_read: Any = None,
                    cache_write: Any = None) -> dict | None:
    """Provider usage in one shape; ``context_tokens`` is the prompt size the provider saw."""
    values = [input_tokens, output_tokens, cache_read, cache_write]
    if not any(isinstance(v, (int, float)) for v in values):
        return None
    i, o, r, w = (int(v) if isinstance(v, (int, float)) else 0 for v in values)
    return {"input_tokens": i, "output_tokens": o, "cache_read_tokens": r,
            "cache_write_tokens": w, "context_tokens": i + r + w}


class UniqueIds:
    """Source ids, made unique within a file: a repeated id gets its line number appended."""

    def __init__(self):
        self.seen: set[str] = set()

    def __call__(self, wanted: str | None, line: int, suffix: str = "") -> str:
        base = (wanted or f"L{line}") + suffix
        if base in self.seen:
            base = f"{base}@L{line}"
        self.seen.add(base)
        return base


def first_line_title(text: str | None, limit: int = 80) -> str | None:
    if not text:
        return None
    line = text.strip().splitlines()[0] if text.strip() else ""
    return (line[: limit - 1] + "…") if len(line) > limit else (line or None)


FORMATS = ("claude-code", "codex", "pi", "openai-chat")


def transcript_module(name: str):
    """The module that knows format ``name`` (its ``parse``, and ``main_line_ids`` for trees)."""
    from . import claude_code, codex, openai_chat, pi

    return {"claude-code": claude_code, "codex": codex, "pi": pi, "openai-chat": openai_chat}[name]


def parser_for(name: str) -> Callable[..., Transcript]:
    return transcript_module(name).parse
