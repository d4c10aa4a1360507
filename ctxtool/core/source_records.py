"""The records every transcript format is parsed into, and the errors parsing raises.

A format parser turns the lines of its file into one :class:`SourceSession` (what the
transcript says about its session) and a stream of :class:`SourceMessage` and
:class:`SourceCompaction` in conversation order; the importer only ever sees these.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import CtxtoolError

# The most one record may take (a JSON document is one record while it is read): bounds the
# memory an endless line (``import - < /dev/zero``) or a value never closed can take.
MAX_RECORD_BYTES = 256 * 1024 * 1024


class TranscriptError(CtxtoolError):
    """Bad input, with the file and line it was found at."""

    def __init__(self, path: str, line: int | None, message: str):
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.detail = path, line, message

    def number_as_message(self) -> None:
        """Say "message #N" instead of line N: in a whole JSON document (an OpenAI message
        list) records are numbered by their place in the list, not by a line of the file."""
        if self.line:
            self.args = (f"{self.path}: message #{self.line}: {self.detail}",)


class InvalidRecord(Exception):
    """A record that does not fit its format. Raised by the record-kind functions, which do
    not know the file; the shared walk adds the path and line (or skips it, --skip-invalid)."""


class BranchedTranscript(Exception):
    """A tree-shaped transcript (Claude Code, Pi v2+) turned out not to be linear.

    Parsers assume a linear file (the common case, one pass); on meeting a record whose parent
    is not the record before it they raise this, and the importer parses again with the main
    line found by a first pass (:func:`ctxtool.transcripts.tree.main_line`).
    """


@dataclass(slots=True)
class Line:
    """A parsed JSONL line: its number and its object."""

    number: int
    obj: Any


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
    user_id: str | None = None  # what only a ctxtool archive says (see ctxtool_archive)
    project_id: str | None = None


@dataclass(slots=True)
class SourceMessage:
    """One message, already in the OpenAI shape (roles system/user/assistant/tool)."""

    source_id: str
    role: str
    content: str | None
    line: int
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    created_at: datetime | None = None
    details: dict[str, Any] | None = None


@dataclass(slots=True)
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
    created_at: datetime | None = None  # when the agent compacted, from the record's time
    # Who wrote it, where the file says (a ctxtool archive): else "imported:<format>".
    summarizer: str | None = None
    summarizer_model: str | None = None
    summary_tokens: int | None = None
    tokens_after: int | None = None


Record = SourceMessage | SourceCompaction


@dataclass
class FileLayout:
    """How a file holds its records, known once it is read: ``jsonl``, ``concatenated``
    (several JSON values on a line), ``multiline`` (records spread over lines, pretty-printed)
    or ``document`` (one JSON document); and the records recovered from lines holding
    several."""

    name: str = "jsonl"
    recovered: Counter[str] = field(default_factory=Counter)


@dataclass
class Transcript:
    """A parsed transcript: ``session`` (complete once ``records`` is exhausted), the records,
    and ``skipped``, a count of source lines that map to no message, by kind."""

    format: str
    session: SourceSession
    records: Iterator[Record]
    skipped: Counter[str]
    numbered_by_message: bool = False  # a whole JSON document: record N is its Nth message
    layout: FileLayout = field(default_factory=FileLayout)


@dataclass(frozen=True)
class RecordedFile:
    """What the store recorded of the file a session was imported from (``store.transcript_files``):
    a hash of its first ``head_bytes`` and the session's source format and id."""

    head_bytes: int
    head_sha256: str
    source_format: str
    source_id: str


@dataclass(frozen=True)
class FileIdentity:
    """The file on disk a transcript is read from, as the store recalls it when none of the
    file's names finds its session: a name it was given after its import, in a folder no run
    saw it in (see ``transcripts.discover.source_ids``). An inode is reused once its file is
    deleted; the first bytes tell the file that grew from another that took its inode."""

    device: int  # st_dev and st_ino as signed 64-bit (a column's range): see discover.signed_64
    inode: int
    head: bytes  # the first discover.HEAD_BYTES of the snapshot imported, or all of it if shorter

    @property
    def head_sha256(self) -> str:
        return hashlib.sha256(self.head).hexdigest()

    def record(self, source_format: str, source_id: str) -> RecordedFile:
        return RecordedFile(len(self.head), self.head_sha256, source_format, source_id)

    def continues(self, recorded: RecordedFile) -> bool:
        """Whether this file begins with the bytes recorded of the one that had its inode: the
        same file, grown (or not) since. A file now shorter than that head is another."""
        size = recorded.head_bytes
        return (
            0 < size <= len(self.head)
            and hashlib.sha256(self.head[:size]).hexdigest() == recorded.head_sha256
        )
