"""Finding and opening transcript files: which files a path names, their bytes as lines, and
the source id of a transcript that has no session id of its own.

Reading what the lines hold (JSON, format detection) is ``reading``; parsing is one module per
format; the database is the importer's.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO

from ..core.source_records import MAX_RECORD_BYTES, FileIdentity, TranscriptError
from .compressed import (
    ARCHIVE_SUFFIXES,
    COMPRESSED_SUFFIXES,
    ArchiveMember,
    DecompressedStream,
    is_compressed,
    uncompressed_name,
)

TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".traj", ".ndjson")
_FOUND_SUFFIXES = (
    TRANSCRIPT_SUFFIXES
    + tuple(s + c for s in TRANSCRIPT_SUFFIXES for c in COMPRESSED_SUFFIXES)
    + ARCHIVE_SUFFIXES
)
STDIN = "-"
_BOM = b"\xef\xbb\xbf"
_STDIN_ID_BYTES = 65536
# A transcript is read line by line through a buffer of this size: at the default 8 KB the
# line iterator refilled it every 16 lines.
READ_BUFFER = 1 << 20


def expand_paths(paths: Iterable[str]) -> list[str]:
    """Files to import: each path as given (a missing one is reported when it is imported, so
    it never stops the others), directories walked for transcripts (compressed ones and
    archives of them too, see ``compressed``), ``-`` = stdin. Folders whose name starts with a
    dot (``.venv``, ``.git``) are skipped under a directory given, unless named themselves:
    their JSON files are a tool's, not transcripts."""
    out: list[str] = []
    for p in paths:
        if p != STDIN and os.path.isdir(p):
            found: list[str] = []
            for root, dirs, files in os.walk(p):  # never follows a symlinked folder (no loops)
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found.extend(
                    os.path.join(root, name)
                    for name in files
                    if name.lower().endswith(_FOUND_SUFFIXES)
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


@dataclass
class SourceFile:
    """A transcript opened for import: its bytes (seekable: a branched tree is read twice),
    how many of them to read, and the source id it gets if it names no session of its own.

    ``size`` is the file's length when it was opened: an agent may still be appending, and
    reading on past it would read a line being written as two (see ``CountingStream``)."""

    stream: IO[bytes]
    size: int | None  # None: read to the end
    fallback_id: str
    legacy_id: LegacyIds = None
    file: FileIdentity | None = None  # None: no file on disk (stdin, an archive's member)


# How many of a file's first bytes its identity hashes: a transcript being written only grows,
# so its beginning stays, and 4 KiB tell two transcripts apart (the reconciler checks the rest).
HEAD_BYTES = 4096


def file_identity(fd: int, size: int | None) -> FileIdentity:
    """The identity of the open file ``fd`` whose first ``size`` bytes (all: None) are read."""
    st = os.fstat(fd)
    head = os.pread(fd, HEAD_BYTES if size is None else min(size, HEAD_BYTES), 0)
    return FileIdentity(signed_64(st.st_dev), signed_64(st.st_ino), head)


def signed_64(n: int) -> int:
    """An unsigned 64-bit device or inode number as a BIGINT holds it (less 2^64 from 2^63 on:
    NFS and XFS inode numbers may use all 64 bits)."""
    return n - (1 << 64) if n >= 1 << 63 else n


@contextlib.contextmanager
def open_source(path: str, links: HardLinks | None = None) -> Iterator[SourceFile]:
    """Open a transcript (see :class:`SourceFile`).

    Standard input is spooled to a temporary file, so memory stays flat for any size; binary
    input, or a line longer than a record can be, stops the spooling at once. Anything that is
    not a regular file (a FIFO, a device) is refused rather than read: it could block
    forever."""
    if path == STDIN:
        with tempfile.TemporaryFile(buffering=READ_BUFFER) as spool:
            head = _spool(sys.stdin.buffer, spool)
            size = spool.tell()
            spool.seek(0)
            # sha1 as ctxtool has always named stdin transcripts: re-imports find them.
            yield SourceFile(spool, size, f"stdin-{hashlib.sha1(head).hexdigest()[:16]}")
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
    if is_compressed(path):
        # Read to its end: a compressed file is no live transcript. Its identity is the file
        # it was compressed from.
        with open(path, "rb") as packed:
            identity = file_identity(packed.fileno(), None)
        with io.BufferedReader(DecompressedStream(path, printable(path)), READ_BUFFER) as stream:
            ids = source_ids(path, uncompressed_name(path), links)
            yield SourceFile(stream, None, *ids, file=identity)
        return
    with open(path, "rb", buffering=READ_BUFFER) as stream:
        size = os.fstat(stream.fileno()).st_size
        identity = file_identity(stream.fileno(), size)
        yield SourceFile(stream, size, *source_ids(path, links=links), file=identity)


def _spool(stdin: IO[bytes], spool: IO[bytes]) -> bytes:
    """Copy standard input to ``spool``; returns its first bytes (they name the transcript)."""
    head = stdin.read(_STDIN_ID_BYTES)
    if b"\x00" in head:
        raise TranscriptError("<stdin>", None, "binary data, not a text transcript")
    spool.write(head)
    since_newline = len(head) - 1 - head.rfind(b"\n")
    while chunk := stdin.read(READ_BUFFER):
        newline = chunk.rfind(b"\n")
        since_newline = len(chunk) - 1 - newline if newline >= 0 else since_newline + len(chunk)
        if since_newline > MAX_RECORD_BYTES:
            raise TranscriptError(
                "<stdin>", None, f"a line longer than {MAX_RECORD_BYTES >> 20} MB: not a transcript"
            )
        spool.write(chunk)
    return head


def source_ids(
    path: str, named: str | None = None, links: HardLinks | None = None
) -> tuple[str, LegacyIds]:
    """The fallback source id of the file at ``path`` (see :func:`fallback_source_id`) and the
    id(s) it may have had before, which the store may still hold its session under.

    A symlink is the file it points at. A file with several hard links has no one name: it
    is named by its inode, so every name finds the same session. One imported before under a
    single name, before it was linked, is found through the ids of every name of the inode
    known here (whichever name is imported first), then moved to the inode one: the names in
    its folder, and those of the same import run in any folder (``links``, see
    :func:`hard_links`). A name in another folder that this run does not import is found by
    the file itself: the store records the inode and first bytes of the file each session was
    imported from (:class:`FileIdentity`, ``store.transcript_files``), which also finds the
    session of a file renamed, or left with one name of several. ``named``: the name the
    file's identity comes from, if not its own (a compressed file's uncompressed name)."""
    named = named or path
    real = os.path.realpath(path)
    st = os.stat(real)
    if st.st_nlink > 1:
        others = _other_names(real, st) + [
            other
            for other in (links or {}).get((st.st_dev, st.st_ino), ())
            if os.path.realpath(other) != real
        ]
        names = [fallback_source_id(named)] + [fallback_source_id(other) for other in others]
        return _inode_id(st), tuple(dict.fromkeys(names))
    return fallback_source_id(named), legacy_source_id(os.path.realpath(named))


# (device, inode) -> the names an import run has of a file with several hard links.
HardLinks = dict[tuple[int, int], list[str]]


def hard_links(files: Iterable[str]) -> HardLinks:
    """The names of each hard-linked file among ``files`` (one import run), in any folder: a
    session imported before under one of them is found through another (see
    :func:`source_ids`). A stat of each file, none read."""
    links: HardLinks = {}
    for path in files:
        if path == STDIN:
            continue
        with contextlib.suppress(OSError):
            st = os.stat(path)
            if st.st_nlink > 1 and stat.S_ISREG(st.st_mode):
                links.setdefault((st.st_dev, st.st_ino), []).append(path)
    return {key: names for key, names in links.items() if len(names) > 1}


# The ids a store may hold a file's session under from before: an older ctxtool's (its stem),
# or, for a hard-linked file, each of its names' (see source_ids).
LegacyIds = str | tuple[str, ...] | None


def _other_names(real: str, st: os.stat_result) -> list[str]:
    """The other names of the file ``real`` in its folder: the entries of the same inode."""
    folder = os.path.dirname(real)
    try:
        with os.scandir(folder) as entries:
            return [
                e.path
                for e in entries
                if e.inode() == st.st_ino and e.path != real and e.is_file(follow_symlinks=False)
            ]
    except OSError:
        return []


def member_source_id(member: ArchiveMember) -> str:
    """An archive member's id: the file's it becomes when unpacked where the archive lies."""
    return fallback_source_id(member.unpacked_path)


def is_transcript_name(name: str) -> bool:
    return name.lower().endswith(TRANSCRIPT_SUFFIXES)


def _inode_id(st: os.stat_result) -> str:
    digest = hashlib.sha256(f"inode:{st.st_dev}:{st.st_ino}".encode()).hexdigest()[:16]
    return f"linked@{digest}"


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
    again (grown, or through a symlink) is the same one. A moved file has a new id, under
    which the store's record of its inode finds its session (see :func:`source_ids`); a
    copy is a new transcript."""
    real = os.path.realpath(path)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"{printable(Path(real).stem)[:100]}@{digest}"


def printable(name: str) -> str:
    """A file name as text a database stores and a terminal shows: bytes that are not UTF-8
    (kept by Python as lone surrogates) written as \\xNN."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class CountingStream:
    """Binary lines from a stream, up to ``size`` bytes (the snapshot of a file still being
    written: the line being written when it was taken ends unfinished, and the next import
    reads it whole), counting bytes read for progress (reported every ``REPORT_BYTES`` and at
    the end: a call for every line cost an import 3%), a UTF-8 byte order mark dropped from the
    first line. A line longer than a record can be is refused: an endless one never fills
    memory."""

    REPORT_BYTES = 1 << 16

    def __init__(
        self,
        stream: IO[bytes],
        on_bytes: Callable[[int], None] | None = None,
        size: int | None = None,
        path: str = "<stream>",
    ):
        self.stream, self.on_bytes, self.size, self.path = stream, on_bytes, size, path

    def __iter__(self) -> Iterator[bytes]:
        limit = MAX_RECORD_BYTES + 1
        # readline through C (partial, iter, enumerate): this runs for every line of files of
        # millions of lines, and a Python call per line would double the reading's cost.
        lines = enumerate(iter(partial(self.stream.readline, limit), b""), start=1)
        left = self.size if self.size is not None else sys.maxsize
        if left <= 0:
            return
        on_bytes, pending, report = self.on_bytes, 0, self.REPORT_BYTES
        for number, raw in lines:
            size = len(raw)
            if size >= left:  # the last line of the snapshot, cut where the snapshot ends
                raw, size, left = raw[:left], left, 0
            else:
                left -= size
            if size == limit and raw[-1:] != b"\n":
                raise TranscriptError(
                    self.path, number, f"a line longer than {MAX_RECORD_BYTES >> 20} MB"
                )
            if on_bytes is not None:
                pending += size
                if pending >= report:
                    on_bytes(pending)
                    pending = 0
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            yield raw
            if not left:
                break
        if pending and on_bytes is not None:
            on_bytes(pending)
