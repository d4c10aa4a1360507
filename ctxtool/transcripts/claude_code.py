"""Claude Code session JSONL (``~/.claude/projects/<project>/<session-id>.jsonl``).

- ``user``/``assistant`` records carry ``message`` with content blocks (text, thinking,
  tool_use, tool_result, image); one API message may be streamed as several assistant records
  sharing ``message.id``: they are merged, so tool calls and their results stay adjacent.
- ``isSidechain`` records are a Task sub-agent's own conversation: not part of the main line,
  counted as skipped ``sidechain``.
- A compaction is a ``system`` record with subtype ``compact_boundary`` (``preTokens``) followed
  by a user record with ``isCompactSummary``: it becomes a checkpoint whose first kept message is
  the next message of the transcript.
- ``summary``/``custom-title``/``ai-title`` records give the title; everything else (queue
  operations, snapshots, attachments, hooks, api errors) is counted by kind.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterator

from . import (Line, MainLineFilter, Record, SourceCompaction, SourceMessage, SourceSession,
               Transcript, UniqueIds, first_line_title, main_line, normalise_usage, parse_time,
               text_of, tool_call)

FORMAT = "claude-code"


def parse(lines: Iterator[Line], path: str, skipped: Counter,
          main: set[str] | None = None) -> Transcript:
    """Parse assuming a linear file, or keep only the records in ``main`` (see main_line_ids)."""
    session = SourceSession(FORMAT)
    return Transcript(session, _records(lines, session, skipped, main), skipped)


def _link(rec: dict) -> tuple[str, str | None] | None:
    """(uuid, parent uuid) of a main-conversation record; a compaction boundary links through
    ``logicalParentUuid``. Sidechain records are another conversation."""
    if rec.get("isSidechain") or not isinstance(rec.get("uuid"), str):
        return None
    parent = rec.get("parentUuid") or rec.get("logicalParentUuid")
    return rec["uuid"], parent if isinstance(parent, str) else None


def main_line_ids(lines: Iterator[Line]) -> set[str]:
    """First pass over a branched file: the uuids on the path from its newest record."""
    return main_line(lines, _link)


def _records(lines: Iterator[Line], session: SourceSession, skipped: Counter,
             main: set[str] | None) -> Iterator[Record]:
    ids = UniqueIds()
    on_main_line = MainLineFilter(main)
    titles: dict[str, str] = {}
    pending_assistant: SourceMessage | None = None
    pending_api_id: str | None = None
    boundary: dict | None = None
    boundary_line = 0

    def flush():
        nonlocal pending_assistant, pending_api_id
        out, pending_assistant, pending_api_id = pending_assistant, None, None
        return out

    for line in lines:
        rec = line.obj
        kind = rec.get("type")
        if session.source_id is None and isinstance(rec.get("sessionId"), str):
            session.source_id = rec["sessionId"]
            session.details["cwd"] = rec.get("cwd")
            session.details["version"] = rec.get("version")
            session.details["git_branch"] = rec.get("gitBranch")
        if not on_main_line.keeps(_link(rec), kind, skipped):
            continue
        if session.created_at is None and kind in ("user", "assistant"):
            session.created_at = parse_time(rec.get("timestamp"))
        if kind == "summary":
            if rec.get("summary"):
                titles.setdefault("summary", rec["summary"])
            skipped["summary"] += 1
            continue
        if kind in ("custom-title", "ai-title"):
            value = rec.get("customTitle") or rec.get("aiTitle")
            if value:
                titles[kind] = value
            skipped[kind] += 1
            continue
        if kind == "system" and rec.get("subtype") == "compact_boundary":
            if pending_assistant:
                yield flush()
            boundary, boundary_line = rec, line.number
            skipped["system:compact_boundary"] += 1
            continue
        if kind not in ("user", "assistant"):
            label = f"{kind}:{rec.get('subtype')}" if rec.get("subtype") else str(kind)
            skipped[label] += 1
            continue
        if rec.get("isSidechain"):
            skipped["sidechain"] += 1
            continue
        message = rec.get("message") or {}
        if not isinstance(message, dict):
            skipped["malformed_message"] += 1
            continue
        when = parse_time(rec.get("timestamp"))

        if kind == "user" and rec.get("isCompactSummary"):
            if pending_assistant:
                yield flush()
            meta = (boundary or {}).get("compactMetadata") or {}
            pre = meta.get("preTokens")
            yield SourceCompaction(
                source_id=ids((boundary or {}).get("uuid") or rec.get("uuid"), boundary_line or line.number),
                summary=text_of(message.get("content")),
                line=line.number,
                tokens_before=pre if isinstance(pre, int) else None,
                details={"trigger": meta.get("trigger"), "summary_uuid": rec.get("uuid")},
            )
            boundary = None
            continue

        if kind == "assistant":
            api_id = message.get("id")
            if pending_assistant is not None and (api_id is None or api_id != pending_api_id):
                yield flush()
            if pending_assistant is None:
                pending_assistant = SourceMessage(ids(rec.get("uuid"), line.number), "assistant",
                                                  None, line.number, created_at=when, details={})
                pending_api_id = api_id
            _merge_assistant(pending_assistant, message, skipped)
            if message.get("model") and message.get("model") != "<synthetic>":
                session.model = message["model"]
            continue

        # A user record: its text, and one tool message per tool_result block.
        if pending_assistant:
            yield flush()
        content = message.get("content")
        base_id = rec.get("uuid")
        if rec.get("toolUseResult") is not None:
            # The UI's structured copy of a tool result; the model sees the tool_result block.
            skipped["field:toolUseResult"] += 1
        if isinstance(content, list):
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            text = text_of([b for b in content if not (isinstance(b, dict)
                                                       and b.get("type") == "tool_result")], skipped)
            for k, block in enumerate(results):
                body = block.get("content")
                yield SourceMessage(
                    ids(base_id, line.number, f"#{k}" if k else ""), "tool",
                    text_of(body, skipped) if not isinstance(body, str) else body, line.number,
                    tool_call_id=block.get("tool_use_id"), created_at=when,
                    details={"is_error": True} if block.get("is_error") else None,
                )
            if text:
                yield SourceMessage(ids(base_id, line.number, "#text" if results else ""), "user",
                                    text, line.number, created_at=when,
                                    details={"is_meta": True} if rec.get("isMeta") else None)
            elif not results:
                skipped["empty_user"] += 1
        else:
            text = text_of(content)
            if session.title is None and not rec.get("isMeta") and not text.startswith("<"):
                session.title = first_line_title(text)
            yield SourceMessage(ids(base_id, line.number), "user", text, line.number,
                                created_at=when,
                                details={"is_meta": True} if rec.get("isMeta") else None)
    if pending_assistant:
        yield flush()
    if boundary is not None:
        skipped["compact_boundary_without_summary"] += 1
    session.title = (titles.get("custom-title") or titles.get("ai-title") or titles.get("summary")
                     or session.title)


def _merge_assistant(target: SourceMessage, message: dict, skipped: Counter) -> None:
    """Add one streamed assistant record's blocks (text, thinking, tool_use) to ``target``."""
    content = message.get("content")
    details = target.details if target.details is not None else {}
    if isinstance(content, str):
        target.content = (target.content + "\n" if target.content else "") + content
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text") or ""
            target.content = (target.content + "\n" if target.content else "") + text
        elif kind == "tool_use":
            target.tool_calls = (target.tool_calls or []) + [
                tool_call(block.get("id") or "", block.get("name") or "", block.get("input"))]
        elif kind in ("thinking", "redacted_thinking"):
            thought = block.get("thinking") or ""
            if thought:
                details["thinking"] = (details.get("thinking", "") + "\n" + thought).lstrip("\n")
        else:
            skipped[f"block:{kind}"] += 1
    usage = message.get("usage")
    if isinstance(usage, dict):
        norm = normalise_usage(usage.get("input_tokens"), usage.get("output_tokens"),
                               usage.get("cache_read_input_tokens"),
                               usage.get("cache_creation_input_tokens"))
        if norm:
            details["usage"] = norm
    if message.get("model"):
        details["model"] = message["model"]
    if message.get("stop_reason"):
        details["stop_reason"] = message["stop_reason"]
    target.details = details

