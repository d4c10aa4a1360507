"""What ``validate`` reads: the few columns each consistency rule needs, per 500 sessions.

The rules themselves are pure (``ctxtool.core.validation``); this module only fetches their input
with queries that follow the indexes: the sessions' checkpoints, the messages those point at,
the restored suffixes (ids, roles, tool links and stored token counts — never content), and,
for checkpoints that recorded the span they summarized, the count and id sum of that span now
(read from the covering index). Never whole histories with their text.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.context_size import suffix_tokens, surely_fits
from ..core.errors import CtxtoolError
from ..core.records import Compaction, Message
from ..core.tokens import encoding_for_model
from ..core.validation import (
    Issue,
    MessageRef,
    checked_threshold,
    kept_sums_issues,
    missing_session_issues,
    past_context_issues,
    span_issues,
    validate_session,
    window_issue,
)
from ..core.windows import CompactionSettings
from ..db.schema import agent_compaction as C
from ..db.schema import agent_message as M
from ..db.schema import agent_session as S
from ..db.schema import context_sums as T
from .reads import (
    _COMPACTION_COLUMNS,
    SESSIONS_PER_RANGE_QUERY,
    compaction_from_row,
    context_tokens,
    read_session,
    session_ids,
    span_messages,
    span_totals,
    suffix_outlines,
    suffix_ranges,
    text_bytes,
)

# Checkpoint spans summed per statement (one index range each).
SPANS_PER_QUERY = 200


def validate(
    conn: Connection,
    session_id: int | None = None,
    settings: CompactionSettings | None = None,
    on_checked: Callable[[int, int], None] | None = None,
) -> tuple[list[Issue], int]:
    """Check the consistency rules for one session or all of them; (issues, sessions checked).

    ``settings`` gives the window each restored context must fit; with neither a window nor a
    reserve in it, each session is checked against the threshold its latest checkpoint was cut
    for, else its model's window less the default reserve. ``on_checked(n, total)`` follows
    the progress."""
    settings = settings or CompactionSettings()
    given = settings.context_window is not None or settings.reserve_tokens is not None
    issues: list[Issue] = []
    if session_id is not None:
        try:
            read_session(conn, session_id)
        except CtxtoolError:
            # Checkpoints left by a session whose row is gone: theirs is one finding.
            found = _checkpoints_without_session(conn, session_id)
            if not found:
                raise
            return found, 1
        ids = [session_id]
    else:
        ids = session_ids(conn)
    for i in range(0, len(ids), SESSIONS_PER_RANGE_QUERY):
        issues.extend(_check_chunk(conn, ids[i : i + SESSIONS_PER_RANGE_QUERY], settings, given))
        if on_checked is not None:
            on_checked(len(ids[i : i + SESSIONS_PER_RANGE_QUERY]), len(ids))
    if session_id is None:
        issues.extend(_checkpoints_without_session(conn))
    return issues, len(ids)


def _checkpoints_without_session(conn: Connection, session_id: int | None = None) -> list[Issue]:
    """Checkpoints whose session_id has no agent_session row (the loop over sessions never
    meets them), one issue per such session (or for ``session_id`` only)."""
    orphaned: dict[int, list[int]] = {}
    query = (
        sa.select(C.c.session_id, C.c.id)
        .select_from(C.outerjoin(S, S.c.session_id == C.c.session_id))
        .where(S.c.session_id.is_(None))
        .order_by(C.c.session_id, C.c.id)
    )
    if session_id is not None:
        query = query.where(C.c.session_id == session_id)
    for r in conn.execute(query):
        orphaned.setdefault(r.session_id, []).append(r.id)
    return [issue for sid, cps in orphaned.items() for issue in missing_session_issues(sid, cps)]


def _check_chunk(
    conn: Connection, chunk: list[int], settings: CompactionSettings, given: bool
) -> list[Issue]:
    sessions = {
        r.session_id: r
        for r in conn.execute(
            sa.select(
                S.c.session_id,
                S.c.model,
                S.c.over_window_ok_at,
                text_bytes(S.c.system_prompt).label("prompt_bytes"),
            ).where(S.c.session_id.in_(chunk))
        )
    }
    compactions: dict[int, list[Compaction]] = {sid: [] for sid in chunk}
    for row in conn.execute(
        sa.select(*_COMPACTION_COLUMNS)
        .where(C.c.session_id.in_(chunk))
        .order_by(C.c.session_id, C.c.id)
    ):
        compactions[row.session_id].append(compaction_from_row(row))
    wanted = sorted({c.first_kept_message_id for cps in compactions.values() for c in cps})
    refs = {}
    if wanted:
        refs = {
            r.id: MessageRef(r.id, r.session_id, r.role)
            for r in conn.execute(
                sa.select(M.c.id, M.c.session_id, M.c.role).where(M.c.id.in_(wanted))
            )
        }
    cuts = {sid: cps[-1].first_kept_message_id if cps else None for sid, cps in compactions.items()}
    suffixes: dict[int, list[Message]] = {sid: [] for sid in chunk}
    suffixes.update(suffix_outlines(conn, suffix_ranges(cuts), every_tool_calls=True))
    kept = {
        r.session_id: r
        for r in conn.execute(
            sa.select(
                T.c.session_id, T.c.checkpoint_id, T.c.through_message_id, T.c.messages
            ).where(T.c.session_id.in_(chunk), T.c.token_encoding != "")
        )
    }
    spans = _span_ids(conn, compactions)
    earlier = _earlier_contexts(conn, compactions)
    issues: list[Issue] = []
    for sid in chunk:
        cps = compactions[sid]
        found = validate_session(sid, cps, refs, suffixes[sid])
        issues.extend(found)
        if sid in earlier:
            named = {
                i.message_id
                for i in found
                if i.rule in ("orphan_tool_result", "cut_orphans_tool_result")
                and i.message_id is not None
            }
            issues.extend(past_context_issues(sid, cps, earlier[sid] + suffixes[sid], named))
        sums_row = kept.get(sid)
        if sums_row is not None and sums_row.checkpoint_id == (cps[-1].id if cps else 0):
            issues.extend(
                kept_sums_issues(sid, sums_row.through_message_id, sums_row.messages, suffixes[sid])
            )
        for cp in cps:
            if cp.id in spans:
                issues.extend(span_issues(sid, cp, spans[cp.id]))
        session = sessions.get(sid)
        if session is None:
            continue
        latest = cps[-1] if cps else None
        threshold = checked_threshold(session.model, settings, latest, given)
        tokens = _tokens_unless_fitting(conn, session, latest, suffixes[sid], threshold.tokens)
        if tokens is not None:
            issues.extend(window_issue(sid, tokens, threshold, latest, session.over_window_ok_at))
    return issues


def _tokens_unless_fitting(
    conn: Connection, session, latest: Compaction | None, suffix: list[Message], threshold: int
) -> int | None:
    """The restored context's exact tokens, or None when its stored counts and the bytes of
    its system prompt and summary already show that it fits under ``threshold``. Any other
    context (counts that cannot be trusted: none yet, another encoding; or one that may be
    over) is measured exactly, in memory: validate writes nothing."""
    counted = suffix_tokens(suffix, encoding_for_model(session.model).name)
    head_bytes = int(session.prompt_bytes) + (
        len(latest.summary.encode()) if latest is not None and latest.summary else 0
    )
    if surely_fits(counted, head_bytes, threshold):
        return None
    return context_tokens(conn, session.session_id)


def _earlier_contexts(
    conn: Connection, compactions: dict[int, list[Compaction]]
) -> dict[int, list[Message]]:
    """For each session with checkpoints before its latest: the outlines of its messages from
    the earliest of their cuts up to the latest cut (the restored suffix holds the rest), which
    is what the contexts those checkpoints restored to were made of."""
    ranges = {}
    for sid, cps in compactions.items():
        if len(cps) > 1:
            low = min(cp.first_kept_message_id for cp in cps[:-1])
            ranges[sid] = (low, cps[-1].first_kept_message_id)
    found: dict[int, list[Message]] = {sid: [] for sid in ranges}
    if ranges:
        found.update(
            suffix_outlines(
                conn,
                sa.or_(
                    *(
                        sa.and_(M.c.session_id == sid, M.c.id >= low, M.c.id < high)
                        for sid, (low, high) in ranges.items()
                    )
                ),
            )
        )
    return found


def _span_ids(conn: Connection, compactions: dict[int, list[Compaction]]) -> dict[int, list[int]]:
    """For each checkpoint whose recorded span disagrees with the store now: the ids stored in
    ``[previous cut, its cut)``. First only the count and id sum of each range (the covering
    index, no rows); the ids themselves only for the ranges that disagree."""
    ranges = []
    for sid, cps in compactions.items():
        previous = 0
        for cp in cps:
            details = cp.details if isinstance(cp.details, dict) else {}
            if isinstance(details.get("summarised_id_sum"), int):
                ranges.append((cp, sid, previous, cp.first_kept_message_id))
            previous = cp.first_kept_message_id
    found: dict[int, list[int]] = {}
    for i in range(0, len(ranges), SPANS_PER_QUERY):
        part = ranges[i : i + SPANS_PER_QUERY]
        selects = [
            span_totals(sid, low, high).add_columns(sa.literal(cp.id).label("cp"))
            for cp, sid, low, high in part
        ]
        sums = {r.cp: (int(r.n), int(r.id_sum)) for r in conn.execute(sa.union_all(*selects))}
        for cp, sid, low, high in part:
            details = cp.details or {}  # a dict: only such checkpoints have a range
            if sums.get(cp.id) == (
                details.get("summarised_messages"),
                details["summarised_id_sum"],
            ):
                continue  # exactly what it summarized
            found[cp.id] = [
                r[0]
                for r in conn.execute(
                    sa.select(M.c.id).where(span_messages(sid, low, high)).order_by(M.c.id)
                )
            ]
    return found
