"""What changed in the work tree, from the text that reports it (pure; plain strings in).

The agent's own edit calls are not the only changes a continuing agent must know of: a
sub-agent's report names the files it wrote, ``git status`` and ``git diff --stat`` list what
the tree holds changed, a shell line moves or removes files. Renames and deletions say so,
and every path is written in one form: relative to the session's working directory where it
lies under it (a carried summary's absolute path and the span's relative one are one file).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

MODIFIED = "modified"
ADDED = "added"
DELETED = "deleted"
RENAMED = "renamed"


@dataclass(frozen=True)
class Change:
    """A file that changed, how, and for a rename the path it had."""

    path: str
    kind: str = MODIFIED
    old_path: str | None = None

    def label(self) -> str:
        """How a summary says it: nothing for a modification, "(deleted)", "(renamed from
        `old`)", "(new)"."""
        if self.kind == RENAMED and self.old_path:
            return f"(renamed from `{self.old_path}`)"
        if self.kind == DELETED:
            return "(deleted)"
        return ""


def normalise_path(path: str, cwd: str | None = None) -> str:
    """One form of a path: ``./`` and doubled slashes gone, ``..`` folded, relative to ``cwd``
    when it lies under it."""
    path = path.strip().strip("`'\"")
    if not path:
        return path
    trailing = "/" if path.endswith("/") and len(path) > 1 else ""
    norm = posixpath.normpath(path)
    if cwd and norm.startswith("/"):
        base = posixpath.normpath(cwd)
        if norm == base:
            return "."
        if norm.startswith(base.rstrip("/") + "/"):
            norm = norm[len(base.rstrip("/")) + 1 :]
    return norm + trailing if norm != "." else norm


def is_directory(path: str, known_files: Iterable[str] = ()) -> bool:
    """A path that names a directory: written with a trailing slash, or a prefix of a known
    file's path."""
    if path.endswith("/") or path in (".", ".."):
        return True
    prefix = path.rstrip("/") + "/"
    return any(f.startswith(prefix) for f in known_files)


_STATUS_SHORT = re.compile(r"^(?P<x>[ MADRCU?!])(?P<y>[ MADRCU?!]) (?P<rest>\S.*)$")
_STATUS_LONG = re.compile(
    r"^\s+(?P<kind>modified|deleted|new file|renamed|both modified|typechange):\s+(?P<rest>.+)$"
)
_STAT_LINE = re.compile(r"^\s*(?P<path>\S.*?)\s+\|\s+(?:\d+\s*[+-]*|Bin\b.*)$")
_STAT_RENAME = re.compile(r"^(?P<pre>.*?)\{(?P<old>[^{}]*) => (?P<new>[^{}]*)\}(?P<post>.*)$")


_C_ESCAPES = {"a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r"}


def _unquoted(path: str) -> str:
    """A path as git prints it unquoted: one with a space, a quote or a non-ASCII byte comes
    in C quotes with octal escapes (core.quotePath), ``"caf\\303\\251.py"`` for café.py."""
    body = path[1:-1]
    if len(path) < 2 or path[0] != '"' or path[-1] != '"' or _escapes_last_quote(body):
        return path
    out = bytearray()
    for m in re.finditer(r"\\([0-7]{1,3}|.)|([^\\]+)", body, re.S):
        plain, escape = m.group(2), m.group(1)
        if plain is not None:
            out += plain.encode()
        elif escape[0] in "01234567":
            out.append(int(escape, 8) & 0xFF)
        else:
            out += _C_ESCAPES.get(escape, escape).encode()
    return out.decode("utf-8", "replace")


def _escapes_last_quote(body: str) -> bool:
    """A quoted path's body ending in an odd run of backslashes: its closing quote is escaped,
    so the path is not in C quotes after all (git never prints one) and is kept as written."""
    return (len(body) - len(body.rstrip("\\"))) % 2 == 1


def _rename(rest: str) -> Change:
    old, _, new = rest.partition(" -> ")
    return Change(_unquoted(new.strip()), RENAMED, _unquoted(old.strip()))


def git_status_changes(output: str) -> list[Change]:
    """The changes ``git status`` printed (short, porcelain or long format); untracked files
    count as new."""
    out: list[Change] = []
    for line in output.splitlines():
        long = _STATUS_LONG.match(line)
        if long:
            kind, rest = long.group("kind"), long.group("rest").strip()
            if kind == "renamed":
                out.append(_rename(rest))
            else:
                out.append(
                    Change(
                        _unquoted(rest),
                        {"deleted": DELETED, "new file": ADDED}.get(kind, MODIFIED),
                    )
                )
            continue
        short = _STATUS_SHORT.match(line)
        if not short or line.startswith(("On branch", "##")):
            continue
        x, y, rest = short.group("x"), short.group("y"), short.group("rest").strip()
        if "R" in (x, y):
            out.append(_rename(rest))
        elif "D" in (x, y):
            out.append(Change(_unquoted(rest), DELETED))
        elif x == "?" or "A" in (x, y):
            out.append(Change(_unquoted(rest), ADDED))
        elif x != "!":
            out.append(Change(_unquoted(rest), MODIFIED))
    return out


_STATUS_HEADINGS = {
    "Changes to be committed:": "staged",
    "Changes not staged for commit:": "not staged",
    "Untracked files:": "untracked",
    "Unmerged paths:": "unmerged",
}
_SHORT_STATES = {"?": "untracked", "U": "unmerged"}
MAX_STATUS_NAMES = 8


def git_status_gist(output: str) -> str | None:
    """Where a repository stands by a ``git status`` it printed, on one line: its branch,
    "no commits yet", and the files in each state (staged, not staged, untracked), the first
    ``MAX_STATUS_NAMES`` of each named. None when the output is no git status."""
    states: dict[str, list[str]] = {}
    head: list[str] = []
    state = None
    for line in output.splitlines():
        text = line.strip()
        if text.startswith(("On branch ", "## ")):
            head.append("on branch " + text.split(None, 2)[-1].split("...")[0])
        elif text == "No commits yet" or "No commits yet" in text:
            head.append("no commits yet")
        elif text in _STATUS_HEADINGS:
            state = _STATUS_HEADINGS[text]
        elif not text or text.startswith(("(use ", "nothing ")):
            continue
        elif line.startswith(("\t", "  ")) and state:
            long = _STATUS_LONG.match(line)
            states.setdefault(state, []).append(long.group("rest").strip() if long else text)
        elif (short := _STATUS_SHORT.match(line)) and state is None:
            x = short.group("x")  # staged first: "MM" is staged, and changed again since
            kind = _SHORT_STATES.get(x) or ("staged" if x != " " else "not staged")
            states.setdefault(kind, []).append(short.group("rest").strip())
    if not head and not states:
        return None
    parts = head + [
        f"{kind}: {', '.join(names[:MAX_STATUS_NAMES])}"
        + (f" (and {len(names) - MAX_STATUS_NAMES} more)" if len(names) > MAX_STATUS_NAMES else "")
        for kind, names in states.items()
    ]
    return "; ".join(dict.fromkeys(parts))


def diff_stat_changes(output: str) -> list[Change]:
    """The files ``git diff --stat`` (or ``git show --stat``) listed, renames as such."""
    out: list[Change] = []
    for line in output.splitlines():
        found = _STAT_LINE.match(line)
        if not found:
            continue
        path = found.group("path").strip()
        braces = _STAT_RENAME.match(path)
        if braces:
            pre, post = braces.group("pre"), braces.group("post")
            old = (pre + braces.group("old") + post).replace("//", "/")
            new = (pre + braces.group("new") + post).replace("//", "/")
            out.append(Change(new, RENAMED, old))
        elif " => " in path:
            old, _, new = path.partition(" => ")
            out.append(Change(new.strip(), RENAMED, old.strip()))
        elif not path.startswith("..."):
            out.append(Change(path))
    return out


def shell_changes(command: str) -> list[Change]:
    """The moves and removals a shell line makes (``git mv``, ``mv``, ``git rm``, ``rm``)."""
    out: list[Change] = []
    for step in re.split(r"\s*(?:&&|\|\||;|\||\n)\s*", command):
        words = _without_redirections([w.strip("'\"") for w in step.split()])
        git = words[:1] == ["git"]
        if git:
            words = words[1:]
        args = [w for w in words[1:] if not w.startswith("-")]
        if words[:1] == ["mv"] and any(c in a for a in args for c in "*?$"):
            continue  # a glob or a variable names no file the summary can say
        if words[:1] == ["mv"] and len(args) == 2 and not _is_directory_word(args[1]):
            out.append(Change(args[1], RENAMED, args[0]))
        elif words[:1] == ["mv"] and len(args) >= 2:  # into a directory: each keeps its name
            target = args[-1].rstrip("/")
            out += [
                Change(
                    posixpath.normpath(f"{target}/{posixpath.basename(a.rstrip('/'))}"), RENAMED, a
                )
                for a in args[:-1]
            ]
        elif git and words[:1] == ["rm"] and "--cached" in words:
            continue  # untracked, still on disk: no deletion
        elif words[:1] == ["rm"] and args:
            out += [Change(a, DELETED) for a in args if not any(c in a for c in "*?$")]
    return out


def _without_redirections(words: list[str]) -> list[str]:
    """A step's words without its redirections (``2>/dev/null``, ``> out.txt``, ``2>&1``):
    the file a redirection writes is no argument of the command."""
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif re.fullmatch(r"\d*(?:>>?|<|&>)(?:&\d+)?", word):
            skip = not word.endswith(tuple("0123456789"))  # "> file": the next word is its target
        elif not re.match(r"\d*(?:>>?|<|&>)", word):
            out.append(word)
    return out


def _is_directory_word(word: str) -> bool:
    """A move's target written as a directory: ``dir/``, ``.``, ``..``."""
    return word.endswith("/") or word in (".", "..")


def patch_changes(patch: str) -> list[Change]:
    """The files a patch in ``apply_patch``'s format changes, added, deleted and moved ones said
    so."""
    out: list[Change] = []
    current: Change | None = None
    for line in patch.splitlines():
        header = re.match(r"^\*\*\* (Add|Update|Delete) File: (.+)$", line)
        if header:
            kind = {"Add": ADDED, "Delete": DELETED}.get(header.group(1), MODIFIED)
            current = Change(header.group(2).strip(), kind)
            out.append(current)
            continue
        moved = re.match(r"^\*\*\* Move to: (.+)$", line)
        if moved and current is not None:
            out[-1] = Change(moved.group(1).strip(), RENAMED, current.path)
    return out


_VERBS = (
    r"created|creat(?:ing)|added|adding|modified|modifying|updated|updating|edited|editing|"
    r"wrote|writing|written|changed|deleted|removed|renamed|moved|new file|appended|generated|"
    r"saved"
)
_FILE = r"(?:~?/)?(?:[\w.@~+-]+/)*[\w@+-][\w.@+-]*\.[A-Za-z]{1,6}"
# A name called ("`UserMessageList.render()`") is a method, not a file.
_NO_CALL = r"(?![\w(])"
_REPORTED = re.compile(
    rf"(?P<verb>{_VERBS})\b[^\n`]{{0,40}}?`?(?P<path>{_FILE}){_NO_CALL}`?",
    re.I,
)
_PATH_FIRST = re.compile(
    rf"^\s*(?:[-*+•]|\d+[.)])?\s*\**`?(?P<path>{_FILE}){_NO_CALL}`?\**"
    r"\s*(?:[-—–:(]|\s)\s*\(?(?P<verb>new|created|added|modified|updated|deleted|removed)\b",
    re.I,
)
# A heading that says what the list under it did ("Created:", "Updated files:", "✅ Created
# and indexed 2 documents:"): each item of the list names a file so changed.
_LIST_HEADING = re.compile(
    rf"^\W*(?:[\w-]+\s+){{0,3}}?(?P<verb>{_VERBS})\b[^`\n]{{0,60}}:\s*$", re.I
)
_LIST_ITEM = re.compile(
    rf"^\s*(?:[-*+•]|\d+[.)])?\s*(?:[^`\n:]{{0,40}}:\s*)?`?(?P<path>(?:\./)?{_FILE}){_NO_CALL}`?"
    r"(?:\s|$|[,;.—–(-])"
)


_LIST_MARK = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s")
# The words that name what a thing was made with, not what was made ("using Next.js", "with
# Node.js", "built on Vue.js"): a bare name after them is a technology.
_MEANS = re.compile(r"\b(?:using|via|with|powered by|built on|based on)\s+`?$", re.I)


def _kind_of(verb: str) -> str:
    verb = verb.lower()
    if verb in ("deleted", "removed"):
        return DELETED
    return ADDED if verb.startswith(("creat", "new", "add", "generat")) else MODIFIED


def reported_changes(report: str, deletions: bool = True) -> list[Change]:
    """The files a report (a sub-agent's answer, a tool's "Created …" result, the agent's
    own closing words) says were created, modified, deleted or renamed: a verb before the
    path, a path followed by its verb, or a list under a heading that says what it did
    ("Created:", "Updated files:"). ``deletions``: False for words that may say something was
    removed *from* a file ("removed the import from `a.py`"), where only additions and
    modifications are read."""
    out: dict[str, Change] = {}
    heading: str | None = None
    listed = 0  # items read under the heading
    for line in report.splitlines():
        found_heading = _LIST_HEADING.match(line)
        if found_heading:
            heading, listed = found_heading.group("verb"), 0
            continue
        item = _LIST_ITEM.match(line) if heading else None
        if item and _is_file(item.group("path")):
            out.setdefault(item.group("path"), Change(item.group("path"), _kind_of(heading or "")))
            listed += 1
            continue
        if line.strip() and not _LIST_MARK.match(line) and (listed or line.rstrip().endswith(":")):
            heading = None  # prose after the list, or another heading, ends it
        for found in list(_REPORTED.finditer(line)) + list(_PATH_FIRST.finditer(line)):
            kind, path = _kind_of(found.group("verb")), found.group("path")
            if not _is_file(path) or (kind == DELETED and not deletions):
                continue
            if not re.search(r"[/\\]", path) and _MEANS.search(line[: found.start("path")]):
                continue  # "created the app using Next.js": what it was made with, no file
            out.setdefault(path, Change(path, kind))
    return list(out.values())


# A bare name ending in a web domain's suffix no source file has ("crates.io", "github.com"):
# a site, as in cargo's "Updating crates.io index".
_DOMAIN = re.compile(r"[\w.-]+\.(?:com|org|net|io|dev|ai|app|co|gov|edu)", re.I)
# What a build makes, never the work's own files: a wheel, an egg, object code, compiled
# Python, and anything in a build's output directory ("Removed build/lib.linux").
_ARTIFACT = re.compile(
    r"(?:^|.*/)(?:build|__pycache__|node_modules|[\w.-]+\.egg-info)/.*"
    r"|.*\.(?:whl|egg|pyc|pyo|o|obj|so|dylib|dll|class)",
    re.I,
)


def _is_file(path: str) -> bool:
    """A path a report names, not a version number (``v1.4.2``), an abbreviation, a web
    domain (``crates.io``) nor a build's artifact (a ``.whl``, ``build/…``)."""
    return (
        not re.fullmatch(r"v?\d+(\.\d+)+", path)
        and not path.lower().startswith(("e.g", "i.e"))
        and not _DOMAIN.fullmatch(path)
        and not _ARTIFACT.fullmatch(path)
    )


# A line of a tool's report that gives a key of what it made ("Citekey: @kistner2025",
# "ID: PROJ-12"): the names a later question asks for by name.
_REPORT_KEY = re.compile(r"^[^\S\n]*[\w -]{2,20}:\s*`?(?P<name>@?[\w][\w:./@-]{2,60})`?\s*$", re.M)


def report_names(report: str) -> list[str]:
    """The keys a tool's creation report gives its result ("Citekey: @kistner2025"), paths
    left out."""
    return [
        n
        for n in dict.fromkeys(m.group("name") for m in _REPORT_KEY.finditer(report))
        if "/" not in n and not re.search(r"\.[A-Za-z]{1,6}$", n)
    ]


_OPENS_WITH_REPORT = re.compile(rf"\A\W*(?:[^\n]{{0,60}}\b)?(?:{_VERBS})\b", re.I)


REPORT_OPENING_LINES = 3


def opens_with_report(text: str) -> bool:
    """A tool's result whose first lines say it made or changed something ("✅ New citation
    created.", "Created and indexed 2 documents:", "notes.db — indexed / Created: …")."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return any(_OPENS_WITH_REPORT.match(line) for line in lines[:REPORT_OPENING_LINES])


def listed_as(path: str, listed: Iterable[str]) -> str:
    """The path a bare file name stands for: the one listed path it is the last part of
    (``truncated-text.test.ts`` beside ``packages/tui/test/truncated-text.test.ts``); itself
    when it has a directory, or when no listed path or more than one ends in it."""
    if "/" in path:
        return path
    ends = [p for p in listed if p.endswith(f"/{path}")]
    return ends[0] if len(set(ends)) == 1 else path


def merged(changes: Iterable[Change], cwd: str | None = None) -> list[Change]:
    """Each file once, in first-seen order, in one path form; a later deletion or rename of
    a file overrides its modification, and a renamed file is listed under its new path. A
    bare name that is the last part of one listed path is that path."""
    out: dict[str, Change] = {}
    changes = list(changes)
    full = [normalise_path(c.path, cwd) for c in changes if "/" in c.path]
    for change in changes:
        path = listed_as(normalise_path(change.path, cwd), full)
        old = normalise_path(change.old_path, cwd) if change.old_path else None
        if change.kind == RENAMED and old:
            out.pop(old, None)
            out[path] = Change(path, RENAMED, old)
        elif change.kind == DELETED or path not in out:
            out[path] = Change(path, change.kind, old)
    return list(out.values())
