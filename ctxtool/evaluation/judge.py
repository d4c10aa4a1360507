"""The LLM judge: a model answers each probe from the restored context alone, then grades its
answer against the probe's reference answer and key (used only when an endpoint is configured).

Matching by key sees words, not meaning: a summary that says "the second migration" for
"0002_add_index.sql" fails the key but may let an agent carry on. The judge asks the question
an agent would, from what the agent would read, so the two measures check each other. The
model's answer and its grade are both kept in the verdict for the operator to read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..compaction.summarizers.openai import request_parameters
from ..core.errors import CtxtoolError
from ..core.evaluator.answers import message_text
from ..core.evaluator.probes import Probe
from ..core.records import Message

ANSWER_PROMPT = (
    "You are continuing a coding agent's session. All you know of it is the context below "
    "(a summary of the earlier history, then the messages kept after it). Answer the question "
    "from that context alone, in one or two sentences, quoting names, paths and commands as "
    "they appear. If the context does not say, answer exactly: NOT IN CONTEXT."
)
GRADE_PROMPT = (
    "You grade an answer against a reference. Reply with one word: CORRECT when the candidate "
    "answer states what the reference states (paraphrase is fine; for a prohibition it must "
    "state it as a prohibition), INCORRECT otherwise or when it says NOT IN CONTEXT."
)
NOT_IN_CONTEXT = "NOT IN CONTEXT"
DEFAULT_CONTEXT_CHARS = 200_000  # what one question carries: the summary, then the newest kept
ANSWER_TOKENS = 300
GRADE_TOKENS = 5


class JudgeError(CtxtoolError):
    """The judge's endpoint failed or answered nothing usable."""


@dataclass(frozen=True)
class JudgedProbe:
    probe: Probe
    answer: str  # the model's answer from the context
    correct: bool  # the model's grade of that answer against the reference

    def as_dict(self) -> dict:
        return {"answer": self.answer, "correct": self.correct}


def judged_share(judged: Sequence[JudgedProbe]) -> float | None:
    """Share of the judged probes the model answered correctly (None: none judged)."""
    return round(sum(j.correct for j in judged) / len(judged), 3) if judged else None


def context_for_judge(
    summary: str | None, kept: Sequence[Message], limit: int = DEFAULT_CONTEXT_CHARS
) -> str:
    """The restored context as one text: the summary, then as many of the newest kept
    messages as fit in ``limit`` characters (a kept message is never cut)."""
    head = f"## Summary of the earlier history\n{summary or '(none)'}\n\n## Kept messages\n"
    room = max(0, limit - len(head))
    tail: list[str] = []
    for m in reversed(kept):
        text = f"[{m.role} #{m.id}] {message_text(m)}\n"
        if len(text) > room:
            break
        tail.append(text)
        room -= len(text)
    return head + "".join(reversed(tail))


class Judge:
    """Any OpenAI-compatible chat-completions endpoint, through the official ``openai`` client.

    Example::

        judged = Judge("gpt-4.1-mini").judge(probes, summary, kept)
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        context_chars: int = DEFAULT_CONTEXT_CHARS,
    ):
        import openai

        self.model = model
        self.context_chars = context_chars
        self._openai = openai
        self.client = openai.OpenAI(
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
            base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
            timeout=timeout,
            max_retries=max_retries,
        )

    def judge(
        self,
        probes: Sequence[Probe],
        summary: str | None,
        kept: Sequence[Message] = (),
        on_probe: Callable[[JudgedProbe], None] | None = None,
    ) -> list[JudgedProbe]:
        """Ask every probe of the context, then grade each answer (``on_probe`` after each)."""
        context = context_for_judge(summary, kept, self.context_chars)
        out = []
        for probe in probes:
            reply = self._ask(
                ANSWER_PROMPT,
                f"<context>\n{context}\n</context>\n\nQuestion: {probe.question}",
                ANSWER_TOKENS,
            )
            out.append(JudgedProbe(probe, reply, self._grade(probe, reply)))
            if on_probe is not None:
                on_probe(out[-1])
        return out

    def _grade(self, probe: Probe, reply: str) -> bool:
        if reply.strip().upper().startswith(NOT_IN_CONTEXT):
            return False
        key = "; ".join(" or ".join(group) for group in probe.all_of)
        grade = self._ask(
            GRADE_PROMPT,
            f"Question: {probe.question}\nReference answer: {probe.answer}\n"
            f"Key terms (one of each group): {key}\n"
            f"{'The reference is a prohibition.' if probe.negated else ''}\n"
            f"Candidate answer: {reply}",
            GRADE_TOKENS,
        )
        return grade.strip().upper().startswith("CORRECT")

    def _ask(self, system: str, user: str, max_tokens: int) -> str:
        openai = self._openai
        try:
            response = self.client.chat.completions.create(
                model=self.model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                **request_parameters(self.model, max_tokens),
            )
        except openai.APIStatusError as exc:
            raise JudgeError(
                f"the judge ({self.model}) answered HTTP {exc.status_code}: {exc.message}"
            ) from None
        except openai.APIError as exc:
            raise JudgeError(f"cannot use the judge ({self.model}): {exc}") from None
        choices = getattr(response, "choices", None)
        text = choices[0].message.content if choices and choices[0].message else None
        if not isinstance(text, str):
            raise JudgeError(f"the judge ({self.model}) returned no answer")
        return text.strip()
