"""Claude Code session JSONL (``~/.claude/projects/<project>/<session-id>.jsonl``).

- ``user``/``assistant`` records carry ``message`` with content blocks (text, thinking,
  tool_use, tool_result, image); one API message may be streamed as several assistant records
  sharing ``message.id``: they are merged, so tool calls and their results stay adjacent.
- ``isSidechain`` records are a Task sub-agent's own conversation: not part of the main line,
  counted as skipped ``sidechain``.
- A compaction is a ``system`` record with subtype ``compact_boundary`` (``preTokens``) followed
  by a user record with ``isCompactSummary``: it becomes a checkpoint whose first kept message is
  the next message of the transcript.
- ``custom-title``/``ai-title`` records give the title, else a ``summary`` record whose
  ``leafUuid`` is a message of this file: Claude Code writes the summary of the session a new
  one resumes or follows at the top of the new file, naming its leaf in the other one. Without
  either, the first real request does (``titles.py``). Everything else (queue operations,
  snapshots, attachments, hooks, api errors) is counted by kind.
"""

from __future__ import annotations

from typing import Any

from ..core.source_records import Line, Record, SourceCompaction, SourceMessage
from . import fields as f
from .walk import FormatParser

_UNTIED = ("summary", "queue-operation", "file-history-snapshot")  # records without ids


class ClaudeCodeParser(FormatParser):
    name = "claude-code"
    tree = True

    def __init__(self):
        super().__init__()
        self.titles: dict[str, str] = {}
        self.summaries: list[tuple[str | None, str]] = []  # (leafUuid, summary)
        self.uuids: set[str] = set()  # of this file's messages: the leaves its summaries name
        self.pending: SourceMessage | None = None  # an assistant message still being streamed
        self.pending_api_id: str | None = None
        self.boundary: dict | None = None  # the compact_boundary waiting for its summary
        self.boundary_line = 0

    @staticmethod
    def fits(obj: dict) -> bool:
        # Claude Code adds record types often: any typed record tied to the session fits.
        return isinstance(obj.get("type"), str) and (
            "uuid" in obj or "sessionId" in obj or "messageId" in obj or obj["type"] in _UNTIED
        )

    @staticmethod
    def link(rec: dict) -> tuple[str, str | None] | None:
        """(uuid, parent uuid) of a main-conversation record; a compaction boundary links through
        ``logicalParentUuid``. Sidechain records are another conversation."""
        uuid = rec.get("uuid")
        if type(uuid) is not str or rec.get("isSidechain"):
            return None
        parent = rec.get("parentUuid") or rec.get("logicalParentUuid")
        return uuid, parent if type(parent) is str else None

    def observe(self, rec: dict) -> bool:
        session = self.session
        if session.source_id is None and isinstance(rec.get("sessionId"), str):
            session.source_id = f.identifier(rec, "sessionId")
            for key, field in (("cwd", "cwd"), ("version", "version"), ("git_branch", "gitBranch")):
                session.details[key] = rec[field] if isinstance(rec.get(field), str) else None
        return session.source_id is not None  # the first record with a session id is enough

    def kind_of(self, obj: dict) -> str:
        kind = obj.get("type")
        if type(kind) is not str:
            return super().kind_of(obj)
        if kind == "system" and obj.get("subtype") == "compact_boundary":
            return "compact_boundary"
        return kind

    def unknown(self, kind: str, line: Line) -> None:
        subtype = line.obj.get("subtype")
        self.skipped[f"{kind}:{f.label(subtype)}" if subtype else kind] += 1

    def finish(self) -> list[Record]:
        out = self._flush()
        if self.boundary is not None:
            self.skipped["compact_boundary_without_summary"] += 1
        t = self.titles
        own = (s for leaf, s in self.summaries if leaf is None or leaf in self.uuids)
        self.session.title = (
            t.get("custom-title") or t.get("ai-title") or next(own, None) or self.session.title
        )
        return out

    def _flush(self) -> list[Record]:
        out, self.pending, self.pending_api_id = self.pending, None, None
        return [out] if out else []

    # -- one method per record kind ------------------------------------------------------------

    def _summary(self, line: Line) -> None:
        summary = line.obj.get("summary")
        if isinstance(summary, str) and summary:
            leaf = line.obj.get("leafUuid")
            self.summaries.append((leaf if isinstance(leaf, str) else None, summary))
        self.skipped["summary"] += 1

    def _title(self, line: Line) -> None:
        kind = line.obj["type"]
        value = f.string(line.obj, "customTitle" if kind == "custom-title" else "aiTitle")
        if value:
            self.titles[kind] = value
        self.skipped[kind] += 1

    def _compact_boundary(self, line: Line) -> list[Record]:
        self.boundary, self.boundary_line = line.obj, line.number
        self.skipped["system:compact_boundary"] += 1
        return self._flush()

    def _message(self, line: Line) -> tuple[dict, str | None] | None:
        """The checked ``message`` of a user/assistant record and its uuid, or None for a
        sidechain one. (Inline checks of the usual types first: this runs for every message.)"""
        rec = line.obj
        if self.session.created_at is None:
            self.session.created_at = f.parse_time(rec.get("timestamp"))
        uuid = f.identifier(rec, "uuid")
        if uuid is not None:
            self.uuids.add(uuid)
        if rec.get("isSidechain"):
            self.skipped["sidechain"] += 1
            return None
        message = rec.get("message")
        if type(message) is not dict:
            message = f.obj(rec, "message") or {}
        return message, uuid

    def _assistant(self, line: Line) -> list[Record] | None:
        found = self._message(line)
        if found is None:
            return None
        message, uuid = found
        api_id = f.identifier(message, "id")
        model = f.name(message, "model")
        blocks = _blocks(message)  # read and checked before anything changes: a refused
        out = []  # record leaves no trace
        if self.pending is not None and (api_id is None or api_id != self.pending_api_id):
            out = self._flush()
        if self.pending is None:
            self.pending = SourceMessage(
                self.ids(uuid, line.number),
                "assistant",
                None,
                line.number,
                None,
                None,
                None,
                self.time(line.obj.get("timestamp")),
                {},
            )
            self.pending_api_id = api_id
        _merge_assistant(self.pending, blocks, message, self.skipped)
        if model and model != "<synthetic>":
            self.session.model = model
        return out

    def _user(self, line: Line) -> list[Record] | None:
        found = self._message(line)
        if found is None:
            return None
        message, uuid = found
        rec = line.obj
        out = self._flush() if self.pending is not None else []
        if rec.get("isCompactSummary"):
            boundary, self.boundary = self.boundary or {}, None
            return out + [_checkpoint(boundary, self.boundary_line, line, message, self.ids)]
        if rec.get("toolUseResult") is not None:
            # The UI's structured copy of a tool result; the model sees the tool_result block.
            self.skipped["field:toolUseResult"] += 1
        stamp = rec.get("timestamp")
        when = f.parse_time(stamp)
        if when is None and stamp is not None:  # self.time's count, inline: every user record
            self.skipped["invalid_timestamp"] += 1
        number = line.number
        content = message.get("content")
        if type(content) is not list:
            meta = {"is_meta": True} if rec.get("isMeta") else None
            text = content if type(content) is str else f.text_of(content)
            out.append(
                SourceMessage(
                    self.ids(uuid, number), "user", text, number, None, None, None, when, meta
                )
            )
            return out
        # one pass: most such records hold a single tool result
        results: list[Any] = []
        others: list[Any] = []
        for b in content:
            (results if type(b) is dict and b.get("type") == "tool_result" else others).append(b)
        for k, block in enumerate(results):
            # The id and the text first, then the call id's check: a record refused for its call
            # id (--skip-invalid) still takes the ids it took before 2026-12, so a re-import of
            # a file imported then finds its messages under the same ids.
            source_id = self.ids(uuid, number, f"#{k}" if k else "")
            body = block.get("content")
            text = body if type(body) is str else f.text_of(body, self.skipped)
            call_id = f.identifier(block, "tool_use_id")
            out.append(
                SourceMessage(
                    source_id,
                    "tool",
                    text,
                    number,
                    None,
                    call_id,
                    None,
                    when,
                    {"is_error": True} if block.get("is_error") else None,
                )
            )
        text = f.text_of(others, self.skipped) if others else ""
        if text:
            out.append(
                SourceMessage(
                    self.ids(uuid, number, "#text" if results else ""),
                    "user",
                    text,
                    number,
                    None,
                    None,
                    None,
                    when,
                    {"is_meta": True} if rec.get("isMeta") else None,
                )
            )
        elif not results:
            self.skipped["empty_user"] += 1
        return out

    handlers = {
        "summary": _summary,
        "custom-title": _title,
        "ai-title": _title,
        "compact_boundary": _compact_boundary,
        "assistant": _assistant,
        "user": _user,
    }


def _checkpoint(
    boundary: dict, boundary_line: int, line: Line, message: dict, ids
) -> SourceCompaction:
    """The compact_boundary record and the summary after it, as one checkpoint."""
    meta = boundary.get("compactMetadata")
    meta = meta if isinstance(meta, dict) else {}
    boundary_id = boundary.get("uuid") if isinstance(boundary.get("uuid"), str) else None
    trigger = meta.get("trigger")
    return SourceCompaction(
        source_id=ids(boundary_id or line.obj.get("uuid"), boundary_line or line.number),
        summary=f.text_of(message.get("content")),
        line=line.number,
        tokens_before=f.token_count(meta.get("preTokens")),
        details={
            "trigger": trigger if isinstance(trigger, str) else None,
            "summary_uuid": line.obj.get("uuid"),
        },
        created_at=f.parse_time(boundary.get("timestamp"))
        or f.parse_time(line.obj.get("timestamp")),
    )


def _blocks(
    message: dict,
) -> tuple[list[str], list[dict] | None, list[str] | None, list[str] | None]:
    """One streamed assistant record's content: (texts, tool calls, thoughts, kinds of the
    other blocks; None for none), every field checked first (InvalidRecord), so nothing of a
    refused record is merged. (Lists made only when needed: this runs for every record.)"""
    content = message.get("content")
    texts: list[str] = []
    calls = thoughts = others = None
    if type(content) is str:
        texts.append(content)
    elif type(content) is list:
        for block in content:
            if type(block) is not dict:
                continue
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                texts.append(text if type(text) is str else "")
            elif kind == "tool_use":
                call_id, name = f.identifier(block, "id"), f.name(block, "name")
                if not (call_id and name):  # an API pairs a result by the id, needs the name
                    call_id, name = f.required(call_id, "'id'"), f.required(name, "'name'")
                call = f.tool_call(call_id, name, block.get("input"))
                if calls is None:
                    calls = [call]
                else:
                    calls.append(call)
            elif kind in ("thinking", "redacted_thinking"):
                thought = block.get("thinking")
                if type(thought) is str and thought:
                    thoughts = [thought] if thoughts is None else [*thoughts, thought]
            else:
                kind = f"block:{f.label(kind)}"
                others = [kind] if others is None else [*others, kind]
    return texts, calls, thoughts, others


def _merge_assistant(target: SourceMessage, blocks, message: dict, skipped) -> None:
    """Add one streamed assistant record's blocks (text, thinking, tool_use) to ``target``."""
    texts, calls, thoughts, others = blocks
    details = target.details if target.details is not None else {}
    content = target.content
    for text in texts:
        content = (content + "\n" if content else "") + text
    target.content = content
    if calls:
        target.tool_calls = calls if target.tool_calls is None else [*target.tool_calls, *calls]
    for thought in thoughts or ():
        details["thinking"] = (details.get("thinking", "") + "\n" + thought).lstrip("\n")
    for kind in others or ():
        skipped[kind] += 1
    _assistant_details(details, message)
    target.details = details


def _assistant_details(details: dict, message: dict) -> None:
    usage = message.get("usage")
    if type(usage) is dict:
        norm = f.normalise_usage(
            usage.get("input_tokens"),
            usage.get("output_tokens"),
            usage.get("cache_read_input_tokens"),
            usage.get("cache_creation_input_tokens"),
        )
        if norm:
            details["usage"] = norm
    model, stop = message.get("model"), message.get("stop_reason")
    if type(model) is str and model:
        details["model"] = model
    if type(stop) is str and stop:
        details["stop_reason"] = stop
