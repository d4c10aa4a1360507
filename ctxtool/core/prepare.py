"""Preparing a compaction and judging its summary: pure functions (Pi's ``prepareCompaction``
shape). The runner reads the session, calls :func:`prepare`, asks the summarizer, calls
:func:`check_summary`, and writes what :func:`checkpoint_values` returns. Nothing here knows
the store or a summarizer: the summarizer's request and answer are the runner's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .context_size import restored_context_tokens, stored_summary_count, with_head_count
from .evaluator import DEFAULT_MIN_QUALITY, Evaluation, carry_over, evaluate, meets_floor
from .evaluator.gate import overtaken_items
from .plan import (
    CompactionPlan,
    CompactionSettings,
    NeedsEarlier,
    plan_compaction,
    plan_message,
    plan_tail,
)
from .records import (
    SUMMARY_PREFIX,
    AnsweredMessages,
    Compaction,
    Message,
    RestoredContext,
    SummarizedSpan,
)
from .span_facts import work_calls
from .status import CompactionStatus
from .tokens import REPLY_PRIMING_TOKENS, MessageText, count_messages, count_text
from .touched_files import files_touched, merge_file_lists

MIN_SUMMARY_BUDGET = 256
# The least share of the previous summary's items a new summary must hold (--min-carry-over):
# a re-compaction must not drop what the last summary knew.
DEFAULT_MIN_CARRY_OVER = 0.9


@dataclass
class Preparation:
    """Everything decided before the summarizer runs. ``status`` set: stop there."""

    session_id: int
    tokens_before: int
    threshold: int
    encoding: str
    status: CompactionStatus | None = None
    plan: CompactionPlan | None = None
    previous: Compaction | None = None
    summarized: list[Message] = field(default_factory=list)
    kept: list[Message] = field(default_factory=list)
    replaced_tokens: int = 0
    summary_budget: int = 0
    # The budget before it grew for a carried summary (--max-summary-tokens, a quarter of
    # the threshold at most): half of it is the span's own room in a grown budget.
    base_budget: int = 0
    error: str | None = None
    _files: dict[str, Any] | None = field(default=None, repr=False)
    _overtaken: frozenset[str] | None = field(default=None, repr=False)
    # Counted once a compaction: the previous summary's tokens, and the system prompt's (the
    # prompt counted with them): planning asks for each up to four times.
    _previous_tokens: int | None = field(default=None, repr=False, compare=False)
    _system_tokens: tuple[str, int] | None = field(default=None, repr=False, compare=False)

    @property
    def files(self) -> dict[str, Any]:
        """The files the summarized messages read and modified, the previous checkpoint's lists
        merged in. Worked out when first asked (the summarizer's request, the checkpoint's
        details), so a dry run, which shows neither, does not read every tool call of the
        span (a fifteenth of planning a 600k-message session)."""
        if self._files is None:
            read, modified = files_touched([c for m in self.summarized for c in work_calls(m)])
            self._files = merge_file_lists(
                self.previous.details if self.previous else None, read, modified
            )
        return self._files

    @property
    def overtaken(self) -> frozenset[str]:
        """The previous summary's pending items the summarized span finished: the carry-over
        floor does not count them (``evaluator.gate.overtaken_items``)."""
        if self._overtaken is None:
            self._overtaken = overtaken_items(self.previous_summary, self.summarized)
        return self._overtaken

    @property
    def previous_tokens(self) -> int:
        """Tokens of the previous summary's text (0 without one): the count its checkpoint
        keeps for this encoding when it keeps one, else counted now."""
        if self._previous_tokens is None:
            prev, stored = self.previous, None
            if prev is not None and prev.summary:
                stored = stored_summary_count(prev.details, self.encoding, prev.summary)
            if stored is None:
                stored = count_text(prev.summary if prev and prev.summary else "", self.encoding)
            self._previous_tokens = stored
        return self._previous_tokens

    def system_tokens(self, system_prompt: str) -> int:
        """Tokens of ``system_prompt``'s text, counted once for the prompt last asked about."""
        known = self._system_tokens
        if known is None or known[0] != system_prompt:
            known = self._system_tokens = (system_prompt, count_text(system_prompt, self.encoding))
        return known[1]

    @property
    def parent_id(self) -> int:
        return self.previous.id if self.previous else 0

    @property
    def previous_summary(self) -> str | None:
        return self.previous.summary if self.previous else None

    @property
    def summarized_tokens(self) -> int:
        return self.plan.summarized_tokens if self.plan else 0

    @property
    def tokens_kept(self) -> int | None:
        return self.tokens_before - self.replaced_tokens if self.plan else None

    def span(self) -> SummarizedSpan:
        assert self.plan is not None
        assert not self.plan.unlisted_summarized, "a tail plan (dry run) names no span"
        ids = self.plan.summarized_ids
        return SummarizedSpan(
            self.session_id,
            self.previous.first_kept_message_id if self.previous else None,
            self.plan.first_kept_message_id,
            len(ids),
            sum(ids),
        )


def summary_budget(threshold: int, max_summary_tokens: int) -> int:
    """The summary's size budget: ``--max-summary-tokens``, but never more than a quarter of
    the threshold (nor less than MIN_SUMMARY_BUDGET for that reason), so summary and kept
    messages fit the window together."""
    return min(max_summary_tokens, max(MIN_SUMMARY_BUDGET, threshold // 4))


def grown_budget(budget: int, previous_tokens: int, growth: float) -> int:
    """The budget of a summary that carries an earlier one of ``previous_tokens``: a carried
    summary larger than half the budget gets room for itself and a whole budget of the span's
    own, so carried items are folded by value rather than cut for lack of room; never more
    than ``growth`` (``CompactionSettings.max_summary_growth``) times the budget. The cut is
    planned with the grown budget, so the kept messages leave it room."""
    if previous_tokens <= budget // 2:
        return budget
    return max(budget, min(previous_tokens + budget, int(budget * growth)))


def fitting_budget(budget: int, base: int, room: int) -> int:
    """A grown ``budget`` cut to ``room``, what the threshold leaves the summary's text beside
    the system prompt, the summary's framing and the smallest safe kept suffix: growth that
    would put the restored context over its threshold falls back as far as it must, never
    below the budget before growth (``base``). A budget that did not grow stays as it is, and
    so does one where no summary fits (``room`` <= 0: the context stays over its window
    whatever the summary's size, and the grown budget still keeps the carried items)."""
    if budget <= base or room <= 0:
        return budget
    return max(base, min(budget, room))


def summary_message_tokens(summary: str, encoding: str) -> int:
    """Tokens of a summary as the restored context carries it (a user message with a preface)."""
    return count_messages([MessageText("user", SUMMARY_PREFIX + summary)], encoding)[0]


def prepare(
    ctx: RestoredContext,
    model: str | None,
    settings: CompactionSettings,
    encoding: str,
    *,
    max_summary_tokens: int,
    force: bool = False,
) -> Preparation:
    """Measure the restored context, decide whether to compact, choose the cut (one that fits
    the window), and gather what the summarizer needs."""
    answered = AnsweredMessages(ctx.messages)
    prep = start_preparation(
        ctx.session_id,
        restored_context_tokens(ctx, encoding, answered.entries),
        ctx.compaction,
        model,
        settings,
        encoding,
        max_summary_tokens=max_summary_tokens,
        force=force,
    )
    if prep.status is not None:
        return prep
    messages = [plan_message(m) for m in ctx.messages]
    plan = plan_compaction(
        messages,
        settings.keep_recent_tokens,
        max_kept_tokens=_kept_room(prep, ctx.system_prompt)[1],
    )
    if _fit_growth(prep, ctx.system_prompt, plan):
        plan = plan_compaction(
            messages,
            settings.keep_recent_tokens,
            max_kept_tokens=_kept_room(prep, ctx.system_prompt)[1],
        )
    settle_plan(prep, plan, ctx.system_prompt, ctx.messages, answered)
    if prep.plan is not None:
        prep.summarized = [m for m in ctx.messages if m.id < prep.plan.first_kept_message_id]
    return prep


def start_preparation(
    session_id: int,
    tokens_before: int,
    previous: Compaction | None,
    model: str | None,
    settings: CompactionSettings,
    encoding: str,
    *,
    max_summary_tokens: int,
    force: bool = False,
) -> Preparation:
    """A preparation for a context of ``tokens_before`` (measured by the caller): its status
    BELOW_THRESHOLD unless it is over its threshold or ``force``; else to be planned."""
    threshold = settings.threshold(model)
    budget = summary_budget(threshold, max_summary_tokens)
    prep = Preparation(
        session_id,
        tokens_before,
        threshold,
        encoding,
        previous=previous,
        summary_budget=budget,
        base_budget=budget,
    )
    if previous is not None and previous.summary:
        prep.summary_budget = grown_budget(
            budget, prep.previous_tokens, settings.max_summary_growth
        )
    if not force and tokens_before <= threshold:
        prep.status = CompactionStatus.BELOW_THRESHOLD
    return prep


def _kept_room(prep: Preparation, system_prompt: str | None) -> tuple[int, int]:
    """(the system prompt's tokens, what is left for kept messages once the system prompt,
    the summary's budget and the framing are in)."""
    encoding = prep.encoding
    head = prep.system_tokens(system_prompt) + 8 if system_prompt else 0
    fixed = head + prep.summary_budget + _summary_framing(encoding)
    return head, prep.threshold - fixed


def _fit_growth(
    prep: Preparation, system_prompt: str | None, plan: CompactionPlan | None | NeedsEarlier
) -> bool:
    """Cut a grown budget that leaves no safe cut room (``plan`` over its window, keeping the
    smallest safe suffix) to what fits beside that suffix; True when it was cut, so the caller
    plans again with it."""
    if not isinstance(plan, CompactionPlan) or not plan.over_window:
        return False
    head, _ = _kept_room(prep, system_prompt)
    room = prep.threshold - head - _summary_framing(prep.encoding) - plan.kept_tokens
    budget = fitting_budget(prep.summary_budget, prep.base_budget, room)
    cut = budget < prep.summary_budget
    prep.summary_budget = budget
    return cut


def _summary_framing(encoding: str) -> int:
    """The tokens the summary message takes beside the summary: its preface, the message's
    overhead (8 at most) and the reply priming. The same for every compaction: counted once
    an encoding (planning asked for it up to four times a compaction)."""
    framing = _FRAMING.get(encoding)
    if framing is None:
        framing = _FRAMING[encoding] = (
            count_text(SUMMARY_PREFIX, encoding) + 8 + REPLY_PRIMING_TOKENS
        )
    return framing


_FRAMING: dict[str, int] = {}


def plan_of_tail(
    prep: Preparation,
    system_prompt: str | None,
    tail: Sequence[Message],
    settings: CompactionSettings,
    *,
    whole: bool,
) -> CompactionPlan | None | NeedsEarlier:
    """The plan over the suffix's newest messages ``tail`` (``plan.plan_tail``): what the
    whole suffix's plan would be, or NEEDS_EARLIER. The caller adds the summarized messages
    before the tail (``plan.with_earlier``) and then calls :func:`settle_plan`."""
    messages = [plan_message(m) for m in tail]
    plan = plan_tail(
        messages, settings.keep_recent_tokens, _kept_room(prep, system_prompt)[1], whole=whole
    )
    if _fit_growth(prep, system_prompt, plan):
        plan = plan_tail(
            messages, settings.keep_recent_tokens, _kept_room(prep, system_prompt)[1], whole=whole
        )
    return plan


def settle_plan(
    prep: Preparation,
    plan: CompactionPlan | None,
    system_prompt: str | None,
    messages: Sequence[Message],
    answered: AnsweredMessages | None = None,
) -> Preparation:
    """Set the plan on ``prep`` with what it keeps and replaces, or the status that says why
    there is none. ``messages``: the restored suffix, or (a tail plan) its newest messages from
    before the cut on; ``prep.summarized`` is the caller's (a dry run lists none).
    ``answered``: ``messages`` answered already, whose entries the kept ones are taken from."""
    over = prep.tokens_before > prep.threshold
    head, room = _kept_room(prep, system_prompt)
    if plan is None:
        prep.status = CompactionStatus.OVER_WINDOW if over else CompactionStatus.NOTHING_TO_CUT
        if over:
            biggest = max(messages, key=lambda m: m.token_count or 0, default=None)
            prep.error = over_window_message(
                prep.tokens_before, prep.threshold, [biggest] if biggest else [], head, room
            )
        return prep
    prep.plan = plan
    # What stays is measured as it will be sent (synthetic answers to unanswered calls
    # included), so tokens_after is what a restore then counts, not an estimate from the plan.
    prep.kept = [m for m in messages if m.id >= plan.first_kept_message_id]
    start = len(messages) - len(prep.kept)
    entries = None
    if (
        answered is not None
        and answered.messages is messages
        and all(a is b for a, b in zip(prep.kept, messages[start:]))
    ):
        entries = answered.suffix(start)
    kept_tokens = restored_context_tokens(
        RestoredContext(prep.session_id, system_prompt, None, prep.kept), prep.encoding, entries
    )
    prep.replaced_tokens = prep.tokens_before - kept_tokens
    if prep.summary_budget > prep.base_budget:
        # grown, yet never to a summary as large as what it replaces (a cut that summarizes
        # little more than the carried summary itself)
        smaller = prep.replaced_tokens - _summary_framing(prep.encoding) - 16
        prep.summary_budget = max(prep.base_budget, min(prep.summary_budget, smaller))
        # and within what the threshold leaves beside the kept messages as measured (answers
        # to their unanswered calls included), which the plan's counts may fall short of
        room = prep.threshold - kept_tokens - _summary_framing(prep.encoding)
        prep.summary_budget = fitting_budget(
            prep.summary_budget, prep.base_budget, room + REPLY_PRIMING_TOKENS
        )
    if plan.over_window:
        oversized = [m for m in prep.kept if m.id in set(plan.oversized_ids)]
        prep.error = over_window_message(None, prep.threshold, oversized, head, room)
    return prep


def over_window_message(
    tokens: int | None,
    threshold: int,
    messages: list[Message],
    system_tokens: int = 0,
    room: int | None = None,
) -> str:
    """Names what no safe cut can leave out of the restored context: the messages that must
    stay verbatim, or the system prompt when it leaves (next to) no room for any message."""
    size = (
        f"restored context of {tokens} tokens is"
        if tokens is not None
        else "restored context stays"
    )
    start = f"{size} over its threshold of {threshold} tokens and no safe cut fits: "
    if room is not None and system_tokens and (room <= 0 or system_tokens >= threshold // 2):
        fixed = threshold - room
        return (
            start + f"the system prompt ({system_tokens} tokens) and the summary's room "
            f"({fixed - system_tokens}) take {fixed}, leaving {max(room, 0)} for messages "
            "(shorten the system prompt, or give a larger --context-window)"
        )
    named = ", ".join(
        f"message {m.id} ({m.role}, {m.token_count or 0} tokens)" for m in messages[:3]
    )
    return start + f"{named or 'its newest messages'} must stay verbatim"


def check_summary(
    prep: Preparation, text: str, *, min_carry_over: float | None = None
) -> tuple[int, str | None]:
    """(summary tokens as carried, why it is refused or None). Refused: empty; not smaller
    than what it replaces; over its budget; or (``min_carry_over``) dropping most of the
    previous summary's items."""
    if not text.strip():
        return 0, "summary is empty"
    tokens = summary_message_tokens(text, prep.encoding)
    if tokens >= prep.replaced_tokens:
        return tokens, (
            f"summary ({tokens} tokens) is not smaller than what it replaces "
            f"({prep.replaced_tokens} tokens)"
        )
    own = count_text(text, prep.encoding)
    if own > prep.summary_budget:
        # The budget is on the text (the model's max_tokens); the report shows the message.
        return tokens, (
            f"summary text ({own} tokens; {tokens} as the context message it "
            f"becomes) is over its budget of {prep.summary_budget} tokens "
            + (
                "(--max-summary-tokens, at most a quarter of the threshold)"
                if prep.summary_budget <= (prep.base_budget or prep.summary_budget)
                else "(--max-summary-tokens grown for the carried summary, "
                "--max-summary-growth, within what the threshold leaves it)"
            )
        )
    floor = carry_over_floor(prep, min_carry_over)
    if floor is not None and prep.previous is not None:
        kept = carry_over(prep.previous.summary, text, prep.overtaken).share
        if kept is not None and kept < floor:
            # The flag only helps while it, not the quarter of the threshold, sets the budget.
            base = prep.base_budget or prep.summary_budget
            room = (
                "a larger --max-summary-tokens leaves room for them"
                if base < max(MIN_SUMMARY_BUDGET, prep.threshold // 4)
                else f"the summary's budget, {base} tokens, is already the most "
                f"a threshold of {prep.threshold} allows: a larger --max-summary-tokens "
                "changes nothing"
            )
            if prep.summary_budget > base:
                room += (
                    f"; it grew to {prep.summary_budget} tokens for the carried summary "
                    "(a larger --max-summary-growth lets it grow further)"
                )
            required = f"at least {floor:.0%} required (--min-carry-over"
            if floor < min_carry_over:  # type: ignore[operator]  # not None with a floor
                required += f" {min_carry_over:.0%} of what the budget holds"
            finished = (
                f" ({len(prep.overtaken)} the span finished left out)" if prep.overtaken else ""
            )
            return tokens, (
                f"summary drops items of the previous summary: it keeps {kept:.0%} "
                f"of them{finished}, {required}; {room})"
            )
    return tokens, None


def carry_over_floor(prep: Preparation, min_carry_over: float | None) -> float | None:
    """The share of the previous summary's items the new summary must hold (None: not
    checked): see :func:`scaled_floor`."""
    if min_carry_over is None or prep.previous is None:
        return None
    return scaled_floor(min_carry_over, prep.previous_tokens, carried_room(prep))


def carried_room(prep: Preparation) -> int:
    """What the summary's budget holds of the carried summary: a grown budget less the
    budget it keeps for the span's own items, never less than the budget before growth."""
    base = prep.base_budget or prep.summary_budget
    return max(base, prep.summary_budget - base)


def scaled_floor(min_carry_over: float, previous_tokens: int, budget: int) -> float:
    """``min_carry_over``, scaled down when the previous summary is larger than the whole
    budget of the new one: a runtime's own 2,500-token summary carried into a 750-token
    budget cannot keep 90% of its items; it must keep that share of what the budget holds."""
    if previous_tokens <= budget:
        return min_carry_over
    return round(min_carry_over * budget / previous_tokens, 3)


def evaluate_summary(prep: Preparation, text: str) -> Evaluation:
    """The summary evaluated as the agent will restore it (summary + kept messages) against
    the probes of the span it replaces (ctxtool.evaluation)."""
    return evaluate(
        prep.summarized,
        text,
        prep.kept,
        previous_summary=prep.previous_summary,
        continued=prep.previous is not None,
        encoding=prep.encoding,
        known_paths=[
            p
            for key in ("read_files", "modified_files")
            for p in prep.files.get(key) or ()
            if isinstance(p, str)
        ],
    )


def quality_figures(prep: Preparation, evaluation: Evaluation, text: str) -> dict[str, Any]:
    """What ``details["quality"]`` stores: the evaluation's figures and the carry-over of the
    previous summary's items (None for a first checkpoint)."""
    kept = carry_over(prep.previous_summary, text, prep.overtaken) if prep.previous else None
    return {**evaluation.figures(), "carry_over": kept.share if kept else None}


def check_quality(evaluation: Evaluation, min_quality: float = DEFAULT_MIN_QUALITY) -> str | None:
    """Why a summary fails the quality gate (under ``min_quality`` or stating fabrications),
    naming the missed probes; None when it passes."""
    ok, missed = meets_floor(evaluation, min_quality)
    if ok:
        return None
    reasons = []
    if evaluation.fabrications:
        stated = ", ".join(repr(f.text) for f in evaluation.fabrications[:3])
        reasons.append(f"states what the history never contained: {stated}")
    score = evaluation.score
    if score is not None and score < min_quality:
        held = len(evaluation.summary_only) - len(missed)
        reasons.append(
            f"answers {score:.0%} of the probes only the summary can answer "
            f"({held}/{len(evaluation.summary_only)}), at least {min_quality:.0%} required "
            "(--min-quality)"
        )
    named = ", ".join(v.probe.id for v in missed[:5])
    more = f" and {len(missed) - 5} more" if len(missed) > 5 else ""
    return "summary " + " and ".join(reasons) + (f"; missed: {named}{more}" if missed else "")


def checkpoint_values(
    prep: Preparation,
    text: str,
    summary_tokens: int,
    summarizer: str,
    model: str | None,
    quality: dict[str, Any],
) -> dict[str, Any]:
    """The agent_compaction row for an accepted summary, with the figures that explain it:
    files, the exact span summarized (count and id range, so `validate` can prove nothing
    arrived inside it later), and the quality gate's figures."""
    assert prep.plan is not None
    span = prep.span()
    details = {
        **prep.files,
        "split_turn": prep.plan.split_turn,
        "summarised_messages": span.count,
        "summarised_from_message_id": prep.plan.summarized_ids[0],
        "summarised_to_message_id": prep.plan.summarized_ids[-1],
        "summarised_id_sum": span.id_sum,
        "encoding": prep.encoding,
        # What the cut was made for: `validate` checks the context against it later.
        "threshold": prep.threshold,
        "quality": quality,
    }
    # The summary as sent, counted: showing the context later needs no vocabulary for it.
    details = with_head_count(details, prep.encoding, SUMMARY_PREFIX + text, summary_tokens) or {}
    tokens_after = prep.tokens_before - prep.replaced_tokens + summary_tokens
    if prep.plan.over_window and tokens_after > prep.threshold:
        details["over_window"] = prep.plan.oversized_ids
    return {
        "summary": text,
        "first_kept_message_id": prep.plan.first_kept_message_id,
        "tokens_before": prep.tokens_before,
        "tokens_after": tokens_after,
        "summary_tokens": summary_tokens,
        "summarizer": summarizer,
        "summarizer_model": model,
        "details": details,
    }
