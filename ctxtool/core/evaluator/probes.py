"""Probes: the questions a continuing agent has about the history it no longer sees, each with
an answer key (pure).

A key is a list of groups; each group lists alternatives, one of which a context that answers
correctly contains (case-insensitive, whitespace normalised). ``negated`` marks a prohibition:
the context must state it as one ("never push to main" is not held by "push to main").
``none_of`` lists phrases whose presence in the summary means the answer is wrong. The same
shape as the hand-written keys in tests/answer_keys, so derived and hand keys are scored alike.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..records import Message
from ..span_facts import COMMAND_TOOLS, Failure, FileChange, Signals, Statement, signals_of


class ProbeKind(StrEnum):
    GOAL = "goal"
    LATEST_REQUEST = "latest_request"
    OPEN_TASKS = "open_tasks"
    ERROR_FIX = "error_fix"
    FILE_CHANGED = "file_changed"
    INSTRUCTION = "instruction"
    DECISION = "decision"
    CURRENT_WORK = "current_work"
    # Hand-key kinds the evaluator does not derive (yet): tests/answer_keys/README.md.
    REMAINING_WORK = "remaining_work"
    SUPERSEDED = "superseded"
    FILE_REMOVED = "file_removed"
    NUMBER = "number"


@dataclass(frozen=True)
class Probe:
    id: str
    kind: ProbeKind
    question: str
    answer: str  # the reference answer, for people and for the LLM judge
    all_of: tuple[tuple[str, ...], ...]
    none_of: tuple[str, ...] = ()
    negated: bool = False
    # Where the work stands at the cut, as the key's writer read it (``STATES``): the state
    # the context must give the probe's subject, its first ``all_of`` group.
    state: str | None = None

    def state_phrases(self) -> tuple[str, ...]:
        """The ``none_of`` phrases a state implies: a fixed error must not be called open, a
        finished task must not be listed as pending."""
        prefix = {FIXED: OPEN_STATE, DONE: PENDING_STATE}.get(self.state or "")
        return tuple(prefix + alt for alt in self.all_of[0]) if prefix else ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind.value,
            "question": self.question,
            "answer": self.answer,
            "all_of": [list(g) for g in self.all_of],
        }
        if self.none_of:
            out["none_of"] = list(self.none_of)
        if self.negated:
            out["negated"] = True
        if self.state:
            out["state"] = self.state
        return out


# The states a hand key can give its subject: an error fixed or still open at the cut, a task
# still to do or finished. ``fixed``/``open`` key an ``error_fix`` probe, ``pending``/``done``
# a task (``open_tasks``, ``remaining_work``, ``current_work``).
FIXED, OPEN, PENDING, DONE = "fixed", "open", "pending", "done"
STATES = {
    FIXED: ("error_fix",),
    OPEN: ("error_fix",),
    PENDING: ("open_tasks", "remaining_work", "current_work"),
    DONE: ("open_tasks", "remaining_work", "current_work"),
}


class InvalidKey(ValueError):
    """An answer key that is not in the key format."""


def probe_from_dict(data: dict[str, Any]) -> Probe:
    """One probe of a key file. A group is a list of alternatives, or an object holding one
    with ``"negated": true`` (the probe is then a prohibition)."""
    if not isinstance(data, dict):
        raise InvalidKey("a probe is not an object")
    try:
        kind = ProbeKind(str(data.get("kind")))
    except ValueError:
        raise InvalidKey(f"probe {data.get('id')!r}: unknown kind {data.get('kind')!r}") from None
    negated = bool(data.get("negated"))
    groups = []
    for group in data.get("all_of") or []:
        if isinstance(group, dict):
            negated = negated or bool(group.get("negated"))
            group = next((v for v in group.values() if isinstance(v, list)), [])
        if isinstance(group, str):
            group = [group]
        alternatives = tuple(str(a) for a in group if str(a).strip())
        if alternatives:
            groups.append(alternatives)
    if not groups:
        raise InvalidKey(f"probe {data.get('id')!r} has no answer key (all_of)")
    state = data.get("state")
    if state is not None and kind.value not in STATES.get(str(state), ()):
        raise InvalidKey(f"probe {data.get('id')!r}: state {state!r} does not fit kind {kind}")
    return Probe(
        id=str(data.get("id") or kind.value),
        kind=kind,
        question=str(data.get("question") or ""),
        answer=str(data.get("answer") or ""),
        all_of=tuple(groups),
        none_of=tuple(str(n) for n in data.get("none_of") or ()),
        negated=negated,
        state=str(state) if state is not None else None,
    )


# -- probes derived from the span's signals --------------------------------------------------------

MAX_PROBES_PER_KIND = 10
# How a summary says a failure was fixed (any one of them).
FIX_WORDS = ("fixed", "resolved", "succeeded", "passes", "passed", "passing", "works", "→", "->")
# ``none_of`` phrases that name a state (``answers.ContextText.states``): a fixed failure's
# command called open, a finished task listed as still to do.
OPEN_STATE = "open:"
PENDING_STATE = "pending:"
# Joins the parts of an ``open:`` phrase that must all be named on the line calling it open:
# ``open: apply_patch … engine.rs`` is the failure of apply_patch on engine.rs, not another.
SAME_LINE = " … "
# Files are asked about more: a session changes dozens, each a thing the next agent may touch
# again (the score averages per kind, so they still do not outvote the goal).
MAX_FILE_PROBES = 25
_PATH = re.compile(r"(?:[\w.@~+-]*/)+[\w.@+-]+|\b[\w-]+\.[a-z]{1,5}\b")
_IDENTIFIER = re.compile(
    r"(?<![\w-])(?:[A-Za-z_][\w]*(?:[_:][\w]+)+|[a-z]+[A-Z]\w*|[A-Z]\w*[a-z][A-Z]\w*|"
    r"[a-z][a-z0-9]*(?:-[a-z0-9]+){1,}|[a-z]+\d+[a-z0-9]*|\d{2,}|#\d+)(?![\w-])"
)
_FILE_NAME = re.compile(r"[\w-]{3,}\.[a-z]{1,5}")
_WORD = re.compile(r"[a-z][a-z']{4,}")
STOPWORDS = frozenset(
    [
        "about",
        "above",
        "after",
        "again",
        "against",
        "along",
        "also",
        "although",
        "among",
        "another",
        "anything",
        "around",
        "because",
        "before",
        "being",
        "below",
        "between",
        "both",
        "cannot",
        "could",
        "doesn",
        "every",
        "everything",
        "first",
        "found",
        "going",
        "great",
        "having",
        "here",
        "into",
        "itself",
        "just",
        "know",
        "later",
        "least",
        "like",
        "looks",
        "make",
        "maybe",
        "might",
        "more",
        "most",
        "much",
        "need",
        "needs",
        "never",
        "nothing",
        "now",
        "other",
        "otherwise",
        "ought",
        "over",
        "please",
        "pretty",
        "really",
        "right",
        "same",
        "seems",
        "should",
        "since",
        "some",
        "something",
        "still",
        "such",
        "sure",
        "than",
        "that",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "thing",
        "things",
        "think",
        "this",
        "those",
        "though",
        "through",
        "today",
        "under",
        "until",
        "using",
        "very",
        "want",
        "wants",
        "what",
        "whatever",
        "when",
        "where",
        "whether",
        "which",
        "while",
        "will",
        "with",
        "within",
        "without",
        "would",
        "yeah",
        "your",
        "alright",
        "actually",
        "basically",
        "currently",
        "already",
        "because",
        "instead",
        "files",
        "file",
        "code",
        "change",
        "changes",
        "create",
        "update",
        "remove",
        "implement",
        "implementation",
    ]
)


def key_terms(text: str, limit: int = 3, prose: bool = True) -> list[tuple[str, ...]]:
    """The most distinctive terms of a text as key groups: paths (a file's basename as an
    alternative), identifiers and numbers first, then (``prose``) the longest uncommon words
    (with a stem as an alternative, so "committing" also matches "commit")."""
    groups: list[tuple[str, ...]] = []
    seen: set[str] = set()

    def add(group: tuple[str, ...]) -> None:
        if group[0].lower() not in seen and len(groups) < limit:
            seen.add(group[0].lower())
            groups.append(group)

    # Each kind of term is looked for only while the key has room (a term past ``limit`` is
    # never added): a long request's paths often fill it.
    for found in _PATH.finditer(text):
        if len(groups) >= limit:
            return groups
        path = found.group().strip(".,:;()'\"`")
        if ("/" in path and len(path) > 3) or _FILE_NAME.fullmatch(path):
            base = path.rstrip("/").rsplit("/", 1)[-1]
            add((path, base) if "." in base[1:] and base != path else (path,))
    for found in _IDENTIFIER.finditer(text):
        if len(groups) >= limit:
            return groups
        ident = found.group()
        if ident.lower() not in seen and not any(ident in g[0] for g in groups):
            add((ident,))
    if not prose or len(groups) >= limit:
        return groups
    if not groups and not any(w not in STOPWORDS for w in _WORD.findall(text.lower())):
        # Only common words ("List the files"): the words themselves are the key.
        phrase = " ".join(text.split()[:8]).strip(" .!")
        return [(phrase,)] if phrase else []
    words = sorted(
        {w.strip("'") for w in _WORD.findall(text.lower())} - STOPWORDS,
        key=lambda w: (-len(w), w),
    )
    for word in words:
        if any(word in g[0].lower() for g in groups):
            continue
        stem = word[: max(5, len(word) - 3)]
        add((word, stem) if stem != word else (word,))
    return groups


def derive_probes(
    span: Sequence[Message], signals: Signals | None = None, *, continued: bool = False
) -> list[Probe]:
    """The probes a span's signals answer: goal, latest request, open tasks, each failure,
    each file changed, each instruction and decision (a few of each, each said once).
    ``continued``: the span follows an earlier checkpoint, so its first request is no goal
    (the goal was stated before it, and the previous summary's carry-over guards it)."""
    s = signals if signals is not None else signals_of(span)
    probes: list[Probe] = []

    def add(
        kind: ProbeKind,
        n: int,
        question: str,
        answer: str,
        groups: list[tuple[str, ...]],
        negated: bool = False,
        none_of: tuple[str, ...] = (),
    ) -> None:
        groups = list(dict.fromkeys(g for g in groups if g))
        if groups:
            probe_id = kind.value if n == 0 else f"{kind.value}_{n}"
            probes.append(Probe(probe_id, kind, question, answer, tuple(groups), none_of, negated))

    if s.goal and not continued:
        g = s.goal
        groups = (
            [(g.command, g.command.lstrip("/"))]
            + ([(g.arguments,)] if g.arguments else [])
            + (key_terms(g.title, 1) if g.title else [])
            if g.command
            else key_terms(g.text)
        )
        add(ProbeKind.GOAL, 0, "What is the overall goal of this session?", g.text, groups)
    if s.latest_request:
        text = s.latest_request.text
        add(ProbeKind.LATEST_REQUEST, 0, "What did the user ask for last?", text, key_terms(text))
    listed = "; ".join(f"{t.content} ({t.status})" for t in s.open_tasks)
    for n, task in enumerate(s.open_tasks[:MAX_PROBES_PER_KIND], 1):
        add(
            ProbeKind.OPEN_TASKS,
            n,
            "Which tasks are still open?",
            f"{task.content} ({task.status}); the open list: {listed}",
            key_terms(task.content, 2),
        )
    for n, f in enumerate(_distinct_failures(s)[:MAX_PROBES_PER_KIND], 1):
        outcome = "fixed" if f.fixed else "not fixed"
        if f.changed_between:
            outcome += f" after changes to {', '.join(f.changed_between[:5])}"
        then = f"; then: {f.then}" if f.then else ""
        command = _command_key(f.tool, f.command)
        error = key_terms(f.error, 1, prose=False)
        add(
            ProbeKind.ERROR_FIX,
            n,
            f"What went wrong when running `{f.command[:120]}`, and was it fixed?",
            f"`{f.command[:200]}` failed: {f.error} ({outcome}){then}",
            # A fixed failure's answer says it was fixed, and never calls it open.
            command + error + ([FIX_WORDS] if f.fixed else []),
            none_of=_called_open(command, error) if f.fixed else (),
        )
    finished = [t for t in s.tasks if t.status in ("completed", "done")]
    for n, task in enumerate(finished[:MAX_PROBES_PER_KIND], len(s.open_tasks) + 1):
        terms = key_terms(task.content, 2)
        add(
            ProbeKind.OPEN_TASKS,
            n,
            f"Is this task still to do: {task.content[:200]}?",
            f"No: {task.content} was completed.",
            terms,
            # the whole description: a term alone may name another task still open
            none_of=(PENDING_STATE + " ".join(task.content.split()),),
        )
    for n, change in enumerate(s.files_changed[:MAX_FILE_PROBES], 1):
        base = change.path.rstrip("/").rsplit("/", 1)[-1]
        add(
            ProbeKind.FILE_CHANGED,
            n,
            f"Which file was changed for: {(change.request or 'the goal')[:200]}?",
            _change_answer(change),
            [(change.path, base)],
        )
    if s.current_work:
        work = s.current_work
        result = f"(result: {work.last_result})" if work.last_result else None
        text = " — ".join(t for t in (work.statement, work.last_action, result) if t)
        add(
            ProbeKind.CURRENT_WORK,
            0,
            "What was the agent doing when the span ends?",
            text,
            # A call whose command was redacted names only its tool: nothing to recall.
            (
                _command_key(work.last_tool or "", work.last_action)
                if work.last_action and work.last_action != work.last_tool
                else []
            )
            + key_terms(work.statement or "", 2),
        )
    for n, st in enumerate(_firmest(_distinct(s.instructions))[:MAX_PROBES_PER_KIND], 1):
        add(
            ProbeKind.INSTRUCTION,
            n,
            "What did the user instruct the agent to do or not to do?",
            _said(st),
            # A prohibition is keyed on what it forbids: "read hello.py without editing files"
            # is held by "without editing", not by a negated "hello.py".
            (st.prohibition and st.forbidden and key_terms(st.forbidden, 2))
            or key_terms(st.text, 2),
            negated=st.prohibition,
        )
    for n, st in enumerate(_distinct(s.decisions)[:MAX_PROBES_PER_KIND], 1):
        add(ProbeKind.DECISION, n, "What did the user decide?", _said(st), key_terms(st.text, 2))
    return probes


def _change_answer(change: FileChange) -> str:
    """A file change as a reference answer: the path, what the agent said it was doing, the
    names its edits brought in, and the request it served."""
    parts = [change.path]
    if change.said:
        parts.append(f"— {change.said}")
    if change.added:
        parts.append(f"(adds {', '.join(change.added)})")
    parts.append(f"(for: {(change.request or 'the goal')[:300]})")
    return " ".join(parts)


_FIRM = re.compile(r"\b(never|always|must|don'?t|do not|no more|from now on|make sure)\b|!", re.I)


def _firmest(statements: list[Statement]) -> list[Statement]:
    """Prohibitions and rules said firmly ("never", "must", "always", "!") before the rest, in
    the order said: with more than a probe kind's share, those are the ones to keep."""
    return sorted(statements, key=lambda st: not (st.prohibition or _FIRM.search(st.text)))


def _distinct(statements: list[Statement]) -> list[Statement]:
    """Each statement once: a rule the user repeated is one thing to remember."""
    seen: dict[str, Statement] = {}
    for st in statements:
        seen.setdefault(" ".join(st.text.lower().split()), st)
    return list(seen.values())


def _said(statement: Statement) -> str:
    """A statement as a reference answer: the sentence, and the request it was said in."""
    if not statement.request or statement.request == statement.text:
        return statement.text
    return f"{statement.text} (said in: {statement.request[:400]})"


def _command_key(tool: str, command: str) -> list[tuple[str, ...]]:
    """A run as a key group: for a shell command each step of its line (no ``bash -lc``
    wrapper, no ``cd DIR``, no pipe or redirection after it) and its first three words, any
    of which names the run; for another tool the path it worked on."""
    if tool.lower() not in COMMAND_TOOLS:
        return key_terms(command, 1, prose=False)
    line = _SHELL_WRAPPER.sub("", command).strip().strip("'\"")
    alternatives: list[str] = []
    for step in re.split(r"\s*(?:&&|\|\||;)\s*", line):
        step = re.split(r"\s+(?:\||2>&1|>)", step.strip().strip("'\""))[0].strip()
        words = step.split()
        if len(words) < 2 or words[0] == "cd":
            continue
        alternatives += [step, " ".join(words[:3])]
    if not alternatives:
        return key_terms(command, 1)
    return [tuple(dict.fromkeys(alternatives))]


def _called_open(command: list[tuple[str, ...]], error: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The ``open:`` phrases of a fixed failure: its command (any alternative) together with
    its error's term on one line. The command alone is no subject: a tool fails on many targets
    (``apply_patch`` on two files), and another failure of it may well be open."""
    if not error:
        return tuple(OPEN_STATE + alt for g in command for alt in g)
    return tuple(
        OPEN_STATE + alt + SAME_LINE + term for g in command for alt in g for term in error[0]
    )


_SHELL_WRAPPER = re.compile(r"^\s*(?:/bin/)?(?:ba|z)?sh\s+-l?c\s+")


def _distinct_failures(s: Signals) -> list[Failure]:
    """Each distinct failure once: the same command failing with another error is another
    problem (a type check that fails on one thing, then on the next)."""
    seen: dict[tuple[str, str], Failure] = {}
    for f in s.failures:
        seen.setdefault((f.command, f.error), f)
    return list(seen.values())
