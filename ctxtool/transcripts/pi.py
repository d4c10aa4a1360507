"""Pi coding-agent session JSONL (``~/.pi/agent/sessions/--<path>--/<ts>_<uuid>.jsonl``).

v1 (no ``version``): a header then linear entries without ids; a compaction points at its first
kept entry by ``firstKeptEntryIndex`` (index over the file's entries, header = 0).
v2/v3: entries carry ``id``/``parentId``; a compaction names ``firstKeptEntryId``.
Message roles: user, assistant (text, thinking, toolCall blocks), toolResult, bashExecution (a
shell command the user ran, which pi puts in the context as user text, unless excluded),
custom/hookMessage. ``custom_message`` and ``branch_summary`` entries take part in the context
too and become user messages. ``model_change`` sets the session's model, ``session_info`` its
title; ``thinking_level_change``, ``label``, ``custom`` (extension state) are counted.

A first-kept entry that is not a message resolves to the next message after it.
"""

from __future__ import annotations

from ..core.source_records import Line, Record, SourceCompaction, SourceMessage
from . import fields as f
from .walk import FormatParser

_KINDS = {
    "session",
    "message",
    "model_change",
    "thinking_level_change",
    "compaction",
    "custom",
    "custom_message",
    "branch_summary",
    "session_info",
    "label",
}


class PiParser(FormatParser):
    name = "pi"
    tree = True

    def __init__(self):
        super().__init__()
        self.named_title: str | None = None  # a session_info name beats the first user message
        self.entry_index = -1
        # Entry key (v2 id, or v1 "#index") -> source id of the first message at or after it.
        self.by_key: dict[str, str | None] = {}
        self.unresolved: list[str] = []  # entry keys waiting for the next message

    @staticmethod
    def fits(obj: dict) -> bool:
        kind = obj.get("type")
        if not isinstance(kind, str):
            return False
        if "id" in obj and "parentId" in obj:
            return True  # every v2+ entry, of any type (pi adds types over time)
        return kind in _KINDS and ("id" in obj or "timestamp" in obj or "message" in obj)

    @staticmethod
    def link(rec: dict) -> tuple[str, str | None] | None:
        """(id, parentId) of a v2+ tree entry; None for the header and v1 entries (no ids)."""
        if rec.get("type") == "session" or not isinstance(rec.get("id"), str):
            return None
        parent = rec.get("parentId")
        return rec["id"], parent if isinstance(parent, str) else None

    def observe(self, obj: dict) -> None:
        self.entry_index += 1  # v1 indexes count every entry, on the main line or not

    def unknown(self, kind: str, line: Line) -> None:
        self._remember(line, None)
        self.skipped[kind] += 1

    def finish(self) -> list[Record]:
        if self.named_title:
            self.session.title = self.named_title
        return []

    def _remember(self, line: Line, source_id: str | None) -> None:
        """Map this entry's keys (v1 index, v2 id) to the first message at or after it."""
        keys = [f"#{self.entry_index}"]
        entry_id = line.obj.get("id")
        if isinstance(entry_id, str) and entry_id:
            keys.append(entry_id)
        for key in keys:
            if source_id is None:
                self.unresolved.append(key)
                self.by_key[key] = None
                continue
            for waiting in self.unresolved:
                self.by_key[waiting] = source_id
            self.unresolved.clear()
            self.by_key[key] = source_id

    # -- one method per record kind ------------------------------------------------------------

    def _session(self, line: Line) -> None:
        rec, session = line.obj, self.session
        session_id = rec.get("id")
        session.source_id = (
            str(session_id) if f.integer(session_id) is not None else f.identifier(rec, "id")
        ) or None
        session.created_at = f.parse_time(rec.get("timestamp"))
        session.model = f.name(rec, "modelId") or session.model
        session.details.update(
            {
                k: rec[k]
                for k in ("cwd", "version", "provider", "branchedFrom", "parentSession")
                if rec.get(k) is not None
            }
        )

    def _message(self, line: Line) -> list[Record] | None:
        rec, kind = line.obj, line.obj["type"]
        f.identifier(rec, "id")
        if kind == "message":
            message = f.obj(rec, "message") or {}
        elif kind == "custom_message":
            message = {
                "role": "custom",
                "content": rec.get("content"),
                "customType": rec.get("customType"),
            }
        else:
            message = {"role": "branchSummary", "summary": f.string(rec, "summary")}
        role = message.get("role")
        if role == "assistant" and f.name(message, "model"):
            self.session.model = message["model"]
        when = self.time(rec.get("timestamp"), message.get("timestamp"))
        out = _to_message(
            message, self.ids(rec.get("id"), line.number), line.number, when, self.skipped
        )
        if out is None:
            self.skipped[f"message:{f.label(role)}"] += 1
            self._remember(line, None)
            return None
        self._remember(line, out.source_id)
        return [out]

    def _model_change(self, line: Line) -> None:
        self._remember(line, None)
        self.session.model = f.name(line.obj, "modelId") or self.session.model
        self.skipped["model_change"] += 1

    def _session_info(self, line: Line) -> None:
        self._remember(line, None)
        name = line.obj.get("name")
        if name:
            self.named_title = name if isinstance(name, str) else f.text_of(name)
        self.skipped["session_info"] += 1

    def _compaction(self, line: Line) -> list[Record]:
        rec = line.obj
        f.identifier(rec, "id")
        summary = f.string(rec, "summary") or ""
        target = f.identifier(rec, "firstKeptEntryId")
        raw_index = rec.get("firstKeptEntryIndex")
        index = f.integer(raw_index)
        key = target if target is not None else (f"#{index}" if index is not None else None)
        details = rec.get("details") if isinstance(rec.get("details"), dict) else {}
        self._remember(line, None)
        if key is None or key not in self.by_key:
            # No entry before it has that id or index (-5, 10**20, none given): the checkpoint
            # keeps from the next message, and the report says so.
            shown = (
                key if key is not None else (None if raw_index is None else repr(raw_index)[:40])
            )
            details = {**details, "unresolved_first_kept": shown}
            self.skipped["unresolved_first_kept"] += 1
        return [
            SourceCompaction(
                self.ids(rec.get("id"), line.number),
                summary,
                line.number,
                first_kept_source_id=self.by_key.get(key) if key else None,
                tokens_before=f.token_count(rec.get("tokensBefore")),
                details=details or None,
                created_at=self.time(rec.get("timestamp")),
            )
        ]

    handlers = {
        "session": _session,
        "message": _message,
        "custom_message": _message,
        "branch_summary": _message,
        "model_change": _model_change,
        "session_info": _session_info,
        "compaction": _compaction,
    }


def _to_message(message: dict, source_id: str, line: int, when, skipped) -> SourceMessage | None:
    role = message.get("role")
    content = message.get("content")
    if role == "user":
        return SourceMessage(source_id, "user", f.text_of(content, skipped), line, created_at=when)
    if role in ("custom", "hookMessage"):
        custom_type = message.get("customType")
        return SourceMessage(
            source_id,
            "user",
            f.text_of(content, skipped),
            line,
            created_at=when,
            details={
                "source_role": role,
                "custom_type": custom_type if isinstance(custom_type, str) else None,
            },
        )
    if role == "branchSummary":
        text = "The conversation came back from another branch, summarized here:\n\n" + (
            message.get("summary") or ""
        )
        return SourceMessage(
            source_id,
            "user",
            text,
            line,
            created_at=when,
            details={"source_role": "branch_summary"},
        )
    if role == "assistant":
        return _assistant(message, source_id, line, when, skipped)
    if role == "toolResult":
        return SourceMessage(
            source_id,
            "tool",
            f.text_of(content, skipped),
            line,
            tool_call_id=f.identifier(message, "toolCallId"),
            name=f.name(message, "toolName"),
            created_at=when,
            details={"is_error": True} if message.get("isError") else None,
        )
    if role == "bashExecution":
        if message.get("excludeFromContext"):
            return None  # a `!!` command: shown to the user, never sent to the model
        command, output = message.get("command", ""), message.get("output", "")
        text = f"$ {f.text_of(command)}\n{f.text_of(output)}"
        return SourceMessage(
            source_id,
            "user",
            text,
            line,
            created_at=when,
            details={
                "source_role": "bashExecution",
                "exit_code": f.integer(message.get("exitCode")),
            },
        )
    return None


def _assistant(message: dict, source_id: str, line: int, when, skipped) -> SourceMessage:
    content = message.get("content")
    texts, calls, thinking = [], [], []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                texts.append(text if isinstance(text, str) else "")
            elif kind == "toolCall":
                calls.append(
                    f.tool_call(
                        f.required(f.identifier(block, "id"), "'id'"),
                        f.required(f.name(block, "name"), "'name'"),
                        block.get("arguments"),
                    )
                )
            elif kind == "thinking":
                thinking.append(
                    block.get("thinking") if isinstance(block.get("thinking"), str) else ""
                )
            else:
                skipped[f"block:{f.label(kind)}"] += 1
    details: dict = {
        k: message[k]
        for k in ("provider", "model", "api", "stopReason", "errorMessage")
        if isinstance(message.get(k), str)
    }
    usage = message.get("usage")
    if isinstance(usage, dict):
        norm = f.normalise_usage(
            usage.get("input"), usage.get("output"), usage.get("cacheRead"), usage.get("cacheWrite")
        )
        if norm:
            details["usage"] = norm
    if any(thinking):
        details["thinking"] = "\n".join(t for t in thinking if t)
    return SourceMessage(
        source_id,
        "assistant",
        "\n".join(t for t in texts if t) or None,
        line,
        tool_calls=calls or None,
        created_at=when,
        details=details or None,
    )
