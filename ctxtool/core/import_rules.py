"""The import rules, as one pure step over a transcript's records (no database, plain lists).

Given what the store already holds of a session, :class:`Reconciler` turns each parsed record
into what must be written:

- a tool result whose call is not in the transcript (trimmed logs, a skipped item) becomes a
  ``user`` message: an orphan result would make the restored context invalid for an API;
- a checkpoint whose first kept message is a tool result keeps the call too (its first kept
  message moves to the assistant message making the call), whichever agent wrote it;
- the last stored message, caught mid-stream by the previous import, is completed when the
  transcript now holds more of it;
- a file that disagrees with the stored messages it claims to extend is refused, not merged
  (compared on role, byte size and first bytes, for the messages whose fingerprints the store
  read: the first ones of the session and the last), and so is one where a message the store
  holds comes after one it lacks: a continuation only adds at the end, and where ids are line
  numbers a line inserted or removed shifts the ids of the messages between the ends. Where
  ids are line numbers (:func:`positional`), the store reads the fingerprint of every message
  (a shift can land every moved message on a stored id, the last one unmoved), and a file
  that lacks a message the store holds had lines removed: both are refused.

The size limit is :func:`size_problem`, a rule on the bytes a message costs to send.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .source_records import Record, SourceCompaction, SourceMessage, TranscriptError

PREFIX_BYTES = 32


@dataclass(frozen=True)
class StoredMessage:
    """What the store holds of one message: enough to recognise it and to see it grew."""

    id: int
    source_id: str
    role: str
    content_bytes: int
    prefix: bytes = b""  # the first PREFIX_BYTES bytes of its content (UTF-8)
    tool_calls: int = 0


# A source id numbered by its line (``fields.UniqueIds``' fallback, where a format has no ids:
# Pi v1, OpenAI chat, Codex without ids).
_LINE_ID = re.compile(r"L[0-9]+")


def positional(source_id: str | None) -> bool:
    """Whether a session's ids are line numbers (judged by its last stored message's id): a
    line inserted or removed above a message gives it another message's id."""
    return source_id is not None and _LINE_ID.fullmatch(source_id) is not None


def fingerprint(role: str, content_bytes: int, prefix: bytes) -> int:
    """A message as one int (memory stays small for very long sessions): its role, its size
    and the start of its text. Reading whole contents back would make every re-import of a
    long session read its whole history; two different messages agreeing on all three is
    unlikely enough for telling one transcript from another."""
    return hash((role, content_bytes, prefix))


@dataclass
class StoredSession:
    """The session as stored: message fingerprints by source id (None: present, not checked),
    checkpoint source ids, and the last stored message (possibly caught mid-stream)."""

    messages: dict[str, int | None] = field(default_factory=dict)
    compactions: set[str] = field(default_factory=set)
    last: StoredMessage | None = None


class Disagreement(TranscriptError):
    """The file's message differs from the stored one under the same source id."""


class DuplicateRecord(TranscriptError):
    """Two messages of one file under one source id: the file's own fault, found before
    anything is written (the store's unique key would refuse it as if another import had
    written the message first, and the import would be tried again, in vain)."""


@dataclass(slots=True)
class NewMessage:
    message: SourceMessage


@dataclass(slots=True)
class CompleteMessage:
    """Rewrite stored message ``stored_id`` with the fuller ``message``."""

    stored_id: int
    message: SourceMessage


@dataclass(slots=True)
class NewCheckpoint:
    """``first_kept_source_id`` None: the checkpoint keeps nothing yet (it ends the file), its
    cut goes after the session's last message."""

    compaction: SourceCompaction
    first_kept_source_id: str | None


Action = NewMessage | CompleteMessage | NewCheckpoint


@dataclass
class Counts:
    messages_present: int = 0
    compactions_present: int = 0
    converted: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)


class Reconciler:
    """The rules above, one record at a time (records in transcript order)."""

    def __init__(self, path: str, stored: StoredSession | None = None):
        self.path = path
        self.stored = stored or StoredSession()
        self.counts = Counts()
        self.call_owner: dict[str, str] = {}  # tool call id -> source id of the message making it
        self.tool_owner: dict[str, str] = {}  # tool result source id -> its call's message
        self.waiting: list[SourceCompaction] = []  # checkpoints keeping "the next message"
        self.first_new: SourceMessage | None = None  # the first message the store lacks
        last = self.stored.last
        # Where ids are line numbers, the stored ids the file holds: none may be missing.
        self.seen: set[str] | None = set() if last and positional(last.source_id) else None
        self.matched: set[str] = set()  # the stored messages the file has shown so far
        self.lines: dict[str, int] = {}  # source id -> the line of the file's message with it

    @property
    def continuation_proven(self) -> bool:
        """Whether every stored message has turned up: after that no record can show the file
        is not a continuation (a stored message after a new one, a stored line missing), so
        what is written so far may be committed."""
        return len(self.matched) >= len(self.stored.messages)

    def run(self, records: Iterable[Record]) -> Iterator[Action]:
        for rec in records:
            yield from self.step(rec)
        yield from self.finish()

    def step(self, rec: Record) -> list[Action]:
        if isinstance(rec, SourceCompaction):
            return self._checkpoint(rec)
        msg = rec
        first_line = self.lines.get(msg.source_id)
        if first_line is None:
            self.lines[msg.source_id] = msg.line
        else:
            raise DuplicateRecord(
                self.path,
                msg.line,
                f"message id {msg.source_id!r} is taken already by the message of line "
                f"{first_line}: a transcript names each message once (refused as it is, "
                "nothing written)",
            )
        if msg.tool_calls or msg.role == "tool":
            self._pair(msg)
        if not self.waiting and msg.source_id not in self.stored.messages:
            if self.first_new is None:
                self.first_new = msg
            return [NewMessage(msg)]  # the usual record: a new message, nothing waiting
        out: list[Action] = []
        if self.waiting:
            out = [NewCheckpoint(c, self._kept_from(c, msg)) for c in self.waiting]
            self.waiting.clear()
        if msg.source_id not in self.stored.messages:
            if self.first_new is None:
                self.first_new = msg
            out.insert(0, NewMessage(msg))
            return out
        if self.first_new is not None:
            raise self._moved_records(msg, self.first_new)
        stored = self.stored.messages[msg.source_id]
        self.counts.messages_present += 1
        self.matched.add(msg.source_id)
        if self.seen is not None:
            self.seen.add(msg.source_id)
        completed = self._compare(msg, stored)
        return ([completed] if completed else []) + out

    def finish(self) -> list[Action]:
        """The checkpoints still waiting for their first kept message when the file ends: the
        agent summarized everything and kept nothing yet (a Pi compaction whose first kept
        entry is not written yet, a compact boundary as the last line). Restoring the session
        as the agent does means their summary alone, and the messages a later import of the
        grown file appends after it, so they are written with their cut after the last
        message (skipping them restored the previous checkpoint and every message since)."""
        if self.seen is not None and len(self.seen) < len(self.stored.messages):
            raise self._removed_lines()
        out: list[Action] = [NewCheckpoint(c, None) for c in self.waiting]
        self.waiting.clear()
        return out

    def _removed_lines(self) -> Disagreement:
        """A file numbered by line that lacks a line the store holds: lines were removed (the
        ids after them moved onto stored ids, or the file ends before its stored end)."""
        missing = min(
            (k for k in self.stored.messages if k not in self.seen),  # type: ignore[operator]
            key=lambda k: (not positional(k), int(k[1:]) if positional(k) else 0, k),
        )
        line = int(missing[1:]) if positional(missing) else None
        return Disagreement(
            self.path,
            line,
            f"message {missing!r} is stored, but this file no longer has it: it is not a "
            "continuation of the transcript imported before (records removed"
            + (f" at or above line {line}" if line is not None else "")
            + "; refused, not merged: import it as a session of its own)",
        )

    def _pair(self, msg: SourceMessage) -> None:
        if msg.tool_calls:
            for call in msg.tool_calls:
                self.call_owner[call["id"]] = msg.source_id
        elif msg.role == "tool":
            owner = self.call_owner.get(msg.tool_call_id) if msg.tool_call_id else None
            if owner is not None:
                self.tool_owner[msg.source_id] = owner
                return
            msg.details = {
                **(msg.details or {}),
                "source_role": "tool",
                "orphan_tool_call_id": msg.tool_call_id,
            }
            msg.role, msg.tool_call_id = "user", None
            self.counts.converted["orphan_tool_result_to_user"] += 1

    def _checkpoint(self, comp: SourceCompaction) -> list[Action]:
        if comp.source_id in self.stored.compactions:
            self.counts.compactions_present += 1
            return []
        self.stored.compactions.add(comp.source_id)
        if comp.first_kept_source_id is None:
            self.waiting.append(comp)
            return []
        first_kept = comp.first_kept_source_id
        if first_kept in self.tool_owner:
            first_kept = self._moved(comp, first_kept)
        return [NewCheckpoint(comp, first_kept)]

    def _kept_from(self, comp: SourceCompaction, msg: SourceMessage) -> str:
        """A waiting checkpoint keeps from ``msg``, or from the call of a tool result."""
        return (
            self._moved(comp, msg.source_id) if msg.source_id in self.tool_owner else msg.source_id
        )

    def _moved(self, comp: SourceCompaction, tool_result: str) -> str:
        # The agent kept a tool result but summarized its call: keep the call too, or the
        # restored context would hold an orphan result.
        comp.details = {**(comp.details or {}), "first_kept_moved_to_call_of": tool_result}
        return self.tool_owner[tool_result]

    def _moved_records(self, msg: SourceMessage, new: SourceMessage) -> Disagreement:
        """A stored message after one the store lacks: a continuation only ever adds at the
        end. Where ids are line numbers (Pi v1, OpenAI chat, Codex without ids), a line
        inserted or removed above shifts every id after it onto another message, and only the
        first and the last stored messages are compared by content: the order tells."""
        return Disagreement(
            self.path,
            msg.line,
            f"message {msg.source_id!r} is stored already, but comes after "
            f"{new.source_id!r} (line {new.line}), which is not: this file is not a "
            "continuation of the transcript imported before (records inserted, removed or "
            "moved above line "
            f"{new.line}; refused, not merged: import it as a session of its own)",
        )

    def _compare(self, msg: SourceMessage, stored: int | None) -> CompleteMessage | None:
        """A message the store already holds: the same, or the last one grown; else refuse."""
        last = self.stored.last
        if stored is None and (last is None or msg.source_id != last.source_id):
            return None  # present; its fingerprint was not read (see StoredSession)
        encoded = msg.content.encode("utf-8") if msg.content else b""
        size, prefix = len(encoded), encoded[:PREFIX_BYTES]
        if last is not None and msg.source_id == last.source_id:
            grew = size > last.content_bytes or len(msg.tool_calls or []) > last.tool_calls
            if (
                msg.role == last.role
                and size >= last.content_bytes
                and (prefix.startswith(last.prefix) or last.prefix.startswith(prefix))
            ):
                if grew:
                    self.counts.converted["completed_partial_message"] += 1
                    return CompleteMessage(last.id, msg)
                return None
        elif fingerprint(msg.role, size, prefix) == stored:
            return None
        raise Disagreement(
            self.path,
            msg.line,
            f"message {msg.source_id!r} differs from the one stored under the same id: this file "
            "is not a continuation of the transcript imported before (refused, not merged; "
            "a different transcript needs a session id, or a file path, of its own)",
        )


# What a text costs inside a statement depends on who escapes it: the import's own text
# renderer (``db.dialects._row_literal``) escapes these ...
RENDERED_ESCAPES = "\\'\0\r\x1a"
# ... and the driver (a statement SQLAlchemy sends: pymysql's escape_string) these.
DRIVER_ESCAPES = "\\'\"\n\r\0\x1a"


def escaped_bytes(text: str | None, escaped: str = RENDERED_ESCAPES) -> int:
    """Bytes a text costs inside a SQL statement: UTF-8, with each ``escaped`` character
    counted twice. Exact counting only runs for texts long enough to matter."""
    if not text:
        return 0
    return len(text.encode("utf-8")) + sum(text.count(c) for c in escaped)


def size_problem(
    content: str | None,
    json_texts: Iterable[str | None],
    max_content_bytes: int,
    max_row_bytes: int,
    escaped: str = RENDERED_ESCAPES,
) -> str | None:
    """Why a message cannot be stored, or None: its text is larger than the column takes, or
    the row (text, tool calls, details) is larger than one statement may be once escaped."""
    chars = len(content) if content else 0
    for text in json_texts:  # no list nor generator: this runs for every imported message
        if text:
            chars += len(text)
    if 4 * chars <= min(max_content_bytes, max_row_bytes):
        return None  # even at 4 bytes a character it fits: no need to count
    texts = [content, *json_texts]
    content_bytes = len(content.encode("utf-8")) if content else 0
    if content_bytes > max_content_bytes:
        size, limit = _two_sizes(content_bytes, max_content_bytes)
        return f"message of {size} is larger than the {limit} the store accepts (MEDIUMTEXT)"
    sent = sum(escaped_bytes(t, escaped) for t in texts)
    if sent > max_row_bytes:
        size, limit = _two_sizes(sent, max_row_bytes)
        return (
            f"message of {size} as sent (text escaped, tool-call arguments and details "
            f"included) is larger than the {limit} the server accepts in one statement "
            "(max_allowed_packet)"
        )
    return None


def _two_sizes(size: int, limit: int) -> tuple[str, str]:
    """A size and the limit it is over, in MB to one decimal, or in bytes where that would show
    the same number twice ("0.9 MB is larger than the 0.9 MB")."""
    mb = f"{size / 1048576:.1f} MB", f"{limit / 1048576:.1f} MB"
    return mb if mb[0] != mb[1] else (f"{size:,} bytes", f"{limit:,} bytes")
