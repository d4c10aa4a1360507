"""Archive, then purge: sessions leave the store only into an archive that holds them.

``archive_sessions`` writes each session as ctxtool's own re-importable JSONL
(``transcripts.ctxtool_archive``: the session, its messages, its checkpoints), one file per
session, and a manifest (``ctxtool-archive.manifest``) giving each file's counts and a checksum of
the session's messages and checkpoints. Files and manifest are written to a temporary name and
renamed, so a killed run leaves only complete files, each in the manifest once complete.

``purge_sessions`` deletes a session only when the archive written by ctxtool holds it: the
file read back gives the manifest's counts and checksum, each of its checkpoints keeps from a
message of the file or says it kept nothing (what an import of it gives back), and the
store's session still gives them too (nothing added since), checked and deleted in one
transaction per session under the session's row lock. A purge killed at any point has deleted only sessions verified so; a
redacted archive never allows a purge (it does not hold what the store holds).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import orjson
from sqlalchemy.engine import Connection

from . import __version__
from .core.context_size import HEAD_COUNTS_KEY
from .core.errors import CtxtoolError
from .core.records import Compaction, Message, Session
from .db import read_connection
from .redaction import Redactor, without_cut_word
from .store import Store
from .store.archiving import first_message_from, lock_session, matching_sessions
from .store.removal import remove_rows
from .transcripts.ctxtool_archive import (
    ARCHIVED,
    ARCHIVED_DETAILS,
    CHECKPOINT,
    MESSAGE,
    SESSION,
    says_kept_nothing,
)
from .whole_file import replacing

MANIFEST = "ctxtool-archive.manifest"  # JSON; not .json, so importing the folder skips it
ARCHIVE_VERSION = 1
_DURATION = re.compile(r"^\s*(\d+)\s*([dhwm]?)\s*$")
_UNITS = {"": "days", "d": "days", "h": "hours", "w": "weeks", "m": "minutes"}


@dataclass
class ArchivedSession:
    """One session in an archive: what its manifest entry says."""

    session_id: int
    source: str
    file: str
    messages: int
    checkpoints: int
    checksum: str
    redacted: dict[str, int] = field(default_factory=dict)  # placeholders written, by type

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class PurgeCheck:
    """What the purge found for one archived session, and did."""

    session_id: int
    source: str
    file: str
    messages: int
    checkpoints: int
    verdict: str  # "purged", "would purge", or why the session stays
    purged: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def parse_age(text: str) -> timedelta:
    """``30`` or ``30d`` days, ``12h`` hours, ``2w`` weeks, ``90m`` minutes."""
    match = _DURATION.match(text)
    if not match:
        raise CtxtoolError(f"--older-than {text!r}: give a number of days (30, 30d), or 12h, 2w")
    return timedelta(**{_UNITS[match[2]]: int(match[1])})


def select_sessions(
    store: Store,
    refs: Iterable[str] = (),
    older_than: timedelta | None = None,
    project: str | None = None,
    now: datetime | None = None,
) -> list[int]:
    """The sessions ``refs`` name (any reference ``context show`` takes), or all, narrowed to
    those whose last message (or start, without one) is older than ``older_than`` and to one
    project."""
    refs = list(refs)
    ids = list(dict.fromkeys(store.resolve_session(r) for r in refs)) if refs else None
    cutoff = (now or datetime.now()) - older_than if older_than is not None else None
    with store.engine.connect() as conn:
        return matching_sessions(conn, ids, project, cutoff)


# -- the records of an archive file: one function each, for writing and for checking --------


def session_record(session: Session) -> dict:
    return {
        "type": SESSION,
        "archive_version": ARCHIVE_VERSION,
        "session_id": session.session_id,
        "source_format": session.source_format or "ctxtool",
        "source_id": session.source_id or f"session-{session.session_id}",
        "title": session.title,
        "model": session.model,
        "system_prompt": session.system_prompt,
        "user_id": session.user_id,
        "project_id": session.project_id,
        "created_at": _time(session.created_at),
        "details": session.details,
    }


def message_record(m: Message) -> dict:
    return {
        "type": MESSAGE,
        "id": m.id,
        "source_id": message_source_id(m.id, m.source_id),
        "role": m.role,
        "content": m.content,
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id,
        "name": m.name,
        "created_at": _time(m.created_at),
        "details": m.details,
    }


def checkpoint_record(c: Compaction, first_kept_source_id: str | None) -> dict:
    """``first_kept_source_id`` None: the checkpoint keeps no message of the session (it kept
    nothing when it was written, details.kept_after_message); importing the archive writes its
    cut after the session's last message again."""
    made_by = {
        k: v
        for k, v in (
            ("summarizer", c.summarizer),
            ("summarizer_model", c.summarizer_model),
            ("summary_tokens", c.summary_tokens),
            ("tokens_after", c.tokens_after),
        )
        if v is not None
    }
    if c.details is not None and not isinstance(c.details, dict):
        # A runtime's details that are no JSON object (text, a list): kept whole beside the
        # columns, where the archive's reader takes them back from.
        made_by[ARCHIVED_DETAILS] = c.details
    details = {**(c.details if isinstance(c.details, dict) else {})}
    if made_by:
        details[ARCHIVED] = made_by
    return {
        "type": CHECKPOINT,
        "id": c.id,
        "source_id": c.source_id or f"ctxtool-checkpoint:{c.id}",
        "summary": c.summary,
        "first_kept_source_id": first_kept_source_id,
        "tokens_before": c.tokens_before,
        "created_at": _time(c.created_at),
        "details": details or None,
    }


def kept_nothing_marked(record: dict) -> bool:
    """Whether a checkpoint record says it kept nothing, as the archive's reader decides."""
    return says_kept_nothing(record.get("details"))


def message_source_id(message_id: int, source_id: str | None) -> str:
    """A message written by a runtime has no source id: the archive names it by its id."""
    return source_id or f"ctxtool:{message_id}"


_CHECKED = {
    MESSAGE: ("source_id", "role", "content", "tool_calls", "tool_call_id", "name"),
    CHECKPOINT: ("source_id", "summary", "first_kept_source_id", "tokens_before"),
}


class Checksum:
    """Counts and a sha256 of what an archive must hold of a session: each message's and each
    checkpoint's identity and content, in order. Computed alike from the store and from a
    file read back, so the two agree exactly when they hold the same."""

    def __init__(self):
        self.hash = hashlib.sha256()
        self.messages = self.checkpoints = 0

    def add(self, record: dict) -> None:
        kind = record["type"]
        values = [kind, *(record.get(k) for k in _CHECKED[kind])]
        if kind == CHECKPOINT and record.get("first_kept_source_id") is None:
            # Kept nothing: whether it says so is what makes it importable (an archive of an
            # earlier version never wrote a checkpoint so, and its checksums stay as they were).
            values.append(kept_nothing_marked(record))
        self.hash.update(orjson.dumps(values))
        self.hash.update(b"\n")
        if kind == MESSAGE:
            self.messages += 1
        else:
            self.checkpoints += 1

    def hexdigest(self) -> str:
        return self.hash.hexdigest()


def session_records(store: Store, session_id: int) -> Iterator[dict]:
    """The session's archive records, in file order, as the store holds them now (messages
    read in batches, a connection each: flat memory)."""
    return archive_records(
        store.session(session_id), store.iter_messages(session_id), _checkpoints(store, session_id)
    )


def archive_records(
    session: Session,
    messages: Iterable[Message],
    checkpoints: Iterable[tuple[Compaction, str | None]],
) -> Iterator[dict]:
    """A session's archive records, in file order: its session record, then each message's,
    then each checkpoint's (``checkpoints``: each with the archive's name of the first message
    it keeps, :func:`_first_kept`), read from the iterables as they are written."""
    yield session_record(session)
    for m in messages:
        yield message_record(m)
    for cp, first_kept in checkpoints:
        yield checkpoint_record(cp, first_kept)


def _checkpoints(store: Store, session_id: int) -> Iterator[tuple[Compaction, str | None]]:
    """The session's checkpoints with the first message each keeps, on a connection of their
    own opened when the messages before them are written."""
    with read_connection(store.engine) as conn:
        yield from _with_first_kept(conn, session_id, store.compactions(session_id, conn))


def _with_first_kept(
    conn: Connection, session_id: int, checkpoints: list[Compaction]
) -> Iterator[tuple[Compaction, str | None]]:
    for cp in checkpoints:
        yield cp, _first_kept(conn, session_id, cp.first_kept_message_id)


def _first_kept(conn: Connection, session_id: int, cut: int) -> str | None:
    """The archive's name for the first message a checkpoint keeps: the session's first
    message from its cut on, which restore keeps first; None when it has none (the
    checkpoint kept nothing and nothing was appended after it: no message holds its cut's id,
    or another session's does)."""
    first = first_message_from(conn, session_id, cut)
    return message_source_id(*first) if first is not None else None


def archive_sessions(
    store: Store,
    session_ids: Iterable[int],
    out_dir: str,
    redactor: Redactor | None = None,
    on_session: Callable[[ArchivedSession], None] | None = None,
    preview: bool = False,
) -> list[ArchivedSession]:
    """Write each session to ``out_dir/session-<id>.jsonl`` and the manifest beside them.

    ``redactor`` (see :mod:`ctxtool.redaction`) replaces secrets in what is written; a
    redacted archive is marked so in the manifest (and cannot be purged against). With
    ``preview`` nothing is written: the redactor only collects what it would replace."""
    out = Path(out_dir)
    if not preview:
        out.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(out) if (out / MANIFEST).exists() else _new_manifest()
    done: list[ArchivedSession] = []
    for session_id in session_ids:
        name = f"session-{session_id}.jsonl"
        checksum = Checksum()
        before = Counter(redactor.counts) if redactor is not None else Counter()
        records = session_records(store, session_id)
        header = next(records)
        with _replacing(out / name, discard=preview) as stream:
            for record in itertools.chain([header], records):
                if record is not header:
                    checksum.add(record)  # what the store holds, before any redaction
                if redactor is not None:
                    _redact_record(redactor, record, session_id)
                stream.write(orjson.dumps(record) + b"\n")
        entry = ArchivedSession(
            session_id,
            f"{header['source_format']}:{header['source_id']}",
            name,
            checksum.messages,
            checksum.checkpoints,
            checksum.hexdigest(),
            dict(redactor.counts - before) if redactor is not None else {},
        )
        if not preview:
            manifest["sessions"][str(session_id)] = {
                **entry.as_dict(),
                "redacted": redactor is not None,
            }
            with _replacing(out / MANIFEST) as stream:
                stream.write(json.dumps(manifest, indent=1).encode() + b"\n")
        done.append(entry)
        if on_session is not None:
            on_session(entry)
    return done


def _redact_record(redactor: Redactor, record: dict, session_id: int) -> None:
    where = f"session {session_id}"
    if record["type"] != SESSION:
        where += f" {record['type'].removeprefix('ctxtool_')} {record['id']}"
    else:
        record["title"] = without_cut_word(record.get("title"))
    details = record.get("details")
    if isinstance(details, dict) and HEAD_COUNTS_KEY in details:
        # The kept counts of the prompt or summary carry a digest of the unredacted text (and
        # its size), which would let a guess at a short secret be checked offline. They are a
        # cache: importing the archive counts the redacted text again.
        record["details"] = {k: v for k, v in details.items() if k != HEAD_COUNTS_KEY} or None
    for key, value in record.items():
        if key not in ("type", "id", "source_id", "first_kept_source_id", "source_format"):
            record[key] = redactor.value(value, f"{where} {key}")


def _new_manifest() -> dict:
    return {
        "written_by": f"ctxtool {__version__}",
        "archive_version": ARCHIVE_VERSION,
        "sessions": {},
    }


def read_manifest(archive_dir: Path) -> dict:
    """The manifest of an archive ctxtool wrote, or CtxtoolError saying why it is not one."""
    path = archive_dir / MANIFEST
    try:
        manifest = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise CtxtoolError(
            f"{archive_dir}: no {MANIFEST}: not an archive written by ctxtool"
        ) from None
    except (OSError, ValueError) as exc:
        raise CtxtoolError(f"{path}: unreadable ({exc})") from None
    if (
        not isinstance(manifest, dict)
        or not str(manifest.get("written_by", "")).startswith("ctxtool")
        or manifest.get("archive_version") != ARCHIVE_VERSION
        or not isinstance(manifest.get("sessions"), dict)
    ):
        raise CtxtoolError(f"{path}: not a manifest of an archive written by ctxtool")
    return manifest


@contextlib.contextmanager
def _replacing(path: Path, discard: bool = False):
    """Write ``path`` whole or not at all (``whole_file.replacing``; ``discard``: nowhere, a
    preview)."""
    if discard:
        with open(os.devnull, "wb") as stream:
            yield stream
        return
    with replacing(path) as stream:
        yield stream


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


# -- purge ----------------------------------------------------------------------------------


def purge_sessions(
    store: Store,
    archive_dir: str,
    refs: Iterable[str] = (),
    dry_run: bool = False,
    on_session: Callable[[PurgeCheck], None] | None = None,
) -> list[PurgeCheck]:
    """Delete the archived sessions (those ``refs`` name, or all in the archive) that the
    archive verifiably holds; see the module docstring. Every session gets a verdict."""
    folder = Path(archive_dir)
    manifest = read_manifest(folder)
    entries = list(manifest["sessions"].values())
    refs = list(refs)
    if refs:
        wanted = {store.resolve_session(r) for r in refs}
        missing = wanted - {e["session_id"] for e in entries}
        if missing:
            raise CtxtoolError(
                f"session {min(missing)} is not in the archive {archive_dir}: archive it first"
            )
        entries = [e for e in entries if e["session_id"] in wanted]
    checks = []
    for entry in sorted(entries, key=lambda e: e["session_id"]):
        check = PurgeCheck(
            entry["session_id"],
            entry["source"],
            entry["file"],
            entry["messages"],
            entry["checkpoints"],
            "",
        )
        check.verdict = _file_problem(folder, entry) or _purge_one(store, entry, dry_run)
        check.purged = check.verdict == "purged"
        checks.append(check)
        if on_session is not None:
            on_session(check)
    return checks


def _file_problem(folder: Path, entry: dict) -> str | None:
    """Why the archive file does not hold what its manifest says, or None."""
    if entry.get("redacted"):
        return "kept: its archive is redacted (it does not hold what the store holds)"
    path = folder / entry["file"]
    if Path(entry["file"]).name != entry["file"]:
        return f"kept: the manifest names a file outside the archive ({entry['file']!r})"
    checksum = Checksum()
    messages: set[str] = set()
    try:
        with open(path, "rb") as f:
            header = orjson.loads(f.readline())
            if header.get("type") != SESSION or header.get("session_id") != entry["session_id"]:
                return f"kept: {entry['file']} is not the archive of session {entry['session_id']}"
            for raw in f:
                record = orjson.loads(raw)
                checksum.add(record)
                if record["type"] == MESSAGE:
                    messages.add(record["source_id"])
                elif (lost := _lost_checkpoint(record, messages)) is not None:
                    return f"kept: {entry['file']}: {lost}"
    except FileNotFoundError:
        return f"kept: {entry['file']} is missing from the archive"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"kept: {entry['file']} is unreadable ({str(exc)[:80]})"
    if (checksum.messages, checksum.checkpoints, checksum.hexdigest()) != (
        entry["messages"],
        entry["checkpoints"],
        entry["checksum"],
    ):
        return f"kept: {entry['file']} does not hold what the manifest says (changed or damaged)"
    return None


def _lost_checkpoint(record: dict, messages: set[str]) -> str | None:
    """Why importing the archive would not give back this checkpoint record, or None: it
    must keep from a message of the file before it, or say it kept nothing."""
    first_kept = record.get("first_kept_source_id")
    if first_kept is None and kept_nothing_marked(record):
        return None
    if first_kept is not None and first_kept in messages:
        return None
    name = record.get("source_id")
    if first_kept is None:
        return (
            f"its checkpoint {name!r} keeps no message and does not say it kept nothing (an "
            "import of it would refuse it; see validate's first_kept_missing)"
        )
    return (
        f"its checkpoint {name!r} keeps from a message the file does not hold (an import of "
        "it would drop the checkpoint): archive it again"
    )


def _purge_one(store: Store, entry: dict, dry_run: bool) -> str:
    """Check the store still holds exactly what was archived, and delete it, in one
    transaction under the session's row lock (an import waits, then finds it gone)."""
    session_id = entry["session_id"]
    with store.engine.begin() as conn:
        if not lock_session(conn, session_id):
            return "kept: not in the store (already purged?)"
        checksum = Checksum()
        records = archive_records(
            store.session(session_id, conn),
            store.iter_messages(session_id, conn=conn),
            _with_first_kept(conn, session_id, store.compactions(session_id, conn)),
        )
        header = next(records)
        if f"{header['source_format']}:{header['source_id']}" != entry["source"]:
            return f"kept: session {session_id} is now another session ({header['source_format']}:{header['source_id']})"
        for record in records:
            checksum.add(record)
        if (checksum.messages, checksum.checkpoints, checksum.hexdigest()) != (
            entry["messages"],
            entry["checkpoints"],
            entry["checksum"],
        ):
            return (
                f"kept: changed since it was archived ({checksum.messages} messages, "
                f"{checksum.checkpoints} checkpoints now): archive it again"
            )
        if dry_run:
            return "would purge"
        remove_rows(conn, [session_id])
    return "purged"
