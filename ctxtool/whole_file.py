"""Writing a file whole or not at all, treating its path as a plain write would.

A temporary file beside the target, synced and renamed over it at the end, so a failure (a
disk full, a session deleted while it is read, Ctrl-C) leaves the old file whole. Unlike a
bare rename: a symlink is written through to its target, the replaced file's mode (and owner,
where we may give it) is kept, a new file gets the mode a plain ``open()`` gives, and a device
or a FIFO (``-o /dev/null``), which cannot be renamed over, is written straight into.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from .core.errors import CtxtoolError


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary stream whose bytes become ``path`` when the block ends without an error."""
    target = os.path.realpath(path)
    try:
        existing: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        with open(target, "wb") as stream:
            yield stream
        return
    name, folder = os.path.basename(target), os.path.dirname(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".part")
    except OSError as exc:
        # Said as what failed: the target itself may exist and be writable (/proc/version).
        raise CtxtoolError(
            f"cannot write {path}: no temporary file can be made in {folder} "
            f"({exc.strerror or exc}); the file is written beside its target, then renamed "
            "over it"
        ) from None
    try:
        with os.fdopen(fd, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        _take_place_of(tmp, existing)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_whole(path: str, pieces: Iterable[str]) -> int:
    """Write the text ``pieces`` to ``path`` (UTF-8) through :func:`replacing`; the bytes
    written. A file that cannot be written is one line naming it."""
    size = 0
    try:
        with replacing(path) as stream:
            for piece in pieces:
                data = piece.encode("utf-8")
                stream.write(data)
                size += len(data)
    except OSError as exc:
        raise CtxtoolError(f"cannot write {path}: {exc.strerror or exc}") from None
    return size


def _take_place_of(temporary: str, existing: os.stat_result | None) -> None:
    """Give the temporary file what the file it replaces had (its mode, and its owner where
    we may), or for a new file the mode a plain open() gives (a temporary file's is 0600)."""
    if existing is None:
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(temporary, 0o666 & ~mask)
        return
    os.chmod(temporary, stat.S_IMODE(existing.st_mode))
    mine = os.stat(temporary)
    if (mine.st_uid, mine.st_gid) != (existing.st_uid, existing.st_gid):
        try:
            os.chown(temporary, existing.st_uid, existing.st_gid)
        except PermissionError:
            pass  # not ours to give away: the file becomes the writer's, as it would by hand
