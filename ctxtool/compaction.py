"""Compaction planning: pure functions over a list of messages (no database, no LLM).

Should a session compact, where is the cut, what is summarised and what is kept verbatim. The
rules: keep at least ``keep_recent_tokens`` of the most recent messages; cut at a turn boundary
(a user message) where possible; never between a tool call and its result, and never leave a
tool result in the kept part without its call. A turn larger than the budget is cut inside, at
an assistant message whose earlier tool calls are all answered, and its early part summarised.
Iterative: the messages given are the session's restored suffix (from the previous checkpoint's
first kept message on), so a new checkpoint covers exactly what the previous one kept and
nothing falls between two checkpoints.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Sequence

DEFAULT_RESERVE_TOKENS = 16_384
DEFAULT_KEEP_RECENT_TOKENS = 20_000
DEFAULT_CONTEXT_WINDOW = 128_000

# Context windows by model-name prefix (longest prefix wins); --context-window overrides.
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000, "gpt-4.1": 1_047_576, "gpt-4.5": 128_000, "gpt-4-turbo": 128_000,
    "gpt-4-32k": 32_768, "gpt-4": 8_192, "gpt-3.5-turbo": 16_385, "gpt-5": 400_000,
    "o1": 200_000, "o3": 200_000, "o4": 200_000, "chatgpt-4o": 128_000, "gpt-oss": 131_072,
    "claude": 200_000, "gemini": 1_048_576, "llama": 128_000, "mistral": 128_000,
    "deepseek": 128_000, "qwen": 131_072,
}


def context_window_for(model: str | None, override: int | None = None) -> int:
    """The model's context window: the override, else the longest matching prefix, else 128k."""
    if override:
        return override
    name = (model or "").rsplit("/", 1)[-1].lower()
    best = max((p for p in CONTEXT_WINDOWS if name.startswith(p)), key=len, default=None)
    return CONTEXT_WINDOWS[best] if best else DEFAULT_CONTEXT_WINDOW


@dataclass(frozen=True)
class CompactionSettings:
    context_window: int | None = None  # None: from the session's model
    reserve_tokens: int = DEFAULT_RESERVE_TOKENS
    keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS

    def threshold(self, model: str | None) -> int:
        """Compact when the current context exceeds this many tokens."""
        return context_window_for(model, self.context_window) - self.reserve_tokens


def should_compact(context_tokens: int, model: str | None, settings: CompactionSettings) -> bool:
    return context_tokens > settings.threshold(model)


@dataclass(frozen=True)
class PlanMessage:
    """What the planner needs of a message: its id, role, tokens and tool-call links."""

    id: int
    role: str
    tokens: int
    call_ids: tuple[str, ...] = ()      # tool calls made by an assistant message
    tool_call_id: str | None = None     # the call a tool result answers


@dataclass
class CompactionPlan:
    """Where to cut: messages[:cut] are summarised, messages[cut:] are kept verbatim."""

    first_kept_message_id: int
    summarised_ids: list[int]
    kept_ids: list[int]
    summarised_tokens: int
    kept_tokens: int
    split_turn: bool = False
    notes: list[str] = field(default_factory=list)


def is_safe_cut(messages: Sequence[PlanMessage], cut: int) -> bool:
    """True when keeping messages[cut:] leaves no tool result without its call and no call
    without its result across the cut."""
    if cut <= 0 or cut >= len(messages) + 1:
        return False
    if cut < len(messages) and messages[cut].role == "tool":
        return False
    summarised_calls: set[str] = set()
    for m in messages[:cut]:
        summarised_calls.update(m.call_ids)
    for m in messages[cut:]:
        if m.role == "tool" and m.tool_call_id in summarised_calls:
            return False
    return True


def plan_compaction(messages: Sequence[PlanMessage], keep_recent_tokens: int) -> CompactionPlan | None:
    """Choose the cut over a session's restored suffix; None when nothing can be summarised.

    The budget is met by walking back from the newest message; the cut then moves back (keeping
    more) to the nearest safe turn boundary. When no such boundary leaves anything to summarise,
    the turn is split at the nearest safe assistant message instead.
    """
    if len(messages) < 2:
        return None
    # The first index from which the kept tail holds at least the budget.
    kept = 0
    budget_at = 0
    for i in range(len(messages) - 1, -1, -1):
        kept += messages[i].tokens
        if kept >= keep_recent_tokens:
            budget_at = i
            break
    if budget_at <= 0:
        return None  # everything fits in the budget: nothing worth summarising

    # Prefer a user message at or before budget_at (keeps >= budget), never index 0.
    for c in range(budget_at, 0, -1):
        if messages[c].role == "user" and is_safe_cut(messages, c):
            return _plan(messages, c, split=False)
    # One turn larger than the budget: cut inside it, at an assistant message.
    for c in range(budget_at, 0, -1):
        if messages[c].role == "assistant" and is_safe_cut(messages, c):
            return _plan(messages, c, split=True)
    # Nothing safe at or before the budget point: accept keeping less than the budget.
    for c in range(budget_at + 1, len(messages)):
        if messages[c].role in ("user", "assistant") and is_safe_cut(messages, c):
            plan = _plan(messages, c, split=messages[c].role != "user")
            plan.notes.append("kept less than keep_recent_tokens: no safe cut before it")
            return plan
    return None


def _plan(messages: Sequence[PlanMessage], cut: int, split: bool) -> CompactionPlan:
    return CompactionPlan(
        first_kept_message_id=messages[cut].id,
        summarised_ids=[m.id for m in messages[:cut]],
        kept_ids=[m.id for m in messages[cut:]],
        summarised_tokens=sum(m.tokens for m in messages[:cut]),
        kept_tokens=sum(m.tokens for m in messages[cut:]),
        split_turn=split,
    )


# -- deterministic details taken from tool calls ------------------------------------------------

_READ_TOOLS = re.compile(r"^(read|read_file|readfile|view|cat|open|glob|grep|ls|list_dir|search)$", re.I)
_WRITE_TOOLS = re.compile(r"^(write|write_file|edit|multiedit|multi_edit|str_replace|"
                          r"str_replace_editor|create|create_file|apply_patch|patch|notebookedit)$", re.I)
_PATH_KEYS = ("file_path", "path", "filePath", "filename", "notebook_path")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)


def files_touched(tool_calls: Sequence[dict]) -> tuple[list[str], list[str]]:
    """(files read, files modified), in first-seen order, from OpenAI-style tool calls."""
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    for call in tool_calls:
        function = call.get("function") or {}
        name = str(function.get("name") or "")
        raw = function.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else (raw or {})
        except (TypeError, ValueError):
            args = {}
        paths = []
        if isinstance(args, dict):
            paths = [str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str)]
        if name.lower() == "apply_patch" or (isinstance(raw, str) and "*** Begin Patch" in raw):
            text = raw if isinstance(raw, str) else json.dumps(raw)
            paths += [p.strip() for p in _PATCH_FILE.findall(text.replace("\\n", "\n"))]
            modified.update(dict.fromkeys(paths))
        elif _WRITE_TOOLS.match(name):
            modified.update(dict.fromkeys(paths))
        elif _READ_TOOLS.match(name):
            read.update(dict.fromkeys(paths))
    return [p for p in read if p not in modified], list(modified)


def merge_file_lists(previous: dict | None, read: list[str], modified: list[str]) -> dict:
    """Files of a new checkpoint: the previous checkpoint's plus this span's (iterative)."""
    prev_read = list((previous or {}).get("read_files") or [])
    prev_mod = list((previous or {}).get("modified_files") or [])
    all_mod = list(dict.fromkeys(prev_mod + modified))
    all_read = [p for p in dict.fromkeys(prev_read + read) if p not in all_mod]
    return {"read_files": all_read, "modified_files": all_mod}
