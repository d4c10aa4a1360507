"""OpenAI chat messages: ``{role, content, tool_calls, tool_call_id, name}``.

Accepted as JSONL (one message per line), a JSON array, or one JSON object holding the list in
``messages`` or ``history`` (SWE-agent trajectories, which also use ``tool_call_ids``, a list).
The legacy ``function_call`` / role ``function`` pair becomes a tool call and its result.
Leading system messages become the session's system prompt. Extra fields are kept in details.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterator

from . import (Line, Record, SourceMessage, SourceSession, Transcript, UniqueIds, first_line_title,
               text_of, tool_call)

FORMAT = "openai-chat"
_KNOWN = {"role", "content", "tool_calls", "tool_call_id", "tool_call_ids", "name", "function_call"}
_ROLES = {"system", "user", "assistant", "tool", "developer", "function"}


def parse(lines: Iterator[Line], path: str, skipped: Counter,
          main: set[str] | None = None) -> Transcript:
    """Parse the file (``main`` is for tree formats; this one is linear)."""
    session = SourceSession(FORMAT)
    return Transcript(session, _records(lines, session, skipped), skipped)


def _records(lines: Iterator[Line], session: SourceSession, skipped: Counter) -> Iterator[Record]:
    ids = UniqueIds()
    leading = True
    legacy_calls: dict[str, list[str]] = {}  # function name -> ids of unanswered function_calls
    for line in lines:
        msg = line.obj
        role = msg.get("role")
        if role not in _ROLES:
            skipped[f"role:{role}"] += 1
            continue
        text = text_of(msg.get("content"), skipped)
        if role in ("system", "developer") and leading:
            session.system_prompt = text if session.system_prompt is None else (
                session.system_prompt + "\n\n" + text)
            continue
        leading = False
        role = {"developer": "system", "function": "tool"}.get(role, role)
        calls = None
        if isinstance(msg.get("tool_calls"), list):
            calls = [tool_call(c.get("id") or "", (c.get("function") or {}).get("name") or "",
                               (c.get("function") or {}).get("arguments"))
                     for c in msg["tool_calls"] if isinstance(c, dict)] or None
        elif isinstance(msg.get("function_call"), dict):
            # The legacy (2023) shape: one function_call, answered by a role "function" message.
            fn = msg["function_call"]
            calls = [tool_call(f"call_L{line.number}", fn.get("name") or "", fn.get("arguments"))]
            legacy_calls.setdefault(fn.get("name") or "", []).append(calls[0]["id"])
        call_id = msg.get("tool_call_id")
        if call_id is None and isinstance(msg.get("tool_call_ids"), list) and msg["tool_call_ids"]:
            call_id = msg["tool_call_ids"][0]
        if call_id is None and msg.get("role") == "function" and legacy_calls.get(msg.get("name") or ""):
            call_id = legacy_calls[msg.get("name") or ""].pop(0)
        extra = {k: v for k, v in msg.items() if k not in _KNOWN}
        if role == "user" and session.title is None:
            session.title = first_line_title(text)
        yield SourceMessage(ids(msg.get("id") if isinstance(msg.get("id"), str) else None,
                                line.number),
                            role, text if text or not calls else None, line.number,
                            tool_calls=calls, tool_call_id=call_id,
                            name=msg.get("name") if role != "tool" else None,
                            details=extra or None)
