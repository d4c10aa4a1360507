"""Finding and opening transcript files: which files, which format, JSONL or one document.

Reading stays apart from parsing (one module per format) and from the database (the importer):
a file is read line by line, its format detected from its first records, and a pretty-printed
JSON document (an OpenAI message list) told apart from JSONL.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator

from ..errors import CtxtoolError
from . import FORMATS, Line, Transcript, TranscriptError, parser_for

TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".traj", ".ndjson")
_PEEK_LINES = 50


def expand_paths(paths: Iterable[str]) -> list[str]:
    """Files to import: each file as given, directories walked for transcripts, ``-`` = stdin."""
    out: list[str] = []
    for p in paths:
        if p == "-":
            out.append(p)
            continue
        path = Path(p)
        if path.is_dir():
            out.extend(str(f) for f in sorted(path.rglob("*"))
                       if f.is_file() and f.suffix in TRANSCRIPT_SUFFIXES)
        elif path.exists():
            out.append(p)
        else:
            raise CtxtoolError(f"{p}: no such file or directory")
    return out


class CountingStream:
    """Binary lines from a stream, counting bytes read (for progress)."""

    def __init__(self, stream: BinaryIO, on_bytes: Callable[[int], None] | None):
        self.stream, self.on_bytes = stream, on_bytes

    def __iter__(self) -> Iterator[bytes]:
        for raw in self.stream:
            if self.on_bytes:
                self.on_bytes(len(raw))
            yield raw


def open_transcript(path: str, stream: BinaryIO, fmt: str | None, skip_invalid: bool,
                    skipped: Counter, main: set[str] | None = None) -> tuple[str, Transcript]:
    """Detect the format (unless given) from the first records and start parsing."""
    raw_iter = iter(stream)
    peeked: list[bytes] = []
    first_obj = None
    first_char = None
    for raw in raw_iter:
        peeked.append(raw)
        stripped = raw.strip()
        if not stripped:
            continue
        if b"\x00" in raw:
            raise TranscriptError(path, len(peeked), "binary data, not a text transcript")
        if first_char is None:
            first_char = stripped[:1]
        try:
            obj = json.loads(stripped.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            if first_char in (b"[", b"{") and len(peeked) == _first_nonblank(peeked) \
                    and stripped.endswith((b"{", b"[", b",")):
                # Not JSONL: one pretty-printed JSON document (an OpenAI message list), whose
                # first line opens an object or array. A broken JSONL record is reported below.
                return _whole_document(path, peeked, raw_iter, fmt, skipped)
            if not skip_invalid:
                break  # LineReader reports this line with its number
            continue
        if isinstance(obj, dict):
            first_obj = obj
            break
        if isinstance(obj, list):
            return _whole_document(path, peeked, raw_iter, fmt, skipped)
        if len(peeked) >= _PEEK_LINES:
            break
    if not any(r.strip() for r in peeked):
        raise TranscriptError(path, None, "file is empty")
    lines = LineReader(path, itertools.chain(peeked, raw_iter), skip_invalid, skipped)
    if fmt is None:
        if first_obj is None:
            next(iter(lines), None)  # raises the error of the first bad line, if there is one
            raise TranscriptError(path, None, "no complete JSON record in the first lines")
        fmt = detect_format(first_obj, path)
    return fmt, parser_for(fmt)(iter(lines), path, skipped, main)


def _first_nonblank(peeked: list[bytes]) -> int:
    for i, raw in enumerate(peeked, start=1):
        if raw.strip():
            return i
    return 0


def _whole_document(path, peeked, raw_iter, fmt, skipped) -> tuple[str, Transcript]:
    data = b"".join(itertools.chain(peeked, raw_iter))
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TranscriptError(path, data.count(b"\n", 0, exc.start) + 1, "invalid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise TranscriptError(path, exc.lineno, f"malformed JSON ({exc.msg} at column {exc.colno})") from None
    fmt = fmt or detect_format(doc, path)
    if fmt != "openai-chat":
        raise TranscriptError(path, None,
                              f"a single JSON document cannot be a {fmt} transcript (JSONL expected)")
    messages = doc if isinstance(doc, list) else (doc.get("messages") or doc.get("history"))
    if not isinstance(messages, list):
        raise TranscriptError(path, None, "expected a list of messages")
    lines = (Line(i, m) if isinstance(m, dict) else _bad_item(path, i)
             for i, m in enumerate(messages, start=1))
    transcript = parser_for(fmt)(lines, path, skipped)
    return fmt, transcript


def _bad_item(path: str, index: int):
    raise TranscriptError(path, None, f"message #{index} is not a JSON object")


class LineReader:
    """JSON lines from a binary stream, with line numbers, clear errors and optional skipping."""

    def __init__(self, path: str, stream: Iterable[bytes], skip_invalid: bool, skipped: Counter):
        self.path = path
        self.stream = stream
        self.skip_invalid = skip_invalid
        self.skipped = skipped

    def __iter__(self) -> Iterator[Line]:
        for number, raw in enumerate(self.stream, start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
                obj = json.loads(text)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                if not raw.endswith(b"\n"):
                    # An unterminated last line: the agent is still writing it. Not an error;
                    # the next import of the grown file picks it up.
                    self.skipped["incomplete_last_line"] += 1
                    continue
                if isinstance(exc, UnicodeDecodeError):
                    self._bad(number, f"invalid UTF-8 at byte {exc.start} of the line")
                else:
                    snippet = text.strip()[:40].encode("unicode_escape").decode("ascii")
                    self._bad(number, f"malformed JSON ({exc.msg} at column {exc.colno}): {snippet!r}")
                continue
            if not isinstance(obj, dict):
                self._bad(number, f"expected a JSON object, found {type(obj).__name__}")
                continue
            yield Line(number, obj)

    def _bad(self, number: int, message: str) -> None:
        if not self.skip_invalid:
            raise TranscriptError(self.path, number, message + " (use --skip-invalid to skip such lines)")
        self.skipped["invalid_line"] += 1


def detect_format(first: dict | list, path: str) -> str:
    """Name the format of a transcript from its first JSON record (or whole-file JSON value)."""
    if isinstance(first, list) or (isinstance(first, dict) and (
            isinstance(first.get("history"), list) or isinstance(first.get("messages"), list))):
        return "openai-chat"
    if not isinstance(first, dict):
        raise TranscriptError(path, None, "not a transcript: the first record is not a JSON object")
    kind = first.get("type")
    if kind == "session" and ("cwd" in first or "version" in first or "id" in first):
        return "pi"
    if kind in ("session_meta", "response_item", "event_msg", "turn_context", "compacted") \
            and "payload" in first:
        return "codex"
    if "record_type" in first or (kind is None and {"id", "timestamp"} <= set(first)
                                  and ("instructions" in first or "git" in first)):
        return "codex"
    if "sessionId" in first or kind in ("summary", "queue-operation", "file-history-snapshot") \
            or ("uuid" in first and kind in ("user", "assistant", "system")):
        return "claude-code"
    if "role" in first:
        return "openai-chat"
    raise TranscriptError(
        path, 1, f"cannot tell the transcript format (first record has keys "
                 f"{', '.join(sorted(first)[:8])}); pass --format {{{','.join(FORMATS)}}}")


def file_sizes(paths: Iterable[str]) -> int:
    return sum(os.path.getsize(p) for p in paths if p != "-")
