"""Tool calls as compaction reads them: through ``Message.calls()``, the one place that turns
what a runtime stored (``{"a": 1}``, ``["call_1"]``, ``[null]``, ``42`` included) into calls in
the API's shape (``function`` an object, ``name``/``arguments``/``id`` strings), so one odd row
never stops a batch and nothing here needs to check types again."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .records import Message


def call_name(call: dict[str, Any]) -> str:
    """The function name of a call ('?' when it has none)."""
    return str(call["function"]["name"] or "?")


def call_arguments(call: dict[str, Any]) -> str:
    """The arguments of a call, a JSON string as the API sends it."""
    return str(call["function"]["arguments"])


def calls_of(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Every call made by ``messages``, in order."""
    return [c for m in messages for c in m.calls()]
