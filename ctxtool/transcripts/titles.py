"""A session's title when its transcript names none: its first real request.

What a request is, is ``ctxtool.core.span_facts``' call (the evaluator reads goals the same way): a
message the user typed, not a slash-command expansion, an AGENTS.md / CLAUDE.md block, a
reminder, an environment block, continuation boilerplate, a UI command such as ``/mode`` or an
acknowledgement. A slash command the user ran is a request in its own words: ``/plan-implement
8107`` is the title of the session it started.
"""

from __future__ import annotations

from ..core.records import Message
from ..core.source_records import SourceMessage
from ..core.span_facts import UserText, request_text, slash_command, user_text_kind
from .fields import first_line_title


def request_title(m: SourceMessage) -> str | None:
    """The title ``m`` gives its session if it is the first real request, else None."""
    if m.role != "user" or not m.content:
        return None
    kind = user_text_kind(Message(0, 0, m.role, m.content, details=m.details))
    if kind is UserText.COMMAND:
        return first_line_title(slash_command(m.content))
    if kind is UserText.REQUEST:
        return first_line_title(request_text(m.content))
    return None
