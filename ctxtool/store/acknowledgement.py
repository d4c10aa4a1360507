"""The operator's acknowledgement that a session stays over its window.

A message larger than what the window leaves (a 27,528-token ``find .`` output kept verbatim)
cannot be summarized away by any safe cut: every `compact --all` run finds the session
``over_window`` and fails, forever. Once an operator has looked at it (and the runtime trims
or drops such a message itself, see docs/search.md), `sessions mark S --over-window-ok` records
that; the batch still reports the session, and no longer fails on it. Nothing else changes: the
history and the checkpoints stay as they are.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..core.compaction_outcome import CompactionOutcome
from ..core.status import CompactionStatus
from ..db import dialect_of
from ..db.schema import agent_session as S
from .reads import Store


def mark_over_window_ok(engine: Engine, session: str | int, ok: bool = True) -> int:
    """``Store(engine).mark_over_window_ok(session, ok)``, kept under the name docs/search.md
    showed."""
    return Store(engine).mark_over_window_ok(session, ok)


def set_over_window_ok(conn: Connection, session_id: int, ok: bool = True) -> None:
    """Record (``ok``) or clear the session's acknowledgement, in the caller's transaction."""
    value = dialect_of(conn).server_now() if ok else None
    conn.execute(S.update().where(S.c.session_id == session_id).values(over_window_ok_at=value))


def acknowledged_at(conn: Connection, session_ids: Iterable[int]) -> dict[int, datetime]:
    """{session id: when its over-window state was acknowledged}, for those acknowledged."""
    ids = sorted(set(session_ids))
    if not ids:
        return {}
    rows = conn.execute(
        sa.select(S.c.session_id, S.c.over_window_ok_at).where(
            S.c.session_id.in_(ids), S.c.over_window_ok_at.is_not(None)
        )
    )
    return {r.session_id: r.over_window_ok_at for r in rows}


def excused(outcome: CompactionOutcome, acknowledged: Collection[int]) -> bool:
    """Whether a failed outcome is one the operator acknowledged: over the window, and marked."""
    return outcome.status == CompactionStatus.OVER_WINDOW and outcome.session_id in acknowledged


def batch_failures(
    outcomes: Sequence[CompactionOutcome], acknowledged: Iterable[int]
) -> list[CompactionOutcome]:
    """The outcomes that fail a batch: not ok, and not an acknowledged over-window session."""
    marked = set(acknowledged)
    return [o for o in outcomes if not o.ok and not excused(o, marked)]


def way_out(session_ids: Sequence[int]) -> str:
    """What an over-window error line ends with: the command that acknowledges the sessions
    once an operator has looked at them (the first three named)."""
    ids = list(dict.fromkeys(session_ids))
    commands = "; ".join(f"ctxtool sessions mark {i} --over-window-ok" for i in ids[:3])
    more = f" (and {len(ids) - 3} more)" if len(ids) > 3 else ""
    return f"once looked at, acknowledge {'it' if len(ids) == 1 else 'them'}: {commands}{more}"
