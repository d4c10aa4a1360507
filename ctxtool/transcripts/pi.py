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

from collections import Counter
from typing import Iterator

from . import (Line, MainLineFilter, Record, SourceCompaction, SourceMessage, SourceSession,
               Transcript, UniqueIds, first_line_title, main_line, normalise_usage, parse_time,
               text_of, tool_call)

FORMAT = "pi"


def parse(lines: Iterator[Line], path: str, skipped: Counter,
          main: set[str] | None = None) -> Transcript:
    """Parse assuming a linear file, or keep only the entries in ``main`` (see main_line_ids)."""
    session = SourceSession(FORMAT)
    return Transcript(session, _records(lines, session, skipped, main), skipped)


def _link(rec: dict) -> tuple[str, str | None] | None:
    """(id, parentId) of a v2+ tree entry; None for the header and v1 entries (no ids)."""
    if rec.get("type") == "session" or not isinstance(rec.get("id"), str):
        return None
    parent = rec.get("parentId")
    return rec["id"], parent if isinstance(parent, str) else None


def main_line_ids(lines: Iterator[Line]) -> set[str]:
    """First pass over a branched file: the entry ids on the path from its newest record."""
    return main_line(lines, _link)


def _records(lines: Iterator[Line], session: SourceSession, skipped: Counter,
             main: set[str] | None) -> Iterator[Record]:
    ids = UniqueIds()
    on_main_line = MainLineFilter(main)
    named_title: str | None = None  # a session_info name beats the first user message
    entry_index = -1
    # Entry key (v2 id, or v1 index) -> source id of the first message at or after that entry.
    by_key: dict[str, str | None] = {}
    unresolved: list[str] = []  # entry keys waiting for the next message

    def remember(key: str, message_source_id: str | None):
        if message_source_id is None:
            unresolved.append(key)
            by_key[key] = None
            return
        for waiting in unresolved:
            by_key[waiting] = message_source_id
        unresolved.clear()
        by_key[key] = message_source_id

    for line in lines:
        rec = line.obj
        entry_index += 1
        kind = rec.get("type")
        if not on_main_line.keeps(_link(rec), kind, skipped):
            continue
        key_v1 = f"#{entry_index}"
        entry_id = rec.get("id") if isinstance(rec.get("id"), str) and kind != "session" else None
        if kind == "session":
            session.source_id = str(rec.get("id") or "") or None
            session.created_at = parse_time(rec.get("timestamp"))
            session.model = rec.get("modelId") or session.model
            session.details.update({k: rec[k] for k in ("cwd", "version", "provider",
                                                        "branchedFrom", "parentSession")
                                    if rec.get(k) is not None})
            continue
        if kind in ("message", "custom_message", "branch_summary"):
            # Extension messages and branch summaries take part in the LLM context too.
            message = (rec.get("message") or {}) if kind == "message" else (
                {"role": "custom", "content": rec.get("content"), "customType": rec.get("customType")}
                if kind == "custom_message" else {"role": "branchSummary", "summary": rec.get("summary")})
            out = _message(message, ids(entry_id, line.number), line.number,
                           parse_time(rec.get("timestamp")) or parse_time(message.get("timestamp")),
                           skipped)
            if message.get("role") == "assistant" and message.get("model"):
                session.model = message["model"]
            if out is None:
                skipped[f"message:{message.get('role')}"] += 1
                _remember_keys(remember, entry_id, key_v1, None)
                continue
            if out.role == "user" and session.title is None:
                session.title = first_line_title(out.content)
            _remember_keys(remember, entry_id, key_v1, out.source_id)
            yield out
            continue
        _remember_keys(remember, entry_id, key_v1, None)
        if kind == "model_change":
            session.model = rec.get("modelId") or session.model
            skipped["model_change"] += 1
        elif kind == "session_info" and rec.get("name"):
            named_title = str(rec["name"])
            skipped["session_info"] += 1
        elif kind == "compaction":
            target = rec.get("firstKeptEntryId")
            key = target if isinstance(target, str) else (
                f"#{rec['firstKeptEntryIndex']}" if isinstance(rec.get("firstKeptEntryIndex"), int)
                else None)
            first_kept = by_key.get(key) if key is not None else None
            details = rec.get("details") if isinstance(rec.get("details"), dict) else {}
            if key is not None and key not in by_key:
                details = {**details, "unresolved_first_kept": key}
            tokens = rec.get("tokensBefore")
            yield SourceCompaction(ids(entry_id, line.number), rec.get("summary") or "", line.number,
                                   first_kept_source_id=first_kept,
                                   tokens_before=tokens if isinstance(tokens, int) else None,
                                   details=details or None)
        else:
            skipped[str(kind)] += 1
    if named_title:
        session.title = named_title


def _remember_keys(remember, entry_id, key_v1, source_id) -> None:
    remember(key_v1, source_id)
    if entry_id:
        remember(entry_id, source_id)


def _message(message: dict, source_id: str, line: int, when, skipped: Counter) -> SourceMessage | None:
    role = message.get("role")
    content = message.get("content")
    if role == "user":
        return SourceMessage(source_id, "user", text_of(content, skipped), line, created_at=when)
    if role in ("custom", "hookMessage"):
        return SourceMessage(source_id, "user", text_of(content, skipped), line, created_at=when,
                             details={"source_role": role, "custom_type": message.get("customType")})
    if role == "branchSummary":
        text = ("The conversation came back from another branch, summarised here:\n\n"
                + str(message.get("summary") or ""))
        return SourceMessage(source_id, "user", text, line, created_at=when,
                             details={"source_role": "branch_summary"})
    if role == "assistant":
        texts, calls, thinking = [], [], []
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict):
                kind = block.get("type")
                if kind == "text":
                    texts.append(block.get("text") or "")
                elif kind == "toolCall":
                    calls.append(tool_call(block.get("id") or "", block.get("name") or "",
                                           block.get("arguments")))
                elif kind == "thinking":
                    thinking.append(block.get("thinking") or "")
                else:
                    skipped[f"block:{kind}"] += 1
        details: dict = {k: message[k] for k in ("provider", "model", "api", "stopReason")
                         if message.get(k) is not None}
        usage = message.get("usage")
        if isinstance(usage, dict):
            norm = normalise_usage(usage.get("input"), usage.get("output"), usage.get("cacheRead"),
                                   usage.get("cacheWrite"))
            if norm:
                details["usage"] = norm
        if any(thinking):
            details["thinking"] = "\n".join(t for t in thinking if t)
        return SourceMessage(source_id, "assistant", "\n".join(t for t in texts if t) or None, line,
                             tool_calls=calls or None, created_at=when, details=details or None)
    if role == "toolResult":
        details = {"is_error": True} if message.get("isError") else None
        return SourceMessage(source_id, "tool", text_of(content, skipped), line,
                             tool_call_id=message.get("toolCallId"), name=message.get("toolName"),
                             created_at=when, details=details)
    if role == "bashExecution":
        if message.get("excludeFromContext"):
            return None  # a `!!` command: shown to the user, never sent to the model
        text = f"$ {message.get('command', '')}\n{message.get('output', '')}"
        return SourceMessage(source_id, "user", text, line, created_at=when,
                             details={"source_role": "bashExecution",
                                      "exit_code": message.get("exitCode")})
    return None
