"""Codex CLI rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Current layout: ``{timestamp, type, payload}`` lines: ``session_meta`` (id, cwd,
base_instructions), ``turn_context`` (model), ``response_item`` (message, function_call,
function_call_output, custom_tool_call(_output), reasoning, ...), ``event_msg`` (UI events that
duplicate response items, token_count) and ``compacted`` (summary message + replacement history).
Legacy layout (2025): a bare meta line ``{id, timestamp, instructions}``, ``{record_type}``
lines and bare items without the payload wrapper. Both are read here.

Codex items carry no id: a message's source id is its line number, stable as a rollout grows.
Consecutive function calls are one assistant message (parallel tool calls). Further
``session_meta`` lines (forks, sub-agents) and event messages are counted as skipped.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterator

from . import (Line, Record, SourceCompaction, SourceMessage, SourceSession, Transcript, UniqueIds,
               first_line_title, normalise_usage, parse_time, text_of, tool_call)

FORMAT = "codex"
_TEXT_BLOCKS = ("input_text", "output_text", "text")
_ROLE = {"user": "user", "assistant": "assistant", "developer": "system", "system": "system"}


def parse(lines: Iterator[Line], path: str, skipped: Counter,
          main: set[str] | None = None) -> Transcript:
    """Parse the file (``main`` is for tree formats; this one is linear)."""
    session = SourceSession(FORMAT)
    return Transcript(session, _records(lines, session, skipped), skipped)


def _instructions(value) -> str | None:
    if isinstance(value, dict):
        value = value.get("text")
    return value if isinstance(value, str) and value else None


def _records(lines: Iterator[Line], session: SourceSession, skipped: Counter) -> Iterator[Record]:
    ids = UniqueIds()
    calls: SourceMessage | None = None
    seen_meta = False

    def flush():
        nonlocal calls
        out, calls = calls, None
        return out

    for line in lines:
        rec = line.obj
        kind = rec.get("type")
        when = parse_time(rec.get("timestamp"))
        if "payload" in rec and isinstance(rec.get("payload"), dict):
            payload = rec["payload"]
        elif "record_type" in rec:
            skipped[f"record_type:{rec.get('record_type')}"] += 1
            continue
        elif kind is None and "id" in rec and not seen_meta:
            # Legacy bare meta line.
            seen_meta = True
            session.source_id = str(rec["id"])
            session.created_at = parse_time(rec.get("timestamp"))
            session.system_prompt = _instructions(rec.get("instructions"))
            session.details["git"] = rec.get("git")
            continue
        else:
            payload, kind = rec, "response_item"

        if kind == "session_meta":
            if seen_meta:
                skipped["session_meta:fork_or_subagent"] += 1
                continue
            seen_meta = True
            session.source_id = str(payload.get("id") or "") or None
            session.created_at = parse_time(payload.get("timestamp")) or when
            session.system_prompt = _instructions(payload.get("base_instructions")
                                                  or payload.get("instructions"))
            for key in ("cwd", "originator", "cli_version", "source", "model_provider"):
                if payload.get(key) is not None:
                    session.details[key] = payload.get(key)
            continue
        if kind == "turn_context":
            if payload.get("model"):
                session.model = payload["model"]
            skipped["turn_context"] += 1
            continue
        if kind == "event_msg":
            ptype = payload.get("type")
            if ptype == "token_count" and isinstance(payload.get("info"), dict):
                info = payload["info"]
                last = info.get("last_token_usage")
                if isinstance(last, dict):
                    usage = normalise_usage(last.get("input_tokens"), last.get("output_tokens"),
                                            last.get("cached_input_tokens"))
                    if usage:
                        # Codex counts cached input inside input_tokens.
                        usage["context_tokens"] = usage["input_tokens"]
                        session.details["last_usage"] = usage
                if isinstance(info.get("model_context_window"), int):
                    session.details["model_context_window"] = info["model_context_window"]
            skipped[f"event_msg:{ptype}"] += 1
            continue
        if kind == "compacted":
            if calls:
                yield flush()
            history = payload.get("replacement_history")
            yield SourceCompaction(ids(None, line.number), _compacted_summary(payload), line.number,
                                   details={"replacement_history_items":
                                            len(history) if isinstance(history, list) else 0})
            continue
        if kind != "response_item":
            skipped[str(kind)] += 1
            continue

        item = payload.get("type")
        if item in ("function_call", "custom_tool_call", "local_shell_call"):
            if calls is None:
                calls = SourceMessage(ids(None, line.number), "assistant", None, line.number,
                                      tool_calls=[], created_at=when)
            arguments = payload.get("arguments") if item == "function_call" else (
                payload.get("input") if item == "custom_tool_call" else payload.get("action"))
            calls.tool_calls.append(tool_call(payload.get("call_id") or payload.get("id") or "",
                                              payload.get("name") or item, arguments))
            continue
        if calls:
            yield flush()
        if item in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            output = payload.get("output")
            if isinstance(output, dict):
                output = output.get("content") or output.get("output") or str(output)
            yield SourceMessage(ids(None, line.number), "tool", text_of(output, skipped, _TEXT_BLOCKS),
                                line.number, tool_call_id=payload.get("call_id"), created_at=when)
        elif item == "message":
            role = _ROLE.get(payload.get("role"))
            if role is None:
                skipped[f"message:{payload.get('role')}"] += 1
                continue
            text = text_of(payload.get("content"), skipped, _TEXT_BLOCKS)
            if role == "user" and session.title is None and not text.lstrip().startswith("<"):
                session.title = first_line_title(text)
            details = {"source_role": payload.get("role")} if role != payload.get("role") else None
            if payload.get("phase"):
                details = {**(details or {}), "phase": payload["phase"]}
            yield SourceMessage(ids(None, line.number), role, text, line.number,
                                created_at=when, details=details)
        else:
            skipped[f"response_item:{item}"] += 1
    if calls:
        yield flush()


def _compacted_summary(payload: dict) -> str:
    """The text a ``compacted`` record leaves in the context: Codex replaces the history with
    its ``replacement_history`` (recent user messages and the summary), or, in older versions,
    with ``message`` alone. Both become the checkpoint's summary, so nothing Codex kept is lost."""
    summary = (payload.get("message") or "").strip()
    history = payload.get("replacement_history")
    kept = []
    for item in history if isinstance(history, list) else ():
        if isinstance(item, dict) and item.get("type") == "message":
            text = text_of(item.get("content"), None, _TEXT_BLOCKS).strip()
            if text and text != summary:
                kept.append(f"[{item.get('role')}] {text}")
    if not kept:
        return summary
    kept_text = "\n\n".join(kept)
    return f"{summary}\n\n## Messages kept by Codex\n\n{kept_text}" if summary else kept_text
