"""Importing transcripts into the store: streaming, batched, one transaction per session.

Each file is one session, identified by (source_format, source_id) so that importing it again,
or a longer version of it, adds only the messages and checkpoints whose source ids are new.
Messages go in multi-row INSERT batches (bounded in rows and bytes, so memory stays flat);
checkpoints the agent made become agent_compaction rows pointing at the imported message ids.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import sys
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from .db import describe_db_error, dialect_of
from .errors import CtxtoolError
from .db.schema import agent_compaction as C
from .db.schema import agent_message as M
from .db.schema import MESSAGE_INSERT_COLUMNS
from .db.schema import agent_session as S
from .store import Store
from .transcripts import (MAX_MESSAGE_BYTES, BranchedTranscript, SourceCompaction,
                          SourceMessage, Transcript, TranscriptError, transcript_module)
from .transcripts.files import CountingStream, LineReader, expand_paths, open_transcript

BATCH_ROWS = 1000
BATCH_BYTES = 4 * 1024 * 1024
_CONFLICT_ATTEMPTS = 5


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
    error: str | None = None

    def as_dict(self) -> dict:
        return {"file": self.path, "format": self.format, "session_id": self.session_id,
                "added": self.messages_added, "present": self.messages_present,
                "skipped": sum(self.skipped.values()),
                "compactions": self.compactions_added,
                "compactions_present": self.compactions_present,
                "skipped_by_kind": dict(sorted(self.skipped.items())),
                "converted_by_kind": dict(sorted(self.converted.items())), "error": self.error}


class Importer:
    """Imports transcripts into one store.

    Example::

        results = Importer(create_engine(url)).import_paths(["~/.claude/projects/x/"])
    """

    def __init__(self, engine: Engine, fmt: str | None = None, skip_invalid: bool = False,
                 on_bytes: Callable[[int], None] | None = None):
        self.engine = engine
        self.fmt = fmt
        self.skip_invalid = skip_invalid
        self.on_bytes = on_bytes
        self.dialect = dialect_of(engine)

    def import_paths(self, paths: Iterable[str]) -> list[FileResult]:
        return [self.import_file(p) for p in expand_paths(paths)]

    def import_file(self, path: str) -> FileResult:
        """Import one file; errors are reported in the result, with nothing written for it."""
        result = FileResult(path)
        try:
            if path == "-":
                data = sys.stdin.buffer.read()
                digest = hashlib.sha1(data[:65536]).hexdigest()[:16]
                self._import_stream("<stdin>", io.BytesIO(data), f"stdin-{digest}", result)
            else:
                with open(path, "rb") as stream:
                    self._import_stream(path, stream, Path(path).stem, result)
        except CtxtoolError as exc:
            result.error = str(exc)
        except SQLAlchemyError as exc:
            result.error = f"{path}: {describe_db_error(exc)}"
        except OSError as exc:
            result.error = f"{path}: {exc.strerror or exc}"
        return result

    # -- one session -----------------------------------------------------------------------------

    def _import_stream(self, path: str, stream: BinaryIO, fallback_id: str, result: FileResult) -> None:
        try:
            for attempt in range(_CONFLICT_ATTEMPTS):
                try:
                    self._import_pass(path, stream, fallback_id, result, None)
                    break
                except (IntegrityError, OperationalError) as exc:
                    # Another import of the same transcript wrote the same messages first
                    # (unique source ids; or the two deadlocked on them): nothing of ours was
                    # written; the next attempt finds them present.
                    if attempt == _CONFLICT_ATTEMPTS - 1 or not self.dialect.is_write_conflict(exc):
                        raise
                    time.sleep(0.05 * (attempt + 1))
                    stream.seek(0)
                    self._reset(result)
        except BranchedTranscript:
            # A tree with abandoned branches: nothing was written (the transaction rolled back).
            # Find the main line in a first pass, then import only it.
            stream.seek(0)
            self._reset(result)
            lines = LineReader(path, stream, self.skip_invalid, Counter())
            main = transcript_module(result.format).main_line_ids(iter(lines))
            stream.seek(0)
            self._import_pass(path, stream, fallback_id, result, main)

    @staticmethod
    def _reset(result: FileResult) -> None:
        result.skipped.clear()
        result.converted.clear()
        result.messages_present = result.compactions_present = 0

    def _import_pass(self, path: str, stream: BinaryIO, fallback_id: str, result: FileResult,
                     main: set[str] | None) -> None:
        fmt, transcript = open_transcript(path, CountingStream(stream, self.on_bytes), self.fmt,
                                          self.skip_invalid, result.skipped, main)
        result.format = fmt
        records = transcript.records
        first = next(records, None)  # headers are read by now: the session's source id is known
        src = transcript.session
        src.source_id = src.source_id or fallback_id
        result.source_id = src.source_id
        session_id, created = self._session_for(src.source_format, src.source_id)
        result.session_id = session_id
        try:
            with self.engine.begin() as conn:
                self._write_session(conn, session_id, transcript,
                                    itertools.chain([first] if first else [], records), path, result)
        except BaseException as exc:
            # Bad input leaves nothing behind. A database conflict or a branch signal keeps the
            # (empty) session row: the next attempt, or a concurrent import of the same
            # transcript, is already using it.
            if created and not isinstance(exc, (SQLAlchemyError, BranchedTranscript)):
                self._drop_empty_session(session_id)
            result.messages_added = result.compactions_added = 0
            raise

    def _session_for(self, source_format: str, source_id: str) -> tuple[int, bool]:
        """The session id for this source, allocating a new one (committed at once) if needed."""
        lookup = sa.select(S.c.session_id).where(S.c.source_format == source_format,
                                                 S.c.source_id == source_id)
        for _attempt in range(20):
            with self.engine.begin() as conn:
                existing = conn.execute(lookup).scalar()
                if existing is not None:
                    return int(existing), False
            try:
                with self.engine.begin() as conn:
                    # One statement allocates max+1 and inserts; a concurrent importer that took
                    # the same id makes it fail on the primary key, and we try again.
                    conn.execute(sa.text(
                        "INSERT INTO agent_session (session_id, source_format, source_id) "
                        "SELECT COALESCE(MAX(session_id), 0) + 1, :f, :s FROM agent_session"),
                        {"f": source_format, "s": source_id})
                    new_id = conn.execute(lookup).scalar()
                return int(new_id), True
            except IntegrityError:
                continue
        raise CtxtoolError(f"could not allocate a session id for {source_format}:{source_id}")

    def _drop_empty_session(self, session_id: int) -> None:
        with self.engine.begin() as conn:
            has_rows = conn.execute(sa.select(M.c.id).where(M.c.session_id == session_id).limit(1)).first()
            if has_rows is None:
                conn.execute(S.delete().where(S.c.session_id == session_id))

    def _write_session(self, conn: Connection, session_id: int, transcript: Transcript,
                       records: Iterator, path: str, result: FileResult) -> None:
        present_messages = {r[0] for r in conn.execute(
            sa.select(M.c.source_id).where(M.c.session_id == session_id,
                                           M.c.source_id.is_not(None)))}
        present_compactions = {r[0] for r in conn.execute(
            sa.select(C.c.source_id).where(C.c.session_id == session_id,
                                           C.c.source_id.is_not(None)))}
        # The previous import may have stopped inside a message the agent was still writing
        # (Claude Code streams one assistant message as several records): that last stored
        # message is completed if the transcript now holds more of it.
        last_stored = conn.execute(
            sa.select(M.c.id, M.c.source_id, M.c.content, M.c.tool_calls)
            .where(M.c.session_id == session_id, M.c.source_id.is_not(None))
            .order_by(M.c.id.desc()).limit(1)).first() if present_messages else None
        completions: list[tuple[int, SourceMessage]] = []
        max_bytes = self.dialect.max_message_bytes(conn)
        # created_at is NOT NULL: a record without a usable time takes the last one seen.
        last_time = transcript.session.created_at or datetime.now(timezone.utc).replace(tzinfo=None)
        batch: list[tuple] = []
        batch_bytes = 0
        waiting: list[SourceCompaction] = []   # compactions whose first kept message comes next
        ready: list[tuple[SourceCompaction, str]] = []  # (compaction, first kept source id)
        call_owner: dict[str, str] = {}  # tool call id -> source id of the message making it
        inserts = self.dialect.message_inserts(conn, M, MESSAGE_INSERT_COLUMNS)
        # Parsing overlaps with the database: the main thread parses and renders each batch,
        # one writer thread sends it (releasing the GIL while the server works), in order, with
        # at most one batch in flight so memory stays bounded.
        writer = ThreadPoolExecutor(max_workers=1)
        in_flight: Future | None = None

        def write(payload, count: int, comps: list[tuple[SourceCompaction, str]],
                  completed: list[tuple[int, SourceMessage]]) -> None:
            for message_id, full in completed:
                conn.execute(M.update().where(M.c.id == message_id).values(
                    content=full.content, tool_calls=full.tool_calls, details=full.details or None,
                    token_count=None, token_encoding=None))
            inserts.send(payload)
            result.messages_added += count
            for comp, first_kept in comps:
                self._write_compaction(conn, session_id, comp, first_kept, path, result)

        def flush():
            nonlocal batch, batch_bytes, ready, in_flight
            payload = inserts.render(batch)
            if in_flight is not None:
                in_flight.result()
            in_flight = writer.submit(write, payload, len(batch), ready, list(completions))
            batch, batch_bytes, ready = [], 0, []
            completions.clear()

        try:
            for rec in records:
                if isinstance(rec, SourceCompaction):
                    if rec.source_id in present_compactions:
                        result.compactions_present += 1
                        continue
                    present_compactions.add(rec.source_id)
                    if rec.first_kept_source_id is None:
                        waiting.append(rec)
                    else:
                        ready.append((rec, rec.first_kept_source_id))
                    continue
                msg: SourceMessage = rec
                if msg.tool_calls:
                    for c in msg.tool_calls:
                        call_owner[c["id"]] = msg.source_id
                elif msg.role == "tool" and msg.tool_call_id not in call_owner:
                    # A result whose call is not in the transcript (trimmed, or made by a skipped
                    # item) would make the restored context invalid for an API: keep its text as
                    # a user message and say so.
                    msg.details = {**(msg.details or {}), "source_role": "tool",
                                   "orphan_tool_call_id": msg.tool_call_id}
                    msg.role, msg.tool_call_id = "user", None
                    result.converted["orphan_tool_result_to_user"] += 1
                for comp in waiting:
                    first_kept = msg.source_id
                    if msg.role == "tool":
                        # The agent kept a tool result but summarised its call: keep the call
                        # too, or the restored context would hold an orphan result.
                        first_kept = call_owner[msg.tool_call_id]
                        comp.details = {**(comp.details or {}), "first_kept_moved_to_call_of": msg.source_id}
                    ready.append((comp, first_kept))
                waiting.clear()
                if msg.source_id in present_messages:
                    result.messages_present += 1
                    if last_stored is not None and msg.source_id == last_stored.source_id \
                            and _grew(msg, last_stored):
                        completions.append((last_stored.id, msg))
                        result.converted["completed_partial_message"] += 1
                else:
                    # New ids need no remembering: the parser keeps source ids unique per file.
                    size = len(msg.content.encode("utf-8")) if msg.content else 0
                    if size > max_bytes:
                        raise TranscriptError(
                            path, msg.line,
                            f"message of {size / 1048576:.1f} MB is larger than the "
                            f"{max_bytes / 1048576:.0f} MB "
                            "the store accepts (MEDIUMTEXT / max_allowed_packet)")
                    last_time = msg.created_at or last_time
                    batch.append((
                        session_id, msg.role, msg.content, last_time.strftime("%Y-%m-%d %H:%M:%S.%f"),
                        _json(msg.tool_calls), msg.tool_call_id, msg.name, msg.source_id,
                        _json(msg.details),
                    ))
                    batch_bytes += size
                if len(batch) >= BATCH_ROWS or batch_bytes >= BATCH_BYTES or ready or completions:
                    flush()
            flush()
            in_flight.result()
        finally:
            # Never leave the writer using the connection while the transaction ends.
            writer.shutdown(wait=True)
        for _comp in waiting:
            result.skipped["compaction_without_kept_message"] += 1
        self._update_session(conn, session_id, transcript)

    def _write_compaction(self, conn: Connection, session_id: int, comp: SourceCompaction,
                          first_kept_source: str, path: str, result: FileResult) -> None:
        first_kept = conn.execute(sa.select(M.c.id).where(
            M.c.session_id == session_id, M.c.source_id == first_kept_source)).scalar()
        if first_kept is None or not comp.summary.strip():
            result.skipped["compaction_unresolved" if first_kept is None else "compaction_empty"] += 1
            return
        conn.execute(C.insert().values(
            session_id=session_id, summary=comp.summary, first_kept_message_id=first_kept,
            tokens_before=comp.tokens_before,
            parent_compaction_id=Store(self.engine).latest_compaction_id(session_id, conn),
            summarizer=f"imported:{result.format}", source_id=comp.source_id,
            details=comp.details or None,
        ))
        result.compactions_added += 1

    def _update_session(self, conn: Connection, session_id: int, transcript: Transcript) -> None:
        src = transcript.session
        values = {k: v for k, v in {
            "title": (src.title or "")[:512] or None, "model": src.model,
            "system_prompt": src.system_prompt, "created_at": src.created_at,
            "details": {k: v for k, v in src.details.items() if v is not None} or None,
        }.items() if v is not None}
        if values:
            conn.execute(S.update().where(S.c.session_id == session_id).values(**values))



def _grew(parsed: SourceMessage, stored) -> bool:
    """The transcript now holds more of this message than was stored (more blocks written)."""
    return (len(parsed.tool_calls or []) > len(stored.tool_calls or [])
            or len(parsed.content or "") > len(stored.content or ""))


def _json(value) -> str | None:
    return json.dumps(value, ensure_ascii=False) if value else None
