"""Tool calls as compaction reads them: through ``Message.calls()``, the one place that turns
what a runtime stored (``{"a": 1}``, ``["call_1"]``, ``[null]``, ``42`` included) into calls in
the API's shape, so one odd row never stops a batch. Names and arguments are read defensively
here too, for lists of calls that did not come from a message."""

from __future__ import annotations

from typing import Any, Iterable

from ..records import Message


def call_name(call: dict) -> str:
    """The function name of an OpenAI-style call ('?' when it has none)."""
    function = call.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) and name else "?"


def call_arguments(call: dict) -> Any:
    """The raw arguments of a call (a JSON string as the API sends it, or an object)."""
    function = call.get("function")
    return function.get("arguments") if isinstance(function, dict) else None


def call_ids(m: Message) -> tuple[str, ...]:
    """Ids of the message's calls (a call without an id answers nothing)."""
    return tuple(c["id"] for c in m.calls())


def calls_of(messages: Iterable[Message]) -> list[dict]:
    """Every call made by ``messages``, in order."""
    return [c for m in messages for c in m.calls()]
