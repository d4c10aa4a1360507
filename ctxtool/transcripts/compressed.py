"""Compressed transcripts (``.gz``, ``.zst``) and archives of a transcripts folder (``.tar.gz``,
``.tgz``, ``.tar.zst``, ``.tar``, ``.zip``), read as streams.

A compressed file is decompressed as it is read, never whole in memory. An archive's members
are read one at a time, each spooled to a temporary file (a branched tree is read twice, and a
tar stream cannot go back), so memory stays flat and the disk holds one member at most.

Identities do not change with the packing: a compressed file has the source id of the file it
was compressed from (``a.jsonl.gz`` is ``a.jsonl`` beside it), and an archive member the id of
the file it becomes when the archive is unpacked where it lies. What an archive can do to a
reader is refused, per member: a path that climbs out of the archive (``../``), an absolute
one, and data that decompresses past ``MAX_RATIO`` times its packed size (a zip bomb); a
truncated or corrupt stream is an error naming the file, never a traceback.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO, BinaryIO, Protocol

from ..core.source_records import TranscriptError

COMPRESSED_SUFFIXES = (".gz", ".zst")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.zst", ".tar", ".zip")
# A transcript compresses 5-20x; a zip bomb a thousand times and more. Below the floor nothing
# is refused (a small file of repeated lines compresses far better than a real one).
MAX_RATIO = 200
RATIO_FLOOR = 64 * 1024 * 1024
_CHUNK = 1 << 20


def is_archive(path: str) -> bool:
    return path.lower().endswith(ARCHIVE_SUFFIXES)


def is_compressed(path: str) -> bool:
    return not is_archive(path) and path.lower().endswith(COMPRESSED_SUFFIXES)


def uncompressed_name(path: str) -> str:
    """The name the file had before it was compressed: ``a.jsonl.gz`` -> ``a.jsonl``."""
    lower = path.lower()
    return next((path[: -len(s)] for s in COMPRESSED_SUFFIXES if lower.endswith(s)), path)


class Bomb(TranscriptError):
    def __init__(self, shown: str, packed: int):
        super().__init__(
            shown,
            None,
            f"decompresses to more than {MAX_RATIO} times its packed size ({packed} bytes): "
            "refused as a decompression bomb",
        )


class _Budget:
    """Decompressed bytes allowed for ``packed`` compressed ones."""

    def __init__(self, shown: str, packed: int):
        self.shown, self.packed = shown, packed
        self.left = max(packed * MAX_RATIO, RATIO_FLOOR)

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise Bomb(self.shown, self.packed)


def _corrupt(shown: str, exc: Exception) -> TranscriptError:
    reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
    return TranscriptError(shown, None, f"truncated or corrupt compressed data ({reason})")


# Every way a decompressor says its input is bad.
_BAD_DATA: tuple[type[Exception], ...] = (
    EOFError,
    zlib.error,
    gzip.BadGzipFile,
    zipfile.BadZipFile,
    tarfile.TarError,
)
try:
    import zstandard

    _BAD_DATA += (zstandard.ZstdError,)
except ImportError:  # .zst support is the optional extra ctxtool[zst]
    zstandard = None  # type: ignore[assignment]


class _Reader(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


def _open_decompressed(path: str, shown: str) -> _Reader:
    if path.lower().endswith(".gz") or path.lower().endswith(".tgz"):
        return gzip.open(path, "rb")
    if path.lower().endswith(".zst"):
        if zstandard is None:
            raise TranscriptError(
                shown, None, "reading .zst needs the zstandard package: pip install 'ctxtool[zst]'"
            )
        return zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True)
    return open(path, "rb")


class DecompressedStream(io.RawIOBase):
    """A compressed file's decompressed bytes, counted against its bomb budget; seekable to
    the start (decompressing again), as a branched transcript is read twice."""

    def __init__(self, path: str, shown: str):
        self.path, self.shown = path, shown
        self.packed = os.path.getsize(path)
        self._open()

    def _open(self) -> None:
        self.inner = _open_decompressed(self.path, self.shown)
        self.budget = _Budget(self.shown, self.packed)
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            data = self.inner.read(len(buffer))
        except _BAD_DATA as exc:
            raise _corrupt(self.shown, exc) from None
        n = len(data)
        buffer[:n] = data
        self.budget.spend(n)
        self.position += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if (offset, whence) not in ((0, io.SEEK_SET), (0, io.SEEK_CUR)):
            raise io.UnsupportedOperation("a decompressed stream rewinds to its start only")
        if whence == io.SEEK_SET:
            self.inner.close()
            self._open()
        return self.position

    def tell(self) -> int:
        return self.position

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.inner.close()
        super().close()


@dataclass
class ArchiveMember:
    """One transcript inside an archive: the name it is shown by, the path it would have once
    unpacked beside the archive (its identity), and its bytes spooled to a temporary file
    (None when the member is refused: ``error`` says why)."""

    shown: str
    unpacked_path: str
    stream: BinaryIO | None = None
    size: int = 0
    error: TranscriptError | None = None


def unsafe_member_name(name: str) -> str | None:
    """Why a member name may not be read as a path inside the archive, or None."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or (parts and parts[0].endswith(":")):
        return "an absolute path"
    if ".." in parts:
        return "a path that climbs out of the archive (..)"
    return None


def archive_members(
    path: str, shown: str, wanted: Callable[[str], bool]
) -> Iterator[ArchiveMember]:
    """The members of the archive at ``path`` whose names ``wanted`` accepts, in archive
    order, each spooled while it is being yielded. Raises TranscriptError if the archive
    itself cannot be read (or breaks off: the members before the break are yielded)."""
    packed = os.path.getsize(path)
    budget = _Budget(shown, packed)
    beside = os.path.dirname(os.path.realpath(path))
    try:
        if path.lower().endswith(".zip"):
            yield from _zip_members(path, shown, beside, budget, wanted)
        else:
            yield from _tar_members(path, shown, beside, budget, wanted)
    except _BAD_DATA as exc:
        raise _corrupt(shown, exc) from None


def _member(shown, beside, name, budget, wanted, open_member) -> Iterator[ArchiveMember]:
    if not wanted(name):
        return  # not a transcript (whatever its path: it is never read)
    member = ArchiveMember(f"{shown}/{name.lstrip('/')}", os.path.join(beside, name))
    problem = unsafe_member_name(name)
    if problem is not None:
        member.error = TranscriptError(member.shown, None, f"archive member with {problem}")
        yield member
        return
    with tempfile.TemporaryFile() as spool:
        with open_member() as source:
            while chunk := source.read(_CHUNK):
                budget.spend(len(chunk))
                spool.write(chunk)
        member.size = spool.tell()
        spool.seek(0)
        member.stream = spool
        yield member


def _zip_members(path, shown, beside, budget, wanted) -> Iterator[ArchiveMember]:
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if not info.is_dir():
                yield from _member(
                    shown, beside, info.filename, budget, wanted, lambda i=info: archive.open(i)
                )


def _tar_members(path, shown, beside, budget, wanted) -> Iterator[ArchiveMember]:
    with contextlib.ExitStack() as stack:
        if path.lower().endswith(".zst"):
            fileobj = stack.enter_context(DecompressedStream(path, shown))
            archive = stack.enter_context(tarfile.open(fileobj=fileobj, mode="r|"))
        else:
            archive = stack.enter_context(tarfile.open(path, mode="r|*"))
        for info in archive:
            if info.isfile():
                yield from _member(
                    shown,
                    beside,
                    info.name,
                    budget,
                    wanted,
                    lambda i=info: _extracted(archive, i),
                )


def _extracted(archive: tarfile.TarFile, info: tarfile.TarInfo) -> contextlib.closing[IO[bytes]]:
    data = archive.extractfile(info)
    if data is None:  # only a regular file is asked for; a tar that says otherwise lies
        raise tarfile.TarError(f"member {info.name!r} has no data")
    return contextlib.closing(data)
