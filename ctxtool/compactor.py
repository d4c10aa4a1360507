"""Running compaction against the store: one session, or a cron batch on many workers.

The planning is pure (``ctxtool.compaction``); this module reads the restored suffix, calls the
summarizer, and appends the checkpoint. Safety against other compactors (other threads, other
hosts): a session is claimed with a lease (owner + expiry on server time, taken by a
conditional UPDATE whose affected-row count says who won, so it works on engines where
``FOR UPDATE SKIP LOCKED`` does not lock, such as TiDB); the checkpoint is one INSERT in one
transaction, re-checked against the lease and the parent checkpoint, and the unique key
(session_id, parent_compaction_id) rejects a second child of the same parent whatever happens.
A crash leaves no checkpoint or a complete one; an expired lease is simply taken over.
"""

from __future__ import annotations

import os
import re
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from .compaction import (CompactionSettings, PlanMessage, files_touched, merge_file_lists,
                         plan_compaction, should_compact)
from .records import SUMMARY_PREFIX, Message, restore_context
from .db import describe_db_error, dialect_of, read_connection
from .errors import CtxtoolError
from .db.schema import agent_compaction as C
from .db.schema import agent_message as M
from .db.schema import agent_session as S
from .store import SESSIONS_PER_RANGE_QUERY, Store, restored_context_tokens, suffix_ranges
from .summarizers import Summarizer, SummaryRequest
from .token_counting import count_loaded_messages, count_session_messages
from .tokens import REPLY_PRIMING_TOKENS, MessageText, count_messages, encoding_for_model

DEFAULT_LEASE_SECONDS = 900

# Outcome statuses.
COMPACTED = "compacted"
PLANNED = "planned"            # dry run
BELOW_THRESHOLD = "below_threshold"
NOTHING_TO_CUT = "nothing_to_cut"
LEASE_HELD = "lease_held"      # another compactor holds the session
LOST_RACE = "lost_race"        # another checkpoint was appended first; nothing written
REJECTED = "rejected"          # the summary was empty or not smaller; nothing written
FAILED = "failed"
OK_STATUSES = {COMPACTED, PLANNED, BELOW_THRESHOLD, NOTHING_TO_CUT, LEASE_HELD, LOST_RACE}


@dataclass
class CompactionOutcome:
    session_id: int
    status: str
    tokens_before: int | None = None
    tokens_after: int | None = None
    tokens_kept: int | None = None  # tokens after, before the new summary is added (the plan)
    threshold: int | None = None
    summarised_messages: int | None = None
    kept_messages: int | None = None
    first_kept_message_id: int | None = None
    split_turn: bool | None = None
    compaction_id: int | None = None
    summarizer: str | None = None
    model: str | None = None
    error: str | None = None
    seconds: float = 0.0
    summarizer_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def as_dict(self) -> dict:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 3)
        d["summarizer_seconds"] = round(self.summarizer_seconds, 3)
        return d


# What a system prompt or an imported summary may add to the summed message counts: sessions
# this close to their threshold are measured exactly before they are left out.
NEAR_THRESHOLD_TOKENS = 32_768


@dataclass
class _EffectiveContext:
    session_id: int
    model: str | None
    summary_tokens: int | None
    first_kept_message_id: int | None
    tokens: int
    uncounted: int
    last_message_id: int


@dataclass
class Candidate:
    """A session found by the batch query, with its effective-context figures."""

    session_id: int
    model: str | None
    estimated_tokens: int
    uncounted: int
    last_message_id: int


def parse_duration(text: str | None) -> int | None:
    """``90s``, ``10m``, ``2h``, ``1d`` (or bare seconds) as seconds."""
    if not text:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", text)
    if not match:
        raise CtxtoolError(f"invalid duration {text!r}: use e.g. 90s, 10m, 2h, 1d")
    return int(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Compactor:
    """Compacts sessions of one store with one summarizer.

    Example::

        compactor = Compactor(engine, ExtractiveSummarizer(), CompactionSettings())
        outcome = compactor.compact_session(42)
        outcomes = compactor.compact_all(workers=8, older_than=600)
    """

    def __init__(self, engine: Engine, summarizer: Summarizer, settings: CompactionSettings,
                 owner: str | None = None, lease_seconds: int = DEFAULT_LEASE_SECONDS,
                 encoding: str | None = None):
        self.engine = engine
        self.summarizer = summarizer
        self.settings = settings
        self.owner = owner or default_owner()
        self.lease_seconds = lease_seconds
        self.encoding = encoding
        self.dialect = dialect_of(engine)
        self.store = Store(engine)

    # -- one session -----------------------------------------------------------------------------

    def compact_session(self, session_id: int, force: bool = False,
                        dry_run: bool = False) -> CompactionOutcome:
        """Compact one session if it is over its threshold (or ``force``); never raises for
        per-session failures, which are reported in the outcome."""
        started = time.perf_counter()
        out = CompactionOutcome(session_id, FAILED, summarizer=self.summarizer.name,
                                model=self.summarizer.model)
        try:
            self._compact(session_id, force, dry_run, out)
        except CtxtoolError as exc:  # SummarizerError included
            out.status, out.error = FAILED, str(exc)
        except SQLAlchemyError as exc:
            out.status, out.error = FAILED, describe_db_error(exc)
        out.seconds = time.perf_counter() - started
        return out

    def _compact(self, session_id: int, force: bool, dry_run: bool, out: CompactionOutcome) -> None:
        # One connection for the whole session; each phase ends its transaction, so nothing
        # (in particular SQLite's write lock) is held while the summarizer works.
        with self.engine.connect() as conn:
            session = self.store.session(session_id, conn)
            encoding = encoding_for_model(session.model, self.encoding).name
            latest = self.store.latest_compaction(session_id, conn)
            suffix = self.store.messages(session_id, latest.first_kept_message_id if latest else None,
                                         conn=conn)
            # Messages the runtime wrote without a count are counted first (the suffix only).
            count_loaded_messages(conn, suffix, encoding)
            conn.commit()
            ctx = restore_context(session_id, session.system_prompt, latest, suffix)
            out.tokens_before = restored_context_tokens(ctx, encoding)
            out.threshold = self.settings.threshold(session.model)
            if not force and not should_compact(out.tokens_before, session.model, self.settings):
                out.status = BELOW_THRESHOLD
                return
            plan = plan_compaction([_plan_message(m) for m in ctx.messages],
                                   self.settings.keep_recent_tokens)
            if plan is None:
                out.status = NOTHING_TO_CUT
                return
            out.summarised_messages = len(plan.summarised_ids)
            out.kept_messages = len(plan.kept_ids)
            out.first_kept_message_id = plan.first_kept_message_id
            out.split_turn = plan.split_turn
            out.notes = plan.notes
            replaced_tokens = plan.summarised_tokens + (_summary_message_tokens(latest.summary, encoding)
                                                        if latest else 0)
            out.tokens_kept = out.tokens_before - replaced_tokens
            if dry_run:
                out.status = PLANNED
                return
            parent_id = latest.id if latest else 0
            claimed = self._claim(conn, session_id, parent_id)
            if claimed is not True:
                out.status = claimed
                return
            try:
                self._summarise_and_append(conn, session_id, encoding, latest, ctx, plan,
                                           replaced_tokens, out)
            finally:
                if out.status != COMPACTED:
                    self._release(conn, session_id)

    def _summarise_and_append(self, conn, session_id, encoding, latest, ctx, plan,
                              replaced_tokens: int, out) -> None:
        summarised = [m for m in ctx.messages if m.id < plan.first_kept_message_id]
        read, modified = files_touched([c for m in summarised for c in (m.tool_calls or ())])
        files = merge_file_lists(latest.details if latest else None, read, modified)
        llm_started = time.perf_counter()
        summary = self.summarizer.summarize(SummaryRequest(
            latest.summary if latest else None, summarised, files, plan.split_turn))
        out.summarizer_seconds = time.perf_counter() - llm_started
        out.summarizer, out.model = summary.summarizer, summary.model
        if not summary.text.strip():
            out.status, out.error = REJECTED, "summary is empty"
            return
        summary_tokens = _summary_message_tokens(summary.text, encoding)
        if summary_tokens >= replaced_tokens:
            out.status = REJECTED
            out.error = (f"summary ({summary_tokens} tokens) is not smaller than what it "
                         f"replaces ({replaced_tokens} tokens)")
            return
        out.tokens_after = out.tokens_before - replaced_tokens + summary_tokens
        details = {**files, "split_turn": plan.split_turn,
                   "summarised_messages": len(plan.summarised_ids),
                   "summarised_from_message_id": plan.summarised_ids[0], "encoding": encoding}
        out.compaction_id = self._append(conn, session_id, latest.id if latest else 0, {
            "session_id": session_id, "summary": summary.text,
            "first_kept_message_id": plan.first_kept_message_id,
            "tokens_before": out.tokens_before, "tokens_after": out.tokens_after,
            "summary_tokens": summary_tokens,
            "summarizer": summary.summarizer, "summarizer_model": summary.model,
            "details": details,
        })
        out.status = COMPACTED if out.compaction_id else LOST_RACE

    def _append(self, conn, session_id: int, parent_id: int, values: dict) -> int | None:
        """Append the checkpoint and release the lease in one transaction; None if another
        compactor got there first (lease lost, a newer checkpoint, or the unique key)."""
        try:
            with conn.begin():
                still_ours = conn.execute(
                    S.update().where(S.c.session_id == session_id, S.c.lease_owner == self.owner)
                    .values(lease_owner=None, lease_expires_at=None)).rowcount
                if still_ours != 1:
                    return None
                if self.store.latest_compaction_id(session_id, conn) != parent_id:
                    return None
                result = conn.execute(C.insert().values(parent_compaction_id=parent_id, **values))
                return int(result.inserted_primary_key[0])
        except IntegrityError:
            return None  # uq_compaction_parent: a sibling checkpoint already exists

    # -- leases ----------------------------------------------------------------------------------

    def _claim(self, conn, session_id: int, parent_id: int) -> bool | str:
        """Take the session's lease if it is free or expired (the affected-row count decides),
        and check no checkpoint was appended since we planned; True, or the status why not."""
        now = self.dialect.server_now()
        with conn.begin() as tx:
            taken = conn.execute(
                S.update()
                .where(S.c.session_id == session_id,
                       sa.or_(S.c.lease_owner.is_(None), S.c.lease_expires_at < now,
                              S.c.lease_owner == self.owner))
                .values(lease_owner=self.owner,
                        lease_expires_at=self.dialect.server_now_plus(self.lease_seconds))
            ).rowcount
            if taken != 1:
                tx.rollback()
                return LEASE_HELD
            if self.store.latest_compaction_id(session_id, conn) != parent_id:
                tx.rollback()  # another compactor finished between our read and our claim
                return LOST_RACE
        return True

    def _release(self, conn, session_id: int) -> None:
        with conn.begin():
            conn.execute(S.update().where(S.c.session_id == session_id, S.c.lease_owner == self.owner)
                         .values(lease_owner=None, lease_expires_at=None))

    # -- the batch -------------------------------------------------------------------------------

    def find_candidates(self, force: bool = False, older_than: int | None = None) -> list[Candidate]:
        """Sessions over threshold, measured over their effective contexts only.

        The stored token counts of the messages since each session's cut are summed with index
        range reads (see _effective_rows); sessions with uncounted messages are counted (suffix
        only) and measured again. That sum leaves out the system prompt (and the summary of an
        imported checkpoint), so sessions within NEAR_THRESHOLD_TOKENS of their threshold are
        measured exactly; the cost still follows the effective contexts.
        """
        rows = self._effective_rows()
        uncounted = [r for r in rows if r.uncounted]
        for r in uncounted:
            count_session_messages(self.engine, r.session_id, r.first_kept_message_id, self.encoding)
        if uncounted:
            rows = self._effective_rows()
        candidates = []
        for r in rows:
            threshold = self.settings.threshold(r.model)
            estimate = int(r.tokens or 0) + int(r.summary_tokens or 0) + REPLY_PRIMING_TOKENS
            if not force and threshold - NEAR_THRESHOLD_TOKENS < estimate <= threshold:
                estimate = self.store.context_tokens(r.session_id, self.encoding)
            if force or estimate > threshold:
                candidates.append(Candidate(r.session_id, r.model, estimate, int(r.uncounted or 0),
                                            int(r.last_message_id)))
        if older_than is not None and candidates:
            candidates = self._quiet_for(candidates, older_than)
        candidates.sort(key=lambda c: (-(c.estimated_tokens - self.settings.threshold(c.model)),
                                       c.session_id))
        return candidates

    def _effective_rows(self, conn: Connection | None = None) -> list[_EffectiveContext]:
        """Per unleased session: its latest cut, and the sum of stored token counts from there.

        Two indexed steps. First, every session with its latest checkpoint (one query, through
        idx_compaction_session_id). Then the stored counts since each cut, summed from the
        covering index with store.suffix_ranges, 500 sessions per query.
        """
        if conn is None:
            with read_connection(self.engine) as own:
                return self._effective_rows(own)
        latest_id = (sa.select(sa.func.max(C.c.id)).where(C.c.session_id == S.c.session_id)
                     .scalar_subquery())
        cp = C.alias("cp")
        sessions_query = (
            sa.select(S.c.session_id, S.c.model, cp.c.summary_tokens, cp.c.first_kept_message_id)
            .select_from(S.outerjoin(cp, cp.c.id == latest_id))
            .where(sa.or_(S.c.lease_owner.is_(None), S.c.lease_expires_at < self.dialect.server_now()))
        )
        out: list[_EffectiveContext] = []
        sessions = conn.execute(sessions_query).all()
        for i in range(0, len(sessions), SESSIONS_PER_RANGE_QUERY):
            chunk = {r.session_id: r for r in sessions[i:i + SESSIONS_PER_RANGE_QUERY]}
            ranges = suffix_ranges({sid: r.first_kept_message_id for sid, r in chunk.items()})
            sums = conn.execute(
                sa.select(M.c.session_id, sa.func.sum(M.c.token_count).label("tokens"),
                          sa.func.sum(sa.case((M.c.token_count.is_(None), 1), else_=0))
                          .label("uncounted"),
                          sa.func.max(M.c.id).label("last_message_id"))
                .where(ranges).group_by(M.c.session_id))
            for row in sums:
                r = chunk[row.session_id]
                out.append(_EffectiveContext(r.session_id, r.model, r.summary_tokens,
                                             r.first_kept_message_id, int(row.tokens or 0),
                                             int(row.uncounted or 0), int(row.last_message_id)))
        return out

    def _quiet_for(self, candidates: list[Candidate], seconds: int) -> list[Candidate]:
        """Keep sessions whose newest message is older than ``seconds`` (server time)."""
        ids = [c.last_message_id for c in candidates]
        cutoff = self.dialect.server_now_plus(-seconds)
        quiet: set[int] = set()
        with read_connection(self.engine) as conn:
            for i in range(0, len(ids), 1000):
                chunk = ids[i:i + 1000]
                quiet.update(r[0] for r in conn.execute(
                    sa.select(M.c.id).where(M.c.id.in_(chunk), M.c.created_at < cutoff)))
        return [c for c in candidates if c.last_message_id in quiet]

    def compact_all(self, workers: int = 1, limit: int | None = None, older_than: int | None = None,
                    force: bool = False, dry_run: bool = False,
                    on_done: Callable[[CompactionOutcome], None] | None = None) -> list[CompactionOutcome]:
        """Find sessions over threshold and compact them with ``workers`` concurrent calls."""
        candidates = self.find_candidates(force=force, older_than=older_than)[:limit]
        return self.compact_sessions([c.session_id for c in candidates], workers, force, dry_run,
                                     on_done)

    def compact_sessions(self, session_ids: list[int], workers: int = 1, force: bool = False,
                         dry_run: bool = False,
                         on_done: Callable[[CompactionOutcome], None] | None = None
                         ) -> list[CompactionOutcome]:
        """Compact the given sessions with ``workers`` concurrent calls; outcomes by session id."""
        outcomes: list[CompactionOutcome] = []
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            futures = [pool.submit(self.compact_session, sid, force, dry_run) for sid in session_ids]
            for future in as_completed(futures):
                outcome = future.result()
                outcomes.append(outcome)
                if on_done:
                    on_done(outcome)
        outcomes.sort(key=lambda o: o.session_id)
        return outcomes


def _summary_message_tokens(summary: str, encoding: str) -> int:
    """Tokens of a summary as the restored context carries it (a user message with a preface)."""
    return count_messages([MessageText("user", SUMMARY_PREFIX + summary)], encoding)[0]


def _plan_message(m: Message) -> PlanMessage:
    return PlanMessage(m.id, m.role, m.token_count or 0,
                       tuple(c.get("id") or "" for c in (m.tool_calls or ())), m.tool_call_id)
