"""The prompt an LLM summarizer gets: the span to summarize and the previous summary to update.

The format has a place for everything an agent needs to carry on (the sections of
``core.sections``): the goal with its command and plan, the latest request quoted, the
open tasks, the current work, errors and whether they were fixed, each changed file and why,
the user's instructions, decisions, and a next step taken only from the latest request.
"""

from __future__ import annotations

from ...core.summary_prompt import (  # noqa: F401 - the prompt's texts, as named here before
    BRIEF_FORMAT,
    SUMMARY_FORMAT,
    SYSTEM_PROMPT,
    TURN_PREFIX_FORMAT,
)
from ...redaction import mask_secrets
from .base import SummaryRequest, render_conversation, turn_start
from .span_notes import fixed_since

_FILES_IN_PROMPT = 60  # newest paths of each list named in the prompt
_FILES_IN_BRIEF_PROMPT = 12  # in the brief one: a small window's room is for the conversation
_FIXED_IN_PROMPT = 20  # carried failures a run of the span fixed, named in the prompt


def build_prompt(request: SummaryRequest, brief: bool = False) -> str:
    """The user prompt: the span to summarize, and the previous summary to update (iterative);
    a split turn's prefix apart, under a prompt of its own; or, for a revision, the draft and
    the previous summary's items it dropped. ``brief``: the short format, for a model whose
    window the full one would crowd."""
    if request.draft is not None:
        return build_revision_prompt(request)
    summary_format = BRIEF_FORMAT if brief else SUMMARY_FORMAT
    previous_summary, files = request.previous_summary, request.files
    history, prefix = _transcripts(request)
    parts = [f"<conversation>\n{history}\n</conversation>"]
    if prefix is not None:
        parts.append(f"<turn-prefix>\n{prefix}\n</turn-prefix>")
    if previous_summary:
        shown = mask_secrets(previous_summary)  # a runtime's summary may hold one
        parts.append(f"<previous-summary>\n{shown}\n</previous-summary>")
        parts.append(
            "The messages above are NEW since the previous summary. Update the previous summary "
            "with them, converting it into the format below: keep every item of it that is "
            "still relevant (goal, constraints, decisions, open tasks, files, errors), move "
            "finished tasks to Done, mark errors fixed when a later run on their target succeeded, "
            "and drop its "
            "scratchpad (an <analysis> block) and any continuation boilerplate. " + summary_format
        )
        fixed = fixed_since(shown, request.messages)[:_FIXED_IN_PROMPT]
        if fixed:
            # Read from the runs themselves: a user's own `$ cmd` reads as context to a model.
            listed = "\n".join(f"- {c}" for c in fixed)
            parts.append(
                f"<fixed-since-previous-summary>\n{listed}\n</fixed-since-previous-summary>\n"
                "The previous summary lists the failures of these commands as still open; a run "
                "of each in the new messages (the agent's or the user's) succeeded: mark those "
                "errors fixed."
            )
    else:
        parts.append("Summarize the conversation above. " + summary_format)
    if prefix is not None:
        parts.append(TURN_PREFIX_FORMAT)
    if request.instructions:
        parts.append(
            "The operator asks the summary to focus on the following (in addition to the "
            f"sections above):\n<focus>\n{request.instructions}\n</focus>"
        )
    parts.append(f"Stay under {request.max_tokens} tokens.")
    read, modified = files.get("read_files") or [], files.get("modified_files") or []
    if read or modified:
        named = _FILES_IN_BRIEF_PROMPT if brief else _FILES_IN_PROMPT
        parts.append(
            "Files read: "
            + ", ".join(read[-named:])
            + "\nFiles modified: "
            + ", ".join(modified[-named:])
        )
    return "\n\n".join(parts)


def _transcripts(request: SummaryRequest) -> tuple[str, str | None]:
    """(the conversation, the split turn's prefix or None), rendered unless the request
    carries them rendered already (a folded chunk)."""
    if request.transcript is not None:
        return request.transcript, request.turn_prefix if request.split_turn else None
    if not request.split_turn:
        return render_conversation(request.messages), None
    start = turn_start(request.messages)
    return (
        render_conversation(request.messages[:start]),
        render_conversation(request.messages[start:]),
    )


def unanswered_question(question: str, answer: str, limit: int = 300) -> str:
    """A probe the draft missed as a revision request lists it: the question, and what the
    conversation says (the probe's reference answer, shortened past ``limit`` characters)."""
    answer = " ".join(answer.split())
    if len(answer) > limit:
        answer = answer[: limit - 1] + "…"
    return f"{' '.join(question.split())} (the conversation says: {answer})"


def build_revision_prompt(request: SummaryRequest) -> str:
    """A draft the quality gate refused, sent back once: the questions a continuing agent has
    that it failed to answer, and the previous summary's items it dropped."""
    parts = [f"<draft-summary>\n{request.draft}\n</draft-summary>"]
    asks = []
    if request.questions:
        listed = "\n".join(f"- {q}" for q in request.questions)
        parts.append(f"<unanswered-questions>\n{listed}\n</unanswered-questions>")
        asks.append(
            "The draft summary above was checked by asking it the questions an agent continuing "
            "the work needs answered, and it failed to answer those listed under "
            "unanswered-questions (each with what the conversation says). Rewrite it so that it "
            "answers every one of them, in the section the answer belongs to."
        )
    if request.missing:
        parts.append("<dropped-items>\n" + "\n".join(request.missing) + "\n</dropped-items>")
        asks.append(
            "The draft updates a previous summary but dropped the items listed under "
            "dropped-items, which the previous summary held: keep every one of them."
        )
    asks.append(
        "Keep everything the draft already says, in the same format; condense the wording if "
        "needed, keep exact paths, identifiers and error messages, and state only what the "
        f"conversation shows. Output only the summary. Stay under {request.max_tokens} tokens."
    )
    return "\n\n".join(parts + [" ".join(asks)])
