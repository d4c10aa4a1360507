"""Each session's restored-suffix sums kept between runs (migration 0011, ``ctxtool_context_sums``).

`compact --all` and `sessions list --over-window` need, for every session, the sums over its
messages since its cut (``store.candidates``). Summing them walks the whole message index,
however it is written (docs/benchmarks.md). A session's suffix only grows at its end,
so a run keeps what it summed (``Store.remember_sums``), and the next one adds only what came since:
one dive of the index per session finds its newest id, and the messages above the row's
``through_message_id`` are summed on their ranges. A 100k-session store then costs a read of
100k short rows and 100k dives, not a walk of 10M entries.

A row is a cache, never the truth: it is used only while the session's latest checkpoint and
the encoding its model needs are those it names, and while its newest message is not below the
row's (:func:`split`, pure). Anything else and the session is summed from its messages again.

What a row cannot see is a message committed *below* its ``through_message_id`` after it was
read. Under the session-row rule that ctxtool's importer follows and runtimes are asked to
follow (``store.session_touch``: every transaction that inserts messages writes the session's
row first, or the triggers do it for them), a session's inserts commit in id order, so any
snapshot of its messages is a prefix of them and no such message exists; it is the rule a
checkpoint's span proof rests on too. A runtime that breaks it (two open transactions
inserting into one session with neither the statement nor the triggers) can leave a row short
of such a message. The row then heals as the session grows: at every
:data:`SUMMED_AGAIN_EVERY`-th version of its row, a grown session whose row holds at most
:data:`SUMMED_AGAIN_UP_TO` messages is summed from its cut again, not from the row on
(:func:`summed_again`; the other runs still read only what came since); a longer suffix is
over any threshold and compacted, and the checkpoint replaces the row. `validate` names a row short of
its messages (``kept_sums_short``); ``--rescan`` sums everything from the messages.

Writers that change stored counts mark the rows of the sessions they count (:func:`forget`),
in their own transaction; a row is replaced only if it is still the version that was read,
so a run that summed before such a count cannot put its older sums back. Removing a session
marks its row the same way (:func:`drop`), so that a run's sums of it land nowhere, not even on
a session created again under its id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.context_size import SuffixTokens, summed_suffix
from ..db.dialects import insert_or_ignore
from ..db.schema import agent_message as M
from ..db.schema import context_sums as T

# A grown session whose kept row holds at most this many messages, at every SUMMED_AGAIN_EVERY-th
# version of its row, is summed from its cut again (summed_again): what a runtime committed
# below the row since it was written is then counted.
SUMMED_AGAIN_UP_TO = 10_000
SUMMED_AGAIN_EVERY = 8
# A row written by forget(): no run's sums, never current (no session needs encoding "").
_FORGOTTEN = ""
# Rows written a transaction: short transactions, so a sibling on another node that races for
# the same rows loses one chunk (its later run writes them), not the whole of what a run keeps
# (``Store.remember_sums``).
ROWS_PER_TRANSACTION = 500


@dataclass(frozen=True)
class SuffixSums:
    """The server's sums over messages of one session (a restored suffix, or the part of it
    written since a row was kept): how many, their usable stored counts and the rows without
    one under the session's encoding, tool calls, tool results, messages of no chat role, the
    UTF-8 bytes of the longest result's call id, and the newest id summed. Additive: the sums
    of a suffix are those of its older part :meth:`then` its newer part."""

    messages: int = 0
    tokens: int = 0
    uncounted: int = 0
    calls: int = 0
    results: int = 0
    foreign: int = 0
    longest_result_id: int = 0
    last_message_id: int = 0

    @classmethod
    def of_row(cls, row, tokens: str = "tokens", uncounted: str = "uncounted") -> SuffixSums:
        """From a row of ``candidates.all_suffix_sums`` or ``suffix_sums`` (NULL sums are 0)."""
        values = row._mapping
        return cls(
            int(values["messages"] or 0),
            int(values[tokens] or 0),
            int(values[uncounted] or 0),
            int(values["calls"] or 0),
            int(values["results"] or 0),
            int(values["foreign"] or 0),
            int(values["longest_result_id"] or 0),
            int(values["last_message_id"] or 0),
        )

    def then(self, later: SuffixSums) -> SuffixSums:
        """These sums followed by those of the session's messages after them."""
        if not later.messages:
            return self
        return SuffixSums(
            self.messages + later.messages,
            self.tokens + later.tokens,
            self.uncounted + later.uncounted,
            self.calls + later.calls,
            self.results + later.results,
            self.foreign + later.foreign,
            max(self.longest_result_id, later.longest_result_id),
            max(self.last_message_id, later.last_message_id),
        )

    def suffix_tokens(self, encoding: str) -> SuffixTokens:
        """What the sums say of the suffix's tokens (``context_size.summed_suffix``)."""
        return summed_suffix(
            self.tokens,
            self.uncounted,
            self.calls,
            self.results,
            self.longest_result_id,
            encoding,
            foreign=self.foreign,
        )


@dataclass(frozen=True)
class KeptSums:
    """A row of the table: a session's suffix sums from checkpoint ``checkpoint_id``'s cut (0:
    no checkpoint), counts under ``encoding``, through ``sums.last_message_id``;
    ``paired_through``: the newest id through which its calls were proved answered next."""

    session_id: int
    version: int
    checkpoint_id: int
    encoding: str
    sums: SuffixSums
    paired_through: int | None = None


@dataclass(frozen=True)
class SessionNow:
    """What one read of the store says of a session: its latest checkpoint (0: none) and that
    checkpoint's cut (None: none), the encoding its model needs, its newest message id (None:
    it has no message)."""

    session_id: int
    checkpoint_id: int
    cut: int | None
    encoding: str
    last_message_id: int | None


# How many grown sessions cost a walk as much as one stale session does: past that many, one
# walk of the index is cheaper than summing each grown session on its range
# (docs/benchmarks.md, "Figures behind the code").
GROWN_PER_STALE = 4


@dataclass
class Split:
    """Which sessions a run can take from the table (:func:`split`): ``current`` as kept,
    ``grown`` kept but with messages after its row (sum from the id after it), ``stale``
    summed from its cut again (no row, another checkpoint or encoding, or a row past the
    session's newest message)."""

    current: dict[int, KeptSums]
    grown: dict[int, KeptSums]
    stale: list[SessionNow]

    def mostly_stale(self, sessions: int) -> bool:
        """Whether summing the stale and grown sessions one range each would cost more than
        one walk of the whole index: the server checks each entry a range query reads against
        its terms, so ranges pay off only for a small part of the store (a first run, or one
        after a recount of everything, walks instead). A grown session is a term too, over
        fewer entries (:data:`GROWN_PER_STALE`)."""
        weight = len(self.stale) + len(self.grown) / GROWN_PER_STALE
        return weight > max(1_000, sessions // 20)


def split(sessions: Iterable[SessionNow], kept: Mapping[int, KeptSums]) -> Split:
    """Sort the sessions that have messages by what their kept sums are worth now (pure: the
    rule of the module's docstring)."""
    out = Split({}, {}, [])
    for s in sessions:
        if s.last_message_id is None:
            continue  # nothing to sum: no effective context
        row = kept.get(s.session_id)
        if (
            row is None
            or row.checkpoint_id != s.checkpoint_id
            or row.encoding != s.encoding
            or s.last_message_id < row.sums.last_message_id
        ):
            out.stale.append(s)
        elif s.last_message_id > row.sums.last_message_id:
            out.grown[s.session_id] = row
        else:
            out.current[s.session_id] = row
    return out


def summed_again(grown: Mapping[int, KeptSums]) -> set[int]:
    """Of the grown sessions (:func:`split`), those to sum from their cut again rather than
    from their row on (pure): rows of at most :data:`SUMMED_AGAIN_UP_TO` messages, at every
    :data:`SUMMED_AGAIN_EVERY`-th version (a grown session's row is written again by each run
    that reads it). A message a runtime committed below the row after it was read (ids out of
    commit order) is then counted within that many runs that find the session grown, not
    never; the other runs read only the entries written since."""
    return {
        sid
        for sid, row in grown.items()
        if row.sums.messages <= SUMMED_AGAIN_UP_TO and row.version % SUMMED_AGAIN_EVERY == 0
    }


# A kept row's columns after its session id, in the order :func:`kept_from` reads them: a read
# of every session joins them (one query, the driver's own tuples: 100k rows).
KEPT_COLUMNS = (
    T.c.version,
    T.c.checkpoint_id,
    T.c.token_encoding,
    T.c.messages,
    T.c.tokens,
    T.c.uncounted,
    T.c.calls,
    T.c.results,
    T.c.foreign_roles,
    T.c.longest_result_id,
    T.c.through_message_id,
    T.c.paired_through,
)


def kept_from(session_id: int, values: Sequence) -> KeptSums | None:
    """The row of :data:`KEPT_COLUMNS` ``values`` (an outer join's: all NULL when none)."""
    if values[0] is None:
        return None
    version, checkpoint_id, encoding, *sums, paired = values
    return KeptSums(
        session_id,
        int(version),
        int(checkpoint_id),
        encoding,
        SuffixSums(*map(int, sums)),
        None if paired is None else int(paired),
    )


@dataclass(frozen=True)
class SumsToKeep:
    """Sums a run read, to keep: ``read_version`` is the version of the row it read (None: it
    read none), which the row must still have for it to be replaced."""

    session_id: int
    checkpoint_id: int
    encoding: str
    sums: SuffixSums
    read_version: int | None
    paired_through: int | None = None


def write_sums(conn: Connection, rows: Sequence[SumsToKeep]) -> int:
    """Keep the given sums, each only where its row is still as the run read it (or still
    absent); how many were written. ``Store.remember_sums`` writes them a chunk a
    transaction."""
    new = [r for r in rows if r.read_version is None]
    old = [r for r in rows if r.read_version is not None]
    written = 0
    if new:
        # Absent when read: inserted unless a row arrived since (a forget(), or a sibling).
        written += conn.execute(insert_or_ignore(T), [_values(r, 1) for r in new]).rowcount
    if old:
        update = (
            T.update()
            .where(
                T.c.session_id == sa.bindparam("b_session_id"),
                T.c.version == sa.bindparam("b_version"),
            )
            .values({k: sa.bindparam(k) for k in _values(old[0], 0) if k != "session_id"})
        )
        params = [
            {
                **{k: v for k, v in _values(r, r.read_version + 1).items() if k != "session_id"},
                "b_session_id": r.session_id,
                "b_version": r.read_version,
            }
            for r in old
            if r.read_version is not None
        ]
        written += conn.execute(update, params).rowcount
    return max(written, 0)


def _values(r: SumsToKeep, version: int) -> dict:
    s = r.sums
    return {
        "session_id": r.session_id,
        "version": version,
        "checkpoint_id": r.checkpoint_id,
        "token_encoding": r.encoding,
        "through_message_id": s.last_message_id,
        "messages": s.messages,
        "tokens": s.tokens,
        "uncounted": s.uncounted,
        "calls": s.calls,
        "results": s.results,
        "foreign_roles": s.foreign,
        "longest_result_id": s.longest_result_id,
        "paired_through": r.paired_through,
    }


def versions_after(seen: Mapping[int, int], kept: Sequence[SumsToKeep]) -> dict[int, int]:
    """The version each session's row has once ``kept`` is remembered, if nobody else wrote
    it: ``seen`` ({session: version}: the rows a read saw), a kept row's next version (1: a
    row inserted). Pure; what :func:`pairing_marks` matches."""
    out = dict(seen)
    for r in kept:
        out[r.session_id] = 1 if r.read_version is None else r.read_version + 1
    return out


def pairing_marks(
    proved: Mapping[int, tuple[int, int]], versions: Mapping[int, int]
) -> list[dict[str, int]]:
    """What :func:`mark_pairing` writes of ``proved`` ({session: (checkpoint id, message id)}:
    the server proved the session's calls answered next from its cut through that message):
    one mark a session whose row ``versions`` (as :func:`versions_after` gives them) holds.
    Pure."""
    return [
        {
            "b_session_id": sid,
            "b_version": versions[sid],
            "b_checkpoint_id": cp,
            "b_through": last,
        }
        for sid, (cp, last) in sorted(proved.items())
        if sid in versions
    ]


def mark_pairing(conn: Connection, marks: Sequence[dict[str, int]]) -> int:
    """Note each proof of :func:`pairing_marks` on the row still kept for its checkpoint, at
    the version the run read or wrote; how many rows took one. A proof of the suffix up to a
    message stays true whatever is added after it or recounted, until the next checkpoint
    moves the cut, or a message of it is rewritten: a row written since the run read it takes
    none, since it may have been marked (:func:`forget`, :func:`drop`) by a rewrite of
    messages the proof read as they were before, and written again by another run since."""
    through: sa.BindParameter[int] = sa.bindparam("b_through", type_=sa.BigInteger)
    update = (
        T.update()
        .where(
            T.c.session_id == sa.bindparam("b_session_id"),
            T.c.version == sa.bindparam("b_version"),
            T.c.checkpoint_id == sa.bindparam("b_checkpoint_id"),
            T.c.token_encoding != _FORGOTTEN,
            sa.or_(T.c.paired_through.is_(None), T.c.paired_through < through),
        )
        .values(paired_through=through)
    )
    return conn.execute(update, marks).rowcount


def forget(conn: Connection, message_ids: Sequence[int], *, rewritten: bool = False) -> None:
    """In the caller's transaction (one that writes the stored counts of these messages, or
    rewrites them: an import completing a message it stored half-streamed): mark
    the kept sums of their sessions as no run's, a new version, so a run that read them before
    cannot write its sums back; an absent row is written marked, for the same reason."""
    if not message_ids:
        return
    # The sessions first, then the rows by key: MariaDB runs an UPDATE's IN (subquery) once
    # for each row of the table.
    sessions = (
        conn.execute(sa.select(M.c.session_id).where(M.c.id.in_(list(message_ids))).distinct())
        .scalars()
        .all()
    )
    # A count changes no pairing; a rewritten message may.
    _mark(conn, sessions, {"paired_through": None} if rewritten else {})


def drop(conn: Connection, session_ids: Sequence[int]) -> None:
    """In the caller's transaction (one that removes these sessions): mark their kept sums as
    no run's, with no checkpoint and no pairing proof, rather than delete them. A run that
    read a session before (a row, or none) then writes nothing after, not even onto a session
    created again under the same id (SQLite reuses the highest id, an import may give ids).
    The row stays, never current; every read of the table starts from the sessions."""
    _mark(conn, list(dict.fromkeys(session_ids)), {"checkpoint_id": -1, "paired_through": None})


# Sessions a statement of _mark: an IN list, and a multi-row insert, of bounded size.
_SESSIONS_PER_STATEMENT = 1_000


def _mark(conn: Connection, sessions: Sequence[int], changes: Mapping[str, object]) -> None:
    """Give the rows of ``sessions`` a new version that no run read, as no run's sums (plus
    ``changes``), writing such a row where there is none: two statements a chunk of them."""
    marked = SumsToKeep(0, -1, _FORGOTTEN, SuffixSums(last_message_id=-1), None)
    forgotten = {k: v for k, v in _values(marked, 1).items() if k != "session_id"}
    insert = insert_or_ignore(T)
    for i in range(0, len(sessions), _SESSIONS_PER_STATEMENT):
        chunk = list(sessions[i : i + _SESSIONS_PER_STATEMENT])
        conn.execute(
            T.update()
            .where(T.c.session_id.in_(chunk))
            .values(version=T.c.version + 1, token_encoding=_FORGOTTEN, **changes)
        )
        conn.execute(insert, [{"session_id": sid, **forgotten} for sid in chunk])
