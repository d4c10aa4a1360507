"""Files read and modified, taken deterministically from tool calls (pure).

A checkpoint's ``details`` accumulate them across checkpoints, so the latest checkpoint knows
every file the session touched; the lists are capped (newest kept) so a session that read
thousands of files does not drag a megabyte of paths along with every checkpoint read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .records import call_name
from .span_facts import arguments_of, modified_paths, path_of

_READ_TOOLS = re.compile(
    r"^(read|read_file|readfile|view|cat|open|glob|grep|ls|list_dir|search)$", re.I
)

MAX_READ_FILES = 200
MAX_MODIFIED_FILES = 500


def files_touched(tool_calls: Sequence[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(files read, files modified), in first-seen order, from OpenAI-style tool calls. What a
    call modifies is ``span_facts.modified_paths`` (the rule the evaluator's probes use too)."""
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    for call in tool_calls:
        changed = modified_paths(call)
        if changed:
            modified.update(dict.fromkeys(changed))
        elif _READ_TOOLS.match(call_name(call)) or (
            # An editor tool's ``view`` (SWE-agent's str_replace_editor) reads a file.
            "editor" in call_name(call).lower() and arguments_of(call).get("command") == "view"
        ):
            path = path_of(call)  # the path the evaluator's probes read the call as naming
            if path is not None:
                read[path] = None
    return [p for p in read if p not in modified], list(modified)


def merge_file_lists(
    previous: dict[str, Any] | None, read: list[str], modified: list[str]
) -> dict[str, Any]:
    """Files of a new checkpoint: the previous checkpoint's plus this span's (iterative), each
    list capped to its newest entries with the number left out counted."""
    previous = previous if isinstance(previous, dict) else {}
    prev_read = [p for p in previous.get("read_files") or [] if isinstance(p, str)]
    prev_mod = [p for p in previous.get("modified_files") or [] if isinstance(p, str)]
    all_mod = list(dict.fromkeys(prev_mod + modified))
    all_read = [p for p in dict.fromkeys(prev_read + read) if p not in all_mod]
    out: dict[str, list[str] | int] = {
        "read_files": all_read[-MAX_READ_FILES:],
        "modified_files": all_mod[-MAX_MODIFIED_FILES:],
    }
    omitted_read = int(previous.get("read_files_omitted") or 0) + max(
        0, len(all_read) - MAX_READ_FILES
    )
    omitted_mod = int(previous.get("modified_files_omitted") or 0) + max(
        0, len(all_mod) - MAX_MODIFIED_FILES
    )
    if omitted_read:
        out["read_files_omitted"] = omitted_read
    if omitted_mod:
        out["modified_files_omitted"] = omitted_mod
    return out
