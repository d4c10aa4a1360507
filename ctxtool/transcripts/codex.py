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

from ..core.source_records import Line, Record, SourceCompaction, SourceMessage
from . import fields as f
from .walk import FormatParser

_TEXT_BLOCKS = ("input_text", "output_text", "text")
_ROLE = {"user": "user", "assistant": "assistant", "developer": "system", "system": "system"}
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
_ITEMS = {"message", "reasoning", *_CALLS, *_OUTPUTS, "web_search_call"}


class CodexParser(FormatParser):
    name = "codex"

    def __init__(self):
        super().__init__()
        self.calls: SourceMessage | None = None  # consecutive tool calls: one assistant message
        self.seen_meta = False

    @staticmethod
    def fits(obj: dict) -> bool:
        kind = obj.get("type")
        return (
            ("payload" in obj and isinstance(kind, str))
            or "record_type" in obj
            or (isinstance(kind, str) and kind in _ITEMS and "message" not in obj)  # bare item
            or (kind is None and "id" in obj and "timestamp" in obj)
        )

    def kind_of(self, obj: dict) -> str:
        if isinstance(obj.get("payload"), dict):
            return super().kind_of(obj)
        if "record_type" in obj:
            return "record_type"
        if obj.get("type") is None and "id" in obj and not self.seen_meta:
            return "legacy_meta"
        return "response_item"  # a legacy bare item

    def finish(self) -> list[Record]:
        return self._flush()

    def _flush(self) -> list[Record]:
        out, self.calls = self.calls, None
        return [out] if out else []

    @staticmethod
    def _payload(line: Line) -> dict:
        payload = line.obj.get("payload")
        return payload if isinstance(payload, dict) else line.obj

    # -- one method per record kind ------------------------------------------------------------

    def _record_type(self, line: Line) -> None:
        self.skipped[f"record_type:{f.label(line.obj.get('record_type'))}"] += 1

    def _meta(self, line: Line) -> None:
        """The session's first ``session_meta`` (or the legacy bare meta line)."""
        legacy = not isinstance(line.obj.get("payload"), dict)
        meta = line.obj if legacy else self._payload(line)
        if self.seen_meta:
            self.skipped["session_meta:fork_or_subagent"] += 1
            return
        self.seen_meta = True
        session = self.session
        meta_id = meta.get("id")
        session.source_id = (
            str(meta_id) if f.integer(meta_id) is not None else f.identifier(meta, "id")
        ) or None
        session.created_at = f.parse_time(meta.get("timestamp")) or f.parse_time(
            line.obj.get("timestamp")
        )
        session.system_prompt = _instructions(
            meta.get("base_instructions") or meta.get("instructions")
        )
        keys = (
            ("git",) if legacy else ("cwd", "originator", "cli_version", "source", "model_provider")
        )
        for key in keys:
            if meta.get(key) is not None:
                session.details[key] = meta[key]

    def _turn_context(self, line: Line) -> None:
        model = f.name(self._payload(line), "model")
        if model:
            self.session.model = model
        self.skipped["turn_context"] += 1

    def _event(self, line: Line) -> None:
        payload = self._payload(line)
        info = payload.get("info")
        if payload.get("type") == "token_count" and isinstance(info, dict):
            last = info.get("last_token_usage")
            if isinstance(last, dict):
                usage = f.normalise_usage(
                    last.get("input_tokens"),
                    last.get("output_tokens"),
                    last.get("cached_input_tokens"),
                )
                if usage:
                    usage["context_tokens"] = usage["input_tokens"]  # cached input is inside it
                    self.session.details["last_usage"] = usage
            if f.token_count(info.get("model_context_window")) is not None:
                self.session.details["model_context_window"] = info["model_context_window"]
        self.skipped[f"event_msg:{f.label(payload.get('type'))}"] += 1

    def _compacted(self, line: Line) -> list[Record]:
        payload = self._payload(line)
        f.string(payload, "message")
        history = payload.get("replacement_history")
        return self._flush() + [
            SourceCompaction(
                self.ids(None, line.number),
                _compacted_summary(payload),
                line.number,
                details={
                    "replacement_history_items": len(history) if isinstance(history, list) else 0
                },
                created_at=self.time(line.obj.get("timestamp")),
            )
        ]

    def _item(self, line: Line) -> list[Record] | None:
        payload = self._payload(line)
        item = payload.get("type")
        when = self.time(line.obj.get("timestamp"))
        if item in _CALLS:
            self._call(line, payload, item, when)
            return None
        out = self._flush()
        if item in _OUTPUTS:
            output = payload.get("output")
            if isinstance(output, dict):
                output = output.get("content") or output.get("output") or str(output)
            out.append(
                SourceMessage(
                    self.ids(None, line.number),
                    "tool",
                    f.text_of(output, self.skipped, _TEXT_BLOCKS),
                    line.number,
                    tool_call_id=f.identifier(payload, "call_id"),
                    created_at=when,
                )
            )
        elif item == "message":
            message = self._message(line, payload, when)
            out.extend([message] if message else [])
        else:
            self.skipped[f"response_item:{f.label(item)}"] += 1
        return out

    def _call(self, line: Line, payload: dict, item: str, when) -> None:
        # The call's fields first: a refused record leaves no half-made message behind.
        call_id = f.required(
            f.identifier(payload, "call_id") or f.identifier(payload, "id"), "'call_id'"
        )
        name = f.name(payload, "name") or item
        arguments = (
            payload.get("arguments")
            if item == "function_call"
            else (payload.get("input") if item == "custom_tool_call" else payload.get("action"))
        )
        if self.calls is None:
            self.calls = SourceMessage(
                self.ids(None, line.number),
                "assistant",
                None,
                line.number,
                tool_calls=[],
                created_at=when,
            )
        calls = self.calls.tool_calls
        assert calls is not None, "a message of calls is made with its list"
        calls.append(f.tool_call(call_id, name, arguments))

    def _message(self, line: Line, payload: dict, when) -> SourceMessage | None:
        source_role = payload.get("role")
        role = _ROLE.get(source_role) if isinstance(source_role, str) else None
        if role is None:
            self.skipped[
                f"message:{f.label(source_role) if source_role is not None else None}"
            ] += 1
            return None
        text = f.text_of(payload.get("content"), self.skipped, _TEXT_BLOCKS)
        details = {"source_role": source_role} if role != source_role else None
        if isinstance(payload.get("phase"), str) and payload["phase"]:
            details = {**(details or {}), "phase": payload["phase"]}
        return SourceMessage(
            self.ids(None, line.number), role, text, line.number, created_at=when, details=details
        )

    handlers = {
        "record_type": _record_type,
        "legacy_meta": _meta,
        "session_meta": _meta,
        "turn_context": _turn_context,
        "event_msg": _event,
        "compacted": _compacted,
        "response_item": _item,
    }


def _instructions(value) -> str | None:
    if isinstance(value, dict):
        value = value.get("text")
    return value if isinstance(value, str) and value else None


def _compacted_summary(payload: dict) -> str:
    """The text a ``compacted`` record leaves in the context: Codex replaces the history with
    its ``replacement_history`` (recent user messages and the summary), or, in older versions,
    with ``message`` alone. Both become the checkpoint's summary, so nothing Codex kept is lost."""
    summary = (payload.get("message") or "").strip()
    history = payload.get("replacement_history")
    kept = []
    for item in history if isinstance(history, list) else ():
        if isinstance(item, dict) and item.get("type") == "message":
            text = f.text_of(item.get("content"), None, _TEXT_BLOCKS).strip()
            if text and text != summary:
                kept.append(f"[{f.label(item.get('role'))}] {text}")
    if not kept:
        return summary
    kept_text = "\n\n".join(kept)
    return f"{summary}\n\n## Messages kept by Codex\n\n{kept_text}" if summary else kept_text
