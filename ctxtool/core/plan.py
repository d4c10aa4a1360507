"""Compaction planning: pure functions over a list of messages (no database, no LLM).

Should a session compact, where is the cut, what is summarized and what is kept verbatim. The
rules: keep at least ``keep_recent_tokens`` of the most recent messages; cut at a turn boundary
(a message the user typed: a request, a slash command, an "ok"; never text a runtime injected
as a user message, such as a skill's expansion or a system reminder) where possible; never between a tool call and its result, and never leave a
tool result in the kept part without its call. A turn larger than the budget is cut inside, at
an assistant message whose earlier tool calls are all answered, and its early part summarized.
``keep_recent_tokens`` is a target: when the kept part would not fit the window, the cut moves
forward to the latest-keeping safe cut that fits; when none fits, the plan says ``over_window``
and names the messages too large to fit.
Iterative: the messages given are the session's restored suffix (from the previous checkpoint's
first kept message on), so a new checkpoint covers exactly what the previous one kept and
nothing falls between two checkpoints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from .records import Message, pair_tool_calls
from .span_facts import UserText, user_text_kind

# Defined in core.windows (a command sizing windows need not load the planner), still
# importable from here.
from .windows import CONTEXT_WINDOWS as CONTEXT_WINDOWS
from .windows import DEFAULT_CONTEXT_WINDOW as DEFAULT_CONTEXT_WINDOW
from .windows import DEFAULT_KEEP_RECENT_TOKENS as DEFAULT_KEEP_RECENT_TOKENS
from .windows import DEFAULT_RESERVE_TOKENS as DEFAULT_RESERVE_TOKENS
from .windows import CompactionSettings as CompactionSettings
from .windows import context_window_for as context_window_for
from .windows import should_compact as should_compact


@dataclass(frozen=True)
class PlanMessage:
    """What the planner needs of a message: its id, role, tokens, tool-call links, and whether
    it starts a turn."""

    id: int
    role: str
    tokens: int
    call_ids: tuple[str, ...] = ()  # tool calls made by an assistant message
    tool_call_id: str | None = None  # the call a tool result answers
    # False for a user-role message the user never typed (a skill's expansion, a system
    # reminder): the turn goes on through it. None: every user message starts a turn.
    starts_turn: bool | None = None

    @property
    def turn_boundary(self) -> bool:
        """A cut here keeps whole turns."""
        return self.role == "user" and self.starts_turn is not False


def plan_message(m: Message) -> PlanMessage:
    """The planner's view of a stored message: its calls as sent (``Message.call_ids``), and
    for a user-role message whether the user typed it (``span_facts.user_text_kind``): a runtime
    that stores a skill's expansion as a user message does not end the turn there, or one long
    turn reads as many and the cut walks back to its start (a 255-line Claude Code run kept
    97k tokens of a 20k target)."""
    return PlanMessage(
        m.id,
        m.role,
        m.token_count or 0,
        m.call_ids,
        m.tool_call_id if isinstance(m.tool_call_id, str) else None,
        starts_turn=None if m.role != "user" else user_text_kind(m) is not UserText.CONTEXT,
    )


@dataclass
class CompactionPlan:
    """Where to cut: messages[:cut] are summarized, messages[cut:] are kept verbatim."""

    first_kept_message_id: int
    summarized_ids: list[int]
    kept_ids: list[int]
    summarized_tokens: int
    kept_tokens: int
    split_turn: bool = False
    notes: list[str] = field(default_factory=list)
    over_window: bool = False  # even the best safe cut keeps more than fits
    oversized_ids: list[int] = field(default_factory=list)  # the kept messages to blame
    # Summarized messages before those listed, not read (a tail plan, see plan_tail): their
    # tokens are in summarized_tokens, their ids are not in summarized_ids.
    unlisted_summarized: int = 0

    @property
    def summarized_count(self) -> int:
        return self.unlisted_summarized + len(self.summarized_ids)


def is_safe_cut(messages: Sequence[PlanMessage], cut: int) -> bool:
    """True when keeping messages[cut:] leaves no tool result without its call and no call
    without its result across the cut."""
    if cut <= 0 or cut >= len(messages) + 1:
        return False
    return safe_cuts(messages)[cut]


def safe_cuts(messages: Sequence[PlanMessage]) -> list[bool]:
    """``safe[c]`` for every cut 0..len: one pass, so planning stays linear on long sessions.

    A cut c is unsafe when messages[c] is a tool result, or when a call made before c is
    answered at or after c (the interval (call, result] is closed to cuts). Calls and results
    pair as everywhere (:func:`~ctxtool.core.records.pair_tool_calls`): a reused id pairs with the
    latest earlier call, so an old call never closes every cut up to a new turn's result; a
    call stored without an id pairs with a result stored with ``tool_call_id=""``."""
    n = len(messages)
    blocked = [0] * (n + 2)
    for (start, _), result in pair_tool_calls(messages).answers.items():
        blocked[start + 1] += 1
        blocked[result + 1] -= 1
    safe = [False] * (n + 1)
    open_intervals = 0
    for c in range(n + 1):
        open_intervals += blocked[c]
        safe[c] = c > 0 and open_intervals == 0 and (c == n or messages[c].role != "tool")
    return safe


def plan_compaction(
    messages: Sequence[PlanMessage], keep_recent_tokens: int, max_kept_tokens: int | None = None
) -> CompactionPlan | None:
    """Choose the cut over a session's restored suffix; None when nothing can be summarized.

    The budget is met by walking back from the newest message; the cut then moves back (keeping
    more) to the nearest safe turn boundary. When no such boundary leaves anything to summarize,
    the turn is split at the nearest safe assistant message instead. With ``max_kept_tokens``
    (what fits the window once the system prompt and the summary are in), a plan keeping more
    moves its cut forward until it fits, or is marked ``over_window``.
    """
    if len(messages) < 2:
        return None
    safe = safe_cuts(messages)
    plan = _plan_for_budget(messages, safe, keep_recent_tokens)
    if max_kept_tokens is None or (plan is not None and plan.kept_tokens <= max_kept_tokens):
        return plan
    return _fit_window(messages, safe, plan, max_kept_tokens, keep_recent_tokens)


def _plan_for_budget(
    messages: Sequence[PlanMessage], safe: list[bool], keep_recent_tokens: int
) -> CompactionPlan | None:
    # The first index from which the kept tail holds at least the budget.
    kept = 0
    budget_at = 0
    for i in range(len(messages) - 1, -1, -1):
        kept += messages[i].tokens
        if kept >= keep_recent_tokens:
            budget_at = i
            break
    if budget_at <= 0:
        return None  # everything fits in the budget: nothing worth summarizing
    # Prefer a turn boundary at or before budget_at (keeps >= budget), never index 0.
    for c in range(budget_at, 0, -1):
        if messages[c].turn_boundary and safe[c]:
            return _plan(messages, c, split=False)
    # One turn larger than the budget: cut inside it, at an assistant message (or at text
    # the runtime injected into the turn).
    for c in range(budget_at, 0, -1):
        if messages[c].role in ("user", "assistant") and safe[c]:
            return _plan(messages, c, split=True)
    # Nothing safe at or before the budget point: accept keeping less than the budget.
    for c in range(budget_at + 1, len(messages)):
        if messages[c].role in ("user", "assistant") and safe[c]:
            plan = _plan(messages, c, split=not messages[c].turn_boundary)
            plan.notes.append("kept less than keep_recent_tokens: no safe cut before it")
            return plan
    return None


class NeedsEarlier:
    """What :func:`plan_tail` answers when the tail cannot settle the cut alone: read further
    back (or the whole suffix)."""

    def __repr__(self) -> str:
        return "NEEDS_EARLIER"


NEEDS_EARLIER = NeedsEarlier()


def plan_tail(
    tail: Sequence[PlanMessage],
    keep_recent_tokens: int,
    max_kept_tokens: int | None = None,
    *,
    whole: bool,
) -> CompactionPlan | None | NeedsEarlier:
    """The plan :func:`plan_compaction` makes over the whole suffix, from its last messages
    alone when they settle it, else ``NEEDS_EARLIER``. A dry run of a 600k-message session
    reads a few hundred messages instead of every row.

    ``tail`` is the suffix from some message on (``whole``: from its first). The plan lists
    the tail's messages only; :func:`with_earlier` adds the summarized messages before it. The
    tail settles the cut when the budget is reached inside it and a safe turn boundary lies at
    or before that point, after every result whose call is not in the tail (such a result may
    answer a call made earlier, which closes every cut up to it; within the tail, pairs are the
    same as over the whole suffix, since a result pairs with the latest earlier call of its
    id). Every cut the planner looks at from there on is then judged as over the whole."""
    if whole:
        return plan_compaction(tail, keep_recent_tokens, max_kept_tokens)
    kept = 0
    budget_at = -1
    for i in range(len(tail) - 1, -1, -1):
        kept += tail[i].tokens
        if kept >= keep_recent_tokens:
            budget_at = i
            break
    if budget_at <= 0:
        return NEEDS_EARLIER
    pairing = pair_tool_calls(tail)
    unpaired = max(pairing.orphans + pairing.duplicates, default=0)
    safe = safe_cuts(tail)
    cut = next(
        (c for c in range(budget_at, unpaired, -1) if tail[c].turn_boundary and safe[c]), None
    )
    if cut is None:
        return NEEDS_EARLIER
    plan = _plan(tail, cut, split=False)
    if max_kept_tokens is None or plan.kept_tokens <= max_kept_tokens:
        return plan
    fitted = _fit_window(tail, safe, plan, max_kept_tokens, keep_recent_tokens)
    assert fitted is not None  # it falls back on the plan it was given
    return fitted


def with_earlier(plan: CompactionPlan, count: int, tokens: int) -> CompactionPlan:
    """A tail's plan with the ``count`` summarized messages before the tail (``tokens`` as
    the planner counts them) in its totals: what the whole suffix's plan says."""
    return replace(
        plan,
        unlisted_summarized=plan.unlisted_summarized + count,
        summarized_tokens=plan.summarized_tokens + tokens,
    )


def _fit_window(
    messages: Sequence[PlanMessage],
    safe: list[bool],
    plan: CompactionPlan | None,
    max_kept_tokens: int,
    keep_recent_tokens: int,
) -> CompactionPlan | None:
    """The safe cut keeping the most that still fits; else the one keeping the least, marked."""
    start = (
        1
        if plan is None
        else next(i for i, m in enumerate(messages) if m.id == plan.first_kept_message_id) + 1
    )
    kept_from = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        kept_from[i] = kept_from[i + 1] + messages[i].tokens
    cuts = [
        c
        for c in range(start, len(messages))
        if safe[c] and messages[c].role in ("user", "assistant")
    ]
    for c in cuts:
        if kept_from[c] <= max_kept_tokens:
            fitted = _plan(messages, c, split=not messages[c].turn_boundary)
            # Under the window as it is, the context was cut only because it was asked to be
            # (--force): keep_recent_tokens spanned it all, so the earliest safe cut it is.
            fitted.notes.append(
                f"kept {fitted.kept_tokens} tokens, less than keep_recent_tokens, "
                "so the context fits its window"
                if kept_from[0] > max_kept_tokens
                else f"kept {fitted.kept_tokens} tokens: keep_recent_tokens ({keep_recent_tokens}) "
                f"would keep every message ({kept_from[0]} tokens, within the window), so only "
                "what comes before the earliest safe cut is summarized (--force)"
            )
            return fitted
    best = _plan(messages, cuts[-1], split=not messages[cuts[-1]].turn_boundary) if cuts else plan
    if best is None:
        return None
    kept = messages[len(messages) - len(best.kept_ids) :]
    too_big = [m.id for m in kept if m.tokens > max_kept_tokens]
    best.over_window = True
    best.oversized_ids = too_big or [max(kept, key=lambda m: m.tokens).id]
    best.notes.append(
        f"no safe cut keeps under {max_kept_tokens} tokens: the kept part holds {best.kept_tokens}"
        if max_kept_tokens > 0
        else "no room is left for messages under the threshold: the kept part holds "
        f"{best.kept_tokens}"
    )
    return best


def _plan(messages: Sequence[PlanMessage], cut: int, split: bool) -> CompactionPlan:
    return CompactionPlan(
        first_kept_message_id=messages[cut].id,
        summarized_ids=[m.id for m in messages[:cut]],
        kept_ids=[m.id for m in messages[cut:]],
        summarized_tokens=sum(m.tokens for m in messages[:cut]),
        kept_tokens=sum(m.tokens for m in messages[cut:]),
        split_turn=split,
    )
