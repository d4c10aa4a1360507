"""Files read and modified, taken deterministically from tool calls (pure).

A checkpoint's ``details`` accumulate them across checkpoints, so the latest checkpoint knows
every file the session touched; the lists are capped (newest kept) so a session that read
thousands of files does not drag a megabyte of paths along with every checkpoint read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .outcomes import shell_line, shell_steps
from .records import call_name
from .span_facts import arguments_of, command_run, modified_paths, path_of

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
        elif (command := command_run(call)) is not None:
            read.update(dict.fromkeys(shell_reads(command)))
    return [p for p in read if p not in modified], list(modified)


# Programs that print a file: the reads of an agent whose only tool is a shell (Codex,
# OpenHands), ``sed -n '1,80p' a.py`` as much as a Read of ``a.py``.
_PRINTERS = frozenset(
    {"cat", "head", "tail", "nl", "less", "more", "bat", "sed", "get-content", "gc", "type"}
)
_WORD = re.compile(r"'[^']*'|\"[^\"]*\"|\S+")
_OPTION_VALUE = frozenset({"-n", "-c", "--lines", "--bytes", "-TotalCount", "-Tail", "-Head"})
_PATH_WORD = re.compile(
    r"(?:[A-Za-z]:(?=\\))?"  # a Windows drive
    r"(?:[\w.@~+/\\\[\]-]*[\w\]]\.[A-Za-z0-9]{1,8}|[\w.@~+-]*[/\\][\w.@~+/\\\[\]-]+)"
)
# A PowerShell line: its program (``Get-Content``, ``pwsh``) or a drive path (``C:\…``); a
# backslash alone is a bash escape (``rg 'a\|b'``).
_WINDOWS = re.compile(
    r"(?:^|[\s'\"])[A-Za-z]:\\|(?:^|[;|&\n]\s*)(?:powershell|pwsh)(?:\.exe)?\b|"
    r"(?:^|[;|&\n]\s*)(?:Get|Set|Select|Out|New|Remove|Test|Write|Copy|Move)-[A-Za-z]+\b",
    re.I,
)


def shell_reads(command: str) -> list[str]:
    """The files a shell line prints (``cat``, ``head``, ``tail``, ``nl``, ``sed -n`` without
    ``-i``, PowerShell's ``Get-Content``), each step's first stage only (what a pipe feeds
    ``head`` is no file); no glob, variable, option nor ``/dev/`` path."""
    out: list[str] = []
    line = shell_line(command)
    steps = shell_steps(command)
    if _WINDOWS.search(line):  # a shell's quoting would eat a Windows path's separators
        steps = [
            [w.strip("'\"") for w in _WORD.findall(step)]
            for step in re.split(r"&&|\|\||;|\||\n", line)
        ]
    for words in (s for s in steps if s):
        program = words[0].rsplit("/", 1)[-1].lower()
        if program not in _PRINTERS:
            continue
        args = words[1:]
        if program == "sed":
            if any(w.startswith("-i") or w == "--in-place" for w in args):
                continue  # it edits the file
            script = next((w for w in args if not w.startswith("-")), None)
            if "-e" in args or script is None:
                continue
            args = args[args.index(script) + 1 :]
        skip = False
        for word in args:
            if skip:
                skip = False
            elif word in _OPTION_VALUE or (word.startswith("-") and word[1:] in ("Path",)):
                skip = word in _OPTION_VALUE
            elif (
                not word.startswith("-")
                and not any(c in word for c in "*?$<>|&")
                and not word.startswith("/dev/")
                and _PATH_WORD.fullmatch(word)
            ):
                out.append(word)
    return list(dict.fromkeys(out))


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
