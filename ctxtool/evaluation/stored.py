"""Evaluating a stored checkpoint (reads the store; the rules are in the pure modules beside).

The probes of a checkpoint come from the whole history before its cut (the goal was stated at
the start, whatever the previous checkpoint kept of it); the context they are asked of is the
checkpoint's summary and the messages of its context until the next checkpoint replaced it.
Imported runtime checkpoints are evaluated the same way as ctxtool's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..core.context_size import HEAD_COUNTS_KEY, text_digest
from ..core.errors import CtxtoolError
from ..core.evaluator.evaluate import Evaluation, SectionCost, evaluate, stored_section_costs
from ..core.records import SUMMARY_PREFIX, Compaction
from ..core.tokens import encoding_for_model
from ..store.reads import SessionHistory, Store
from .judge import Judge, JudgedProbe, judged_share


@dataclass
class CheckpointEvaluation:
    session_id: int
    checkpoint: Compaction
    summarized: int  # messages before the cut
    kept: int  # messages of its context after the cut
    evaluation: Evaluation
    judged: list[JudgedProbe] = field(default_factory=list)  # with a judge: summary-only probes

    def as_dict(self) -> dict:
        out = {
            "session_id": self.session_id,
            "checkpoint_id": self.checkpoint.id,
            "summarizer": self.checkpoint.summarizer,
            "first_kept_message_id": self.checkpoint.first_kept_message_id,
            "messages_summarized": self.summarized,
            "messages_kept": self.kept,
            **self.evaluation.as_dict(),
            "judge_score": judged_share(self.judged),
        }
        by_id = {j.probe.id: j.as_dict() for j in self.judged}
        for verdict in out["verdicts"]:
            verdict["judge"] = by_id.get(verdict["id"])
        return out


def evaluate_checkpoint(
    store: Store,
    session: str | int,
    at: int | None = None,
    judge: Judge | None = None,
    on_probe: Callable[[JudgedProbe], None] | None = None,
) -> CheckpointEvaluation:
    """Evaluate checkpoint ``at`` of a session (its id, or -1 the latest, -2 the one before;
    default the latest); with a ``judge``, an LLM also answers the probes only the summary
    can answer (``on_probe`` after each)."""
    history = SessionHistory(store, session)
    point = history.point(at)
    checkpoint = point.checkpoint
    if checkpoint is None:
        raise CtxtoolError(
            f"session {history.session_id} has no checkpoint to evaluate; "
            "`ctxtool compact` writes one"
        )
    position = next(i for i, c in enumerate(history.compactions) if c.id == checkpoint.id)
    previous = history.compactions[position - 1] if position else None
    span = store.messages(history.session_id, before_id=checkpoint.first_kept_message_id)
    kept = history.messages_at(point)
    encoding = encoding_for_model(history.session.model).name
    evaluation = evaluate(
        span,
        checkpoint.summary,
        kept,
        previous_summary=previous.summary if previous else None,
        encoding=encoding,
        sections=_stored_sections(checkpoint, encoding),
    )
    judged = (
        judge.judge([v.probe for v in evaluation.summary_only], checkpoint.summary, kept, on_probe)
        if judge is not None
        else []
    )
    return CheckpointEvaluation(
        history.session_id, checkpoint, len(span), len(kept), evaluation, judged
    )


def _stored_sections(checkpoint: Compaction, encoding: str) -> list[SectionCost] | None:
    """The section costs ctxtool stored with its checkpoint, when they were counted in the
    encoding eval counts in (a runtime's checkpoint has none): read, not counted again."""
    details = checkpoint.details or {}
    quality, counted = details.get("quality"), details.get(HEAD_COUNTS_KEY)
    if details.get("encoding") != encoding or not isinstance(quality, dict):
        return None
    # The summary as it was counted: its digest is kept beside its count.
    kept = counted.get(encoding) if isinstance(counted, dict) else None
    if not isinstance(kept, dict) or kept.get("digest") != text_digest(
        SUMMARY_PREFIX + checkpoint.summary
    ):
        return None
    return stored_section_costs(checkpoint.summary, quality.get("section_tokens"))
