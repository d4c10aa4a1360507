"""Appending a checkpoint: one transaction that proves what it summarized is still exactly that.

Before the INSERT, a locking read over the summarized id range counts the messages and sums
their ids. On InnoDB it waits for transactions still inserting into that range (AUTO_INCREMENT
ids are not committed in id order: a message with a lower id can commit after a higher one was
read), so a message committed late below the new cut changes the figures and the append is
refused instead of leaving that message in neither the summary nor the restored context. Then
the lease is re-checked and released, the parent re-checked, and the unique key
``(session_id, parent_compaction_id)`` rejects a second child of one parent whatever happens.

On a multi-primary cluster that read waits on its own node only: what protects the span there
is the session's row, which the lease release here writes and every transaction inserting
messages writes first (store.session_touch), so a session's inserts commit in id order and one
still in flight is above any cut.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from ..core.records import MESSAGES_THROUGH, SummarizedSpan
from ..core.status import CompactionStatus
from ..db.schema import agent_compaction as C
from ..db.schema import agent_message as M
from .leases import give_back
from .reads import span_totals


@dataclass(frozen=True)
class AppendResult:
    """What an append came to: COMPACTED with the new checkpoint's id, SPAN_CHANGED (a message
    arrived inside the summarized range: plan again) or LOST_RACE (the lease was lost, a newer
    checkpoint exists, or the unique key refused a sibling); nothing written but the first."""

    status: CompactionStatus
    compaction_id: int | None = None


# The statements of every append are built once, their values bound at execution: building
# one per call cost more CPU than its round trip.
_SPAN = {
    (from_bound, lock): (query.with_for_update(read=True) if lock else query)
    for from_bound in (False, True)
    for lock in (False, True)
    for query in [
        span_totals(
            sa.bindparam("sid"),
            sa.bindparam("from_id") if from_bound else None,
            sa.bindparam("to_id"),
        )
    ]
}
# The parent check and the newest message stored now (the checkpoint this one replaces
# restored up to it, `context show --at`, whatever times the messages carry) in one statement.
_PARENT_AND_NEWEST = sa.select(
    sa.select(sa.func.max(C.c.id)).where(C.c.session_id == sa.bindparam("sid")).scalar_subquery(),
    sa.select(sa.func.max(M.c.id)).where(M.c.session_id == sa.bindparam("sid")).scalar_subquery(),
)
_INSERT = C.insert()


def span_in_store(conn: Connection, span: SummarizedSpan, lock: bool) -> tuple[int, int]:
    """(count, id sum) of the stored messages in the span's range; ``lock`` makes it a locking
    read that waits for in-flight inserts into the range."""
    params = {"sid": span.session_id, "to_id": span.to_id}
    if span.from_id is not None:
        params["from_id"] = span.from_id
    count, id_sum = conn.execute(_SPAN[span.from_id is not None, lock], params).one()
    return int(count), int(id_sum)


def append_checkpoint(
    conn: Connection, *, owner: str, parent_id: int, values: dict, span: SummarizedSpan
) -> AppendResult:
    """Append the checkpoint and release the lease in one transaction (see the module)."""
    try:
        with conn.begin() as tx:
            if span_in_store(conn, span, lock=True) != (span.count, span.id_sum):
                tx.rollback()
                return AppendResult(CompactionStatus.SPAN_CHANGED)
            if not give_back(conn, span.session_id, owner):
                tx.rollback()
                return AppendResult(CompactionStatus.LOST_RACE)
            latest, newest = conn.execute(_PARENT_AND_NEWEST, {"sid": span.session_id}).one()
            if int(latest or 0) != parent_id:
                tx.rollback()
                return AppendResult(CompactionStatus.LOST_RACE)
            details = {**(values.get("details") or {}), MESSAGES_THROUGH: newest}
            result = conn.execute(
                _INSERT,
                {
                    **values,
                    "session_id": span.session_id,
                    "parent_compaction_id": parent_id,
                    "details": details,
                },
            )
            key = result.inserted_primary_key
            assert key is not None, "an INSERT of one row has its key"
            return AppendResult(CompactionStatus.COMPACTED, int(key[0]))
    except IntegrityError:  # uq_compaction_parent: a sibling checkpoint already exists
        return AppendResult(CompactionStatus.LOST_RACE)
