"""Reading the ``tool_calls`` of stored messages defensively.

A runtime may have written anything into the JSON column (``{"a": 1}``, ``["call_1"]``,
``[null]``, ``42``): compaction reads only well-formed OpenAI-style calls and skips the rest, so
one odd row never stops a batch. The one place that knows the call's shape.
"""

from __future__ import annotations

from typing import Any, Iterable


def well_formed_calls(tool_calls: Any) -> list[dict]:
    """The calls of a message that are objects; anything else in the column is ignored."""
    if not isinstance(tool_calls, list):
        return []
    return [c for c in tool_calls if isinstance(c, dict)]


def call_name(call: dict) -> str:
    """The function name of an OpenAI-style call ('?' when it has none)."""
    function = call.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) and name else "?"


def call_arguments(call: dict) -> Any:
    """The raw arguments of a call (a JSON string as the API sends it, or an object)."""
    function = call.get("function")
    return function.get("arguments") if isinstance(function, dict) else None


def call_ids(tool_calls: Any) -> tuple[str, ...]:
    """Ids of the well-formed calls (a call without an id answers nothing)."""
    return tuple(c["id"] if isinstance(c.get("id"), str) else "" for c in well_formed_calls(tool_calls))


def calls_of(messages: Iterable) -> list[dict]:
    """Every well-formed call made by ``messages``, in order."""
    return [c for m in messages for c in well_formed_calls(m.tool_calls)]
