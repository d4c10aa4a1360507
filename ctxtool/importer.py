"""Importing transcripts into the store: streaming, batched, one transaction per session (or,
with ``max_transaction_bytes``, consecutive ones, each a prefix of the session).

Each file is one session, identified by (source_format, source_id): the transcript's own session
id, or for a transcript without one its file name and path (see
:func:`ctxtool.transcripts.discover.fallback_source_id`; the file's inode, recorded with the
session, finds it under a later name: ``store.transcript_files``). Importing it again, or a
longer version of it, adds only the messages and checkpoints whose source ids are new; a file
that disagrees with what is stored under its id is refused. This module only orchestrates: reading and parsing are
``ctxtool.transcripts``, the rules ``core.import_rules``, the writes ``store.import_writes``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from .core.errors import CtxtoolError, FileFailure
from .core.import_rules import Counts, Disagreement, Reconciler
from .core.source_records import FileIdentity, RecordedFile
from .db import DEFAULT_POLICY, RetryPolicy, dialect_of, retry_transaction
from .failures import describe_failure
from .store.import_writes import ImportedSessions, MessageWriter, SessionGone
from .store.transcript_files import record_file, recorded_file
from .transcripts import PARSERS, BranchedTranscript, Transcript, TranscriptError
from .transcripts.compressed import archive_members, is_archive, is_compressed
from .transcripts.discover import (
    STDIN,
    CountingStream,
    HardLinks,
    LegacyIds,
    SourceFile,
    expand_paths,
    hard_links,
    is_transcript_name,
    member_source_id,
    open_source,
    printable,
)
from .transcripts.fields import source_key
from .transcripts.lines import main_line_of, read_transcript

# Reads of one file that change what is read (the legacy id was another transcript's, the tree
# has abandoned branches): each happens at most once.
_REREADS = 3
# Lost races are retried with db.retry's backoff; a server out of reach fails the file at once
# (one line, nothing written), as it always did: the next file, or the next cron run, tries again.
IMPORT_POLICY = replace(DEFAULT_POLICY, outage_s=0.0)
_FILE_FAILURES = (
    CtxtoolError,
    SQLAlchemyError,
    OSError,
    # input no check foresaw reached the driver: still this file's failure only, so the files
    # after it are imported (from cron, forever otherwise)
    ValueError,
    TypeError,
    OverflowError,
    RecursionError,
)


class _NotTheLegacySession(Exception):
    """The session stored under a file's legacy id holds another transcript."""


@dataclass
class _Reservation:
    """A new session's id, taken from the counter (committed at once) by a pass that then
    wrote nothing: a tree read as linear that turned out branched, before its main line is
    found, or a file that failed. The next pass of the same file, or the next new session of
    the same import, uses it, so no id is handed out and dropped (the first session of a
    fresh store is session 1). A pass that lost a race drops it: the id may be what it lost."""

    session_id: int | None = None


@dataclass(frozen=True)
class _SourceIds:
    """The ids a file's session may be stored under (see ``transcripts.discover``): the one it
    gets, those it may have had, and whether the store's record of its inode may name one
    more (``store.transcript_files``). Once the session found under an earlier id turns out
    to hold another transcript, only the first is left: the file gets a session of its own."""

    fallback: str
    legacy: LegacyIds
    by_file: bool = True

    def earlier(
        self, file: FileIdentity | None, recorded: RecordedFile | None, source_format: str
    ) -> tuple[str, ...]:
        """The earlier ids to look for: the legacy ones, then the one recorded of this inode if
        the file begins as the recorded one did (an inode reused by another file does not)."""
        legacy = self.legacy
        ids = (legacy,) if isinstance(legacy, str) else legacy or ()
        if (
            self.by_file
            and file is not None
            and recorded is not None
            and recorded.source_format == source_format
            and file.continues(recorded)
        ):
            ids += (recorded.source_id,)
        return ids


@dataclass
class FileResult:
    """What importing one file did."""

    path: str
    format: str | None = None
    session_id: int | None = None
    source_id: str | None = None
    messages_added: int = 0
    messages_present: int = 0
    compactions_added: int = 0
    compactions_present: int = 0
    skipped: Counter = field(default_factory=Counter)
    converted: Counter = field(default_factory=Counter)
    recovered: Counter = field(default_factory=Counter)
    layout: str | None = None
    failure: FileFailure | None = None  # why it was not (wholly) imported
    numbered_by_message: bool = False  # a whole JSON document: errors name "message #N"
    # Bounded transactions (--max-transaction-bytes): what this run committed in passes
    # that a lost race then ran again (they find it present), and how many messages the
    # session holds after the last commit, for a failure to say what is left.
    committed_earlier: tuple[int, int] = (0, 0)
    messages_stored: int | None = None

    @property
    def error(self) -> str | None:
        """The failure's whole line, file first, as printed; None if the file was imported."""
        return None if self.failure is None else str(self.failure)

    def as_dict(self) -> dict:
        return {
            "file": printable(self.path),
            "format": self.format,
            "session_id": self.session_id,
            "added": self.messages_added,
            "present": self.messages_present,
            "skipped": sum(self.skipped.values()),
            "compactions": self.compactions_added,
            "compactions_present": self.compactions_present,
            "skipped_by_kind": dict(sorted(self.skipped.items())),
            "converted_by_kind": dict(sorted(self.converted.items())),
            "recovered_by_kind": dict(sorted(self.recovered.items())),
            "layout": self.layout,
            "error": self.error,
        }

    def reset_counts(self) -> None:
        """Back to zero before another attempt at the same file (what bounded transactions
        committed is kept aside: the next attempt finds it present)."""
        self.committed_earlier = (
            self.committed_earlier[0] + self.messages_added,
            self.committed_earlier[1] + self.compactions_added,
        )
        self.skipped.clear()
        self.converted.clear()
        self.recovered.clear()
        self.messages_added = self.messages_present = 0
        self.compactions_added = self.compactions_present = 0


class Importer:
    """Imports transcripts into one store.

    Example::

        results = Importer(create_engine(url)).import_paths(["~/.claude/projects/x/"])
    """

    def __init__(
        self,
        engine: Engine,
        fmt: str | None = None,
        skip_invalid: bool = False,
        on_bytes: Callable[[int], None] | None = None,
        max_row_bytes: int | None = None,
        max_transaction_bytes: int | None = None,
        retry: RetryPolicy = IMPORT_POLICY,
    ):
        self.engine = engine
        self.retry = retry  # how often a lost race (a lock wait, a deadlock) is run again
        self.max_row_bytes = max_row_bytes
        # `import --max-transaction-bytes`: a session's new messages go in transactions of at
        # most this many row bytes (TiDB's txn-total-size-limit, Galera's wsrep_max_ws_size).
        self.max_transaction_bytes = max_transaction_bytes
        self.fmt = fmt
        self.skip_invalid = skip_invalid
        self.on_bytes = on_bytes
        self.dialect = dialect_of(engine)
        self.sessions = ImportedSessions(engine)
        self.links: HardLinks = {}
        self._spare_id: int | None = None  # a new session id taken and never committed

    def import_paths(self, paths: Iterable[str]) -> list[FileResult]:
        """Every file under ``paths``; a file that fails never stops the others."""
        return self.import_files(expand_paths(paths))

    def import_files(
        self, files: Iterable[str], results: list[FileResult] | None = None
    ) -> list[FileResult]:
        """These files (already expanded), an archive's transcripts one result each, appended
        to ``results`` as each is done (a caller that is interrupted keeps those)."""
        results = [] if results is None else results
        files = list(files)
        self.links = hard_links(files)  # a linked file's names in other folders of this run
        for path in files:
            if is_archive(path):
                results.extend(self.import_archive(path))
            else:
                results.append(self.import_file(path))
        return results

    @contextlib.contextmanager
    def _counted_packed(self, path: str) -> Iterator[None]:
        """``on_bytes`` counts a file's bytes as stored on disk, as a progress bar's total
        (``discover.file_sizes``) does: a compressed file or an archive, whose lines are
        decompressed bytes, counts its packed size once it is done instead of its lines."""
        if self.on_bytes is None or not (is_archive(path) or is_compressed(path)):
            yield
            return
        on_bytes, self.on_bytes = self.on_bytes, None
        try:
            yield
        finally:
            self.on_bytes = on_bytes
            with contextlib.suppress(OSError):
                on_bytes(os.path.getsize(path))

    def import_file(self, path: str) -> FileResult:
        """Import one file. A failure is ``result.failure``, a core error whose message
        (``result.error``) is one line naming the file (and the line where there is one);
        nothing is written for the file but what bounded transactions committed before it."""
        shown = "<stdin>" if path == STDIN else printable(path)
        with self._counted_packed(path):
            return self._import_opened(path, shown, lambda: open_source(path, self.links))

    def import_archive(self, path: str) -> list[FileResult]:
        """Every transcript in a .tar.gz/.zip (see transcripts.compressed), one result each; a
        refused member is its own failure, an archive that breaks off one more."""
        with self._counted_packed(path):
            return self._import_archive(path)

    def _import_archive(self, path: str) -> list[FileResult]:
        shown = printable(path)
        results: list[FileResult] = []
        try:
            for member in archive_members(path, shown, is_transcript_name):
                if member.stream is None:  # refused (see transcripts.compressed)
                    refused = FileResult(member.shown)
                    assert member.error is not None
                    self._record_failure(member.shown, member.error, refused)
                    results.append(refused)
                    continue
                source = SourceFile(member.stream, member.size, member_source_id(member))
                results.append(
                    self._import_opened(member.shown, member.shown, partial(_already_open, source))
                )
        except _FILE_FAILURES as exc:
            broken = FileResult(path)
            self._record_failure(shown, exc, broken)
            results.append(broken)
        return results

    def _import_opened(
        self, path: str, shown: str, opener: Callable[[], AbstractContextManager[SourceFile]]
    ) -> FileResult:
        result = FileResult(path)
        try:
            with opener() as source:
                self._import_source(shown, source, result)
        except _FILE_FAILURES as exc:
            self._record_failure(shown, exc, result)
        return result

    def _record_failure(self, shown: str, exc: BaseException, result: FileResult) -> None:
        """The file's failure, as a core error on its result. What bounded transactions
        committed before it stays, and the failure says so: a prefix of the session, which
        importing the file again continues (its messages are found present by their source
        ids)."""
        said = describe_failure(exc, secrets=[self.engine.url], where=shown).message
        if isinstance(exc, TranscriptError):
            detail, line = exc.detail, exc.line
        else:
            detail, line = said.removeprefix(f"{shown}: "), None
        earlier_messages, earlier_compactions = result.committed_earlier
        result.messages_added += earlier_messages
        result.compactions_added += earlier_compactions
        kept = None
        if result.messages_added or result.compactions_added:
            kept = (result.messages_stored or 0, result.session_id)
        elif (
            self.max_transaction_bytes is not None
            and result.messages_stored
            and result.session_id is not None
            and not isinstance(exc, Disagreement)
        ):
            # A run again that committed nothing new: what earlier runs committed is stored,
            # and this file continues it.
            kept = (result.messages_stored, result.session_id)
        result.failure = FileFailure(said, shown, detail, line, result.numbered_by_message, kept)

    def _import_source(self, path: str, source: SourceFile, result: FileResult) -> None:
        # A new id an earlier file took and never committed comes first (see _Reservation).
        reservation, self._spare_id = _Reservation(self._spare_id), None
        try:
            self._import_in_passes(path, source, result, reservation)
        finally:
            if reservation.session_id not in (None, result.session_id):
                # Taken and never committed (the file failed, or found its session after
                # all): the next new session of this import takes it.
                self._spare_id = reservation.session_id

    def _import_in_passes(
        self, path: str, source: SourceFile, result: FileResult, reservation: _Reservation
    ) -> None:
        main = None
        ids = _SourceIds(source.fallback_id, source.legacy_id)  # see transcripts.discover
        stream = source.stream
        progress = _FileProgress(self.on_bytes)
        passes = 0

        def one_pass() -> None:
            # Every pass reads the file from its start, with nothing of an earlier one counted.
            nonlocal passes
            if passes:
                stream.seek(0)
                progress.rewind()
                result.reset_counts()
            passes += 1
            self._import_pass(path, source, ids, result, main, progress, reservation)

        def lost_race(exc: Exception) -> bool:
            if not self._lost_race(exc):
                return False
            reservation.session_id = None  # the id may be what was lost
            return True

        for _ in range(_REREADS):
            try:
                retry_transaction(self.engine, one_pass, policy=self.retry, lost_race=lost_race)
                return
            except _NotTheLegacySession:
                # same stem, name or inode, another transcript: it gets its own session
                ids = _SourceIds(ids.fallback, None, by_file=False)
            except (BranchedTranscript, Disagreement) as exc:
                # A tree with abandoned branches: nothing was written (the transaction rolled
                # back). Find the main line in a first pass, then import only it. A disagreement
                # seen while reading a tree as linear may come from a branch (a tool result
                # whose call is abandoned reads differently): it is final on the main line only.
                fmt = result.format or ""  # known: the transcript was being written
                if isinstance(exc, Disagreement) and (main is not None or not PARSERS[fmt].tree):
                    raise
                stream.seek(0)
                lines = CountingStream(stream, size=source.size, path=path)
                main = main_line_of(path, lines, fmt, self.skip_invalid)
        raise CtxtoolError(f"{path}: read {_REREADS} times without settling what it holds")

    def _lost_race(self, exc: Exception) -> bool:
        """Another import of the same transcript created or changed it first (a duplicate key,
        or the two deadlocked), or a runtime took the new session id: nothing of ours was
        written, and the next attempt finds its session and messages present, or takes
        another id. (Deadlocks and a Galera node's 1213 are db.retry's own conflicts too.)"""
        return isinstance(exc, SessionGone) or (
            isinstance(exc, IntegrityError | OperationalError)
            and self.dialect.is_write_conflict(exc)
        )

    def _import_pass(
        self,
        path: str,
        source: SourceFile,
        ids: _SourceIds,
        result: FileResult,
        main: set[str] | None,
        progress: _FileProgress,
        reservation: _Reservation,
    ) -> None:
        # Counting bytes costs a call for every line: only for a caller that shows them.
        on_bytes = progress.advance if self.on_bytes else None
        counted = CountingStream(source.stream, on_bytes, source.size, path)
        transcript = read_transcript(path, counted, self.fmt, self.skip_invalid, main)
        result.numbered_by_message = transcript.numbered_by_message
        if (
            self.max_transaction_bytes is not None
            and main is None
            and transcript.format
            and PARSERS[transcript.format].tree
        ):
            # Bounded transactions commit before the end of the file is read: a tree's main
            # line must be known first, or a record on a branch abandoned further down would
            # be committed as the session's (one transaction would roll it back unseen).
            result.format = transcript.format
            raise BranchedTranscript(None)
        try:
            self._import_transcript(path, transcript, ids, source.file, result, reservation)
        except TranscriptError as exc:
            if transcript.numbered_by_message:
                exc.number_as_message()
            raise

    def _import_transcript(
        self,
        path: str,
        transcript: Transcript,
        ids: _SourceIds,
        file: FileIdentity | None,
        result: FileResult,
        reservation: _Reservation,
    ) -> None:
        result.format = transcript.format or None
        first = next(transcript.records, None)  # headers are read by now: the source id is known
        if first is None:
            result.layout = transcript.layout.name
            result.recovered.update(transcript.layout.recovered)
            # Not one message or checkpoint (an empty message list, a file of metadata records
            # only): nothing to store, and no empty session row for it. Not an error either:
            # an agent's folders hold such files, and a cron import must not fail on them.
            result.skipped.update(transcript.skipped)
            result.skipped["no_messages"] += 1
            return
        own_id = transcript.session.source_id
        source_format = transcript.session.source_format
        result.source_id = source_key(own_id or ids.fallback)
        # A transcript that names its session needs no file to find it by.
        file = None if own_id else file
        recorded = None
        if file is not None:
            with self.engine.connect() as conn:
                recorded = recorded_file(conn, file)
        result.session_id, how = self.sessions.find_or_allocate(
            source_format,
            result.source_id,
            None if own_id else ids.earlier(file, recorded, source_format),
            reservation.session_id,
        )
        if how == "new":
            reservation.session_id = result.session_id
        try:
            self._write(
                path,
                transcript,
                itertools.chain([first] if first else [], transcript.records),
                result,
                how,
                (file, recorded),
            )
        except BaseException as exc:
            if not (result.messages_added or result.compactions_added):
                if how == "new":
                    result.session_id = None  # its row was never committed
                if how == "legacy" and isinstance(exc, Disagreement):
                    raise _NotTheLegacySession() from None
            raise

    @staticmethod
    def _count_present(result: FileResult, counts: Counts) -> None:
        """The messages and checkpoints the file's reading found stored already. What a pass
        run again after a lost race finds present was this run's own work, not counted."""
        earlier_messages, earlier_compactions = result.committed_earlier
        result.messages_present = counts.messages_present - earlier_messages
        result.compactions_present = counts.compactions_present - earlier_compactions

    def _write(
        self,
        path: str,
        transcript: Transcript,
        records,
        result: FileResult,
        how: str,
        file: tuple[FileIdentity | None, RecordedFile | None],
    ) -> None:
        """Create or lock the session, record the file it is read from (``file``: its identity
        and what the store recorded of its inode), reconcile every record, write, describe it:
        one transaction, or (``max_transaction_bytes``) consecutive ones, each a prefix of the
        session that starts by writing the session's row. A new session's row and its file's
        are part of the first, so a failure before the first commit leaves neither. A
        transaction that changes nothing (a re-import finding every message present) is
        rolled back: its touch of ``updated_at`` only held the row."""
        session_id, source_id = result.session_id, result.source_id
        assert session_id is not None and source_id is not None  # allocated by the caller
        src = transcript.session
        identity, recorded = file
        with self.engine.connect() as conn:
            if how == "new":
                self.sessions.create(conn, session_id, src.source_format, source_id)
            else:
                self.sessions.lock(conn, session_id)
            file_recorded = identity is not None and record_file(
                conn, identity, recorded, src.source_format, source_id
            )
            stored = self.sessions.stored(conn, session_id)
            stored_before = len(stored.messages)
            result.messages_stored = stored_before
            reconciler = Reconciler(path, stored)

            def commit_chunk() -> None:
                # Between batches, all sent: the session's description as read so far, then
                # the commit, then the next transaction's first statement, the row's touch.
                self.sessions.update(conn, session_id, src, path)
                if how == "legacy":
                    self.sessions.adopt(conn, session_id, source_id)
                conn.commit()
                result.messages_added = writer.messages_added
                result.compactions_added = writer.compactions_added
                result.messages_stored = stored_before + writer.messages_added
                self.sessions.lock(conn, session_id)

            bounded = self.max_transaction_bytes is not None
            with MessageWriter(
                conn,
                session_id,
                src.source_format,
                path,
                src.created_at,
                self.max_row_bytes,
                self.max_transaction_bytes,
                commit_chunk if bounded else None,
                # A refusal (not a continuation after all) must find nothing committed.
                lambda: reconciler.continuation_proven,
            ) as writer:
                try:
                    for rec in records:
                        writer.apply(reconciler.step(rec))
                    writer.apply(reconciler.finish())
                    writer.close()
                except BaseException:
                    # What was found stored before the failure is stored still, whatever
                    # this run's own transaction loses: the failed file's row says so.
                    self._count_present(result, reconciler.counts)
                    raise
            changed = self.sessions.update(
                conn,
                session_id,
                src,
                path,
                unless_stored=not (
                    how != "found"
                    or writer.messages_added
                    or writer.compactions_added
                    or writer.completed
                ),
            )
            if how == "legacy":
                self.sessions.adopt(conn, session_id, source_id)
            if (
                how == "found"
                and not changed
                and writer.messages_added == writer.committed_messages
                and writer.compactions_added == writer.committed_compactions
                and not writer.completed
            ):
                conn.rollback()  # nothing new since the last commit (or at all)
                # The file's record, and the count of a head none is kept of yet (a prompt the
                # runtime set): no activity of the session's, so without the touch of its
                # updated_at.
                counted = self.sessions.hold(conn, session_id) and self.sessions.count_heads(
                    conn, session_id, src.model
                )
                if file_recorded:
                    assert identity is not None
                    record_file(conn, identity, recorded, src.source_format, source_id)
                if counted or file_recorded:
                    conn.commit()
                else:
                    conn.rollback()
            else:
                # Counted as written, so showing the imported context loads no vocabulary.
                self.sessions.count_heads(conn, session_id, src.model)
                conn.commit()
        counts = reconciler.counts
        earlier_messages, earlier_compactions = result.committed_earlier
        result.messages_added = writer.messages_added + earlier_messages
        result.compactions_added = writer.compactions_added + earlier_compactions
        self._count_present(result, counts)
        result.messages_stored = stored_before + writer.messages_added
        result.skipped.update(transcript.skipped)
        result.skipped.update(counts.skipped)
        result.skipped.update(writer.skipped)
        result.converted.update(counts.converted)
        result.recovered.update(transcript.layout.recovered)
        result.layout = transcript.layout.name


def _already_open(source: SourceFile) -> AbstractContextManager[SourceFile]:
    """An archive member, already open (its archive closes it)."""
    return nullcontext(source)


class _FileProgress:
    """Bytes of one file for a progress bar, counted once however often the file is read (a
    branched tree is read twice, a conflict retried): only what goes past the furthest point
    any pass reached is reported."""

    def __init__(self, on_bytes: Callable[[int], None] | None):
        self.on_bytes = on_bytes
        self.position = self.reported = 0

    def advance(self, n: int) -> None:
        self.position += n
        if self.on_bytes is not None and self.position > self.reported:
            self.on_bytes(self.position - self.reported)
            self.reported = self.position

    def rewind(self) -> None:
        self.position = 0
