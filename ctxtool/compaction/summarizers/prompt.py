"""The prompt an LLM summarizer gets: the span to summarize and the previous summary to update."""

from __future__ import annotations

from .base import SummaryRequest, render_conversation

SYSTEM_PROMPT = (
    "You are a context summarization assistant. You read a conversation between a user and an "
    "AI coding agent and write a structured summary that another instance of the agent will use "
    "to continue the work. Do not continue the conversation and do not answer questions in it: "
    "only output the summary."
)

SUMMARY_FORMAT = """Use this exact format:

## Goal
[What the user is trying to accomplish]

## Constraints & Preferences
- [Requirements and preferences the user stated]

## Progress
### Done
- [x] [Completed work]
### In Progress
- [ ] [Current work]
### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Rationale]

## Next Steps
1. [What should happen next]

## Critical Context
- [Exact file paths, function names, identifiers, error messages and data needed to continue]

Keep each section concise. Preserve exact file paths, identifiers and error messages."""

_FILES_IN_PROMPT = 60  # newest paths of each list named in the prompt


def build_prompt(request: SummaryRequest) -> str:
    """The user prompt: the span to summarize, and the previous summary to update (iterative);
    or, for a revision, the draft and the previous summary's items it dropped."""
    if request.draft is not None:
        return build_revision_prompt(request)
    previous_summary, files = request.previous_summary, request.files
    transcript = (
        request.transcript
        if request.transcript is not None
        else render_conversation(request.messages)
    )
    parts = [f"<conversation>\n{transcript}\n</conversation>"]
    if previous_summary:
        parts.append(f"<previous-summary>\n{previous_summary}\n</previous-summary>")
        parts.append(
            "The messages above are NEW since the previous summary. Update the previous summary "
            "with them: keep every item of it that is still relevant (goal, constraints, "
            "decisions, next steps, critical context), move finished items to Done, add new "
            "decisions, next steps and critical context. " + SUMMARY_FORMAT
        )
    else:
        parts.append("Summarize the conversation above. " + SUMMARY_FORMAT)
    parts.append(f"Stay under {request.max_tokens} tokens.")
    if request.split_turn:
        parts.append(
            "The conversation continues after this point in the middle of the current "
            "turn: the agent's work on the latest user request is kept verbatim, the "
            "request itself is not. State that request exactly under Goal or In Progress."
        )
    read, modified = files.get("read_files") or [], files.get("modified_files") or []
    if read or modified:
        parts.append(
            "Files read: "
            + ", ".join(read[-_FILES_IN_PROMPT:])
            + "\nFiles modified: "
            + ", ".join(modified[-_FILES_IN_PROMPT:])
        )
    return "\n\n".join(parts)


def build_revision_prompt(request: SummaryRequest) -> str:
    """A draft that dropped items of the previous summary, and those items: put them back."""
    items = "\n".join(request.missing)
    return (
        f"<draft-summary>\n{request.draft}\n</draft-summary>\n\n"
        f"<dropped-items>\n{items}\n</dropped-items>\n\n"
        "The draft summary above updates a previous summary but dropped the items listed "
        "under dropped-items, which the previous summary held. Rewrite the draft so that it "
        "keeps every one of them (condense the wording if needed, keep exact paths, "
        "identifiers and error messages) and everything the draft already says, in the same "
        f"format. Output only the summary. Stay under {request.max_tokens} tokens."
    )
