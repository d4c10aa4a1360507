"""A span's signals as the lines of a summary (pure).

``ctxtool.core.span_facts`` reads what a span says (goal, requests, tasks, failures and their fixes,
files changed for which request, instructions, decisions, current work). This module adds what
a summary needs on top, which the signals do not carry: the agent's own words next to each file
it changed (why, as it said it), the outcome of its last tool calls, quoting that never cuts a
sentence, and credentials masked in everything written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...core.changes import Change, git_status_gist
from ...core.outcomes import (
    Run,
    aborted,
    command_target,
    failed_turn_error,
    is_exploratory,
    still_running,
)
from ...core.records import Message, call_arguments, call_name
from ...core.sections import ERRORS, canonical_heading, parse_sections
from ...core.span_facts import (
    GIT_STATUS,
    Signals,
    Statement,
    arguments_of,
    checklist_left,
    command_run,
    in_reply,
    invoked_steps_left,
    is_bookkeeping,
    is_request,
    left_in_code,
    loaded_not_written,
    modified_paths,
    path_of,
    reaction_after,
    rejected_calls,
    signals_of,
    succeeded_commands,
    succeeded_targets,
    successful_actions,
    unwrapped_output,
    url_of,
    work_calls,
    working_branch,
    written_texts,
)
from ...core.touched_files import files_touched
from ...core.work_state import names_brought_in, reported_done, stated_next
from ...redaction import SUMMARY_PLACEHOLDER
from ...redaction import mask_secrets as masked  # one place says what a secret is

LATEST_REQUEST_CHARS = 1500
REQUEST_CHARS = 600
STATEMENT_CHARS = 220
COMMAND_CHARS = 160
ERROR_CHARS = 160
REACTION_CHARS = 240
CURRENT_WORK_CHARS = 1200
LAST_CALL_CHARS = 400  # the agent's very last call: its paths whole
MAX_GIST_NAMES = 8
SHORT_OUTPUT_CHARS = 200
LOG_REQUEST_CHARS = 200
LOG_STATEMENT_CHARS = 120
LOG_COMMAND_CHARS = 60
OUTCOME_CHARS = 100  # what the agent reported at the end of an earlier request's turn
DELEGATED_CHARS = 70  # of what a sub-agent reported
FULL_REPORT_CHARS = 900  # of a report said whole while the budget has room
_SPECIFIC_ERROR = re.compile(
    r"^.*(\berror\s+[A-Z]+\d+\b|\b\w*(Error|Exception|Warning):|^\s*E\s{2,}\S|"
    r"\bFAILED\s+\S|\berror\[E\d+\]).*$",
    re.M,
)
RECENT_CALLS = 3
MAX_FIX_FILES = 2  # a fix that changed more files is no one line of code
# A word that carries a number or a version: a cut never ends just before one.
_NUMERIC = re.compile(r"\d")
NUMBER_REACH = 40  # characters past a limit that a number after the cut may take
NUMBER_LINE_CHARS = 320  # a report line carrying numbers is kept whole up to this
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_SHELL_WRAPPER = re.compile(r"^(bash|sh|zsh) -l?c\s+")
# A line of a report that names something: code, a path, a file, a setting, an identifier.
_NAMES_SOMETHING = re.compile(
    r"`[^`]+`|\"[^\"\s]*[._/][^\"\s]*\"|\w/[\w.-]|\b\w+\.[a-z]{2,5}\b|\b[a-z]+[A-Z]\w*|\b[a-z]\w*_\w+"
)
# A file, a path or a piece of code named in the agent's words (``quote_gist``).
_NAMED = re.compile(r"`[^`\n]{2,120}`|(?:[\w.@~+-]*/)+[\w.@+-]+|\b[\w-]+\.[A-Za-z]{1,5}\b")
_QUOTES_A_NAME = re.compile(r"`[^`]+`|\w/[\w.-]")
# A list item's marker or a heading's hashes at the start of a line (one pattern for both uses)
_LIST_MARKER = re.compile(r"^\s*(?:[-*+•]|\d+[.)]|(?P<heading>#+))\s+")
# How a failure ended, as its line in a summary says it ("`cmd` failed: error — still open"):
# written here, read back from a previous summary by the summarizers.
STILL_OPEN = " — still open"
FIXED = " — fixed: a later run succeeded"
# How a tool's complaint retried past at once ends: noise, the first thing trimmed.
RETRIED = " — fixed: retried at once, it succeeded"
# A failure item's end that says it was fixed.
_FIXED_END = re.compile(r" — fixed: .*$")
# The end of a failure item carried as open, however its writer dashed it.
_STILL_OPEN_END = re.compile(r"\s+[—–-]+\s*still open\.?$", re.I)
# A command as ``shown_command`` shows it, inside an item.
_SHOWN_COMMAND = re.compile(r"`[^`\n]+`(?: \(shortened\))?")
# A failure's command and error line, without what came of it.
_STATED = re.compile(r"^[-*]\s+`[^`]+`.*? failed: .*?(?= \(then: | — |$)")


def whole_sentences(text: str, limit: int) -> str:
    """``text`` on one line within ``limit`` characters, shortened only by leaving out whole
    sentences at the end (marked "[…]"); a first sentence longer than the limit is kept up to
    its last word within the limit."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = 0
    for match in _SENTENCE_END.finditer(text):
        if match.start() > limit:
            break
        cut = match.start()
    if not cut:
        cut = word_cut(text, limit)
        if cut >= len(text):
            return text
    return text[:cut].rstrip() + " […]"


def word_cut(text: str, limit: int) -> int:
    """Where to cut ``text`` near ``limit`` between words, never inside or just before a
    number or a version (a rate, a count, ``v2.3.1``): the cut goes on to the last number that
    ends within ``NUMBER_REACH`` characters past the limit; when a number still follows it,
    the cut moves back to the end of the clause before them. ``len(text)`` when the line is
    kept whole."""
    cut = text.rfind(" ", 0, limit + 1) if " " in text[: limit + 1] else limit
    end = cut
    for word in re.finditer(r"\S+", text[cut:]):
        if cut + word.end() > limit + NUMBER_REACH:
            break
        if _NUMERIC.search(word.group(0)):
            end = cut + word.end()
    after = re.match(r"\s*(\S+)", text[end:])
    if after and _NUMERIC.search(after.group(1)):
        clause = max(text.rfind(p, 0, end) for p in (", ", "; ", ": ", " — ", " ("))
        return clause if clause > limit // 3 else end
    return end if after else len(text)


def last_sentences(text: str, limit: int) -> str:
    """The last whole sentences of ``text`` within ``limit`` characters (the ones next to what
    the agent did), or its first ones when the last sentence alone is longer."""
    sentences = [s for s in _SENTENCES.split(" ".join(text.split())) if s]
    kept: list[str] = []
    for sentence in reversed(sentences):
        if len(" ".join([sentence] + kept)) > limit:
            break
        kept.insert(0, sentence)
    return " ".join(kept) if kept else whole_sentences(text, limit)


def plain(text: str) -> str:
    """A line of the agent's that must not read as a heading of the summary."""
    return re.sub(r"^#+\s*", "", text)


def shown_command(command: str, limit: int = COMMAND_CHARS) -> str:
    """A command as a summary shows it: the script a ``bash -lc`` wrapper ran, its secrets
    masked, in backticks when whole, shortened past ``limit`` with the cut said outside the
    backticks. Masked before it is shortened: a secret the cut split would no longer match
    its pattern. The one form a failure's command is shown and compared in."""
    command = masked(_SHELL_WRAPPER.sub("", " ".join(command.split())))
    if len(command) <= limit:
        return f"`{command}`"
    # At a space when that keeps most of it: `curl <a long URL>` is not shortened to `curl`.
    cut = command.rfind(" ", 0, limit)
    cut = cut if cut >= limit // 2 else limit
    mask = command.find(SUMMARY_PLACEHOLDER, max(0, cut - len(SUMMARY_PLACEHOLDER) + 1))
    if 0 <= mask < cut:
        cut = mask + len(SUMMARY_PLACEHOLDER)  # a mask is shown whole, never cut
    return f"`{command[:cut]}` (shortened)"


@dataclass
class TaskNote:
    """A task of the agent's list (``core.span_facts.Task``) as the notes show it: its text,
    secrets masked, and its status."""

    text: str
    status: str  # pending | in_progress | completed, as the tool said


@dataclass
class SpanNotes:
    """The span's signals as summary lines; empty where the span says nothing."""

    goal: str | None = None
    requests: list[str] = field(default_factory=list)  # whole, in order, secrets masked
    outcomes: list[str] = field(default_factory=list)  # what each request's turn reported
    tasks: list[TaskNote] | None = None  # None: no task list in the span
    errors: list[str] = field(default_factory=list)
    resolved: set[str] = field(default_factory=set)  # the errors that are fixed: cut first
    files: dict[str, str] = field(default_factory=dict)  # path -> why ("" when unstated)
    labels: dict[str, str] = field(default_factory=dict)  # path -> "(deleted)", "(renamed from …)"
    constraints: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    current_work: list[str] = field(default_factory=list)
    delegated: list[str] = field(default_factory=list)  # what each sub-agent reported
    # each of those reports within ``FULL_REPORT_CHARS``: said so while the budget has room
    delegated_whole: dict[str, str] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)  # what the agent found along the way
    stated_next: str | None = None  # the agent's last "next: …" (``core.work_state``)
    reported_done: bool = False  # the agent's last words report the work finished
    # The span ends with the agent's words and no call after them: its turn is over, it
    # handed back to the user (what it did last is done, not under way).
    turn_ended: bool = False
    asked: str | None = None  # the question the agent's last words end on, if any
    # What the span's successful runs did (command and purpose): a carried pending item one
    # of them carried out is done (``work_state.done_by_action``).
    actions: list[str] = field(default_factory=list)
    # Commands that ran fine, as ``shown_command`` shows them: a carried failure is matched
    # on the form the summary wrote.
    succeeded: set[str] = field(default_factory=set)
    # What the span's successful runs acted on (``core.outcomes``): a carried failure of the
    # same target is fixed though its command line differs.
    targets: set[str] = field(default_factory=set)

    @property
    def latest_request(self) -> str | None:
        return self.requests[-1] if self.requests else None


def read_span(messages: Sequence[Message]) -> SpanNotes:
    """The notes of a span: its signals, shaped and masked, with the agent's reasons and the
    outcome of its last calls."""
    signals = signals_of(messages)
    requests = [masked(in_reply(r)) for r in signals.requests]
    outcomes = _outcomes(signals, messages)
    if not requests and signals.latest_request is not None:
        requests = [masked(signals.latest_request.text)]  # a command-driven run
        outcomes = [""]
    delegated = _delegated(messages)
    return SpanNotes(
        goal=masked(signals.goal.text) if signals.goal else None,
        requests=requests,
        outcomes=outcomes,
        tasks=[TaskNote(masked(t.content), t.status) for t in signals.tasks if t.content]
        # the invoked command's steps not yet run are work still to do, after the list's
        + [TaskNote(masked(step), "pending") for step in invoked_steps_left(messages)]
        # a checklist the agent wrote as it went, left unchecked
        + [TaskNote(masked(item), "pending") for item in checklist_left(messages)]
        # what the code it wrote leaves for later ("Replace with your deployed program ID")
        + [
            TaskNote(masked(f"`{path}`: {note}"), "pending")
            for path, note in left_in_code(messages)
        ]
        # a file the written ones load that the span has not written yet
        + [
            TaskNote(masked(f"Write `{loaded}` ({by} loads it; not written yet)"), "pending")
            for loaded, by in loaded_not_written(messages)
        ]
        or None,
        errors=(errors := _errors(signals, messages)),
        resolved={e for e in errors if _FIXED_END.search(e)},
        succeeded=_succeeded(messages),
        targets=succeeded_targets(messages),
        files=_files(signals, messages),
        labels={
            c.path: label
            for c in signals.files_changed
            if (label := Change(c.path, c.kind, c.old_path).label())
        },
        constraints=list(dict.fromkeys(masked(_standing(s)) for s in signals.instructions)),
        decisions=list(dict.fromkeys(masked(s.text) for s in signals.decisions)),
        current_work=_current_work(signals, messages),
        findings=[masked(f) for f in findings_along_the_way(messages)],
        delegated=[short for short, _ in delegated],
        delegated_whole={short: whole for short, whole in delegated if whole != short},
        stated_next=masked(said) if (said := stated_next(_last_words(messages))) else None,
        reported_done=reported_done(_last_words(messages)),
        actions=successful_actions(messages),
        turn_ended=(ended := turn_ended(messages)),
        asked=masked(asked) if ended and (asked := _question(_last_words(messages))) else None,
    )


def _standing(statement: Statement) -> str:
    """An instruction as it stands: one that overrides an earlier one says so."""
    if not statement.replaces:
        return statement.text
    return f"{statement.text} (replaces the earlier: {whole_sentences(statement.replaces, 120)})"


# The runtime's mark of words said while the turn goes on (Codex's ``phase``: a
# ``commentary`` message comes between calls, the ``final_answer`` ends the turn).
MID_TURN_PHASES = frozenset({"commentary"})


def turn_ended(messages: Sequence[Message]) -> bool:
    """The span's last message is the agent's words with no call: its turn on the latest
    request is over (it answered, reported or asked, and waits for the user); not when the
    runtime marks those words as said mid-turn (``MID_TURN_PHASES``)."""
    for m in reversed(messages):
        if m.role == "tool" or is_request(m):
            return False
        if m.role == "assistant":
            phase = m.details.get("phase") if isinstance(m.details, dict) else None
            if phase in MID_TURN_PHASES:
                return False
            return bool((m.content or "").strip()) and not work_calls(m)
    return False


def _question(text: str) -> str | None:
    """The question the agent's words end on ("Want me to init the repo and commit?")."""
    sentences = [s for s in _SENTENCES.split(" ".join(text.split())) if s]
    if not sentences or not sentences[-1].endswith("?"):
        return None
    return whole_sentences(sentences[-1], 200)


def _last_words(messages: Sequence[Message]) -> str:
    """The agent's last words, when nothing the user asked came after them."""
    for m in reversed(messages):
        if is_request(m):
            return ""
        if m.role == "assistant" and (m.content or "").strip():
            return m.content or ""
    return ""


def _succeeded(messages: Sequence[Message]) -> set[str]:
    return {shown_command(c) for c in succeeded_commands(messages)}


def fixed_command(item: str, succeeded: set[str], targets: set[str] | None = None) -> str | None:
    """The command of a failure item a previous summary carried as still open ("- `cmd`
    failed: … — still open") that ran fine in the span (``succeeded``, as :func:`shown_command`
    shows commands); None when the item is no such failure. The command is the item's first
    one: a command in its error or in what the agent said then ("(then: I check `git status`)")
    ran fine says nothing of the failure. Compared masked: the summary shows the command
    masked, the span runs it with its secret. ``targets``: what the span's successful runs
    acted on; a failure of one of them is fixed though its line differs."""
    if not _STILL_OPEN_END.search(item):
        return None
    first = _SHOWN_COMMAND.search(masked(item))
    if first is None:
        return None
    if first.group(0) in succeeded:
        return first.group(0)
    line = first.group(0).split("`")[1]
    return first.group(0) if targets and command_target(line) in targets else None


def as_fixed(item: str) -> str:
    """A failure item carried as still open, now fixed by a later run."""
    return _STILL_OPEN_END.sub(FIXED, item)


def failure_stated(item: str) -> str | None:
    """A failure item's command and error line, without what came of it (None: no failure)."""
    found = _STATED.match(item)
    return found.group(0) if found else None


def fixed_since(previous_summary: str | None, messages: Sequence[Message]) -> list[str]:
    """The commands of the failures ``previous_summary`` lists as still open that a run in
    ``messages`` (the agent's or the user's) has since fixed, as the summary shows them."""
    succeeded = _succeeded(messages) if previous_summary else set()
    if not succeeded:
        return []
    targets = succeeded_targets(messages)
    found = (
        fixed_command(item, succeeded, targets)
        for section in parse_sections(previous_summary)
        if canonical_heading(section.heading) == ERRORS
        for item in section.items
    )
    return list(dict.fromkeys(c for c in found if c))


def _outcomes(signals: Signals, messages: Sequence[Message]) -> list[str]:
    """For each request but the latest (whose turn the current work shows), what the agent
    reported when its turn ended: the lines of its last words that name something (a file, a
    setting, a command; what a later question about that turn asks for)."""
    where: dict[int | None, int] = {m.id: i for i, m in enumerate(messages)}
    starts = [where.get(r.message_id) for r in signals.requests]
    out = []
    for n, start in enumerate(starts[:-1]):
        end = next((s for s in starts[n + 1 :] if s is not None), len(messages))
        said = [
            m.content or ""
            for m in messages[(start or 0) + 1 : end]
            if m.role == "assistant" and (m.content or "").strip()
        ]
        out.append(masked(reported(said[-1])) if start is not None and said else "")
    return out + [""] if starts else []


# A fenced code block, to its closing fence or the text's end. A fence's indent is whitespace
# but a newline ([^\S\n]*): with \s* each line start of a run of blank lines scanned the
# whole run again.
_FENCE = re.compile(r"(?ms)^[^\S\n]*(```|~~~).*?(^[^\S\n]*\1|\Z)")
MAX_FINDINGS = 5
FINDING_CHARS = 300
# A figure: a number of two digits or more ("907-line", "10,000 USDG", "372 ms", "v6.26.0").
_FIGURE = re.compile(r"\d[\d,.]*\d")
# A sentence that says what the agent is about to do, not what it found.
_INTENT = re.compile(
    r"^(?:I['’]m|I am|I['’]ll|I will|I need|I want|Let me|Let['’]s|Next|Now|Then|First|Going to"
    r"|After that|Once that)\b|[;,]\s*(?:I['’]m now|I['’]ll|I will|let me)\b|^(?:现在)?(?:让我|我将|我会|接下来)",
    re.I,
)
_FULL_STOP = re.compile(r"(?<=[。！？])")
# The redaction's own placeholder ("[REDACTED_TEXT len=212 sha=…]"): its length is no figure.
_PLACEHOLDER = re.compile(r"\[REDACTED[^\]]*\]")


def has_figure(text: str) -> bool:
    """Whether ``text`` states a figure (a count, a measure, a version)."""
    return bool(_FIGURE.search(text))


def findings_along_the_way(messages: Sequence[Message]) -> list[str]:
    """What the agent stated mid-turn, between its calls, that names or measures something
    ("The release core processed 200,000 events in 372 ms", "Valdyum is a monorepo with a
    Next.js client, … Soroban/Stellar proof flows"): the newest ``MAX_FINDINGS`` sentences,
    never what it is about to do nor a question. A turn's last words are its report, said
    elsewhere (the outcome under its request, the current work)."""
    last_of_turn: set[int] = set()
    said_last: int | None = None
    for i, m in enumerate(messages):
        if m.role == "user" and is_request(m) and said_last is not None:
            last_of_turn.add(said_last)
            said_last = None
        elif m.role == "assistant" and (m.content or "").strip():
            said_last = i
    if said_last is not None:
        last_of_turn.add(said_last)
    out: list[str] = []
    for i, m in enumerate(messages):
        if m.role != "assistant" or i in last_of_turn or not (m.content or "").strip():
            continue
        prose = _FENCE.sub("", m.content or "")
        # line by line, so that a list's next number is not read as the end of a sentence
        # ("… helper 2."); Chinese sentences end at their own full stops. A list's item is a
        # finding only with a figure in it: items are mostly a plan's steps or names listed.
        for item, sentence in (
            (bool(_LIST_MARKER.match(line)), s)
            for line in prose.splitlines()
            for part in _SENTENCES.split(_LIST_MARKER.sub("", line).strip())
            for s in _FULL_STOP.split(part)
        ):
            sentence = sentence.replace("**", "").strip()
            if not sentence or _INTENT.search(sentence) or sentence.endswith((":", "?")):
                continue
            if item and not _FIGURE.search(sentence):
                continue
            if _PLACEHOLDER.search(sentence):
                continue  # what it said is not there to say
            if _FIGURE.search(sentence) or _NAMES_SOMETHING.search(sentence):
                out.append(whole_sentences(sentence, FINDING_CHARS))
    return list(dict.fromkeys(out))[-MAX_FINDINGS:]


SUB_AGENT_TOOLS = ("Task", "Agent", "TaskOutput")
_RESULT_PART = re.compile(r"--- RESULT ---\s*(.*?)(?:</output>|\Z)", re.S)


def _delegated(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """What each sub-agent (Claude Code's ``Task``) reported, by name: its work, the files it
    wrote and the checks it ran are in its report, never in the main conversation's calls.
    Each report twice: within ``DELEGATED_CHARS``, and within ``FULL_REPORT_CHARS`` (its
    findings, figures and versions, for when the budget has room)."""
    calls = {
        c["id"]: c
        for m in messages
        if m.role == "assistant"
        for c in work_calls(m)
        if call_name(c) in SUB_AGENT_TOOLS
    }
    out = []
    for m in messages:
        call = calls.get(m.tool_call_id) if m.role == "tool" and m.tool_call_id else None
        if call is None:
            continue
        text = m.content or ""
        if text.startswith("Async agent launched"):
            continue  # its report comes with TaskOutput
        part = _RESULT_PART.search(text)
        report = part.group(1) if part else text
        said = reported(report, DELEGATED_CHARS)
        if said:
            whole = reported(report, FULL_REPORT_CHARS)
            out.append(
                (masked(f"{_call_line(call)}: {said}"), masked(f"{_call_line(call)}: {whole}"))
            )
    return out


def reported(text: str, limit: int = OUTCOME_CHARS) -> str:
    """A report condensed to its lines that name something (code blocks left out), in order,
    within ``limit`` characters; nothing when no line names anything."""
    prose = _FENCE.sub("", text)  # code is not a report
    named = _naming_lines(prose.splitlines())
    # When they must be cut: lines quoting code or a path first ("Created with `npx
    # create-next-app todo-app`"), then the others ("a Next.js project"), each group in
    # order. A report said whole keeps its own order (a heading before its items).
    if sum(len(line) + 2 for line in named) > limit:
        named.sort(key=lambda line: not _QUOTES_A_NAME.search(line))
    if not named:
        return ""  # nothing a later question could ask for by name
    kept: list[str] = []
    size = 0
    stretched = False  # one line with a figure may run past the limit (NUMBER_STRETCH)
    for line in named:
        over = kept and size + len(line) > limit
        if over and (stretched or not _carries_figure(line, limit, size)):
            kept.append("[…]")
            break
        stretched = stretched or bool(over)
        kept.append(report_line(line, limit))
        size += len(kept[-1]) + 2
    return "; ".join(kept)


def _naming_lines(lines: Sequence[str]) -> list[str]:
    """The lines of a report that name something (``_NAMES_SOMETHING``), markers taken off;
    and the items of a list a naming line introduces ("Single `index.html` with:"): they say
    what the named thing holds, though they quote nothing themselves."""
    out: list[str] = []
    introduced = False  # under a naming line that ends with ":"
    for raw in lines:
        line = _LIST_MARKER.sub("", raw).replace("**", "").strip()
        if not line:
            continue
        if _NAMES_SOMETHING.search(line):
            out.append(line)
            introduced = line.endswith(":")
        elif introduced and (mark := _LIST_MARKER.match(raw)) and not mark.group("heading"):
            out.append(line)
        else:
            introduced = False
    return out


NUMBER_STRETCH = 0.6  # of the limit: how far one report line with a figure may run past it


def _carries_figure(line: str, limit: int, size: int) -> bool:
    """A line with a figure in it ("defaults to 1–4", "C5-E5-G5 (523.25 Hz)") that fits
    within the limit stretched by ``NUMBER_STRETCH``: a report's number is what a later
    question asks for, and the line's first words rarely hold it."""
    return bool(_NUMERIC.search(line)) and size + len(line) <= limit * (1 + NUMBER_STRETCH)


def report_line(line: str, limit: int) -> str:
    """A line of a report within ``limit``, except one that carries numbers or versions (a
    rate, a release): that one is kept whole up to ``NUMBER_LINE_CHARS``, and past that cut
    by whole sentences, never just before a number (:func:`word_cut`)."""
    if _NUMERIC.search(line) and len(line) <= max(limit, NUMBER_LINE_CHARS):
        return line
    return whole_sentences(line, limit)


def _errors(signals: Signals, messages: Sequence[Message]) -> list[str]:
    """Each distinct failure: its first specific error line when the last one is generic
    (``npm error code 2`` after ``error TS2305: …``), what the agent said next, and whether a
    later run of the same command fixed it (and what changed in between) or it is still open."""
    where: dict[int | None, int] = {m.id: i for i, m in enumerate(messages)}  # None: no message
    out: dict[tuple[str, str], str] = {}
    retries: dict[tuple[str, str], list[str]] = {}
    reactions: set[str] = set()  # said once: one reaction to a batch of failures
    calls = _calls_of_results(messages)
    alike: dict[tuple[str, str, bool, str], list[str]] = {}  # the other targets of a line
    grouped: dict[tuple[str, str], tuple[str, str, bool, str]] = {}
    for f in signals.failures:
        if not f.error:
            continue  # a search that found nothing (grep's exit 1) says no error
        if f.retry:  # one line for all of its kind: what the agent learnt
            patch = "Begin Patch" in f.command or f.command.startswith("apply_patch")
            kind = ("apply_patch" if patch else call_tool(f.tool), _error_kind(f.error))
            retries.setdefault(kind, []).append(_target_shown(f.tool, f.command))
            continue
        i = where.get(f.message_id)
        first = _first_error(messages[i].content or "") if i is not None else None
        error = f.error if not first or first in f.error else f"{first} … {f.error}"
        if f.fixed:
            how = f" after changing {', '.join(f.changed_between[:4])}" if f.changed_between else ""
            if how and f.changed_code and len(f.changed_between) <= MAX_FIX_FILES:
                # what a targeted edit brought in: the fix itself
                how += f" ({'; '.join(f'`{c}`' for c in f.changed_code)})"
            # cause -> fix: the command that fixed it when it is another line, the arguments
            # the run that fixed it changed (another directory, a flag of the tool's)
            fix = f" — fixed: {shown_command(f.fixed_by)} succeeded" if f.fixed_by else FIXED
            changed = argument_change(
                calls.get(f.message_id, {}), calls.get(f.fixed_by_message_id, {})
            )
            outcome = fix + (f" with {changed}" if changed else "") + how
        else:
            outcome = STILL_OPEN
        group = (f.tool, _generic(error), f.fixed, _generic(f.fixed_by or ""))
        if group in alike:  # the same failure on another target, fixed the same way
            alike[group].append(_target_shown(f.tool, f.command))
            continue
        alike[group] = []
        said = _reaction(messages, i) if i is not None and not f.warning else ""
        if said in reactions:
            said = ""  # said at the failure before it
        reactions.add(said)
        verb = "warned" if f.warning else "failed"
        line = f"{shown_command(f.command)} {verb}: {error}" + (f" (then: {said})" if said else "")
        out[(f.command, error)] = masked(line + outcome)
        grouped[(f.command, error)] = group
    for entry, group in grouped.items():
        if alike[group]:
            also = ", ".join(dict.fromkeys(alike[group]))
            out[entry] += masked(f" (the same on {len(alike[group])} more: {also})")
    for request in signals.requests:  # an error the user pasted is one too
        i = where.get(request.message_id)
        first = _first_error(request.text)
        if first and i is not None:
            said = _reaction(messages, i)
            line = f"the user reported: {first}" + (f" (then: {said})" if said else "")
            out[("", first)] = masked(line)
    turns = _failed_turns(messages)
    if turns:
        out[("", turns)] = masked(turns)
    refused: dict[str, list[str]] = {}
    for tool, target in rejected_calls(messages):
        refused.setdefault(tool, []).append(target)
    for tool, targets in refused.items():  # what the user would not let run
        count = f" ({len(targets)} times)" if len(targets) > 1 else ""
        on = ", ".join(dict.fromkeys(t for t in targets if t))
        out[(tool, "rejected")] = masked(
            f"{tool} rejected by the user{count}" + (f": {on}" if on else "")
        )
    for (tool, error), targets in retries.items():
        named = ", ".join(dict.fromkeys(t for t in targets if t))
        count = f" ({len(targets)} times)" if len(targets) > 1 else ""
        on = f" (on {named})" if named else ""
        out[(tool, error)] = masked(f"{tool} refused{count}: {error}{on}{RETRIED}")
    return list(out.values())


def _failed_turns(messages: Sequence[Message]) -> str:
    """One line for the model turns that ended with an error (the provider's, not a tool's):
    each error said once with how often, fixed when a later turn of the agent's went on."""
    errors: dict[str, int] = {}
    last = -1
    for i, m in enumerate(messages):
        error = failed_turn_error(m)
        if error:
            errors[error] = errors.get(error, 0) + 1
            last = i
    if not errors:
        return ""
    said = "; ".join(f"{e} ({n} times)" if n > 1 else e for e, n in errors.items())
    went_on = any(
        m.role == "assistant" and failed_turn_error(m) is None and (m.content or m.calls())
        for m in messages[last + 1 :]
    )
    outcome = " — fixed: the next turn went on" if went_on else STILL_OPEN
    return f"the model's turn ended with an error: {said}{outcome}"


def _calls_of_results(messages: Sequence[Message]) -> dict[int | None, dict]:
    """Each tool result's call, by the result's message id."""
    calls = {c["id"]: c for m in messages if m.role == "assistant" for c in work_calls(m)}
    return {
        m.id: calls[m.tool_call_id]
        for m in messages
        if m.role == "tool" and m.tool_call_id in calls
    }


# Arguments that say nothing of why a run failed or worked: the command (shown apart), how
# long it may take, what the agent said it was for.
_INCIDENTAL_ARGUMENTS = frozenset(
    {
        "command",
        "cmd",
        "description",
        "timeout",
        "timeout_ms",
        "yield_time_ms",
        "max_output_tokens",
        "justification",
        "prefix_rule",
    }
)
ARGUMENT_CHARS = 80


def argument_change(failed: dict, fixed: dict) -> str:
    """The arguments a run that fixed a failure gave otherwise ("login: false", "workdir:
    C:\\app"): the fix when the command line stayed the same. Empty when none differ."""
    before, after = arguments_of(failed) if failed else {}, arguments_of(fixed) if fixed else {}
    changed = []
    for key, value in after.items():
        if key in _INCIDENTAL_ARGUMENTS or before.get(key) == value:
            continue
        shown = value if isinstance(value, str) else json.dumps(value)
        if len(shown) <= ARGUMENT_CHARS:
            changed.append(f"{key}: {shown}")
    return ", ".join(changed[:3])


def call_tool(tool: str) -> str:
    return tool if tool[:1].isupper() else tool.capitalize()


def _error_kind(error: str) -> str:
    """A retry's complaint without the path it names: the same for every file it hit."""
    first = error.split(" | ")[0]
    first = re.sub(r"\s*(in|at|:)?\s*/?(?:[\w.@~+-]+/)+[\w.@+-]+", "", first)
    first = re.split(r"\s*[\[,\"']", first, maxsplit=1)[0]  # the quoted text it missed
    return whole_sentences(first, 100)


_QUOTED = re.compile(r"https?://\\S+|\"[^\"]*\"|'[^']*'|`[^`]*`")


def _generic(text: str) -> str:
    """An error or a command without the URLs and quoted names it carries: the same for each
    target a failure hit alike."""
    return _QUOTED.sub("…", text)


def _target_shown(tool: str, command: str) -> str:
    """What a retried call worked on: the file's base name, else the command shown."""
    rest = command[len(tool) :].strip() if command.startswith(tool) else command
    if "Begin Patch" in rest:
        found = re.search(r"\*\*\* (?:Add|Update|Delete) File: (\S+)", rest)
        rest = found.group(1) if found else "a patch"
    return rest.rstrip("/").rsplit("/", 1)[-1] if " " not in rest.strip() else rest[:80]


def _first_error(text: str) -> str | None:
    """The first line naming a specific error (a compiler's code, an exception, a failed test)."""
    found = _SPECIFIC_ERROR.search(text)
    if not found:
        return None
    line = " ".join(found.group(0).split())
    return line if len(line) <= ERROR_CHARS else line[: word_cut(line, ERROR_CHARS)]


def _reaction(messages: Sequence[Message], i: int) -> str:
    """The first thing the agent said after a failure: usually what it makes of it."""
    said = reaction_after(messages, i)
    return plain(whole_sentences(said.content or "", REACTION_CHARS)) if said else ""


MAX_FILE_NAMES = 5  # of the names a file's edits brought in, shown at its line


def _files(signals: Signals, messages: Sequence[Message]) -> dict[str, str]:
    """Each changed file with why: what the agent said as it changed it, the names its edits
    brought in (functions, settings, flags: what is in it now), and the request it served. A
    file the checkpoint's own lists (``touched_files``) count as modified but the signals do
    not (a patch passed as ``["apply_patch", patch]``) is explained the same way."""
    where: dict[int | None, int] = {m.id: i for i, m in enumerate(messages)}  # None: no message
    changes = [(c.path, where.get(c.message_id), c.request) for c in signals.files_changed]
    added = {c.path: c.added[:MAX_FILE_NAMES] for c in signals.files_changed}
    seen = {c.path for c in signals.files_changed}
    asked_before = _requests_by_index(signals, where)
    for i, m in enumerate(messages):
        for path in files_touched(work_calls(m) if m.role == "assistant" else [])[1]:
            if path not in seen:
                seen.add(path)
                changes.append((path, i, asked_before(i)))
    out: dict[str, str] = {}
    before = said_before = None
    goal = signals.goal.text if signals.goal else None
    for path, at, request in changes:
        said = _statement(messages, at) if at is not None else ""
        # What is said at one file is not said again at the next ones: the same statement
        # (three files one message created), the request they served (the goal is above).
        said, said_before = ("" if said == said_before else said), said
        asked = whole_sentences(request, 80) if request and request != before else ""
        if asked and request == goal:
            asked = "the goal"
        before = request
        # a bare path stays bare: a long list of them is folded by directory when short of room
        names = ", ".join(f"`{n}`" for n in added.get(path, ())) if said or asked else ""
        parts = (said, f"(adds {names})" if names else "", f"(for: {asked})" if asked else "")
        out[path] = masked(" ".join(p for p in parts if p))
    return out


def _requests_by_index(signals: Signals, where: dict[int | None, int]):
    """The latest request at each index of the span (the goal before the first one)."""
    marks = sorted((where[r.message_id], r.text) for r in signals.requests if r.message_id in where)
    goal = signals.goal.text if signals.goal else None

    def asked_before(i: int) -> str | None:
        return next((text for j, text in reversed(marks) if j <= i), goal)

    return asked_before


def _statement(messages: Sequence[Message], i: int) -> str:
    """What the agent said it was doing at message ``i``: its own text, else the nearest
    earlier assistant text of the same turn."""
    for j in range(i, max(-1, i - 8), -1):
        m = messages[j]
        if is_request(m):
            break
        text = m.content or ""
        if m.role == "assistant" and text.strip():
            return plain(last_sentences(text, STATEMENT_CHARS))
    return ""


def _current_work(signals: Signals, messages: Sequence[Message]) -> list[str]:
    """The agent's last statement, and its last tool calls with their outcomes (outputs
    elided). When the latest turn made no call (a question answered, a request the agent
    has not started on), the span's last call that did work is said all the same, marked as
    coming before the latest request: it is what the agent was doing at the cut. The last
    call is shown with its paths whole (``LAST_CALL_CHARS``)."""
    work = signals.current_work
    if work is None:
        return []
    out = [masked(_quoted(_last_statement(messages)))] if work.statement else []
    failed = {f.message_id for f in signals.failures if not f.warning}  # a warning: still ok
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    lines: list[str] = []
    shown_ids: set[str] = set()
    before_request = False
    for m in reversed(messages):
        if len(lines) >= RECENT_CALLS or (lines and before_request):
            break
        if is_request(m):
            before_request = True
            continue
        for call in reversed(work_calls(m) if m.role == "assistant" else []):
            if is_bookkeeping(call) or len(lines) >= RECENT_CALLS:
                continue
            result = results.get(call["id"])
            outcome = (
                "no result yet"
                if result is None
                else "failed"
                if result.id in failed
                # stopped by the user, or gone on after the call returned (a process, a
                # sub-agent started): not done
                else "aborted"
                if aborted(unwrapped_output(result.content or ""))
                else "still running"
                if still_running(unwrapped_output(result.content or ""))
                # what a look saw may be work still to do (files uncommitted)
                else "ok"
                if is_look(call)
                else f"{DONE_MARK} ok"  # that call is done, whatever is still under way
            )
            output = " ".join((result.content or "").split()) if result is not None else ""
            if not lines and output and len(output) <= SHORT_OUTPUT_CHARS:
                outcome += f": {output}"  # the very last result, when it is short, is the state
            elif (
                result is not None
                and (gist := result_gist(command_run(call), result))
                # the very last call's gist says where things stand; an earlier one's only
                # when it reports a result (a commit's hash and counts, a test run's figures)
                and (not lines or _REPORT_LINE.search(gist))
            ):
                outcome += f": {gist}"
            limit = LAST_CALL_CHARS if not lines else COMMAND_CHARS
            if outcome.startswith(DONE_MARK):
                outcome += _writes(call)
            shown = f"- {_call_line(call, limit)} → {outcome}"
            if before_request:
                shown = f"- (before the latest request) {_call_line(call, limit)} → {outcome}"
            lines.insert(0, shown)
            shown_ids.add(call["id"])
            if before_request:
                break  # one call says where the work stood
    lines = _open_in_batch(signals, messages, shown_ids) + lines
    branch = working_branch(messages)
    if branch:  # where the work is: a feature branch the agent made or was put on
        lines.insert(0, f"- (on branch `{branch}`)")
    return out + [masked(line) for line in lines]


MAX_OPEN_IN_BATCH = 2


def _open_in_batch(signals: Signals, messages: Sequence[Message], shown_ids: set[str]) -> list[str]:
    """The calls of the agent's last batch (the calls after its last words that came before
    a call) that failed and are still open, when the last calls shown (``shown_ids``, their
    call ids) leave them out: a run that failed among reads is where the work stands, though
    later calls succeeded."""
    start, calls_seen = None, False
    for i in range(len(messages) - 1, -1, -1):  # one backward pass: linear in the span
        m = messages[i]
        if m.role != "assistant":
            continue
        if calls_seen and (m.content or "").strip():
            start = i
            break
        calls_seen = calls_seen or bool(work_calls(m))
    if start is None or any(is_request(m) for m in messages[start:]):
        return []
    open_failed = {
        f.message_id for f in signals.failures if f.error and not f.fixed and not f.retry
    }
    results = {m.tool_call_id: m for m in messages[start:] if m.role == "tool" and m.tool_call_id}
    out: list[str] = []
    for m in messages[start:]:
        for call in work_calls(m) if m.role == "assistant" else []:
            result = results.get(call["id"])
            if result is not None and result.id in open_failed and call["id"] not in shown_ids:
                out.append(f"- {_call_line(call)} → failed (still open)")
    return out[-MAX_OPEN_IN_BATCH:]


def _writes(call: dict) -> str:
    """What an edit at the cut was writing: the code names it brings in (a struct's new
    fields, a client, a flag), the answer to "what was the agent editing" beside its path."""
    if not modified_paths(call):
        return ""
    names = names_brought_in(*written_texts(call))[:MAX_FILE_NAMES]
    return f" (writes {', '.join(f'`{n}`' for n in names)})" if names else ""


DONE_MARK = "✓"  # a call that succeeded (``core.sections.is_done`` reads it as done)
# A line of a command's output that reports what came of it: a commit made, files changed,
# tests passed or failed, a build's count ("Generating static pages (15/15)").
_COMMIT_LINE = re.compile(r"^\[[\w./-]+(?: \(root-commit\))? [0-9a-f]{7,}\]")
_REPORT_LINE = re.compile(
    _COMMIT_LINE.pattern + r"|"
    r"\b\d+ (?:files? changed|insertions?|deletions?|passed|failed|errors?|warnings?|tests?|"
    r"skipped|packages?)\b(?![/.\w])|\(\d+/\d+\)|\btest result:|"
    r"\b(?:compiled|built|generated)\b.*\d",
    re.I,
)
REPORT_LINES = 3
GIST_CHARS = 320


_LOOKS = frozenset({"git:status", "git:log", "git:diff", "git:show", "git:branch"})


def is_look(call: dict) -> bool:
    """A call that only looked (a read, a search, ``ls``, ``git status``): it changed
    nothing that could be done."""
    command = command_run(call)
    run = Run(call_name(call), command or call_name(call), failed=False)
    return is_exploratory(run) or (command is not None and command_target(command) in _LOOKS)


def result_gist(command: str | None, result: Message) -> str:
    """What a long output says came of a run, on one line: where the repository stands after
    a ``git status`` (``changes.git_status_gist``), else its last lines that report a result
    (a commit's hash and count of changes, a test run's or a build's figures). Empty when it
    has none."""
    output = unwrapped_output(result.content or "")
    gist = git_status_gist(output) if command and GIT_STATUS.search(command) else None
    if gist is None:
        lines = [" ".join(line.split()) for line in output.splitlines()]
        # a commit's line (its branch, hash and title) first, then the last figures
        commits = [line for line in lines if _COMMIT_LINE.search(line)][-1:]
        figures = [line for line in lines if _REPORT_LINE.search(line) and line not in commits]
        gist = "; ".join(commits + figures[-(REPORT_LINES - len(commits)) :])
    return whole_sentences(masked(gist), GIST_CHARS) if gist else ""


def quote_gist(quote: str) -> str:
    """What stays of the agent's quoted last words when the budget cannot hold them: their
    first sentence and the files and code they name, each whole."""
    text = " ".join(line.removeprefix(">").strip() for line in quote.splitlines())
    first = whole_sentences(_SENTENCES.split(text.strip())[0] if text.strip() else "", 200)
    names = list(dict.fromkeys(n.strip("`*.,:;()[]") for n in _NAMED.findall(text)))
    names = [n for n in names if n and n not in first][:MAX_GIST_NAMES]
    shown = f" (names: {', '.join(f'`{n}`' for n in names)})" if names else ""
    return f"> {first}{shown}" if first else ""


def _last_statement(messages: Sequence[Message]) -> str:
    said = (m for m in reversed(messages) if m.role == "assistant" and (m.content or "").strip())
    return next(said).content or ""


def _quoted(text: str) -> str:
    """The agent's words as a quote block of whole lines within ``CURRENT_WORK_CHARS`` (its
    own headings and lists stay inside the quote, never headings of the summary)."""
    kept: list[str] = []
    size = 0
    for line in (line.rstrip() for line in text.strip().splitlines() if line.strip()):
        if size + len(line) > CURRENT_WORK_CHARS and kept:
            kept.append("[…]")
            break
        kept.append(whole_sentences(line, CURRENT_WORK_CHARS))
        size += len(line)
    return "\n".join(f"> {line}" for line in kept)


def _call_line(call: dict, limit: int = COMMAND_CHARS) -> str:
    """A call as its tool and its command or path, read as the signals read them (``Bash `make
    test```, ``Edit a.py``); a patch as the files it changes."""
    name = call_name(call)
    patched = files_touched([call])[1]
    if patched and "Begin Patch" in (call_arguments(call) or ""):
        return f"{name} patch {', '.join(patched)}"
    command = command_run(call)
    if command is not None:
        return f"{name} {shown_command(command, limit)}"
    path = path_of(call) or url_of(call)
    if path:
        return f"{name} {path}"
    about = arguments_of(call).get("description")  # what a sub-agent was sent to do
    return f"{name} ({whole_sentences(about, limit)})" if isinstance(about, str) else name


def condensed_log(messages: Sequence[Message]) -> list[str]:
    """The span's turns before the last one as a condensed log, one item per turn: the request,
    the agent's statements (their first sentence) and each tool call with its outcome, outputs
    elided. Consecutive calls of one tool on nothing in particular are counted, not listed."""
    signals = signals_of(messages)
    failed = {f.message_id for f in signals.failures if not f.warning}  # a warning: still ok
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    turns: list[list[str]] = []
    said: list[str] = []
    calls: list[str] = []

    def close() -> None:
        if turns and (said or calls):
            if said:
                turns[-1].append("  - said: " + " / ".join(dict.fromkeys(said)))
            if calls:
                turns[-1].append("  - did: " + "; ".join(_counted(calls)))
        said.clear()
        calls.clear()

    for m in messages:
        if is_request(m):
            close()
            turns.append([f"- asked: {whole_sentences(m.content or '', LOG_REQUEST_CHARS)}"])
            continue
        if m.role != "assistant" or not turns:
            continue
        if (m.content or "").strip():
            first = _SENTENCES.split((m.content or "").strip())[0]
            said.append(plain(whole_sentences(first, LOG_STATEMENT_CHARS)))
        for call in work_calls(m):
            if is_bookkeeping(call):
                continue
            result = results.get(call["id"])
            output = unwrapped_output(result.content or "") if result is not None else ""
            # a process started in an earlier turn has had its time: only a stop is said
            mark = (
                "✗"
                if result is not None and result.id in failed
                else "(aborted)"
                if aborted(output)
                else "✓"
            )
            calls.append(f"{_call_line(call, LOG_COMMAND_CHARS)} {mark}")
    close()
    return [masked("\n".join(turn)) for turn in turns[:-1]]


def _counted(calls: list[str]) -> list[str]:
    """Runs of the same call line said once with a count."""
    out: list[str] = []
    for line in calls:
        if out and out[-1].split(" ×")[0] == line:
            base, _, n = out[-1].partition(" ×")
            out[-1] = f"{base} ×{int(n or 1) + 1}"
        else:
            out.append(line)
    return out
