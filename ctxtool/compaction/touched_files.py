"""Files read and modified, taken deterministically from tool calls (pure).

A checkpoint's ``details`` accumulate them across checkpoints, so the latest checkpoint knows
every file the session touched; the lists are capped (newest kept) so a session that read
thousands of files does not drag a megabyte of paths along with every checkpoint read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from .calls import call_arguments, call_name

_READ_TOOLS = re.compile(
    r"^(read|read_file|readfile|view|cat|open|glob|grep|ls|list_dir|search)$", re.I
)
WRITE_TOOLS = re.compile(
    r"^(write|write_file|edit|multiedit|multi_edit|str_replace|"
    r"str_replace_editor|create|create_file|apply_patch|patch|notebookedit)$",
    re.I,
)
_PATH_KEYS = ("file_path", "path", "filePath", "filename", "notebook_path")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)

MAX_READ_FILES = 200
MAX_MODIFIED_FILES = 500


def files_touched(tool_calls: Sequence[dict]) -> tuple[list[str], list[str]]:
    """(files read, files modified), in first-seen order, from OpenAI-style tool calls."""
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    for call in tool_calls:
        name = call_name(call)
        raw = call_arguments(call)
        paths = paths_of(name, raw)
        if is_patch(name, raw) or WRITE_TOOLS.match(name):
            modified.update(dict.fromkeys(paths))
        elif _READ_TOOLS.match(name):
            read.update(dict.fromkeys(paths))
    return [p for p in read if p not in modified], list(modified)


def is_patch(name: str, raw) -> bool:
    return name.lower() == "apply_patch" or (isinstance(raw, str) and "*** Begin Patch" in raw)


def paths_of(name: str, raw, args: dict | None = None) -> list[str]:
    """The paths one call names: its path arguments, and the files a patch adds, updates or
    deletes. ``args``: the arguments already parsed, when the caller has them."""
    if args is None:
        try:
            args = json.loads(raw) if isinstance(raw, str) else (raw or {})
        except (TypeError, ValueError):
            args = {}
    paths = []
    if isinstance(args, dict):
        paths = [str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str)]
    if is_patch(name, raw):
        text = raw if isinstance(raw, str) else json.dumps(raw)
        paths += [p.strip() for p in _PATCH_FILE.findall(text.replace("\\n", "\n"))]
    return paths


def merge_file_lists(previous: dict | None, read: list[str], modified: list[str]) -> dict:
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
