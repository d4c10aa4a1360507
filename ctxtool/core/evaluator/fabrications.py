"""Precision of a summary: what it states that the history never contained (pure).

Recall alone rewards a dump and cannot see an invented goal. A summary states paths, commands,
error names and identifiers; each must occur in what it summarised (the span, the previous
summary, the kept messages). One that occurs nowhere is a fabrication. A path counts as present
when its basename is (a summary may shorten an absolute path); a command when its first words
are (it may drop the flags).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..records import Message
from .answers import message_text, normalise

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_PATH = re.compile(
    r"(?<![\w/.@-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*[\w]|"
    r"(?<![\w/.-])[\w-]+\.(?:py|pyi|ts|tsx|js|jsx|mjs|md|json|jsonl|toml|yaml|yml|sql|sh|rs|go|"
    r"java|rb|html|css|txt|cfg|ini|lock|c|h|cpp|hpp|kt|swift|php|xml)\b"
)
_CODE_SPAN = re.compile(r"`([^`\n]{2,200})`")
_SHELL_LINE = re.compile(r"^\s*\$ (.{2,200})$", re.M)
_PROGRAMS = frozenset(
    [
        "git",
        "npm",
        "npx",
        "yarn",
        "pnpm",
        "node",
        "python",
        "python3",
        "pip",
        "pip3",
        "uv",
        "pytest",
        "ruff",
        "mypy",
        "cargo",
        "go",
        "make",
        "docker",
        "kubectl",
        "bash",
        "sh",
        "zsh",
        "ls",
        "cd",
        "rm",
        "mv",
        "cp",
        "cat",
        "grep",
        "rg",
        "sed",
        "awk",
        "find",
        "curl",
        "gh",
        "erk",
        "ctxtool",
        "tsc",
        "tsx",
        "biome",
        "jest",
        "vitest",
        "poetry",
        "bundle",
        "rake",
        "rails",
        "mvn",
        "gradle",
    ]
)
_ERROR_NAME = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b")
_IDENTIFIER = re.compile(
    r"(?<![\w./-])(?:[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|"
    r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[A-Za-z]\w*(?:\.\w+)*\(\))(?![\w/-])"
)


@dataclass(frozen=True)
class Fabrication:
    kind: str  # path | command | error | identifier
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text}


def stated_items(summary: str) -> list[Fabrication]:
    """The checkable things a summary states: paths, commands, error names, identifiers."""
    # Commands are read with their URLs (``curl -sS http://host/a && curl -sS http://host/b``
    # without them is a line the history never held); paths and names without (a URL's path
    # is no file of the project).
    quoted = summary or ""
    text = _URL.sub(" ", quoted)
    items: list[Fabrication] = []
    commands = [c for c in _CODE_SPAN.findall(quoted) if _is_command(c)]
    commands += [c for c in _SHELL_LINE.findall(quoted) if _is_command(c)]
    items += [Fabrication("command", c.strip()) for c in commands]
    for match in _PATH.findall(text):
        path = match.rstrip(".")
        if _is_path(path):
            items.append(Fabrication("path", path))
    items += [Fabrication("error", e) for e in _ERROR_NAME.findall(text)]
    for ident in _IDENTIFIER.findall(text):
        if not _ERROR_NAME.fullmatch(ident):
            items.append(Fabrication("identifier", ident))
    return list(dict.fromkeys(items))


def _is_command(text: str) -> bool:
    first = text.strip().split(" ", 1)[0]
    return first in _PROGRAMS and " " in text.strip()


def _is_path(path: str) -> bool:
    """A path a summary states: with a file extension, rooted, or three segments deep (not
    "and/or", "input/output")."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return (
        "." in last.strip(".") or path.startswith(("/", "~", "./", "../")) or path.count("/") >= 2
    )


class SourceText:
    """What a summary may state: the span, the previous summary, the kept messages."""

    def __init__(self, messages: Iterable[Message], extra: Iterable[str | None] = ()):
        messages = list(messages)
        parts = [message_text(m) for m in messages] + [e or "" for e in extra]
        # A summary names a tool's call as the tool and its path ("`grep /src/x`"), as the
        # summarizer shows a call that runs no command.
        self.tools = {
            (c["function"]["name"] or "").lower() for m in messages for c in m.calls()
        } - {""}
        self.text = normalise("\n".join(parts))
        # A call a runtime recorded as code (Codex's ``tools.exec_command({"cmd": …})``) holds
        # its command JSON-escaped: ``printf '\\n'`` for the ``printf '\n'`` it ran.
        self.unescaped = self.text.replace("\\\\", "\\").replace('\\"', '"')

    def _has_command(self, step: str) -> bool:
        return any(_command_found(text, step.strip()) for text in (self.text, self.unescaped))

    def contains(self, item: Fabrication) -> bool:
        text = normalise(item.text)
        if text in self.text:
            return True
        if item.kind == "path":
            base = text.rstrip("/").rsplit("/", 1)[-1]
            return len(base) >= 3 and base in self.text
        if item.kind == "command":
            # A summary may clip a command ("git commit -m … […]"), drop its flags, or quote
            # a line of several steps: each step is then looked for on its own.
            clipped = re.split(r"\s*(?:\[…\]|…|\.\.\.)", text, maxsplit=1)[0]
            steps = [s for s in re.split(r"\s*(?:&&|\|\||;|\|)\s*", clipped) if s.strip()]
            whole = clipped in self.text or clipped in self.unescaped
            tool, _, path = clipped.partition(" ")
            if tool in self.tools and path and " " not in path.strip() and path in self.text:
                return True
            return whole or all(self._has_command(s) for s in steps or [text])
        if item.kind == "identifier" and text.endswith("()"):
            return text[:-2].rsplit(".", 1)[-1] in self.text
        return False


def _command_found(source: str, text: str) -> bool:
    """A command's step is in the source whole, by its first three words, or by its first
    three words that are no flag."""
    words = text.split()
    bare = [w for w in words if not w.startswith("-")]
    return any(part and part in source for part in (text, " ".join(words[:3]), " ".join(bare[:3])))


def fabrications(
    summary: str,
    span: Sequence[Message],
    *,
    previous_summary: str | None = None,
    kept: Sequence[Message] = (),
    known_paths: Sequence[str] = (),
) -> list[Fabrication]:
    """What the summary states that neither the span, the previous summary, the kept
    messages nor ``known_paths`` contain (the files the checkpoints' lists say earlier spans
    read or changed: the history held them, though the previous summary may not name them)."""
    source = SourceText(list(span) + list(kept), [previous_summary, "\n".join(known_paths)])
    return [item for item in stated_items(summary) if not source.contains(item)]
