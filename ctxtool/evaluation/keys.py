"""Hand-written answer keys (tests/answer_keys/*.json) and the spans they key.

A key file names a transcript, how much of it the span is (``through_line`` physical JSONL lines
or ``through_message`` entries of a trajectory's history or of a top-level event array),
optionally the line of the transcript's own summary of that span, and the probes a person wrote
by reading it. The span is imported with ``ctxtool.importer`` into a throw-away SQLite store and
read back, so the messages are exactly those a store holds. Summarizer figures come from these
keys, never from probes the evaluator derives itself (a summarizer may use the same signals; only
independent keys tell whether they are the right ones).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import CtxtoolError
from ..core.evaluator.answers import ContextText, answer
from ..core.evaluator.evaluate import Evaluation, evaluate
from ..core.evaluator.probes import InvalidKey, Probe, ProbeKind, derive_probes, probe_from_dict
from ..core.records import Compaction, Message
from ..db import create_engine
from ..db.urls import sqlite_url_for
from ..importer import Importer
from ..migrate import Migrator
from ..store.reads import Store


@dataclass(frozen=True)
class AnswerKey:
    name: str  # the key file's stem
    transcript: str  # path under the transcripts directory
    format: str
    through: int  # lines (JSONL) or history entries (a .traj) of the span
    agent_summary_line: int | None
    probes: tuple[Probe, ...]


def load_key(path: Path) -> AnswerKey:
    """One key file; a file not in the key format is an error naming it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        through = data.get("through_line") or data["through_message"]
        return AnswerKey(
            Path(path).stem,
            data["transcript"],
            data["format"],
            int(through),
            data.get("agent_summary_line"),
            tuple(probe_from_dict(p) for p in data["probes"]),
        )
    except (ValueError, KeyError, TypeError, InvalidKey) as exc:
        raise CtxtoolError(f"{path}: not an answer key ({exc})") from None


@dataclass
class KeyedSpan:
    """A keyed span as a store holds it, with the transcript's own checkpoint of it (if keyed)."""

    key: AnswerKey
    messages: list[Message]
    checkpoint: Compaction | None
    cut: int  # index in ``messages`` of the first message the checkpoint keeps

    @property
    def summarized(self) -> list[Message]:
        return self.messages[: self.cut]

    @property
    def kept(self) -> list[Message]:
        return self.messages[self.cut :]

    def evaluate(self, summary: str) -> Evaluation:
        """A summary of this span scored on the hand keys."""
        return evaluate(self.summarized, summary, self.kept, probes=self.key.probes)


def keyed_span(key: AnswerKey, transcripts: Path, workdir: Path) -> KeyedSpan:
    """Import the key's span (and, for its checkpoint, the whole transcript) into SQLite
    stores under ``workdir`` and read it back."""
    store = _import_prefix(key, transcripts, workdir, key.through, "span")
    messages = store.messages(_only_session(store))
    checkpoint, cut = None, len(messages)
    if key.agent_summary_line:
        # A runtime's checkpoint is stored once the message it keeps first is read: import the
        # whole transcript and take the first checkpoint the span itself does not hold.
        full = _import_prefix(key, transcripts, workdir, None, "full")
        session_id = _only_session(full)
        held = len(store.compactions(_only_session(store)))
        checkpoint = full.compactions(session_id)[held]
        first_kept = next(
            (m for m in full.messages(session_id) if m.id == checkpoint.first_kept_message_id),
            None,
        )
        if first_kept is not None:  # None: it kept nothing (the transcript's last record)
            cut = next(
                (i for i, m in enumerate(messages) if m.source_id == first_kept.source_id), cut
            )
    return KeyedSpan(key, messages, checkpoint, cut)


def _import_prefix(
    key: AnswerKey, transcripts: Path, workdir: Path, through: int | None, name: str
) -> Store:
    source = transcripts / key.transcript
    target = workdir / f"{key.name}-{name}{source.suffix}"
    if source.suffix in (".traj", ".json"):
        # One JSON document: a trajectory's history, or a top-level event array (OpenHands).
        data = json.loads(source.read_text(encoding="utf-8"))
        if isinstance(data, list):
            data = data[:through]
        else:
            data["history"] = data["history"][:through]
        target.write_text(json.dumps(data), encoding="utf-8")
    else:
        lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
        target.write_text("".join(lines[:through]), encoding="utf-8")
    engine = create_engine(sqlite_url_for(str(workdir / f"{key.name}-{name}.db")))
    Migrator(engine).up()
    # The key names the shared folder (a family); one JSON document in openai-chat/ may be an
    # OpenAI message list or an OpenHands event array, which the importer tells apart itself.
    fmt = None if source.suffix in (".traj", ".json") else key.format
    [result] = Importer(engine, fmt=fmt).import_paths([str(target)])
    if result.error:
        raise CtxtoolError(f"{key.name}: {result.error}")
    return Store(engine)


def _only_session(store: Store) -> int:
    [session_id] = store.session_ids()
    return session_id


def state_held(evaluation: Evaluation) -> tuple[int, int]:
    """(probes only the summary can answer whose key gives their subject a state at the cut,
    ``fixed``/``open``/``pending``/``done``, that the summary holds in that state; such
    probes): where the work stands, by the hand keys alone."""
    stated = [v for v in evaluation.summary_only if v.probe.state]
    return sum(v.held for v in stated), len(stated)


def agreement(spans: list[KeyedSpan]) -> dict[ProbeKind, tuple[int, int]]:
    """Per kind: (hand probes a derived probe of the same kind answers, hand probes). A derived
    probe answers a hand probe when its reference answer holds the hand key: how often the
    evaluator's own questions are the ones a person asked, on the same keyed span."""
    out: dict[ProbeKind, list[int]] = {}
    for span in spans:
        derived = derive_probes(span.messages)
        for hand in span.key.probes:
            answers = [d.answer for d in derived if d.kind is hand.kind]
            counts = out.setdefault(hand.kind, [0, 0])
            counts[1] += 1
            counts[0] += any(answer(hand, ContextText(a)).held for a in answers)
    return {
        k: (held, total) for k, (held, total) in sorted(out.items(), key=lambda kv: kv[0].value)
    }
