"""Finding and opening transcript files: which files a path names, their bytes as lines, and
the source id of a transcript that has no session id of its own.

Reading what the lines hold (JSON, format detection) is ``reading``; parsing is one module per
format; the database is the importer's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from .source import TranscriptError

TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".traj", ".ndjson")
STDIN = "-"
_BOM = b"\xef\xbb\xbf"
_STDIN_ID_BYTES = 65536
# A transcript is read line by line through a buffer of this size: at the default 8 KB the
# line iterator refilled it every 16 lines (100k lines of 500 bytes: 26 ms at 8 KB, 11 ms here).
READ_BUFFER = 1 << 20


def expand_paths(paths: Iterable[str]) -> list[str]:
    """Files to import: each path as given (a missing one is reported when it is imported, so
    it never stops the others), directories walked for transcripts, ``-`` = stdin."""
    out: list[str] = []
    for p in paths:
        if p != STDIN and os.path.isdir(p):
            found = []
            for root, dirs, files in os.walk(p):  # never follows a symlinked folder (no loops)
                dirs.sort()
                found.extend(
                    os.path.join(root, name) for name in files if name.endswith(TRANSCRIPT_SUFFIXES)
                )
            out.extend(sorted(found))
        else:
            out.append(p)
    return out


def file_sizes(paths: Iterable[str]) -> int:
    """Total bytes of the regular files among ``paths`` (the progress bar's total)."""
    total = 0
    for p in paths:
        with contextlib.suppress(OSError):
            st = os.stat(p)
            total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total


@contextlib.contextmanager
def open_source(path: str) -> Iterator[tuple[BinaryIO, str]]:
    """The transcript's bytes, seekable (a branched tree is read twice), and the source id a
    transcript without one of its own gets (see :func:`fallback_source_id`).

    Standard input is spooled to a temporary file, so memory stays flat for any size. Anything
    that is not a regular file (a FIFO, a device) is refused rather than read: it could block
    forever."""
    if path == STDIN:
        with tempfile.TemporaryFile(buffering=READ_BUFFER) as spool:
            head = sys.stdin.buffer.read(_STDIN_ID_BYTES)
            spool.write(head)
            shutil.copyfileobj(sys.stdin.buffer, spool)
            spool.seek(0)
            # sha1 as ctxtool has always named stdin transcripts: re-imports find them.
            yield spool, f"stdin-{hashlib.sha1(head).hexdigest()[:16]}"
        return
    mode = os.stat(path).st_mode  # OSError: missing, permission, symlink loop
    if stat.S_ISDIR(mode):
        raise TranscriptError(printable(path), None, "is a directory")
    if not stat.S_ISREG(mode):
        raise TranscriptError(
            printable(path),
            None,
            "not a regular file (a FIFO, socket or device); save the transcript to a file first",
        )
    with open(path, "rb", buffering=READ_BUFFER) as stream:
        yield stream, fallback_source_id(path)


def legacy_source_id(path: str) -> str | None:
    """The id ctxtool gave a transcript without a session id of its own before the fallback
    below (its file stem alone, which merged same-named files): an upgraded store finds its
    sessions under it once, if the file agrees with what is stored there."""
    if path == STDIN:
        return None
    stem = Path(path).stem
    return stem if printable(stem) == stem else None  # the old id could not hold such a name


def fallback_source_id(path: str) -> str:
    """The id of a transcript that names no session of its own (OpenAI chat files): its file
    name plus a hash of its absolute real path. Two files of the same name in two folders
    (``run1/task-42.traj``, ``run2/task-42.traj``) are two transcripts; the same file imported
    again (grown, or through a symlink) is the same one; a moved file is a new one."""
    real = os.path.realpath(path)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"{printable(Path(path).stem)[:100]}@{digest}"


def printable(name: str) -> str:
    """A file name as text a database stores and a terminal shows: bytes that are not UTF-8
    (kept by Python as lone surrogates) written as \\xNN."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class CountingStream:
    """Binary lines from a stream, counting bytes read (for progress, reported every
    ``REPORT_BYTES`` and at the end: a call for every line cost an import 3%), a UTF-8 byte
    order mark dropped from the first line."""

    REPORT_BYTES = 1 << 16

    def __init__(self, stream: BinaryIO, on_bytes: Callable[[int], None] | None = None):
        self.stream, self.on_bytes = stream, on_bytes

    def __iter__(self) -> Iterator[bytes]:
        lines = iter(self.stream)
        first = next(lines, None)
        if first is None:
            return
        on_bytes = self.on_bytes
        if on_bytes:
            on_bytes(len(first))
        yield first[len(_BOM) :] if first.startswith(_BOM) else first
        if on_bytes is None:
            # Not ``yield from``: a generator delegating to the file closes it when dropped,
            # and an import retried after a write conflict reads the same file again.
            for raw in lines:
                yield raw
            return
        pending, report = 0, self.REPORT_BYTES
        for raw in lines:
            pending += len(raw)
            if pending >= report:
                on_bytes(pending)
                pending = 0
            yield raw
        if pending:
            on_bytes(pending)
