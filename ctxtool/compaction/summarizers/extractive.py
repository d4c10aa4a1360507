"""The ``extractive`` summarizer: deterministic, no network, no model.

It writes the sections an agent needs to carry on (``core.sections``: goal, latest request
quoted, open tasks, current work, errors and fixes, files changed and why, constraints,
decisions, done, earlier requests, next step) from what the span says (``span_notes``), and
converts the previous summary, whoever wrote it, into the same sections: its scratchpad and
boilerplate dropped, its done tasks retired to Done, what the span supersedes (the latest
request, the current work, the next step) moved to Earlier requests / Earlier work, anything
else under its writer's heading. Items are deduplicated and trimmed oldest-first to the budget
with a note saying how much was trimmed; the goal, the latest request, the open tasks and the
modified files are never trimmed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ...core.changes import DELETED, is_directory, normalise_path
from ...core.evaluator import carry_over
from ...core.evaluator.gate import SpanProgress, overtaken_items
from ...core.records import Message
from ...core.sections import (
    CONSTRAINTS,
    CURRENT_WORK,
    DECISIONS,
    DONE,
    EARLIER_REQUESTS,
    EARLIER_WORK,
    ERRORS,
    FILES_CHANGED,
    FILES_READ,
    FINDINGS,
    GOAL,
    LATEST_REQUEST,
    LOG,
    NEXT_STEP,
    OPEN_TASKS,
    SECTIONS,
    TOOL_USAGE,
    canonical_heading,
    heading_of,
    is_done,
    is_item,
    parse_sections,
)
from ...core.span_facts import (
    _files_changed,
    agent_choices,
    is_request,
    modified_paths,
    planned_steps_left,
    successful_actions,
    updates_tasks,
    work_calls,
    written_texts,
)
from ...core.tokens import get_encoding, token_lengths
from ...core.work_state import (
    OPEN_PART,
    OTHER,
    REPORT,
    asks_the_agent,
    cut_mid_sentence,
    finished_by_report,
    is_plan_step,
    names_brought_in,
    report_parts,
    request_steps,
    stale_plan_done,
    steps_left,
)
from .base import Summary, SummaryRequest
from .span_notes import (
    LATEST_REQUEST_CHARS,
    REQUEST_CHARS,
    RETRIED,
    SpanNotes,
    TaskNote,
    as_fixed,
    condensed_log,
    failure_stated,
    fixed_command,
    has_figure,
    masked,
    quote_gist,
    read_span,
    reported,
    shown_command,
    whole_sentences,
)

MAX_READ_FILES = 8
MAX_MODIFIED_FILES = 120
MAX_NEW_ERRORS = 20
MAX_ERRORS = 14  # the section's budget: the span's own failures first, carried ones fill it
READ = "Read"  # read paths: the first items trimmed (the checkpoint's details keep them all)
_NO_TASK = re.compile(r"^[-*]?\s*(none|no pending tasks|nothing)\b", re.I)
# What the span supersedes when it has its own: the previous one moves under another heading.
_SUPERSEDED = {
    LATEST_REQUEST: EARLIER_REQUESTS,
    CURRENT_WORK: EARLIER_WORK,
    NEXT_STEP: EARLIER_WORK,
}
_FILE_ITEM = re.compile(r"^[-*]\s+\**`([^`]+)`")  # "- `path` — why", "- **`path`** (NEW)"
_REQUESTS = {LATEST_REQUEST: EARLIER_REQUESTS}  # one family: a request is said once
_STATUS_MARK = {"in_progress": "[in progress]", "completed": "[x]"}


@dataclass
class _Item:
    section: str
    text: str
    age: int  # lower is older: trimmed first
    protected: bool = False
    previous: bool = False  # carried from the previous summary (the carry-over floor guards it)
    fallback: str | None = None  # what stays when the item is trimmed (a changed file's path)
    over_budget: bool = False  # a carried failure past its section's budget: trimmed first
    resolved: bool = False  # a fixed failure of the span: trimmed after the reasons
    retry: bool = False  # a tool's complaint retried past at once: the first thing trimmed
    # A carried item the span overtook (finished, fixed, superseded): the first of the
    # previous summary's items trimmed.
    retired: bool = False
    # the item said at more length while there is room: shrunk to ``text`` early (after
    # the noise and the read paths), dropped later where ``text`` would be
    longer: str | None = None
    extra_first: bool = False  # its longer form shrinks before anything else is cut
    # a carried changed file the previous summary wrote relative to this root (its path is
    # whole again here; written relative to the new root, if any, never under a wrong one)
    root: str | None = None


class ExtractiveSummarizer:
    """A deterministic summary built from the messages themselves and the previous summary."""

    name = "extractive"
    model = None
    input_tokens = None
    revises = False  # deterministic: it trims with the carry-over floor in mind instead

    def __init__(self, request_chars: int = REQUEST_CHARS, condensed_log: bool = False):
        self.request_chars = request_chars
        # The older turns as a log too (scripts/summary_sections.py --log measures it).
        self.condensed_log = condensed_log

    def seconds_per_request(self) -> float:
        return 60.0

    def describe(self) -> str:
        return "extractive (deterministic, no LLM)"

    def summarize(self, request: SummaryRequest) -> Summary:
        notes = read_span(request.messages)
        stale = _stale_plan_done(notes, request.messages)
        if stale:  # the plan's finished steps are done work, the next step is past them
            notes.tasks = [
                TaskNote(t.text, "completed") if t.text in stale else t for t in notes.tasks or ()
            ]
        said = [m.content or "" for m in request.messages if m.role == "assistant" and m.content]
        items, foreign_order = _previous(request.previous_summary, notes, said)
        items += self._new_items(request, notes, items, age=len(items), stale=stale)
        items = _errors_merged(items)
        modified = list(request.files.get("modified_files") or [])
        read = [
            p
            for p in request.files.get("read_files") or []
            if not is_directory(p, modified) and not _listed_path(p, modified)
        ]
        shown = read[-MAX_READ_FILES:]
        items += [_Item(READ, path, i - len(shown) - len(items)) for i, path in enumerate(shown)]
        items += _unlisted_files(request.files, items)
        left_out = len(read) - len(shown) + int(request.files.get("read_files_omitted") or 0)
        items = _one_path_form(_dedupe(items))
        floor = request.min_carry_over if request.previous_summary else None
        # How many of the previous summary's items may go before this span's own: as many as
        # the floor allows, fewer while the result still holds less than the floor.
        allowed = None if floor is None else int(sum(i.previous for i in items) * (1 - floor))
        overtaken = overtaken_items(request.previous_summary, _progress(notes))
        while True:
            text = self._render(request, items, foreign_order, left_out, allowed)
            kept = carry_over(request.previous_summary, text, overtaken).share
            if not allowed or floor is None or kept is None or kept >= floor:
                return Summary(text, self.name, None)
            allowed //= 2

    def _render(
        self,
        request: SummaryRequest,
        items: list[_Item],
        foreign_order: list[str],
        left_out: int,
        allowed: int | None,
    ) -> str:
        enc = get_encoding(request.encoding)
        budget = request.max_tokens
        for _ in range(3):
            text, trimmed = _fit(items, foreign_order, budget, request.encoding, left_out, allowed)
            notes = [f"({len(request.messages)} messages summarized extractively; no LLM was used)"]
            if trimmed:
                notes.insert(
                    0, f"({trimmed} older items trimmed to stay within {request.max_tokens} tokens)"
                )
            # Masked whole: the span's notes are, a previous summary's items may not be.
            text = masked(text)
            # The items' costs are counted one by one: the whole text may come out a little
            # over them, and is fitted again rather than clipped mid-section.
            over = len(enc.encode_ordinary(text)) - (request.max_tokens - 24 * len(notes))
            if over <= 0:
                break
            budget -= over + 8
        text = _clip_to(text, request.max_tokens - 24 * len(notes), request.encoding)
        return text + "\n\n" + "\n".join(notes)

    def _new_items(
        self,
        request: SummaryRequest,
        notes: SpanNotes,
        carried: list[_Item],
        age: int,
        stale: frozenset[str] | set[str] = frozenset(),
    ) -> list[_Item]:
        """The span's own items, newer than every previous one."""
        items: list[_Item] = []

        def add(section: str, text: str, protected: bool = False) -> None:
            nonlocal age
            age += 1
            items.append(_Item(section, text, age, protected))

        said = [m.content or "" for m in request.messages if m.role == "assistant" and m.content]

        def done_since(item: str) -> bool:
            return _finished_in_span(item, notes) or finished_by_report(item, said)

        carried_goal = any(i.section == GOAL for i in carried)
        goal = None if carried_goal else notes.goal
        if not carried_goal:
            stated = goal or request.title or "(not stated)"
            # the goal that is the latest request too is said once, here, as long as that
            short_goal = SHORT_REQUEST_CHARS if goal == notes.latest_request else SHORT_GOAL_CHARS
            add(GOAL, _not_a_heading(_said(stated, short_goal, done_since)), protected=True)
            whole = _not_a_heading(_said(stated, LATEST_REQUEST_CHARS, done_since))
            if whole != items[-1].text:  # whole while there is room, its start when short
                items[-1].longer = whole
        earlier, latest = notes.requests[:-1], notes.latest_request
        fuller = _fuller_outcomes(notes.outcomes[: len(earlier)], request.messages)
        for text, outcome in zip(earlier, notes.outcomes):
            if text != goal:  # the first request, when it is the goal, is said there
                add(EARLIER_REQUESTS, "- " + whole_sentences(text, self.request_chars))
                whole = "- " + whole_sentences(text, LATEST_REQUEST_CHARS)
                if whole != items[-1].text:  # whole only in spare room
                    items[-1].longer, items[-1].extra_first = whole, True
            if outcome:  # under its request; the first thing trimmed when over budget
                lead = "  → " if text != goal else "- (the goal) → "
                items.append(_Item(EARLIER_REQUESTS, lead + outcome, len(items) - 10**6))
                if fuller.get(outcome):  # the report whole while there is room
                    items[-1].longer = lead + fuller[outcome]
        after = ""
        if latest and request.split_turn:
            after = "\n(The work on it continues in the messages after this summary.)"
        if latest and latest == goal:
            add(LATEST_REQUEST, "(the goal's request, quoted above)" + after, True)
        elif latest:
            short = _said(latest, SHORT_REQUEST_CHARS, done_since).replace("\n", "\n> ")
            add(LATEST_REQUEST, "> " + short + after, True)
            whole = "> " + _said(latest, LATEST_REQUEST_CHARS, done_since).replace("\n", "\n> ")
            whole += after
            if whole != items[-1].text:  # whole while there is room, its start when short
                items[-1].longer = whole
        # A split turn whose kept messages update the task list again: that newer list says
        # where each task stands, the one at the cut would be stale beside it.
        restated = request.split_turn and updates_tasks(request.kept)
        last_stale = next((t.text for t in reversed(notes.tasks or ()) if t.text in stale), None)
        if notes.tasks is not None:
            for task in notes.tasks:
                if task.status == "completed":
                    add(DONE, f"- [x] {task.text}")
                    if task.text == last_stale:  # said once, after the last of them
                        n = len(stale)
                        items[-1].text += STALE_DONE.format(f"these {n}" if n > 1 else "it")
                elif not restated:
                    add(OPEN_TASKS, f"- {_STATUS_MARK.get(task.status, '[ ]')} {task.text}", True)
            if restated and any(t.status != "completed" for t in notes.tasks):
                add(OPEN_TASKS, "- (the task list goes on in the messages after this summary)")
        for line in notes.delegated:
            add(DONE, f"- {line}")
            if line in notes.delegated_whole:  # the report whole while there is room
                items[-1].longer = f"- {notes.delegated_whole[line]}"
        calls = [line for line in notes.current_work if line.startswith("- ")]
        # The agent's last words: what they report finished is done work, what they leave
        # open is current work (mid-turn) or the next step (its turn is over, or the user has
        # spoken since), never the other way round (``core.work_state.report_parts``).
        over = notes.turn_ended or _words_before_request(request.messages)
        left_open: list[str] = []
        for line in notes.current_work:
            if line.startswith(">"):
                for where, text in _placed_words(line, over, notes.reported_done):
                    if where == NEXT_STEP:
                        left_open.append(text)
                        continue
                    add(where, text)
                    items[-1].fallback = _quote_gist(text) or None
                continue
            # The last call is never trimmed (what the agent was doing at the cut). Its calls
            # are done work when its turn ended on its words (it handed back to the user).
            finished = notes.turn_ended and not notes.stated_next
            add(DONE if finished else CURRENT_WORK, line, protected=line is calls[-1])
        if len(notes.errors) > MAX_NEW_ERRORS:
            more = len(notes.errors) - MAX_NEW_ERRORS
            add(ERRORS, f"- (and {more} earlier distinct errors in this span)")
        for error in notes.errors[-MAX_NEW_ERRORS:]:
            add(ERRORS, "- " + error)
            if error in notes.resolved:  # cause -> fix in one line when room is short
                items[-1].resolved = True
                items[-1].retry = error.endswith(RETRIED)
                if items[-1].retry:  # what stays of it: the complaint, once, without targets
                    items[-1].fallback = retry_gist(items[-1].text)
                short = fix_gist(items[-1].text)
                if short != items[-1].text:
                    items[-1].longer, items[-1].text = items[-1].text, short
                    items[-1].extra_first = True
        brought = _names_by_file(request.messages) if notes.files else {}
        settings = _settings_by_file(request.messages) if notes.files else {}
        for path, why in notes.files.items():
            shown = f"`{path}` {notes.labels[path]}" if path in notes.labels else f"`{path}`"
            if why:
                add(FILES_CHANGED, f"- {shown} — {why}")
                items[-1].fallback = f"- {shown}"
            else:
                add(FILES_CHANGED, f"- {shown}", protected=True)
            if settings.get(path):  # what a configuration file it wrote sets
                sets = ", ".join(f"`{line}`" for line in settings[path])
                items[-1].text += f" (sets {sets})"
            unnamed = [n for n in brought.get(path, []) if f"`{n}`" not in items[-1].text]
            if unnamed and why:  # what its edits brought in, while there is room
                names = ", ".join(f"`{n}`" for n in unnamed[:MAX_MORE_NAMES])
                items[-1].longer = f"{items[-1].text} (its edits bring in {names})"
                items[-1].extra_first = True
        for text in notes.constraints:
            if _states_something(text, notes.requests):
                add(CONSTRAINTS, "- " + text)
        for text in notes.decisions:
            if _states_something(text, notes.requests) and not asks_the_agent(text):
                add(DECISIONS, "- " + text)
        for text in agent_choices(request.messages):  # the agent's own, with its reason
            add(DECISIONS, "- (the agent) " + masked(text))
        if self.condensed_log:  # the first items trimmed: the sections say it shorter
            turns = condensed_log(request.messages)
            items += [_Item(LOG, turn, n - len(turns) - age) for n, turn in enumerate(turns)]
        step = _next_step(notes, bool(stale))
        if step:
            add(NEXT_STEP, step)
            left = _steps_left(notes, request.messages)
            if left and not (notes.turn_ended or notes.reported_done):
                add(NEXT_STEP, "- Steps of the latest request not yet done: " + "; ".join(left))
            planned = planned_steps_left(request.messages)
            if planned and not (notes.turn_ended or notes.reported_done):
                add(NEXT_STEP, "- Then, as the agent planned: " + masked("; ".join(planned)))
        for text in left_open:
            add(NEXT_STEP, text)
            items[-1].fallback = _quote_gist(text) or None
        said_at = [i.text for i in carried + items]
        for n, finding in enumerate(notes.findings):  # cut early: the sections say more
            if not any(finding in text for text in said_at):
                items.append(_Item(FINDINGS, f"- {finding}", n - len(notes.findings) - 10**6))
        return items


MAX_STEPS_LEFT = 4
GIST_COMMAND_CHARS = 60
GIST_ERROR_CHARS = 150
GIST_FIX_CHARS = 200
# the directories of a path in a fix's line ("/Users/a/proj/src/" of "/Users/a/proj/src/x.rs")
_DIRECTORIES = re.compile(r"(?<![\w`])(?:[\w.@~-]*/)+(?=[\w.@-]+\.\w+\b)")
_SAME_ON = re.compile(r" \(the same on (\d+) more: .*\)$")
_FAILED = re.compile(r"^(- )?(`[^`]+`(?: \(shortened\))? failed: |[^:`]{1,60}?: )")


def fix_gist(item: str) -> str:
    """A fixed failure's item as one line of cause -> fix, for when the budget is short: its
    command shortened, its first error within ``GIST_ERROR_CHARS``, the fix within
    ``GIST_FIX_CHARS`` (the files it changed by name, room for the code it brought in); what the agent said then and the other targets' names left out (their
    count stays). Dropping the failure whole loses its fix, which a later question asks for.
    An item that is no fixed failure comes back as it is."""
    head, sep, fix = item.rpartition(" — fixed: ")
    if not sep:
        return item
    head = head.split(" (then: ", 1)[0]
    more = _SAME_ON.search(fix)
    if more:
        fix = fix[: more.start()]
    lead = _FAILED.match(head)
    if lead is None:
        return item
    opening = lead.group(0)
    command = re.match(r"(- )?`([^`]+)`(?: \(shortened\))?", opening)
    if command:  # the command shown shorter, its cut said as shown_command says it
        opening = (command.group(1) or "") + shown_command(command.group(2), GIST_COMMAND_CHARS)
        opening += lead.group(0)[command.end() :]
    error = whole_sentences(head[lead.end() :], GIST_ERROR_CHARS)
    alike = f" (the same on {more.group(1)} more)" if more else ""
    before, sep, changed = fix.partition(" after changing ")
    if sep:  # the files the fix changed by name (room for its code), never inside code
        files, code, rest = changed.partition(" (`")
        fix = before + sep + _file_names(files) + code + rest
    short = f"{opening}{error} — fixed: {whole_sentences(fix, GIST_FIX_CHARS)}{alike}"
    return short if len(short) < len(item) else item


def _file_names(files: str) -> str:
    """The files of a fix by name ("a/b/lib.rs, c.py" -> "lib.rs, c.py"), each path whose
    name another of them shares kept whole ("crates/a/src/lib.rs, crates/b/src/lib.rs")."""
    paths = files.split(", ")
    names = [_DIRECTORIES.sub("", p) for p in paths]
    return ", ".join(n if names.count(n) == 1 else p for p, n in zip(paths, names, strict=True))


RETRY_ERROR_CHARS = 60


def retry_gist(item: str) -> str:
    """A tool's complaint retried past at once, in the fewest words: the tool, how often, the
    complaint's first sentence (within ``RETRY_ERROR_CHARS``); not the targets."""
    head = item.removesuffix(RETRIED).split(" (on ", 1)[0]
    tool, sep, error = head.partition(": ")
    return f"{tool}{sep}{whole_sentences(error, RETRY_ERROR_CHARS)} — retried at once"


def _states_something(statement: str, requests: Sequence[str]) -> bool:
    """A constraint or decision the user's words state: not a plan's step, nor one line of
    a sentence that wraps over lines (``work_state.cut_mid_sentence``)."""
    if is_plan_step(statement):
        return False
    return not any(cut_mid_sentence(statement, r) for r in requests)


STALE_DONE = " ({}: done by the agent's reports since the plan's last update)"


def _stale_plan_done(notes: SpanNotes, messages: Sequence[Message]) -> set[str]:
    """The open tasks of a plan the agent stopped updating that its reports since finished
    (``work_state.stale_plan_done``)."""
    if not notes.tasks or all(t.status == "completed" for t in notes.tasks):
        return set()
    updates = [i for i, m in enumerate(messages) if m.role == "assistant" and updates_tasks([m])]
    if not updates:
        return set()
    since = [m for m in messages[updates[-1] + 1 :] if m.role == "assistant"]
    calls = sum(len(work_calls(m)) for m in since)
    words = [m.content for m in since if m.content]
    texts = [t.text for t in notes.tasks]
    done = stale_plan_done(texts, words, calls)
    return {t.text for t, d in zip(notes.tasks, done) if d and t.status != "completed"}


def _steps_left(notes: SpanNotes, messages: Sequence[Message]) -> list[str]:
    """The latest request's steps the span has not done (``work_state.steps_left``), the
    next ``MAX_STEPS_LEFT`` of them, each within a line."""
    if not notes.latest_request:
        return []
    start = max((i for i, m in enumerate(messages) if is_request(m)), default=-1)
    since = messages[start + 1 :]
    said = [m.content or "" for m in since if m.role == "assistant" and m.content]
    steps = request_steps(notes.latest_request)
    changes = _files_changed(since)
    written = [c.path for c in changes if c.kind != DELETED]
    deleted = [c.path for c in changes if c.kind == DELETED]
    left = steps_left(steps, said, successful_actions(messages, start), written, deleted)
    # "2. If you …" would end a sentence at its number
    left = [re.sub(r"^(\d+)\.\s", r"\1) ", s) for s in left[:MAX_STEPS_LEFT]]
    return [whole_sentences(s, 160) for s in left]


def _placed_words(quote: str, over: bool, reported: bool) -> list[tuple[str, str]]:
    """The sections the quote of the agent's last words goes under, part by part: what it
    reports finished under Done; what it leaves open under Current work while the agent is at
    work, under Next step once its turn is over (``over``); a finding under Current work
    mid-turn, under Done (its last report) once the turn is over or the words report the work
    done (``reported``)."""
    words = "\n".join(line.removeprefix(">").removeprefix(" ") for line in quote.splitlines())
    out: list[tuple[str, str]] = []
    parts = report_parts(words)
    for n in range(len(parts) - 1):  # a heading goes where the list it introduces goes
        label, text = parts[n]
        *rest, last = text.split("\n")
        if last.rstrip("*").endswith(":") and _LIST_ITEM.match(parts[n + 1][1]):
            parts[n] = (label, "\n".join(rest))
            parts[n + 1] = (parts[n + 1][0], last + "\n" + parts[n + 1][1])
    for label, text in (p for p in parts if p[1].strip()):
        if label == REPORT or (label == OTHER and (over or reported)):
            where = DONE
        else:
            where = NEXT_STEP if over and label == OPEN_PART else CURRENT_WORK
        quoted = "\n".join("> " + line for line in text.splitlines())
        if out and out[-1][0] == where:
            out[-1] = (where, out[-1][1] + "\n" + quoted)
        else:
            out.append((where, quoted))
    return out


_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


def _quote_gist(quote: str) -> str:
    """What stays of a quote when the budget cannot hold it (``span_notes.quote_gist``); but
    a quote that opens on a heading or a list keeps its first lines whole, up to the end of
    the first item: "1." alone, or "Now invalid themes will:" alone, says nothing."""
    lines = [line.removeprefix(">").strip() for line in quote.splitlines() if line.strip()]
    if not lines or not (lines[0].rstrip("*").endswith(":") or _LIST_ITEM.match(lines[0])):
        return quote_gist(quote)
    head = lines[: 2 if lines[0].rstrip("*").endswith(":") else 1]
    return "> " + whole_sentences(" ".join(head), 240)


def _words_before_request(messages: Sequence[Message]) -> bool:
    """The agent's last words came before the latest request: they answered an earlier one."""
    for m in reversed(messages):
        if is_request(m):
            return True
        if m.role == "assistant" and (m.content or "").strip():
            return False
    return False


FULL_OUTCOME_CHARS = 900
# What lists an item as to do, as a reader of the summary takes it: a checkbox, "pending".
_TO_DO_MARK = re.compile(r"\[ \]|\[in progress\]|\bpending\b|\bin progress\b", re.I)
_OPEN_BOX = re.compile(r"\[ \]")


def _said(text: str, limit: int, finished: Callable[[str], bool]) -> str:
    """The user's text within ``limit`` characters, on one line; but when it lists items as
    to do (a checklist, "pending"), each such line on its own line, an item the span has
    finished since ticked: the checklist of a request says where each item stands at the cut,
    and a finished item is not read as pending beside the others."""
    if not _TO_DO_MARK.search(text):
        return whole_sentences(text, limit)
    lines: list[str] = []
    prose: list[str] = []
    for line in (x.strip() for x in text.splitlines() if x.strip()):
        if not _TO_DO_MARK.search(line):
            prose.append(line)
            continue
        if prose:
            lines.append(" ".join(prose))
            prose = []
        if _OPEN_BOX.search(line) and finished(line):
            line = _OPEN_BOX.sub("[x]", line, count=1) + " (done since)"
        lines.append(" ".join(line.split()))
    if prose:
        lines.append(" ".join(prose))
    out: list[str] = []
    size = 0
    for line in lines:
        room = limit - size
        if out and len(line) > room:
            if room >= 80:  # the start of the line that does not fit, as the one-line form
                out.append(whole_sentences(line, room))
            elif not out[-1].endswith("[…]"):
                out.append("[…]")
            break
        out.append(whole_sentences(line, limit))
        size += len(out[-1]) + 1
    return "\n".join(out)


SHORT_GOAL_CHARS = 400  # the goal when room is short: it still names the work
SHORT_REQUEST_CHARS = 600  # the latest request's quote when room is short


def _fuller_outcomes(outcomes: list[str], messages: Sequence[Message]) -> dict[str, str]:
    """For each earlier request's outcome (the first lines of the agent's report that name
    something, ``span_notes.reported``), the same report within ``FULL_OUTCOME_CHARS``: the
    answer a question about that turn asks for, said whole while the budget has room."""
    wanted = {o for o in outcomes if o and o.endswith("[…]")}
    out: dict[str, str] = {}
    for m in messages:
        if not wanted:
            break
        if m.role != "assistant" or not (m.content or "").strip():
            continue
        short = masked(reported(m.content or ""))
        if short in wanted:
            wanted.discard(short)
            out[short] = masked(reported(m.content or "", FULL_OUTCOME_CHARS))
    return out


MAX_MORE_NAMES = 12


def _names_by_file(messages: Sequence[Message]) -> dict[str, list[str]]:
    """For each file the span's edits change, the code names they bring in, newest first."""
    out: dict[str, list[str]] = {}
    for m in reversed(messages):
        if m.role != "assistant":
            continue
        for call in reversed(work_calls(m)):
            paths = modified_paths(call)
            if not paths:
                continue
            names = names_brought_in(*written_texts(call))
            for path in paths:
                out.setdefault(path, [])
                out[path] += [n for n in names if n not in out[path]]
    return out


MAX_SETTINGS = 12
_SETTING = re.compile(r"^[A-Za-z_][\w.-]*\s*[=:]\s*\S")
_NOT_SETTINGS = ("#", "[", "//", ";")  # comments and a TOML/INI table's header


def settings_written(text: str) -> list[str]:
    """The ``key = value`` lines of a small configuration file the agent wrote whole (TOML,
    INI, YAML, .env), each as written: a threshold or a port it set is what a later question
    asks for, and a bare path says none of it. None for anything else (code, prose)."""
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith(_NOT_SETTINGS)]
    if not lines or len(lines) > MAX_SETTINGS or not all(_SETTING.match(x) for x in lines):
        return []
    return lines


def _settings_by_file(messages: Sequence[Message]) -> dict[str, list[str]]:
    """For each file one write of the span made a small configuration file, its settings
    (the last such write)."""
    out: dict[str, list[str]] = {}
    for m in messages:
        if m.role != "assistant":
            continue
        for call in work_calls(m):
            paths = modified_paths(call)
            new, old = written_texts(call)
            if len(paths) == 1 and not old and (found := settings_written(new)):
                out[paths[0]] = found
    return out


def _next_step(notes: SpanNotes, stale: bool = False) -> str | None:
    """From the latest explicit request, the task under way for it, and the agent's last
    words: its stated next step ("WP14 next") is the next step; a request it reported done is
    not to be continued."""
    if not notes.latest_request:
        return None
    first = whole_sentences(notes.latest_request, 100)  # quoted whole under Latest request
    doing = [t.text for t in notes.tasks or () if t.status == "in_progress"]
    if doing:
        return f"Finish the task in progress ({doing[0]}) for the latest request: {first}"
    left = [t.text for t in notes.tasks or () if t.status != "completed"]
    if stale and left:  # the plan's step under way is done: the next is the first left
        return f"Go on with the plan's first step not yet reported done ({left[0]}) for the latest request: {first}"
    if notes.stated_next:
        return f"As the agent said last: {whole_sentences(notes.stated_next, 200)}"
    # A request answered is not restated here: this section lists what is still to do, and
    # the latest request is quoted above.
    if notes.turn_ended:
        asked = f"; it asked: {notes.asked}" if notes.asked else ""
        return f"The agent ended its turn on the latest request{asked}; wait for the user's next request"
    if notes.reported_done:
        return "The agent reported the latest request done; wait for the next request"
    if notes.tasks and all(t.status == "completed" for t in notes.tasks):
        return f"Every task of the list is done; confirm the latest request is met: {first}"
    return f"Continue the latest request: {first}"


def _previous(
    summary: str | None, notes: SpanNotes, statements: Sequence[str] = ()
) -> tuple[list[_Item], list[str]]:
    """The previous summary's items (any writer) in ctxtool's sections and its foreign headings
    in order. Done tasks are retired to Done; what the span supersedes moves to Earlier
    requests / Earlier work; a tool usage tally (what older versions wrote) is left out: a
    count of calls tells the next step nothing. ``statements``: the agent's words in the span
    (a pending item they last name in a report of finished work is done)."""
    items: list[_Item] = []
    foreign: list[str] = []
    supersedes = {
        LATEST_REQUEST: bool(notes.latest_request),
        CURRENT_WORK: bool(notes.current_work),
        NEXT_STEP: bool(notes.latest_request),
    }
    for section in parse_sections(summary):
        ours = canonical_heading(section.heading)
        if ours in (FILES_READ, TOOL_USAGE):
            continue  # read files are rebuilt from the checkpoint's accumulated lists
        name = ours or section.heading
        if supersedes.get(name):
            name = _SUPERSEDED[name]
        if ours is None and name not in foreign:
            foreign.append(name)
        for line in section.items:
            if not any(is_item(part) for part in line.splitlines()):
                continue
            where = name
            if name == OPEN_TASKS and (_NO_TASK.match(line) or _listed(line, notes)):
                continue  # a placeholder, or a task the span's own list states now
            # an item listed as to do (by its section, or its own mark under any heading)
            to_do = name in (OPEN_TASKS, CURRENT_WORK, NEXT_STEP, EARLIER_WORK) or bool(
                _PENDING_MARK.search(line)
            )
            if to_do and (
                is_done(line)
                or _finished_in_span(line, notes)
                or finished_by_report(line, statements)
            ):
                where = DONE  # marked done, or work the span did since
                line = _marked_done(line)
            if name == ERRORS and fixed_command(line, notes.succeeded, notes.targets):
                # a run of its command succeeded in this span: retired to Done
                where, line = DONE, as_fixed(line)
            item = _Item(where, line, len(items), protected=where == GOAL, previous=True)
            item.retired = where != (ours or section.heading)  # done, fixed or superseded
            path = _FILE_ITEM.match(line) if where == FILES_CHANGED else None
            if path:
                item.fallback = f"- `{path.group(1)}`"  # trimmed, the path stays
            items.append(item)
    return whole_paths(items), foreign


# The marks that list an item as to do (as the evaluator reads them), and its checkbox.
_PENDING_MARK = re.compile(r"\[ \]|\[in progress\]|\bpending\b|\bin progress\b", re.I)
_CHECKBOX = re.compile(r"^(\s*(?:[-*+]|\d+[.)])?\s*)\[(?: |in progress)\]\s*", re.I)


def _marked_done(line: str) -> str:
    """A carried item the span finished, marked done: its checkbox ticked, or ``[x]`` put
    before it, and the words that listed it as to do ("(pending)", "(NEXT)") taken out."""
    if is_done(line) or "\n" in line:
        return line
    text = re.sub(r"\s*\((?:pending|in progress|next|todo)\)", "", line, flags=re.I)
    ticked, n = _CHECKBOX.subn(lambda m: m.group(1) + "[x] ", text, count=1)
    if n:
        return ticked
    lead = re.match(r"^(\s*(?:[-*+]|\d+[.)])\s+|#+\s*)?", text)
    head = lead.group(0) if lead else ""
    return f"{head}[x] {text[len(head) :]}"


def _errors_merged(items: list[_Item]) -> list[_Item]:
    """The Errors section of a checkpoint on top of another: the span's own failures first,
    the carried ones after (the same command failing the same way again is said once, as the
    span says it). Carried ones past the section's budget are the first previous items trimmed."""
    own = [i for i in items if i.section == ERRORS and not i.previous]
    restated = {failure_stated(i.longer or i.text) for i in own} - {None}
    carried = [
        i
        for i in items
        if i.section == ERRORS and i.previous and failure_stated(i.text) not in restated
    ]
    for i in carried[: max(0, len(carried) - max(0, MAX_ERRORS - len(own)))]:
        i.over_budget = True
    others = [i for i in items if i.section != ERRORS]
    return others + own + carried


def _finished_in_span(line: str, notes: SpanNotes) -> bool:
    """A carried pending item that names the same work as a task the span completed, that a
    successful run of the span carried out, or that makes a file the span changed."""
    return _progress(notes).finished(line)


def _progress(notes: SpanNotes) -> SpanProgress:
    """What the span got done, as the gate reads it (``evaluator.gate.overtaken_items``)."""
    completed = tuple(t.text for t in notes.tasks or () if t.status == "completed")
    return SpanProgress(completed, tuple(notes.actions), tuple(notes.files))


def _listed(line: str, notes: SpanNotes) -> bool:
    """The span's task list names this task (its state there is the current one)."""
    text = " ".join(line.lower().split())
    return any(t.text.lower() in text for t in notes.tasks or ())


def _unlisted_files(files: dict, items: list[_Item]) -> list[_Item]:
    """Modified files (the checkpoint's accumulated list) no item names yet: listed plainly,
    the newest ``MAX_MODIFIED_FILES``, with the number left out said. Never trimmed."""
    named = "\n".join(
        i.fallback or i.text
        for i in items
        if (i.protected or i.fallback) and i.section != CURRENT_WORK  # no list of changes
    )
    listed = [m.group(1) for i in items if (m := _FILE_ITEM.match(i.fallback or i.text))]
    paths = [
        p
        for p in files.get("modified_files") or []
        if p not in named and not _listed_path(p, listed)
    ]
    left_out = max(0, len(paths) - MAX_MODIFIED_FILES) + int(
        files.get("modified_files_omitted") or 0
    )
    out = [_Item(FILES_CHANGED, f"- `{p}`", 0, protected=True) for p in paths[-MAX_MODIFIED_FILES:]]
    if left_out:
        out.append(_Item(FILES_CHANGED, f"- (and {left_out} more)", 0, protected=True))
    return out


def _listed_path(path: str, listed: list[str]) -> bool:
    """``path`` is one of ``listed`` in another form: absolute where the other is relative to
    the session's directory, or the reverse (a carried summary used the other form)."""
    norm = normalise_path(path)
    for other in listed:
        o = normalise_path(other)
        if o == norm:
            continue
        if norm.startswith("/") and not o.startswith("/") and norm.endswith("/" + o):
            return True
        if o.startswith("/") and not norm.startswith("/") and o.endswith("/" + norm):
            return True
    return False


def _one_path_form(items: list[_Item]) -> list[_Item]:
    """A changed file listed twice (once relative and once absolute, as a carried summary
    wrote it, or twice in one form, carried and from the span) is listed once: the item that
    says most is kept, in the relative form, and the other's reason is added to it."""
    files = [
        (i, m.group(1))
        for i in items
        if i.section == FILES_CHANGED
        if (m := _FILE_ITEM.match(i.text))
    ]
    drop: set[int] = set()
    for item, path in files:
        if id(item) in drop:
            continue
        twins = [
            (j, p)
            for j, p in files
            if j is not item
            and id(j) not in drop
            and (normalise_path(p) == normalise_path(path) or _listed_path(path, [p]))
        ]
        if not twins:
            continue
        group = [(item, path)] + twins
        keep = max(group, key=lambda ip: (len(ip[0].text), not ip[1].startswith("/")))[0]
        for j, _ in group:
            if j is keep:
                continue
            drop.add(id(j))
            why = j.text.split(" — ", 1)[1] if " — " in j.text else ""
            if why and why not in keep.text:
                keep.text += f"; {'later' if j.age > keep.age else 'earlier'}: {why}"
            keep.protected = keep.protected or j.protected
            keep.previous = keep.previous or j.previous
    return [i for i in items if id(i) not in drop]


def _dedupe(items: list[_Item]) -> list[_Item]:
    """One item per text in a section (whitespace and case aside), keeping the newest
    occurrence's age; a request is said once, as the latest or as an earlier one. Nested details and code
    blocks are never merged away: the same line under two files is two facts."""
    seen: dict[object, _Item] = {}
    for n, item in enumerate(items):
        text = " ".join(item.text.lower().removeprefix("- ").removeprefix("> ").split())
        key: object = (_REQUESTS.get(item.section, item.section), text)
        if item.text[:1].isspace() or "\n" in item.text:
            key = n  # a detail under an item ("  - Step name changed") may repeat elsewhere
        if key in seen:
            older = seen.pop(key)
            item.protected = item.protected or older.protected
            item.previous = item.previous or older.previous
        seen[key] = item
    return list(seen.values())


def _trim_order(items: list[_Item], allowed: int | None) -> list[_Item]:
    """Which items go first when over budget (issue #42's order): a tool's complaints retried
    past at once, read paths, the quote of the agent's last words, the reasons of changed
    files (their paths stay), then the oldest items (a fixed failure, already one line of
    cause -> fix, among them: its fix is what a later question asks for); the user's
    constraints, decisions and requests last. With a carry-over floor, only ``allowed`` of the
    previous summary's items go before this span's own (oldest first, the span's fixed
    failures before them), and the rest of them last."""
    by_age = sorted((i for i in items if not i.protected), key=lambda i: i.age)
    retries = [i for i in by_age if i.retry]
    fixes = [i for i in by_age if i.resolved and not i.retry]
    read = [i for i in by_age if i.section == READ]
    quotes = [i for i in by_age if _is_quote(i)]
    reasons = [i for i in by_age if i.fallback and not i.previous]
    said = [i for i in by_age if _users_words(i)]
    early = {id(i) for i in retries + read + quotes + reasons + said}
    # the carried items the span overtook (finished, fixed, superseded; blocks too)
    overtaken = [i for i in by_age if i.previous and i.retired and id(i) not in early]
    if allowed is None:
        early |= {id(i) for i in overtaken}
        rest = [i for i in by_age if id(i) not in early]
        return _once(retries + read + overtaken + quotes + reasons + rest + said)
    # the overtaken first among the carried items, then failures past their budget
    early |= {id(i) for i in overtaken}
    previous = [i for i in by_age if i.previous and "\n" not in i.text and id(i) not in early]
    previous = (
        overtaken
        + [i for i in previous if i.over_budget]
        + [i for i in previous if not i.over_budget]
    )
    blocks = [i for i in by_age if i.previous and "\n" in i.text and id(i) not in early]
    own = [i for i in by_age if not i.previous and i.section != ERRORS and id(i) not in early]
    # the span's own failures go last: what failed since the last checkpoint is news
    errors = [i for i in by_age if not i.previous and i.section == ERRORS and id(i) not in early]
    return _once(
        retries
        + read
        + quotes
        + reasons
        + fixes
        + previous[:allowed]
        + own
        + said  # the previous summary's items past the floor's allowance go after them
        + previous[allowed:]
        + blocks
        + errors
    )


def _once(order: list[_Item]) -> list[_Item]:
    """Each item once, where it first comes (a quote with a gist is a quote and has a
    fallback): an item counted twice would make the fit think it freed its cost twice."""
    return list({id(i): i for i in order}.values())


def _is_quote(item: _Item) -> bool:
    """The span's quote of the agent's last words (the kept messages often go on from it)."""
    return item.section in (CURRENT_WORK, DONE) and not item.previous and item.text.startswith(">")


def _users_words(item: _Item) -> bool:
    """The user's constraints, decisions and requests of the span: the last items cut."""
    if item.previous or item.section not in (CONSTRAINTS, DECISIONS, EARLIER_REQUESTS):
        return False
    return not item.text.lstrip().startswith(("→", "- (the goal) →"))


def _fit(
    items: list[_Item],
    foreign: list[str],
    budget: int,
    encoding: str,
    read_left_out: int,
    allowed: int | None = None,
) -> tuple[str, int]:
    """Render within ``budget`` tokens, dropping items in :func:`_trim_order`."""
    enc = get_encoding(encoding)
    cost = {id(i): n + 1 for i, n in zip(items, token_lengths([i.text for i in items], enc))}
    reserve = 48  # the notes under the summary, the Read line's frame
    frame = reserve + 4 * (len({i.section for i in items}) + 1)
    over = sum(cost.values()) + frame > budget
    if over or any(i.root for i in items):
        # over, or the carried summary wrote paths relative to a root: the changed files under
        # one root relative to it; over, a long list of bare changed paths says each directory
        # once (no file lost)
        items = relative_paths(items)
        items = folded_paths(items) if over else items
        cost = {id(i): n + 1 for i, n in zip(items, token_lengths([i.text for i in items], enc))}
    short = [i for i in items if i.fallback]
    cost_short = {
        id(i): n + 1 for i, n in zip(short, token_lengths([i.fallback or "" for i in short], enc))
    }
    # what the longer forms add: shrunk back (``shrink``) after the noise and the read paths
    longer = sorted((i for i in items if i.longer), key=lambda i: i.age)
    extra = {
        id(i): max(0, n + 1 - cost[id(i)])
        for i, n in zip(longer, token_lengths([i.longer or "" for i in longer], enc))
    }
    total = sum(cost.values()) + frame + sum(extra.values())
    order = _trim_order(items, allowed)
    noise = next((n for n, i in enumerate(order) if not (i.retry or i.section == READ)), 0)
    # the agent's findings along the way go first: the sections and reports say more
    steps = [(i, False) for i in order if i.section == FINDINGS and not has_figure(i.text)]
    # the user's words said whole shrink after the other extra forms: request history last
    extras = sorted((i for i in longer if i.extra_first), key=_users_words)
    steps += [(i, True) for i in extras]
    steps += [(i, False) for i in order[:noise]] + [(i, True) for i in longer if not i.extra_first]
    steps += [(i, False) for i in order[noise:]]
    dropped: set[int] = set()
    shrunk: set[int] = set()
    undo: list[tuple[set[int], int, int]] = []  # each cut: its set, its item, what it freed
    for item, shrink in steps:
        if total <= budget:
            break
        if id(item) in extra and id(item) not in shrunk:
            shrunk.add(id(item))
            total -= extra[id(item)]
            undo.append((shrunk, id(item), extra[id(item)]))
        if not shrink:
            dropped.add(id(item))
            freed = cost[id(item)] - cost_short.get(id(item), 0)
            total -= freed
            undo.append((dropped, id(item), freed))
    # The last cuts freed more than was needed: what fits again comes back, the most
    # valuable (the last cut) first, so the budget is used while there is more worth saying.
    for cut, key, freed in reversed(undo):
        if total + freed <= budget and not (cut is shrunk and key in dropped):
            cut.discard(key)
            total += freed
    kept = [
        _Item(i.section, i.longer, i.age)
        if i.longer and id(i) not in shrunk
        else i
        if id(i) not in dropped
        else _Item(i.section, i.fallback or "", i.age)
        for i in items
        if id(i) not in dropped or i.fallback
    ]
    read = [i.text for i in kept if i.section == READ]
    read_trimmed = sum(1 for i in items if i.section == READ) - len(read)
    more = read_left_out + read_trimmed
    out: list[str] = []
    for heading in SECTIONS:
        out += _section(heading, kept)
    others = [h for h in dict.fromkeys(i.section for i in kept) if h not in SECTIONS]
    for heading in [h for h in others if h not in foreign and h != READ] + foreign:
        out += _section(heading, kept)
    if read:
        out += ["", f"## {FILES_READ}", ", ".join(read) + (f" (and {more} more)" if more else "")]
    elif more:  # none left to list: the count alone, never "(and 13 more)" after nothing
        out += ["", f"## {FILES_READ}", f"({more} files read; the checkpoint's details list them)"]
    return "\n".join(out).strip(), len(dropped) - read_trimmed


ROOT_DEPTH = 2  # a shared root says something from /home/<user>/ on, never / alone


def common_root(paths: Sequence[str]) -> str | None:
    """The deepest directory every absolute path of ``paths`` lies under (with its trailing
    slash), when two or more are absolute and it is ``ROOT_DEPTH`` directories deep or more;
    None otherwise. Relative paths are left aside: they are relative to the session already."""
    absolute = [p for p in paths if p.startswith("/")]
    if len(absolute) < 2:
        return None
    # the directories above each path (a directory's own name left out, as a file's is)
    parts = [p.rstrip("/").split("/")[1:-1] for p in absolute]
    shared: list[str] = []
    for names in zip(*parts):
        if len(set(names)) > 1:
            break
        shared.append(names[0])
    return "/" + "/".join(shared) + "/" if len(shared) >= ROOT_DEPTH else None


_ROOT_LINE = re.compile(r"^[-*]\s+\(paths relative to `([^`]+)`\)\s*$")


def _root_line(root: str) -> str:
    """The line that says the changed files after it are written relative to ``root``."""
    return f"- (paths relative to `{root}`)"


def whole_paths(items: list[_Item]) -> list[_Item]:
    """A carried summary's changed files written relative to a root (the lines after its
    "- (paths relative to `…`)" line) with their paths whole again, the root line left out:
    the span's own files may share another root, and a carried line put under that one would
    name another file. Each such item keeps its root (:func:`relative_paths` writes it
    relative again, to the root it shares with the span's files)."""
    out: list[_Item] = []
    root: str | None = None
    for item in items:
        said = _ROOT_LINE.match(item.text) if item.section == FILES_CHANGED else None
        if said:
            root = said.group(1)
            continue
        path = _lead_path(item.text) if item.section == FILES_CHANGED else None
        if root and path and item.previous and not _absolute(path):
            item = _rewritten(item, root.__add__)  # the root before the path
            item.root = root
        out.append(item)
    return out


def relative_paths(items: list[_Item]) -> list[_Item]:
    """The span's changed files under one root directory (an absolute session's project,
    ``/home/runner/work/erk/erk/``) listed relative to it, the root said once in a line before
    them: the same prefix on every line costs ten tokens a file. The root is the one the
    span's files share with the carried ones a previous summary wrote relative to its own root
    (:func:`whole_paths`); a carried line the previous summary wrote whole stays as it was (the
    carry-over floor compares it). The files named relative to the session go before the
    root's line, so that no line after it reads from the root unless it lies there. No file is
    lost, and a relative path still names its file by its whole tail. Only an item's leading
    path is rewritten: it alone is known to be a path."""
    items = whole_paths(items)  # a root's line already there: its lines whole again first
    files = [
        path
        for i in items
        if i.section == FILES_CHANGED and (not i.previous or i.root)
        if (path := _lead_path(i.text)) and path.startswith("/")
    ]
    root = common_root(files)
    if root is None:
        return items
    before: list[_Item] = []
    after: list[_Item] = []
    into = after
    for item in items:
        if item.section != FILES_CHANGED:
            continue
        path = _lead_path(item.text)
        if item.text[:1].isspace():  # a detail under the item before it goes with it
            pass
        elif path and (not item.previous or item.root) and path.startswith(root):
            into, item = after, _rewritten(item, lambda p: p.removeprefix(root))
        elif path and not _absolute(path):
            into = before  # relative to the session, not to the root
        else:
            into = after  # a path elsewhere, whole; a line that names no path
        into.append(item)
    first = next(n for n, i in enumerate(items) if i.section == FILES_CHANGED)
    line = _Item(FILES_CHANGED, _root_line(root), items[first].age, protected=True)
    others = [i for i in items if i.section != FILES_CHANGED]
    return others[:first] + before + [line] + after + others[first:]


def _lead_path(text: str) -> str | None:
    """The path an item of the changed files opens with ("- `path` — why")."""
    found = _FILE_ITEM.match(text)
    return found.group(1) if found else None


def _absolute(path: str) -> bool:
    """A path that names its file wherever it is read (POSIX, home, Windows drive or share)."""
    return path.startswith(("/", "~", "\\")) or bool(re.match(r"[A-Za-z]:[\\/]", path))


def _rewritten(item: _Item, change: Callable[[str], str]) -> _Item:
    """A copy of the item with ``change`` applied to the leading path of each of its forms."""

    def lead(text: str | None) -> str | None:
        found = _FILE_ITEM.match(text) if text else None
        if not text or not found:
            return text
        return text[: found.start(1)] + change(found.group(1)) + text[found.end(1) :]

    return replace(
        item, text=lead(item.text) or "", fallback=lead(item.fallback), longer=lead(item.longer)
    )


_BARE_FILE = re.compile(r"^- `([^`]+)`( \((?:deleted|added|renamed from [^)]*)\))?$")


def folded_paths(items: list[_Item]) -> list[_Item]:
    """The changed files listed bare (no reason), two or more in one directory, as one item:
    "- `src/core/`: `a.py`, `b.py` (deleted)", where the first of them stood. Every file
    stays named, its directory said once. Files on either side of a root's line
    (:func:`relative_paths`) are never folded together: the same directory names two."""
    groups: dict[tuple[int, str], list[tuple[_Item, str]]] = {}
    side = 0
    for item in items:
        side += item.section == FILES_CHANGED and bool(_ROOT_LINE.match(item.text))
        found = _BARE_FILE.match(item.text) if item.section == FILES_CHANGED else None
        if found and not item.fallback:
            path = found.group(1)
            cut = max(path.rfind("/"), path.rfind("\\"))
            if 0 < cut < len(path) - 1:
                label = found.group(2) or ""
                folded = (side, path[: cut + 1])
                groups.setdefault(folded, []).append((item, f"`{path[cut + 1 :]}`{label}"))
    out: dict[int, _Item | None] = {}
    for (_, directory), members in groups.items():
        if len(members) < 2:
            continue
        first = members[0][0]
        out[id(first)] = _Item(
            FILES_CHANGED,
            f"- `{directory}`: " + ", ".join(name for _, name in members),
            max(i.age for i, _ in members),
            protected=any(i.protected for i, _ in members),
            previous=any(i.previous for i, _ in members),
        )
        out.update({id(i): None for i, _ in members[1:]})
    return [out.get(id(i), i) for i in items if out.get(id(i), i) is not None]  # type: ignore[misc]


def _clip_to(text: str, budget: int, encoding: str) -> str:
    """The last resort when what is never trimmed (goal, latest request, modified files) is
    itself over the budget: the text is cut at the budget, and says so."""
    enc = get_encoding(encoding)
    tokens = enc.encode_ordinary(text)
    if len(tokens) <= budget:
        return text
    return enc.decode(tokens[: max(0, budget - 12)]).rstrip() + f"\n(clipped to {budget} tokens)"


def _section(heading: str, kept: list[_Item]) -> list[str]:
    lines = [i.text for i in kept if i.section == heading]
    if not lines:
        return []
    return ["", f"## {heading}"] + lines


def _not_a_heading(line: str) -> str:
    """The goal, written as the first line of its section, as an item: a request that opens
    with a Markdown heading (``## Research Plan``, then the question) would otherwise start a
    section of its own and leave the Goal section empty. The heading's marks go, its words
    stay; a line that still reads as a heading (``Fix the login:``) is quoted."""
    if heading_of(line) is None:
        return line
    bare = line.lstrip("#").strip()
    return bare if bare and heading_of(bare) is None else f'"{line}"'
