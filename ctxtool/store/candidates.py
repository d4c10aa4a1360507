"""Finding sessions to compact without reading whole histories (reads only: never writes).

Two indexed steps. First, every session with its latest checkpoint and its lease (one query,
through idx_compaction_session_id). Then sums over the messages since each cut, computed by the
server in one walk of idx_message_session_id_tokens (:func:`all_suffix_sums`): the stored
counts made with the encoding the session needs, the rows without such a count, and how many
tool calls and tool results there are. Nothing of the messages is sent back; the walk passes
over the entries before each cut too, so its cost is about a ``COUNT(*)`` of the index. A session whose calls and results differ in number (some call goes unanswered, or
some result answers none: the restored context adds or resends messages that no stored count
covers) is decided by bounds on those messages' tokens, and measured exactly only when its
threshold lies between them (``context_size.SuffixTokens``; tests/test_bounds.py). Messages
without a usable count are ``uncounted``: filling them in is a separate, explicit step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.context_size import (
    SuffixTokens,
    head_token_counts,
    suffix_tokens,
    total_tokens,
)
from ..core.records import Message, restore_context
from ..core.tokens import encoding_for_model
from ..db import dialect_of
from ..db.dialects import Dialect
from ..db.schema import agent_compaction as C
from ..db.schema import agent_message as M
from ..db.schema import agent_session as S
from ..db.stored_time import parse_stored_time
from . import context_sums
from .reads import (
    SessionHead,
    calls_answered_next,
    context_tokens,
    has_chat_role,
    session_head,
    suffix_outlines,
    suffix_ranges,
    text_bytes,
    usable_count_sums,
)


@dataclass(frozen=True)
class EffectiveContext:
    """A session's effective context as its stored counts see it: the messages since its cut."""

    session_id: int
    model: str | None
    first_kept_message_id: int | None
    suffix: SuffixTokens
    last_message_id: int
    lease_owner: str | None = None  # set only while a live lease holds the session
    lease_expires_at: datetime | None = None
    # UTF-8 bytes of what the suffix's counts leave out: the system prompt and the summary (a
    # stored summary_tokens is not trusted: a runtime may write 0, or a count of its own). A
    # byte-level BPE token is at least one byte, so this bounds their tokens.
    head_bytes: int = 0
    checkpoint_id: int = 0  # the latest checkpoint (its cut), 0 without one
    # The newest id through which the server proved every call of the suffix answered by the
    # message after it (store.context_sums): the sums are exact without asking again.
    paired_through: int | None = None

    @property
    def tokens(self) -> int:
        return self.suffix.tokens

    @property
    def uncounted(self) -> int:
        return self.suffix.uncounted


@dataclass
class ContextsRead:
    """One read of every session's effective context (:func:`read_effective_contexts`), with
    the sums it did not take from ``ctxtool_context_sums`` as they stood (``to_keep``: what a
    writer may keep for the next run, ``Store.remember_sums``), and how it summed them:
    ``walked`` (the whole index), or the kept rows plus ranges (``ranges``: sessions summed
    from their cut again, ``grown``: kept rows with messages added since); ``versions``: the
    version of each kept row it saw (``context_sums.versions_after``)."""

    contexts: list[EffectiveContext]
    to_keep: list[context_sums.SumsToKeep]
    walked: bool
    ranges: int = 0
    grown: int = 0
    versions: dict[int, int] = field(default_factory=dict)


def effective_contexts(
    conn: Connection, encoding: str | None = None, *, rescan: bool = False
) -> list[EffectiveContext]:
    """Every session that has messages, with its latest cut, its suffix's stored counts (those
    made with ``encoding``, default: the one each session's model needs) and live lease.
    ``rescan``: sum every suffix from its messages, whatever sums were kept."""
    return read_effective_contexts(conn, encoding, rescan=rescan).contexts


def read_effective_contexts(
    conn: Connection, encoding: str | None = None, *, rescan: bool = False
) -> ContextsRead:
    """:func:`effective_contexts`, and the sums a writer may keep. The sums come from the rows
    of ``ctxtool_context_sums`` that are still current, plus the messages written since each
    (``store.context_sums``); where too many sessions have none, from one walk of the whole
    message index (:func:`all_suffix_sums`). One read transaction: every figure is of one
    snapshot (REPEATABLE READ, SQLite's WAL)."""
    dialect = dialect_of(conn)
    now = dialect.server_now()
    cp = C.alias("cp")
    live = sa.and_(S.c.lease_owner.is_not(None), S.c.lease_expires_at >= now)
    query = sa.select(
        S.c.session_id,
        S.c.model,
        cp.c.id.label("checkpoint_id"),
        cp.c.first_kept_message_id,
        sa.case((live, S.c.lease_owner), else_=None).label("lease_owner"),
        sa.case((live, S.c.lease_expires_at), else_=None).label("lease_expires_at"),
        (text_bytes(S.c.system_prompt) + text_bytes(cp.c.summary)).label("head_bytes"),
        _newest_message_id(dialect).label("newest_id"),
        *context_sums.KEPT_COLUMNS,
    ).select_from(
        S.outerjoin(cp, cp.c.id == _latest_checkpoint_id()).outerjoin(
            context_sums.T, context_sums.T.c.session_id == S.c.session_id
        )
    )
    # The driver's own tuples: 100k sessions in one read (SQLAlchemy's rows cost seconds).
    rows = dialect.plain_rows(conn, query)
    sessions = {int(r[0]): _SessionRow(*r[:_KEPT_AT]) for r in rows}
    # One lookup a model, not a session (tiktoken's table raises KeyError for every Claude).
    by_model = {
        m: encoding_for_model(m, encoding).name for m in {r.model for r in sessions.values()}
    }
    needed = {sid: by_model[r.model] for sid, r in sessions.items()}
    now_seen = [
        context_sums.SessionNow(
            sid,
            int(r.checkpoint_id or 0),
            r.first_kept_message_id,
            needed[sid],
            None if r.newest_id is None else int(r.newest_id),
        )
        for sid, r in sessions.items()
    ]
    known = {
        int(r[0]): row
        for r in rows
        if (row := context_sums.kept_from(int(r[0]), r[_KEPT_AT:])) is not None
    }
    # A rescan uses no kept sums, but replaces them (their versions are what it writes over).
    kept = {} if rescan else known
    parts = context_sums.split(now_seen, kept)
    with_messages = len(parts.current) + len(parts.grown) + len(parts.stale)
    read = ContextsRead(
        [],
        [],
        walked=rescan or parts.mostly_stale(with_messages),
        versions={sid: row.version for sid, row in known.items()},
    )
    summed: dict[int, context_sums.SuffixSums] = {}
    if read.walked:
        summed = _walked_sums(conn, needed)
    else:
        summed = {sid: row.sums for sid, row in parts.current.items()}
        cuts = {s.session_id: s.cut for s in now_seen}
        again = context_sums.summed_again(parts.grown)
        fresh = _ranged_sums(
            conn,
            {s.session_id: (s.cut, s.encoding) for s in parts.stale}
            | {sid: (cuts[sid], parts.grown[sid].encoding) for sid in again},
        )
        later = _ranged_sums(
            conn,
            {
                sid: (row.sums.last_message_id + 1, row.encoding)
                for sid, row in parts.grown.items()
                if sid not in again
            },
        )
        for sid, row in parts.grown.items():
            if sid not in again:
                summed[sid] = row.sums.then(later.get(sid, context_sums.SuffixSums()))
        summed.update(fresh)
        read.ranges, read.grown = len(parts.stale), len(parts.grown)
    for s in now_seen:
        if s.last_message_id is None:
            continue
        sums = summed.get(s.session_id)
        kept_row = known.get(s.session_id)
        # A proof of the pairing from this cut stays true whatever came since (or was
        # recounted); another checkpoint moved the cut.
        paired = (
            kept_row.paired_through
            if not rescan and kept_row is not None and kept_row.checkpoint_id == s.checkpoint_id
            else None
        )
        if sums is None and s.cut:  # an empty suffix: kept as summed up to the cut
            sums = context_sums.SuffixSums(last_message_id=s.cut - 1)
        # Only sums whose every message has its count: a runtime that stores a message first
        # and its count later (an UPDATE no kept row would see) is summed from its messages
        # until it has; a count changed once made is `tokens count`'s, which marks the row.
        if (
            sums is not None
            and not sums.uncounted
            and (
                kept_row is None
                or kept_row.sums != sums
                or kept_row.encoding != s.encoding
                or kept_row.checkpoint_id != s.checkpoint_id
            )
        ):
            read.to_keep.append(
                context_sums.SumsToKeep(
                    s.session_id,
                    s.checkpoint_id,
                    s.encoding,
                    sums,
                    kept_row.version if kept_row is not None else None,
                    paired,
                )
            )
        if sums is None or not sums.messages:
            continue  # no message since the cut: nothing to compact
        r = sessions[s.session_id]
        read.contexts.append(
            EffectiveContext(
                s.session_id,
                r.model,
                r.first_kept_message_id,
                sums.suffix_tokens(s.encoding),
                sums.last_message_id,
                r.lease_owner,
                r.lease_expires_at,
                int(r.head_bytes or 0),
                s.checkpoint_id,
                paired,
            )
        )
    read.contexts.sort(key=lambda c: c.session_id)
    return read


class _SessionRow(NamedTuple):
    session_id: int
    model: str | None
    checkpoint_id: int | None
    first_kept_message_id: int | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    head_bytes: int | None
    newest_id: int | None


# Where the kept row's columns begin in a row of read_effective_contexts' query.
_KEPT_AT = len(_SessionRow._fields)


def _newest_message_id(dialect: Dialect) -> sa.ScalarSelect:
    """SQL: the id of agent_session's session's newest message (NULL without one), one dive of
    idx_message_session_id_tokens from its end, far cheaper than a walk of the index. The
    index is named: MariaDB otherwise took uq_message_source (session_id, source_id) and
    sorted each session's every entry."""
    newest = (
        sa.select(M.c.id).where(M.c.session_id == S.c.session_id).order_by(M.c.id.desc()).limit(1)
    )
    return dialect.through_session_index(newest, M).scalar_subquery()


def _walked_sums(conn: Connection, needed: Mapping[int, str]) -> dict[int, context_sums.SuffixSums]:
    """Every session's suffix sums from one walk of the message index (:func:`all_suffix_sums`),
    each with the encoding it needs (``needed``; a session written since is left out)."""
    encodings = sorted(set(needed.values()))
    out = {}
    for row in conn.execute(dialect_of(conn).through_session_index(all_suffix_sums(encodings), M)):
        name = needed.get(row.session_id)
        if name is None:  # a session written since the sessions were read: the next run finds it
            continue
        at = encodings.index(name)
        out[int(row.session_id)] = context_sums.SuffixSums.of_row(
            row, f"tokens_{at}", f"uncounted_{at}"
        )
    return out


def _ranged_sums(
    conn: Connection, starts: Mapping[int, tuple[int | None, str]]
) -> dict[int, context_sums.SuffixSums]:
    """The sums of each session's messages from an id on (``starts``: {session: (first id or
    None, encoding)}), on their ranges of the message index, ``SESSIONS_PER_SUMS_QUERY`` a
    query (the server checks every entry it reads against each term of its query)."""
    by_encoding: dict[str, dict[int, int | None]] = {}
    for sid, (start, name) in starts.items():
        by_encoding.setdefault(name, {})[sid] = start
    out = {}
    for name, cuts in by_encoding.items():
        ids = list(cuts)
        for i in range(0, len(ids), SESSIONS_PER_SUMS_QUERY):
            query = suffix_sums(
                {sid: cuts[sid] for sid in ids[i : i + SESSIONS_PER_SUMS_QUERY]}, name
            )
            for row in conn.execute(dialect_of(conn).through_session_index(query, M)):
                out[int(row.session_id)] = context_sums.SuffixSums.of_row(row)
    return out


# Sessions a query when summing from kept rows (see _ranged_sums).
SESSIONS_PER_SUMS_QUERY = 100


def _latest_checkpoint_id() -> sa.ScalarSelect:
    """SQL: the id of the latest checkpoint of agent_session's session (NULL without one)."""
    return sa.select(sa.func.max(C.c.id)).where(C.c.session_id == S.c.session_id).scalar_subquery()


def all_suffix_sums(encodings: list[str]) -> sa.Select:
    """SQL: the sums of :func:`suffix_sums` for every session's suffix in one pass over
    idx_message_session_id_tokens, in session order: each session (its primary key, in order)
    joined to its messages from its latest cut on. The stored counts are summed once per
    encoding in ``encodings`` (``tokens_0``, ``uncounted_0``, ...): the caller takes the one
    each session needs.

    One walk of the index, about what a bare ``COUNT(*)`` of it costs, where the ranges of
    :func:`~ctxtool.store.reads.suffix_ranges`, 50 to 500 sessions a query, cost ten times
    more: the server checked each entry against every range term of its query. The messages before a cut are read and skipped on the index as the walk passes
    them: in a store compacted many times over they are most of it, and the walk still costs
    about one ``COUNT(*)`` of the index, where the ranges read only the suffixes."""
    cp = C.alias("cp")
    per_encoding = []
    for i, name in enumerate(encodings):
        tokens, uncounted = usable_count_sums(name)
        per_encoding += [
            tokens.element.label(f"tokens_{i}"),
            uncounted.element.label(f"uncounted_{i}"),
        ]
    return (
        sa.select(S.c.session_id, *per_encoding, *_shape_sums(), sa.func.count().label("messages"))
        .select_from(
            S.outerjoin(cp, cp.c.id == _latest_checkpoint_id()).join(
                M,
                sa.and_(
                    M.c.session_id == S.c.session_id,
                    M.c.id >= sa.func.coalesce(cp.c.first_kept_message_id, 0),
                ),
            )
        )
        .group_by(S.c.session_id)
    )


def _shape_sums() -> tuple[sa.Label[Any], ...]:
    """SQL aggregates over message rows besides their counts: tool calls, tool results, roles
    resent as user messages, the longest result's call id in bytes, the last message's id.
    Every column they read is in idx_message_session_id_tokens (0009)."""
    return (
        # tool_call_count: JSON_LENGTH(tool_calls), held by the index as the rest (0009).
        sa.func.sum(sa.case((M.c.role == "assistant", M.c.tool_call_count), else_=0)).label(
            "calls"
        ),
        sa.func.sum(sa.case((M.c.role == "tool", 1), else_=0)).label("results"),
        # Messages of no chat role are sent as user messages with a prefix: their stored
        # counts are not what is sent. Compared as bytes: MySQL's collations compare roles
        # without case (and trailing spaces), and a "User" summed as stored was a prefix's
        # worth low each, past every bound (tests/test_bounds.py).
        sa.func.sum(sa.case((has_chat_role(M.c.role), 0), else_=1)).label("foreign"),
        sa.func.max(sa.case((M.c.role == "tool", text_bytes(M.c.tool_call_id)), else_=0)).label(
            "longest_result_id"
        ),
        sa.func.max(M.c.id).label("last_message_id"),
    )


def suffix_sums(cuts: Mapping[int, int | None], encoding: str) -> sa.Select:
    """SQL: per session, the sums of :func:`~ctxtool.core.context_size.summed_suffix` over the
    messages from each cut on (``cuts``: {session id: first kept message id or None}), counts
    made with ``encoding``. Every column it reads is in idx_message_session_id_tokens (0009),
    so the server walks that index and never the rows. For a few sessions; every session's
    at once: :func:`all_suffix_sums`."""
    return (
        sa.select(
            M.c.session_id,
            *usable_count_sums(encoding),
            *_shape_sums(),
            sa.func.count().label("messages"),
        )
        .where(suffix_ranges(cuts))
        .group_by(M.c.session_id)
    )


def exact_context_tokens(
    conn: Connection,
    session_id: int,
    encoding: str | None,
    summed: SuffixTokens | None = None,
    *,
    context: EffectiveContext | None = None,
    proofs: dict[int, tuple[int, int]] | None = None,
    head: SessionHead | None = None,
) -> int:
    """A session's restored context in tokens, exactly as ``Store.context_tokens`` measures it,
    reading the suffix without its text when the stored counts are what is sent (each counted
    with the encoding the session needs; no result or message resent as a user message): ids,
    roles, tool-call links and counts (:func:`~ctxtool.store.reads.suffix_outlines`). A
    600k-message suffix is then no longer sent over the wire whole to be added up.

    ``summed``: the suffix's sums (:func:`effective_contexts`, made with the encoding the
    session needs). When they are the whole story (every count usable, no tool call or result,
    no role resent), the suffix is not read at all: only the system prompt and the summary are
    counted. With tool calls or results, the server is asked whether each call is answered by
    the message right after it (:func:`~ctxtool.store.reads.calls_answered_next`, a runtime's
    usual turns): then too the sums are exact, and nothing comes back but two numbers. Only
    otherwise is the pairing read, row by row.

    ``context``: the read the sums came from (:func:`read_effective_contexts`): its checkpoint
    (sums of an earlier cut are not used: a checkpoint was appended since), its newest message
    and the pairing kept proved (``paired_through``: only what came after is asked about).
    ``proofs`` collects {session: (checkpoint id, newest id)} for each pairing the server
    proved here, for ``Store.remember_pairing``. ``head``: the session's head, read
    already in this transaction with this ``encoding`` (else read here)."""
    start = head or session_head(conn, session_id, encoding)
    session, enc, latest, cut = start.session, start.encoding, start.latest, start.cut
    suffix = summed
    if context is not None and context.checkpoint_id != (latest.id if latest else 0):
        suffix = None  # summed from the cut before a checkpoint appended since the read
    if (
        suffix is not None
        and not (suffix.uncounted or suffix.resent)
        and suffix.unread_pairing
        and _pairing_proved(conn, session_id, cut, suffix, context, proofs)
    ):  # only the pairing was unknown, and the server says every call is answered next
        suffix = SuffixTokens(suffix.tokens)
    if suffix is None or not suffix.known or suffix.unread_pairing:
        ranges = suffix_ranges({session_id: cut})
        outline = next((m for _, m in suffix_outlines(conn, ranges)), [])
        suffix = suffix_tokens(outline, enc)  # one pairing pass; text only where it is needed
    if suffix.uncounted or suffix.resent:
        return context_tokens(conn, session_id, encoding)
    restored = restore_context(session_id, session.system_prompt, latest, [])
    return total_tokens([*head_token_counts(restored, session.details, enc), suffix.tokens])


def _pairing_proved(
    conn: Connection,
    session_id: int,
    cut: int | None,
    suffix: SuffixTokens,
    context: EffectiveContext | None,
    proofs: dict[int, tuple[int, int]] | None,
) -> bool:
    """Whether every call of the suffix is answered by the message after it: as kept (a proof
    up to its newest message), else asked of the server from where the kept proof ends (a
    proved part ends with no call open: its last call's answer is inside it), else from the
    cut. Calls and results must be as many: a call open at the end of the sums is no pair,
    and no proof is asked for then: the server reads the session as it is now, and a proof
    that the call's answer (committed since the sums were read) follows it would make the
    sums without it a figure the context never had."""
    if suffix.unpaired:
        return False
    kept = context.paired_through if context is not None else None
    if kept is not None and context is not None and kept >= context.last_message_id:
        return True
    start = kept + 1 if kept is not None else cut
    if not calls_answered_next(conn, session_id, start):
        return False
    if proofs is not None and context is not None:
        proofs[session_id] = (context.checkpoint_id, context.last_message_id)
    return True


@dataclass(frozen=True)
class SummedContext:
    """A session's restored context in tokens, exact (``tokens``), and the plain sums of its
    suffix it came from: messages, the total of their usable stored counts, the rows without
    one."""

    tokens: int
    messages: int = 0
    counted_tokens: int = 0
    uncounted: int = 0
    last_message_id: int | None = None

    def before(self, tail: Sequence[Message]) -> tuple[int, int] | None:
        """(messages, tokens as the planner counts them) of the suffix before ``tail``, its
        newest messages read in the same transaction (one snapshot: REPEATABLE READ, SQLite's
        WAL): the sums less the tail's, where every count is usable (the planner counts stored
        counts) and the tail ends where the sums did (under READ COMMITTED a message may have
        come since). Else None: the span is summed on the index. Spares a dry run a second
        walk of a 600k-message suffix."""
        if self.uncounted or not tail or tail[-1].id != self.last_message_id:
            return None
        return self.messages - len(tail), self.counted_tokens - sum(
            m.token_count or 0 for m in tail
        )


def summed_context_tokens(
    conn: Connection, session_id: int, encoding: str | None, head: SessionHead | None = None
) -> SummedContext:
    """A session's restored context in tokens, exactly as ``Store.context_tokens`` measures
    it, from its suffix's sums where they tell the whole story (:func:`exact_context_tokens`): a
    dry run measures a 600k-message session without turning its rows into records where it
    can. The sums are the session's kept row and the messages written since, where the row is
    still the session's (``store.context_sums``), with the pairing it kept proved; else summed
    on the index from the cut. Read in the caller's transaction; ``head`` as in
    :func:`exact_context_tokens`."""
    start = head or session_head(conn, session_id, encoding)
    session, enc, latest, cut = start.session, start.encoding, start.latest, start.cut
    checkpoint_id = latest.id if latest else 0
    sums, paired = _session_sums(conn, session_id, checkpoint_id, cut, enc)
    if sums is None:
        return SummedContext(
            exact_context_tokens(conn, session_id, encoding, SuffixTokens(), head=start)
        )
    context = EffectiveContext(
        session_id,
        session.model,
        cut,
        sums.suffix_tokens(enc),
        sums.last_message_id,
        checkpoint_id=checkpoint_id,
        paired_through=paired,
    )
    return SummedContext(
        exact_context_tokens(
            conn, session_id, encoding, context.suffix, context=context, head=start
        ),
        sums.messages,
        sums.tokens,
        sums.uncounted,
        sums.last_message_id,
    )


def _session_sums(
    conn: Connection, session_id: int, checkpoint_id: int, cut: int | None, encoding: str
) -> tuple[context_sums.SuffixSums | None, int | None]:
    """One session's suffix sums (None: no message since its cut) and the newest id through
    which its pairing was proved (None: not proved): its kept row plus what came since where
    the row is current for this read (``context_sums.split``), else summed from the cut."""
    dialect = dialect_of(conn)
    newest = conn.execute(
        dialect.through_session_index(
            sa.select(M.c.id).where(M.c.session_id == session_id).order_by(M.c.id.desc()).limit(1),
            M,
        )
    ).scalar()
    if newest is None:
        return None, None
    values = conn.execute(
        sa.select(*context_sums.KEPT_COLUMNS).where(context_sums.T.c.session_id == session_id)
    ).first()
    kept = None if values is None else context_sums.kept_from(session_id, values)
    now = context_sums.SessionNow(session_id, checkpoint_id, cut, encoding, int(newest))
    parts = context_sums.split([now], {} if kept is None else {session_id: kept})
    if (
        kept is not None
        and not parts.stale
        and not kept.sums.uncounted
        and not context_sums.summed_again(parts.grown)
    ):
        sums = kept.sums
        if session_id in parts.grown:
            later = _ranged_sums(conn, {session_id: (sums.last_message_id + 1, encoding)})
            sums = sums.then(later.get(session_id, context_sums.SuffixSums()))
        return (sums, kept.paired_through) if sums.messages else (None, None)
    fresh = _ranged_sums(conn, {session_id: (cut, encoding)}).get(session_id)
    return (fresh if fresh is not None and fresh.messages else None), None


def quiet_messages(conn: Connection, message_ids: Iterable[int], seconds: int) -> set[int]:
    """Of the given (newest) message ids, those written more than ``seconds`` ago (server time),
    or with no time at all. One row per session, so each time is read in Python as
    ``db.stored_time`` reads it, whatever shape a runtime wrote into SQLite's text column
    (``2026-12-01T09:46:00Z`` sorts after every time of that day written with a space, and SQL
    cannot read ``20261201T094600Z`` at all)."""
    ids = list(message_ids)
    now = parse_stored_time(conn.execute(sa.select(dialect_of(conn).server_now())).scalar())
    assert now is not None, "the server's own clock reads as a time"
    cutoff = now - timedelta(seconds=seconds)
    quiet: set[int] = set()
    for i in range(0, len(ids), 1000):
        for message_id, written in conn.execute(
            sa.select(M.c.id, M.c.created_at).where(M.c.id.in_(ids[i : i + 1000]))
        ):
            if written is None or written <= cutoff:
                quiet.add(message_id)
    return quiet
