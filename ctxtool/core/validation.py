"""Checkpoint consistency rules, as pure functions over plain records.

What must hold for every session, whoever wrote its checkpoints (ctxtool, an agent runtime, an
import): each checkpoint points at a message of its own session that can start a context; the
checkpoints form one chain; cuts never move backwards; the restored context is a valid
OpenAI-style list (every tool result answers a call it contains).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .evaluator.gate import quality_warning
from .inspection import ContextPoint
from .plan import CompactionSettings
from .records import CHAT_ROLES, KEPT_AFTER_MESSAGE, Compaction, Message, pair_tool_calls

# An error is what the store got wrong (exit 1); a warning is a state to act on (a session
# waiting for compaction); a note is a state an operator acknowledged.
ERROR, WARNING, NOTE = "error", "warning", "note"


@dataclass(frozen=True)
class Issue:
    session_id: int
    severity: str
    rule: str
    message: str
    compaction_id: int | None = None
    message_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "severity": self.severity,
            "rule": self.rule,
            "compaction_id": self.compaction_id,
            "message_id": self.message_id,
            "message": self.message,
        }


@dataclass(frozen=True)
class MessageRef:
    """What the rules need of a message a checkpoint points at."""

    id: int
    session_id: int
    role: str


def kept_nothing(cp: Compaction) -> bool:
    """Whether the checkpoint kept nothing when it was written: its cut is the id after the
    session's last message then (records.KEPT_AFTER_MESSAGE), which no message of it need hold."""
    details = cp.details if isinstance(cp.details, dict) else {}  # a runtime may write any text
    after = details.get(KEPT_AFTER_MESSAGE)
    return isinstance(after, int) and after + 1 == cp.first_kept_message_id


def validate_session(
    session_id: int,
    compactions: Sequence[Compaction],
    referenced: Mapping[int, MessageRef],
    suffix: Sequence[Message],
) -> list[Issue]:
    """Every rule, for one session.

    ``compactions`` in id order; ``referenced`` holds the messages their first_kept ids point at;
    ``suffix`` is the restored suffix (messages from the latest checkpoint's cut on).
    """
    issues: list[Issue] = []
    add = issues.append
    previous: Compaction | None = None
    for cp in compactions:
        ref = referenced.get(cp.first_kept_message_id)
        if kept_nothing(cp) and (ref is None or ref.session_id != session_id):
            pass  # nothing kept yet: the cut is after the last message, no message holds its id
        elif ref is None:
            add(
                Issue(
                    session_id,
                    ERROR,
                    "first_kept_missing",
                    f"checkpoint {cp.id} keeps from message {cp.first_kept_message_id}, which does "
                    "not exist",
                    cp.id,
                    cp.first_kept_message_id,
                )
            )
        elif ref.session_id != session_id:
            add(
                Issue(
                    session_id,
                    ERROR,
                    "first_kept_other_session",
                    f"checkpoint {cp.id} keeps from message {ref.id} of session {ref.session_id}",
                    cp.id,
                    ref.id,
                )
            )
        elif ref.role == "tool":
            add(
                Issue(
                    session_id,
                    ERROR,
                    "cut_orphans_tool_result",
                    f"checkpoint {cp.id} keeps from a tool result: its call was summarized",
                    cp.id,
                    ref.id,
                )
            )
        expected_parent = previous.id if previous else 0
        # A runtime that knows only the seed columns records no parent (NULL): its checkpoint
        # follows the one before it by id, as the restore rule reads them.
        if cp.parent_compaction_id is not None and cp.parent_compaction_id != expected_parent:
            add(
                Issue(
                    session_id,
                    ERROR,
                    "chain_broken",
                    f"checkpoint {cp.id} has parent {cp.parent_compaction_id}, expected "
                    f"{expected_parent} (the previous checkpoint)",
                    cp.id,
                )
            )
        if previous and cp.first_kept_message_id < previous.first_kept_message_id:
            add(
                Issue(
                    session_id,
                    WARNING,
                    "cut_moved_back",
                    f"checkpoint {cp.id} keeps from {cp.first_kept_message_id}, before the previous "
                    f"checkpoint's cut {previous.first_kept_message_id}",
                    cp.id,
                )
            )
        if not (cp.summary or "").strip():
            add(
                Issue(
                    session_id,
                    ERROR,
                    "empty_summary",
                    f"checkpoint {cp.id} has an empty summary",
                    cp.id,
                )
            )
        low = quality_warning(cp.details)
        if low:
            add(Issue(session_id, WARNING, "low_quality", f"checkpoint {cp.id}: {low}", cp.id))
        if (
            cp.tokens_before is not None
            and cp.tokens_after is not None
            and cp.tokens_after >= cp.tokens_before
        ):
            add(
                Issue(
                    session_id,
                    WARNING,
                    "not_smaller",
                    f"checkpoint {cp.id} did not shrink the context ({cp.tokens_before} -> "
                    f"{cp.tokens_after} tokens)",
                    cp.id,
                )
            )
        previous = cp
    issues.extend(validate_restored_messages(session_id, suffix))
    issues.extend(id_order_issues(session_id, suffix))
    return issues


# How far a message's created_at may lie before an earlier id's before it counts: each server
# stamps created_at from its own clock at INSERT, and the nodes of a cluster (or a runtime
# writing its own times) differ by about this much.
ID_ORDER_TOLERANCE = timedelta(seconds=1)


def id_order_issues(
    session_id: int, messages: Sequence[Message], tolerance: timedelta = ID_ORDER_TOLERANCE
) -> list[Issue]:
    """The restored suffix is read in id order: a message created more than ``tolerance``
    before one with a lower id got its id out of write order (TiDB hands out ids from
    per-server caches unless AUTO_ID_CACHE=1), and the context restores it out of place. One
    warning per session, naming the first such message and how many there are."""
    latest: Message | None = None
    late: list[tuple[Message, Message]] = []
    for m in messages:
        if m.created_at is None:
            continue
        if latest is not None and latest.created_at is not None:
            if m.created_at < latest.created_at - tolerance:
                late.append((m, latest))
            if m.created_at <= latest.created_at:
                continue
        latest = m
    if not late:
        return []
    m, before = late[0]
    return [
        Issue(
            session_id,
            WARNING,
            "id_order",
            f"message {m.id} was created at {m.created_at:%Y-%m-%d %H:%M:%S}, before message "
            f"{before.id} ({before.created_at:%H:%M:%S}) which has a lower id: the restored "
            f"context, in id order, puts it after ({len(late)} such message(s), tolerance "
            f"{tolerance.total_seconds():g} s; on TiDB, see `migrate status`)",
            message_id=m.id,
        )
    ]


def kept_sums_issues(
    session_id: int, through: int, kept_messages: int, suffix: Sequence[Message]
) -> list[Issue]:
    """The sums a `compact --all` kept for the session's current cut (store.context_sums)
    count ``kept_messages`` messages through id ``through``; the restored suffix has more
    there: a message committed below the row after a run read it (ids out of commit order: a
    runtime's inserts with neither the session-row statement nor the triggers). The batch and
    the listings read the context short by it until the session's next message."""
    there = [m for m in suffix if m.id is not None and m.id <= through]
    if len(there) <= kept_messages:
        return []
    return [
        Issue(
            session_id,
            WARNING,
            "kept_sums_short",
            f"the sums `compact --all` kept count {kept_messages} message(s) through message "
            f"{through}, the session has {len(there)} there: a message was committed below "
            "one committed before it (ids out of commit order; docs/distributed.md, the "
            "runtime's contract); `compact --all --rescan` sums it again",
        )
    ]


def span_issues(session_id: int, checkpoint: Compaction, range_ids: Sequence[int]) -> list[Issue]:
    """A message stored inside the range a checkpoint summarized that the checkpoint did not
    summarize (committed late by a writer whose id was below the cut): it is in neither the
    summary nor the restored context. ``range_ids``: the ids in that range now."""
    gone, gone_id = deleted_from_span(checkpoint, range_ids)
    if gone:
        which = f"message {gone_id} is" if gone_id is not None else f"{gone} of them are"
        return [
            Issue(
                session_id,
                ERROR,
                "summarised_message_deleted",
                f"checkpoint {checkpoint.id} summarized "
                f"{(checkpoint.details or {})['summarised_messages']} message(s) before "
                f"{checkpoint.first_kept_message_id}, and {which} no longer stored: history "
                "was deleted (agent_message keeps every message)",
                checkpoint.id,
                gone_id,
            )
        ]
    missing = unsummarized_messages(checkpoint, range_ids)
    if not missing:
        return []
    shown = ", ".join(str(i) for i in missing[:5]) + (" ..." if len(missing) > 5 else "")
    return [
        Issue(
            session_id,
            ERROR,
            "message_outside_summary",
            f"checkpoint {checkpoint.id} summarized the messages before "
            f"{checkpoint.first_kept_message_id}, but message(s) {shown} in that range were "
            "not summarized: they are in neither its summary nor the restored context",
            checkpoint.id,
            missing[0],
        )
    ]


@dataclass(frozen=True)
class Threshold:
    """The threshold a restored context is checked against, and where it comes from."""

    tokens: int
    source: str


# The summarizers whose checkpoints record the threshold they were cut for
# (compaction.summarizers.KINDS less auto).
_CTXTOOL_SUMMARIZERS = ("openai", "extractive")


def checked_threshold(
    model: str | None, settings: CompactionSettings, latest: Compaction | None, given: bool
) -> Threshold:
    """What `compact` used, unless the caller ``given`` a window or reserve: the threshold the
    latest checkpoint was cut for (recorded in its details), else the model's window less the
    reserve. A store compacted with ``--context-window 32000`` is checked against that window,
    not the model's 200k one."""
    recorded = _details(latest).get("threshold")
    if (
        not given
        and latest is not None
        # A runtime's checkpoint may carry a "threshold" of its own meaning (or 0): not ours.
        and latest.summarizer in _CTXTOOL_SUMMARIZERS
        and isinstance(recorded, int)
        and not isinstance(recorded, bool)
        and recorded > 0
    ):
        return Threshold(recorded, f"the one checkpoint {latest.id} was cut for")
    threshold = settings.threshold(model)
    return Threshold(threshold, f"window {threshold + settings.reserve(model)}")


def _details(checkpoint: Compaction | None) -> dict[str, Any]:
    """A checkpoint's details when they are an object (a runtime may have written anything)."""
    details = checkpoint.details if checkpoint is not None else None
    return details if isinstance(details, dict) else {}


def window_issue(
    session_id: int,
    context_tokens: int,
    threshold: Threshold,
    latest: Compaction | None = None,
    acknowledged: datetime | None = None,
) -> list[Issue]:
    """A restored context over its threshold (``context_tokens``: its exact size). No
    inconsistency of the store: a warning while it waits for compaction (or when no safe cut
    fits it, with the way out), a note once an operator acknowledged it."""
    if context_tokens <= threshold.tokens:
        return []
    problem = (
        f"restored context of {context_tokens} tokens is over its threshold of "
        f"{threshold.tokens} tokens ({threshold.source})"
    )
    mark = f"`ctxtool sessions mark {session_id} --over-window-ok`"
    if acknowledged is not None:
        return [
            Issue(
                session_id,
                NOTE,
                "over_window",
                f"{problem}; acknowledged {acknowledged:%Y-%m-%d %H:%M} ({mark})",
            )
        ]
    stuck = "over_window" in _details(latest)
    way_out = (
        f"no safe cut fits it: once looked at, {mark}"
        if stuck
        else f"waiting for compaction (`ctxtool compact {session_id}`)"
    )
    return [Issue(session_id, WARNING, "over_window", f"{problem}; {way_out}")]


def malformed_tool_calls(tool_calls: object) -> str | None:
    """What is wrong with a message's ``tool_calls`` column, or None when it is absent or a list
    of OpenAI-style calls (an object with a string ``id`` and a ``function`` object with a string
    ``name``). A runtime writes this JSON column directly, so anything can be in it: this says
    what is wrong, where ``tokens.api_calls`` (what every reader uses) quietly leaves it out."""
    if tool_calls is None or tool_calls == []:
        return None
    if not isinstance(tool_calls, list):
        return f"that are not a list ({type(tool_calls).__name__})"
    for i, call in enumerate(tool_calls):
        if not isinstance(call, dict):
            return f"whose entry {i} is not an object ({_kind(call)})"
        if not isinstance(call.get("id"), str) or not call["id"]:
            return f"whose entry {i} has no string id"
        function = call.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return f"whose entry {i} has no function name"
    return None


def _repeated_ids(tool_calls: list[dict[str, Any]]) -> list[str]:
    """The call ids that appear more than once in one message's (well-formed) calls."""
    return [call_id for call_id, n in Counter(c["id"] for c in tool_calls).items() if n > 1]


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def validate_restored_messages(session_id: int, messages: Sequence[Message]) -> list[Issue]:
    """The restored suffix must pair every tool result with a call it contains; a call without
    a result is only acceptable as the very last message (the agent is waiting on it)."""
    issues: list[Issue] = []
    for m in messages:
        problem = malformed_tool_calls(m.tool_calls)
        if problem:
            issues.append(
                Issue(
                    session_id,
                    ERROR,
                    "malformed_tool_calls",
                    f"message {m.id} has tool_calls {problem}: an API rejects it "
                    "(ctxtool leaves out only its entries that are not objects)",
                    message_id=m.id,
                )
            )
        elif m.role == "assistant" and m.tool_calls:
            repeated = _repeated_ids(m.tool_calls)
            if repeated:
                issues.append(
                    Issue(
                        session_id,
                        ERROR,
                        "duplicate_tool_call_id",
                        f"message {m.id} makes more than one tool call with id "
                        f"{', '.join(map(repr, repeated))}: one result would answer "
                        "them all, and an API rejects it",
                        message_id=m.id,
                    )
                )
        if m.role not in CHAT_ROLES:
            issues.append(
                Issue(
                    session_id,
                    WARNING,
                    "unknown_role",
                    f"message {m.id} has role {m.role!r}, which is not a chat role "
                    f"({', '.join(sorted(CHAT_ROLES))}): it is sent as a user "
                    "message saying so",
                    message_id=m.id,
                )
            )
    pairing = pair_tool_calls(messages)
    for m in (messages[i] for i in pairing.duplicates):
        issues.append(
            Issue(
                session_id,
                WARNING,
                "duplicate_tool_result",
                f"tool result {m.id} answers {_call(m.tool_call_id)}, which an "
                "earlier result answered: it is sent as a user message",
                message_id=m.id,
            )
        )
    for m in (messages[i] for i in pairing.orphans):
        issues.append(
            Issue(
                session_id,
                ERROR,
                "orphan_tool_result",
                f"tool result {m.id} answers {_call(m.tool_call_id)}, which is not "
                "in the restored context",
                message_id=m.id,
            )
        )
    issues.sort(
        key=lambda i: i.message_id or 0
    )  # in message order (stable: a message's own as above)
    last_id = messages[-1].id if messages else None
    for index, call_id in pairing.unanswered:
        message_id = messages[index].id
        if message_id != last_id:
            issues.append(
                Issue(
                    session_id,
                    WARNING,
                    "unanswered_tool_call",
                    f"tool call {call_id!r} of message {message_id} has no result",
                    message_id=message_id,
                )
            )
    return issues


def past_context_issues(
    session_id: int,
    compactions: Sequence[Compaction],
    messages: Sequence[Message],
    reported: AbstractSet[int] = frozenset(),
) -> list[Issue]:
    """Every checkpoint that is no longer the latest restored, while it was, a context that
    must pair each tool result with a call it contains: its summary and the messages from its
    cut that existed until the next checkpoint replaced it (``ContextPoint``, as `context
    show --at` shows it). ``compactions`` in id order; ``messages``: the session's messages
    from the earliest of those cuts on, in id order. A result is reported once, for the latest
    context it is orphaned in: ``reported`` holds those already named (in the restored
    context, or as the first kept message of a checkpoint)."""
    issues: list[Issue] = []
    named = set(reported)
    for cp, nxt in reversed(list(zip(compactions, compactions[1:]))):
        point = ContextPoint(cp, nxt)
        held = [m for m in messages if point.holds(m)]
        for m in orphan_results(held):
            if m.id in named or m.id == cp.first_kept_message_id:
                continue
            named.add(m.id)
            issues.append(
                Issue(
                    session_id,
                    ERROR,
                    "orphan_tool_result",
                    f"tool result {m.id} answers {_call(m.tool_call_id)}, which is not "
                    f"in the context checkpoint {cp.id} restored to (until checkpoint "
                    f"{nxt.id} replaced it): its call was summarized or never stored",
                    cp.id,
                    m.id,
                )
            )
    return issues


def orphan_results(messages: Sequence[Message]) -> list[Message]:
    """The tool results of a context (messages in id order) whose call is not before them in it."""
    return [messages[i] for i in pair_tool_calls(messages).orphans]


def _call(call_id: str | None) -> str:
    return "a call with no recorded id" if call_id is None else f"call {call_id!r}"


def missing_session_issues(session_id: int, compaction_ids: Sequence[int]) -> list[Issue]:
    """Checkpoints of a session that has no agent_session row: no restored context can be
    built for them (no system prompt, no model), and a check by session never reaches them."""
    shown = ", ".join(str(i) for i in compaction_ids[:5]) + (
        " ..." if len(compaction_ids) > 5 else ""
    )
    return [
        Issue(
            session_id,
            ERROR,
            "session_missing",
            f"session {session_id} has {len(compaction_ids)} checkpoint(s) ({shown}) but no "
            f"agent_session row: restore the row, or remove them with `ctxtool sessions "
            f"delete {session_id} --yes`",
            compaction_ids[0],
        )
    ]


# What a checkpoint records of itself in ``details`` (how many messages it summarized and the
# sum of their ids: ``summarised_messages``, ``summarised_id_sum``), written by the append that
# proved the span in the same transaction, checked against what the store holds now.


def _recorded_span(checkpoint: Compaction) -> tuple[dict[str, Any], int, int] | None:
    """(details, count, id sum) of the span a checkpoint recorded summarizing; None when it
    recorded none (imported, or written before ctxtool recorded spans)."""
    details = checkpoint.details if isinstance(checkpoint.details, dict) else {}
    count, id_sum = details.get("summarised_messages"), details.get("summarised_id_sum")
    if not isinstance(count, int) or not isinstance(id_sum, int):
        return None
    return details, count, id_sum


def unsummarized_messages(checkpoint: Compaction, range_ids: Sequence[int]) -> list[int] | None:
    """Messages inside a checkpoint's summarized range that it did not summarize.

    ``range_ids``: the ids stored now in ``[previous cut, checkpoint.first_kept_message_id)``
    of its session. Returns [] when they are exactly what the checkpoint summarized; the late
    message's id when one arrived (the id sums tell which); with several, the ids outside the
    first..last summarized ids recorded when they account for the difference, else every id
    of the range (they cannot be told apart). None when the checkpoint recorded no span
    (imported, or written before ctxtool recorded spans): nothing to check.
    """
    span = _recorded_span(checkpoint)
    if span is None:
        return None
    details, count, id_sum = span
    ids = list(range_ids)
    if len(ids) == count and sum(ids) == id_sum:
        return []
    if len(ids) < count:
        return None  # fewer than it summarized: deleted history (deleted_from_span), not this
    if len(ids) == count + 1 and sum(ids) - id_sum in ids:
        return [sum(ids) - id_sum]
    first = details.get("summarised_from_message_id")
    last = details.get("summarised_to_message_id")
    if isinstance(first, int) and isinstance(last, int):
        outside = [i for i in ids if not first <= i <= last]
        if len(ids) - len(outside) == count and sum(ids) - sum(outside) == id_sum:
            return outside
    return ids


def deleted_from_span(checkpoint: Compaction, range_ids: Sequence[int]) -> tuple[int, int | None]:
    """How many of the messages a checkpoint summarized are no longer stored (history deleted,
    which nothing may do), and the id when it is one; (0, None) when none are, or when the
    checkpoint recorded no span. ``range_ids`` as for :func:`unsummarized_messages`."""
    span = _recorded_span(checkpoint)
    if span is None:
        return 0, None
    _, count, id_sum = span
    ids = list(range_ids)
    if len(ids) >= count:
        return 0, None
    gone = count - len(ids)
    return gone, (id_sum - sum(ids) if gone == 1 else None)
