"""OpenAI chat messages: ``{role, content, tool_calls, tool_call_id, name}``.

Accepted as JSONL (one message per line), a JSON array, or one JSON object holding the list in
``messages`` or ``history`` (SWE-agent trajectories, which also use ``tool_call_ids``, a list).
The legacy ``function_call`` / role ``function`` pair becomes a tool call and its result.
Leading system messages become the session's system prompt. Extra fields are kept in details.
"""

from __future__ import annotations

from ..core.source_records import InvalidRecord, Line, Record, SourceMessage
from . import fields as f
from .walk import FormatParser

_KNOWN = {"role", "content", "tool_calls", "tool_call_id", "tool_call_ids", "name", "function_call"}
_ROLES = {"system", "user", "assistant", "tool", "developer", "function"}


class OpenAIChatParser(FormatParser):
    name = "openai-chat"

    def __init__(self):
        super().__init__()
        self.leading = True  # still in the leading system messages
        self.legacy_calls: dict[str, list[str]] = {}  # function name -> unanswered call ids

    @staticmethod
    def fits(obj: dict) -> bool:
        return obj.get("role") in _ROLES if isinstance(obj.get("role"), str) else False

    def kind_of(self, obj: dict) -> str:
        role = obj.get("role")
        return "message" if isinstance(role, str) and role in _ROLES else f"role:{f.label(role)}"

    def _message(self, line: Line) -> list[Record] | None:
        msg = line.obj
        role = msg["role"]
        text = f.text_of(msg.get("content"), self.skipped)
        if role in ("system", "developer") and self.leading:
            prompt = self.session.system_prompt
            self.session.system_prompt = text if prompt is None else prompt + "\n\n" + text
            return None
        self.leading = False
        role = {"developer": "system", "function": "tool"}.get(role, role)
        calls = self._calls(msg, line.number)
        call_id = self._call_id(msg)
        extra = {k: v for k, v in msg.items() if k not in _KNOWN}
        own_id = msg.get("id") if isinstance(msg.get("id"), str) else None
        if own_id is not None:
            f.identifier(msg, "id")
        return [
            SourceMessage(
                self.ids(own_id, line.number),
                role,
                text if text or not calls else None,
                line.number,
                tool_calls=calls,
                tool_call_id=call_id,
                name=f.name(msg, "name") if role != "tool" else None,
                details=extra or None,
            )
        ]

    def _calls(self, msg: dict, number: int) -> list[dict] | None:
        if isinstance(msg.get("tool_calls"), list):
            return chat_tool_calls(msg["tool_calls"])
        if isinstance(msg.get("function_call"), dict):
            # The legacy (2023) shape: one function_call, answered by a role "function" message.
            fn = msg["function_call"]
            calls = [f.tool_call(f"call_L{number}", f.name(fn, "name") or "", fn.get("arguments"))]
            self.legacy_calls.setdefault(fn.get("name") or "", []).append(calls[0]["id"])
            return calls
        return None

    def _call_id(self, msg: dict) -> str | None:
        call_id = f.identifier(msg, "tool_call_id")
        ids = msg.get("tool_call_ids")
        if call_id is None and isinstance(ids, list) and ids:
            if not isinstance(ids[0], str):
                raise InvalidRecord(f"'tool_call_ids' must hold strings, not {f.json_type(ids[0])}")
            call_id = f.identifier({"tool_call_ids": ids[0]}, "tool_call_ids")
        given = msg.get("name")
        name = given if isinstance(given, str) else ""
        if call_id is None and msg["role"] == "function" and self.legacy_calls.get(name):
            call_id = self.legacy_calls[name].pop(0)
        return call_id

    handlers = {"message": _message}


def chat_tool_calls(tool_calls: list) -> list[dict] | None:
    """The ``tool_calls`` of a Chat Completions assistant message, each checked (an id and a
    function name, which an API requires); entries that are not objects are left out."""
    calls = []
    for c in tool_calls:
        if not isinstance(c, dict):
            continue
        fn = f.obj(c, "function") or {}
        calls.append(
            f.tool_call(
                f.required(f.identifier(c, "id"), "'id'"),
                f.required(f.name(fn, "name"), "function 'name'"),
                fn.get("arguments"),
            )
        )
    return calls or None
