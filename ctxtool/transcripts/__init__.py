"""Agent transcript formats, each parsed into one normalised stream of records.

One module per format (``claude_code``, ``codex``, ``pi``, ``openai_chat``, ``openhands``,
``ctxtool_archive``), each a :class:`~.walk.FormatParser` with one method per record kind;
:data:`PARSERS` is the one registry. ``discover`` finds and opens transcripts, ``compressed``
reads compressed files and archives of them, ``lines`` checks their lines and detects their
format. The records a parser hands on and the import's rules are in ``ctxtool.core``
(``source_records``, ``import_rules``). Nothing here touches the database (that is
``ctxtool.importer`` and ``ctxtool.store.import_writes``).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..core.source_records import (
    BranchedTranscript,
    InvalidRecord,
    Line,
    Record,
    SourceCompaction,
    SourceMessage,
    SourceSession,
    Transcript,
    TranscriptError,
)
from .claude_code import ClaudeCodeParser
from .codex import CodexParser
from .ctxtool_archive import CtxtoolArchiveParser
from .openai_chat import OpenAIChatParser
from .openhands import OpenHandsParser
from .pi import PiParser
from .walk import FormatParser, main_line_ids, parse

PARSERS: dict[str, type[FormatParser]] = {
    p.name: p
    for p in (
        ClaudeCodeParser,
        CodexParser,
        PiParser,
        OpenAIChatParser,
        OpenHandsParser,
        CtxtoolArchiveParser,
    )
}
FORMATS = tuple(PARSERS)


def parse_lines(
    fmt: str,
    lines: Iterable[Line],
    path: str = "<lines>",
    skip_invalid: bool = False,
    main: set[str] | None = None,
) -> Transcript:
    """Parse already-decoded lines as format ``fmt`` (tests and benchmarks use plain lists)."""
    return parse(PARSERS[fmt](), lines, path, skip_invalid, main)


__all__ = [
    "FORMATS",
    "PARSERS",
    "BranchedTranscript",
    "FormatParser",
    "InvalidRecord",
    "Line",
    "Record",
    "SourceCompaction",
    "SourceMessage",
    "SourceSession",
    "Transcript",
    "TranscriptError",
    "main_line_ids",
    "parse",
    "parse_lines",
]
