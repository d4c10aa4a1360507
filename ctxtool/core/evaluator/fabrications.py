"""Precision of a summary: what it states that the history never contained (pure).

Recall alone rewards a dump and cannot see an invented goal. A summary states paths, commands,
error names and identifiers; each must occur in what it summarised (the span, the previous
summary, the kept messages). One that occurs nowhere is a fabrication. A path counts as present
when its basename is (a summary may shorten an absolute path); a command when its first words
are (it may drop the flags).

What a small model invents besides (SmolLM2-135M, issue #43): line numbers ("line 13") and
figures the span never held, and the prompt's own instructions copied in place of a summary
(a placeholder such as "What the agent was doing last", a rule's words). A line number or a
figure counts as present when the number occurs anywhere in the history (a read's numbered
lines, a traceback's ``line 42``, a count); copied instructions when the history holds the same
words (a conversation about the prompt itself).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..records import Message
from ..summary_prompt import BRIEF_FORMAT, SUMMARY_FORMAT, SYSTEM_PROMPT, TURN_PREFIX_FORMAT
from .answers import lowered, message_text, normalise

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
# A line a summary points at: "line 13", "lines 40-52", "L13", "parser.py:13". Led by a
# lookahead of the letters a match starts with: re then passes over every other position at
# once, where it tried each alternative (3 times faster on a summary of 300 characters).
_LINE_NUMBER = re.compile(
    r"(?=[l.])(?:\blines?\s+(\d{1,6})(?:\s*(?:-|–|to|and)\s*(\d{1,6}))?\b|"
    r"(?<![\w/])L(\d{1,6})\b|"
    r"(?<=[\w)])\.[a-z]{1,5}:(\d{1,6})\b)",
    re.I,
)
# A figure in prose: two digits or more, a decimal or a version, a percentage; not part of a
# word, a path, a date's or a time's other digits.
_FIGURE = re.compile(r"(?<![\w.,/:#=-])(\d[\d,]*(?:\.\d+)*)(?![\w/])")
# A count of what the summary itself holds or left out, as summarizers note it: "(18 messages
# summarized extractively …)", "(6 older items trimmed to stay within 1500 tokens)", "(clipped
# to 1452 tokens)", "(and 13 earlier distinct errors in this span)", "(and 40 more)", "(58
# files read; …)", "refused (12 times)". No claim about the history.
_OWN_COUNT = re.compile(
    r"\(and \d[\d,]* (?:more|earlier)\b|"
    r"\b\d[\d,]*\s+(?:older\s+)?(?:items?|messages?|tokens?|times|files read)\b",
    re.I,
)
# A numbered list's marker ("10. **Faster**") is an ordinal, no figure.
_LIST_MARKER = re.compile(r"^(\s*(?:[-*]\s+)?)\d{1,3}[.)](?=\s)", re.M)
_NUMBERS = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# The prompt's instructions: a run of this many words copied from them, which the history does
# not hold, is the model repeating its instructions rather than the conversation.
COPIED_WORDS = 8
# A placeholder of the format of at least this many words, written as the content.
PLACEHOLDER_WORDS = 4
_INSTRUCTIONS = "\n".join([SYSTEM_PROMPT, SUMMARY_FORMAT, BRIEF_FORMAT, TURN_PREFIX_FORMAT])


@dataclass(frozen=True)
class Fabrication:
    kind: str  # path | command | error | identifier | line | figure | instructions
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text}


def stated_items(summary: str) -> list[Fabrication]:
    """The checkable things a summary states: paths, commands, error names, identifiers."""
    # Commands are read with their URLs (``curl -sS http://host/a && curl -sS http://host/b``
    # without them is a line the history never held); paths and names without (a URL's path
    # is no file of the project).
    quoted = summary or ""
    text = _URL.sub(" ", quoted) if "://" in quoted else quoted  # every URL holds "://"
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
    items += _numbers_stated(text)
    return list(dict.fromkeys(items))


def _numbers_stated(text: str) -> list[Fabrication]:
    """The line numbers a summary points at, and the figures it states (outside code spans,
    paths and URLs: those are read as commands and paths)."""
    prose = _LIST_MARKER.sub(r"\1", _CODE_SPAN.sub(" ", text))
    items = []
    for match in _LINE_NUMBER.finditer(prose):
        numbers = [n for n in match.groups() if n]
        items += [Fabrication("line", n) for n in numbers]
    lines = {f.text for f in items}
    prose = _OWN_COUNT.sub(" ", _LINE_NUMBER.sub(" ", _PATH.sub(" ", prose)))
    for figure in _FIGURE.findall(prose):
        digits = figure.rstrip(".,")
        if digits not in lines and (len(digits.replace(",", "")) >= 2 or "." in digits):
            items.append(Fabrication("figure", digits))
    return items


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
    """What a summary may state: the span, the previous summary, the kept messages.

    Held as :func:`lowered` (lower case, plain quotes), and normalised (whitespace collapsed)
    only when asked: a string without whitespace is in the normalised text exactly when it is
    in the lowered one, and one with single spaces inside is when the lowered one holds it
    (collapsing a run of whitespace only joins what it separated; the ends are stripped), so
    only a string with spaces that the lowered text lacks needs the normalised one. Numbers
    and words are the same runs in both. Normalising the span was half of this check."""

    def __init__(self, messages: Iterable[Message], extra: Iterable[str | None] = ()):
        self._messages = list(messages)
        parts = [message_text(m) for m in self._messages] + [e or "" for e in extra]
        self.lowered = lowered("\n".join(parts))
        self._text: str | None = None
        self._unescaped: str | None = None
        self._tools: set[str] | None = None
        self._numbers: set[str] | None = None
        self._words: set[tuple[str, ...]] | None = None
        self._joined = ""

    @property
    def text(self) -> str:
        """The history normalised (:func:`normalise`)."""
        if self._text is None:
            self._text = " ".join(self.lowered.split())
        return self._text

    @property
    def unescaped(self) -> str:
        r"""A call a runtime recorded as code (Codex's ``tools.exec_command({"cmd": …})``)
        holds its command JSON-escaped: ``printf '\\n'`` for the ``printf '\n'`` it ran."""
        if self._unescaped is None:
            self._unescaped = self.text.replace("\\\\", "\\").replace('\\"', '"')
        return self._unescaped

    @property
    def tools(self) -> set[str]:
        """A summary names a tool's call as the tool and its path ("`grep /src/x`"), as the
        summarizer shows a call that runs no command."""
        if self._tools is None:
            self._tools = {
                (c["function"]["name"] or "").lower() for m in self._messages for c in m.calls()
            } - {""}
        return self._tools

    def holds(self, part: str) -> bool:
        """Whether the normalised history holds ``part`` (read in the lowered one where that
        says the same, see the class)."""
        words = part.split()
        if words == [part] or not part:  # no whitespace in it
            return part in self.lowered
        if " ".join(words) == part and part in self.lowered:  # single spaces, none at the ends
            return True
        return part in self.text

    def has_number(self, number: str) -> bool:
        """Whether the history holds ``number`` (1,234 as 1234 too; 13 in 13:45 or v2.13)."""
        if self._numbers is None:
            found = _NUMBERS.findall(self.lowered)  # no whitespace in a match: as in the text
            self._numbers = {n.replace(",", "") for n in found} | set(
                re.findall(r"\d+", self.lowered)
            )
        return number.replace(",", "") in self._numbers

    def has_words(self, run: tuple[str, ...]) -> bool:
        """Whether the history holds these words in a row (of ``COPIED_WORDS`` at most)."""
        if self._words is None:
            words = _WORD.findall(self.lowered)  # the text's words, whitespace apart
            self._words = _ngrams(words, COPIED_WORDS)
            self._joined = f" {' '.join(words)} "
        if len(run) >= COPIED_WORDS:
            return run[:COPIED_WORDS] in self._words
        return f" {' '.join(run)} " in self._joined

    def _has_command(self, step: str) -> bool:
        return any(_command_found(text, step.strip()) for text in (self.text, self.unescaped))

    def contains(self, item: Fabrication) -> bool:
        text = normalise(item.text)
        if self.holds(text):
            return True
        if item.kind == "path":
            base = text.rstrip("/").rsplit("/", 1)[-1]
            return len(base) >= 3 and self.holds(base)
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
            return self.holds(text[:-2].rsplit(".", 1)[-1])
        if item.kind in ("line", "figure"):
            return self.has_number(text)
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
    found = [item for item in stated_items(summary) if not source.contains(item)]
    return found + copied_instructions(summary, source)


def _ngrams(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


_INSTRUCTION_WORDS = _ngrams(_WORD.findall(normalise(_INSTRUCTIONS)), COPIED_WORDS)
_PLACEHOLDERS = [
    tuple(_WORD.findall(normalise(p)))
    for p in dict.fromkeys(re.findall(r"\[([^\]\n]+)\]", _INSTRUCTIONS))
]
_PLACEHOLDERS = [p for p in _PLACEHOLDERS if len(p) >= PLACEHOLDER_WORDS]
# Each placeholder's words as a line's joined words hold them (words hold no space).
_PLACEHOLDER_TEXTS = [(p, f" {' '.join(p)} ") for p in _PLACEHOLDERS]


def copied_instructions(summary: str, source: SourceText) -> list[Fabrication]:
    """The summary's lines that repeat the prompt's instructions the history does not hold: a
    run of ``COPIED_WORDS`` words of them, or a format's placeholder written as content."""
    found = []
    for line in (summary or "").splitlines():
        words = _WORD.findall(normalise(line))
        copied = _copied_run(words)
        if copied is None:
            joined = f" {' '.join(words)} "
            copied = next((p for p, text in _PLACEHOLDER_TEXTS if text in joined), None)
        if copied is not None and not source.has_words(copied):
            found.append(Fabrication("instructions", " ".join(copied)))
    return list(dict.fromkeys(found))


def _copied_run(words: list[str]) -> tuple[str, ...] | None:
    """The longest run of ``words`` that the instructions hold, when ``COPIED_WORDS`` long."""
    best: tuple[str, ...] | None = None
    i = 0
    while i + COPIED_WORDS <= len(words):
        if tuple(words[i : i + COPIED_WORDS]) not in _INSTRUCTION_WORDS:
            i += 1
            continue
        end = i + COPIED_WORDS
        while end < len(words) and tuple(words[end - COPIED_WORDS + 1 : end + 1]) in (
            _INSTRUCTION_WORDS
        ):
            end += 1
        if best is None or end - i > len(best):
            best = tuple(words[i:end])
        i = end
    return best
