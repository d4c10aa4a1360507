"""The file on disk each session of a transcript without a session id of its own was imported
from, by inode (migration 0010): how a name the file is given after its import, in a folder no
import run saw it in, finds its session (see ``transcripts.discover.source_ids``). Whether a
recorded file is the one being imported is the pure ``FileIdentity.continues``.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.source_records import FileIdentity, RecordedFile
from ..db.schema import transcript_files as F


def recorded_file(conn: Connection, file: FileIdentity) -> RecordedFile | None:
    """What the store recorded of the file with this inode, if anything: the file itself, or
    one deleted since whose inode it took."""
    row = conn.execute(
        sa.select(F.c.head_bytes, F.c.head_sha256, F.c.source_format, F.c.source_id).where(
            F.c.device == file.device, F.c.inode == file.inode
        )
    ).first()
    return RecordedFile(int(row[0]), row[1], row[2], row[3]) if row is not None else None


def record_file(
    conn: Connection,
    file: FileIdentity,
    recorded: RecordedFile | None,
    source_format: str,
    source_id: str,
) -> bool:
    """Record, in the import's transaction, that ``file`` holds the session stored under
    (``source_format``, ``source_id``), unless ``recorded`` (read before) says so already;
    True when it wrote.

    A file not recorded yet is inserted, never looked for with an UPDATE first: on InnoDB an
    UPDATE of a missing key locks the gap it would be in, and so waits for another import's
    uncommitted row of a neighbouring inode until that import commits. A concurrent import of
    the same inode that inserts first makes the insert fail on the key: a lost race, retried
    (and then found recorded)."""
    wanted = file.record(source_format, source_id)
    if recorded == wanted:
        return False
    values = {
        "head_bytes": wanted.head_bytes,
        "head_sha256": wanted.head_sha256,
        "source_format": source_format,
        "source_id": source_id,
    }
    mine = (F.c.device == file.device, F.c.inode == file.inode)
    if recorded is None or conn.execute(F.update().where(*mine).values(**values)).rowcount == 0:
        conn.execute(F.insert().values(device=file.device, inode=file.inode, **values))
    return True
