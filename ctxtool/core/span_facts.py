"""What a span of transcript messages says, read from its structure (pure; plain lists in).

A continuing agent needs a few facts of the history it no longer sees: the goal, the latest
request, the open tasks, what failed and whether it was fixed, which files changed for which
request, the user's explicit instructions and decisions. They are read here from the records
themselves (roles, ``is_meta`` flags, tool calls and their results), never from what a
summarizer picked, so the evaluator that asks about them is independent of the summarizers.

The transcript is data: slash-command expansions, AGENTS.md / CLAUDE.md blocks, system
reminders, environment blocks, continuation notices and pasted logs are context, never requests;
acknowledgements ("ok", "yo", "wow") are not requests either.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from .changes import (
    DELETED,
    MODIFIED,
    RENAMED,
    Change,
    diff_stat_changes,
    git_status_changes,
    listed_as,
    opens_with_report,
    patch_changes,
    report_names,
    reported_changes,
    shell_changes,
)
from .keyed_patterns import KeyedPattern
from .outcomes import (
    Run,
    aborted,
    alternative_remedy,
    command_target,
    is_exploratory,
    outcomes,
    output_failed,
    remedy_named,
    reported_failure,
    resolved_targets,
    said_failed,
    script_result,
    shell_steps,
)
from .records import Message, call_name
from .work_state import (
    CODE_NAME,
    done_by_action,
    has_placeholder,
    is_bare_url,
    is_one_off,
    is_rejection,
    issue_reference,
    own_words,
    planned_steps,
    quotes_to_reject,
    reported_done,
    same_work,
    steps_left,
    superseded,
    users_own_words,
    without_placeholders,
)


class UserText(Enum):
    """What a user-role message is."""

    REQUEST = "request"  # typed by the user, asks for something
    COMMAND = "command"  # a slash command / skill invocation (<command-name>…)
    CONTEXT = "context"  # injected by a runtime: instructions files, reminders, expansions
    ACKNOWLEDGEMENT = "acknowledgement"  # "ok", "wow": no request in it


# Roles and source roles a runtime writes for text the user never typed.
_INJECTED_SOURCE_ROLES = frozenset(
    {"developer", "system", "bashExecution", "custom", "hookMessage", "branch_summary"}
)
# Text a runtime injects as a user message, recognised by how it starts.
_INJECTED_START = re.compile(
    r"^\s*(<(system-reminder|environment_context|user_instructions|local-command-stdout|"
    r"local-command-stderr|command-stdout|bash-input|bash-stdout|bash-stderr|user-prompt-submit-hook|"
    r"INSTRUCTIONS|turn_aborted|user_shell_command)\b|"
    r"# (AGENTS|CLAUDE)\.md\b|# AGENTS\.md instructions for|Caveat: |Base directory for this skill:|"
    r"\[Request interrupted|This session is being continued from a previous conversation|"
    r"The conversation history before this point was compacted|"
    r"The conversation came back from another branch|"
    r"Please continue the conversation from where we left|"
    r"Continue the conversation from where it left off|<skill\b[^>]*>)",
    re.I,
)
# A slash command typed into a runtime's prompt ("/mode", "/model gpt-5"): it drives the UI,
# it asks the agent for nothing.
_UI_COMMAND = re.compile(r"^\s*/[a-z][\w:.-]*(\s+\S+)?\s*$", re.I)
_COMMAND_NAME = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.S)
_COMMAND_ARGS = re.compile(r"<command-args>\s*(.*?)\s*</command-args>", re.S)
# Blocks inside a typed message that are not the user's words.
_INJECTED_BLOCK = re.compile(
    r"<(system-reminder|environment_context|user_instructions|skill)\b[^>]*>.*?</\1>", re.S | re.I
)
# Continuation boilerplate: Claude Code's notices around a carried summary.
BOILERPLATE = re.compile(
    r"(This session is being continued from a previous conversation[^\n]*|"
    r"Please continue the conversation from where we left it off[^\n]*|"
    r"Continue the conversation from where it left off[^\n]*|"
    r"The conversation history before this point was compacted[^\n]*|"
    r"The conversation is summarized below:?|"
    r"If you need specific details from before compaction[^\n]*|"
    r"Continue with the last task that you were asked to work on\.?)",
    re.I,
)
_ACKNOWLEDGEMENTS = frozenset(
    [
        "ok",
        "okay",
        "k",
        "kk",
        "yo",
        "wow",
        "thanks",
        "thank",
        "you",
        "thx",
        "ty",
        "nice",
        "cool",
        "great",
        "good",
        "perfect",
        "yes",
        "yep",
        "yeah",
        "sure",
        "lol",
        "hm",
        "hmm",
        "awesome",
        "amazing",
        "neat",
        "sweet",
        "alright",
        "right",
        "indeed",
        "fine",
        "done",
    ]
)


def _details(m: Message) -> dict[str, Any]:
    return m.details if isinstance(m.details, dict) else {}


def user_text_kind(m: Message) -> UserText | None:
    """What a user-role message is (None for other roles and empty messages)."""
    if m.role != "user" or not (m.content or "").strip():
        return None
    once = _READ_ONCE.get()
    if once is None:
        return _user_text_kind(m)
    held = once.kinds.get(id(m))
    if held is None or held[0] is not m:
        held = once.kinds[id(m)] = (m, _user_text_kind(m))
    return held[1]


def _user_text_kind(m: Message) -> UserText | None:
    details = _details(m)
    if details.get("is_meta") or details.get("source_role") in _INJECTED_SOURCE_ROLES:
        return UserText.CONTEXT
    text = m.content or ""
    if text.lstrip().startswith("<command-") and _COMMAND_NAME.search(text):
        return UserText.COMMAND
    if _INJECTED_START.match(text) or _UI_COMMAND.match(text) or _is_pasted_log(text):
        return UserText.CONTEXT
    own = request_text(text)
    if not own:
        return UserText.CONTEXT  # only the runtime's notices: nothing the user typed
    if is_acknowledgement(own):
        return UserText.ACKNOWLEDGEMENT
    return UserText.REQUEST


def is_request(m: Message) -> bool:
    """A message the user typed that asks for something."""
    return user_text_kind(m) is UserText.REQUEST


def is_acknowledgement(text: str) -> bool:
    """ "ok", "yo", "wow", "thanks!": words of assent or surprise and nothing else."""
    # The first four words decide it: a fourth is already too many (a long message is not
    # split into all of its words).
    words = [w[0] for w in itertools.islice(_WORD.finditer(text.lower()), 4)]
    return bool(words) and len(words) <= 3 and all(w in _ACKNOWLEDGEMENTS for w in words)


_WORD = re.compile(r"[a-z']+")


def _is_pasted_log(text: str) -> bool:
    """A message that is only a pasted JSON record or log, with no words of the user's."""
    stripped = text.strip()
    if stripped[:1] in "{[":
        try:
            json.loads(stripped)
            return True
        except ValueError:
            pass
    lines = [line for line in stripped.splitlines() if line.strip()]
    if len(lines) < 4:
        return False
    logged = sum(bool(_LOG_LINE.match(line)) for line in lines)
    return logged / len(lines) > 0.6


_LOG_LINE = re.compile(
    r"^\s*(\{.*\}|\[\d|\d{4}-\d\d-\d\d|\d\d:\d\d|at |File \"|Traceback|[A-Z]+\s*\||\$ |> )"
)


def request_text(text: str) -> str:
    """The user's own words of a typed message: injected blocks and the runtime's notices in
    it ("System: [time] Exec failed …", OpenClaw's) removed, a pasted JSON record after the
    words cut off (it is material, not the request)."""
    text = users_own_words(_INJECTED_BLOCK.sub("", text or ""))
    paste = re.search(r"\n[^\S\n]*\{\"", text)  # \s* rescanned every blank line
    if paste and paste.start() > 0:
        text = text[: paste.start()]
    return text.strip()


# -- the signals ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """A real request, with the id of the message that made it."""

    message_id: int | None
    text: str
    # A short reply's subject: the agent's question it answers, or the option it picks by
    # number ("选 2" → "还是保持现状，只确保backup仓库的每日备份？"); "yes" alone says nothing.
    answers: str | None = None


@dataclass(frozen=True)
class Goal:
    """What the session is for: a slash command with its arguments and the plan or issue title
    its expansion carried, or else the first real request."""

    text: str
    command: str | None = None
    arguments: str | None = None
    title: str | None = None
    message_id: int | None = None


@dataclass(frozen=True)
class Task:
    """One entry of the agent's task list (TodoWrite, TaskCreate/TaskUpdate, update_plan)."""

    id: str
    content: str
    status: str  # pending | in_progress | completed | deleted, as the tool said

    @property
    def open(self) -> bool:
        return self.status not in ("completed", "done", "deleted", "cancelled")


@dataclass(frozen=True)
class Failure:
    """A tool call or user shell command that failed, and what became of it."""

    message_id: int | None  # the failed result
    tool: str
    command: str  # the command line, or tool + path for a non-command tool
    error: str  # the line of the result that says what went wrong
    fixed: bool = False  # a later run of the same command succeeded
    fixed_by_message_id: int | None = None
    changed_between: tuple[str, ...] = ()  # files modified between the failure and the fix
    then: str | None = None  # what the agent said next (its diagnosis, or the fix it made)
    fixed_by: str | None = None  # the command that fixed it, when it is another line
    retry: bool = False  # a tool's complaint retried past at once (``core.outcomes``)
    # The first line each edit between the failure and the fix brought in: the fix itself
    # when the command stayed the same ("let rejected = matches!(").
    changed_code: tuple[str, ...] = ()
    # A warning a run that succeeded printed, which a later edit of the file it names removed
    # (``_warnings_fixed``): no failure, but a fix worth remembering.
    warning: bool = False


@dataclass(frozen=True)
class FileChange:
    """A file the agent modified, with the request it served."""

    path: str
    tool: str
    message_id: int | None
    request: str | None
    said: str | None = None  # what the agent said before its first edit of the file
    added: tuple[str, ...] = ()  # identifiers its edits brought in (functions, flags, names)
    kind: str = MODIFIED  # or added, deleted, renamed (``core.changes``)
    old_path: str | None = None  # of a renamed file


@dataclass(frozen=True)
class Statement:
    """A sentence of the user's: an instruction or a decision."""

    text: str
    message_id: int | None
    prohibition: bool = False
    request: str = ""  # the whole request it was said in (a decision may answer a question)
    forbidden: str | None = None  # of a prohibition: what it forbids ("editing files")
    replaces: str | None = None  # an earlier instruction this one overrides


@dataclass(frozen=True)
class CurrentWork:
    """What the agent was doing at the end of the span: its last statement and its last
    tool call that did some work (a command, or a tool and the path it worked on; a task-list
    update or a poll of a running command is none)."""

    statement: str | None
    last_action: str | None
    last_tool: str | None
    message_id: int | None
    last_result: str | None = None  # the start of that call's result


@dataclass
class Signals:
    """Everything :func:`signals_of` reads from a span."""

    goal: Goal | None = None
    latest_request: Request | None = None
    requests: list[Request] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    files_changed: list[FileChange] = field(default_factory=list)
    instructions: list[Statement] = field(default_factory=list)
    decisions: list[Statement] = field(default_factory=list)
    current_work: CurrentWork | None = None

    @property
    def open_tasks(self) -> list[Task]:
        return [t for t in self.tasks if t.open]


# The spans read inside a shared_signals() block: their messages (held, so the ids stay
# theirs) and signals, by the ids of the messages.
_SHARED: ContextVar[dict[tuple[int, ...], tuple[tuple[Message, ...], Signals]] | None] = ContextVar(
    "span_facts_shared_signals", default=None
)


@contextlib.contextmanager
def shared_signals() -> Iterator[None]:
    """Within the block (this thread's), :func:`signals_of` reads each span once: one
    compaction's summarizer and quality gate read the same span, its messages unchanged and
    the signals read only. Also a decorator."""
    token = _SHARED.set({})
    try:
        with _reading_once():
            yield
    finally:
        _SHARED.reset(token)


class _ReadOnce:
    """What the signals ask of the same call or message again and again, read once: a call's
    arguments by their JSON text, a message's calls and its kind by the message (held, so
    its id stays its own). The values are read only."""

    def __init__(self) -> None:
        self.arguments: dict[str, dict[str, Any]] = {}
        self.calls: dict[int, tuple[Message, list[dict[str, Any]]]] = {}
        self.kinds: dict[int, tuple[Message, UserText | None]] = {}


_READ_ONCE: ContextVar[_ReadOnce | None] = ContextVar("span_facts_read_once", default=None)


@contextlib.contextmanager
def _reading_once() -> Iterator[None]:
    """Within the block, each call's arguments, each message's calls and kind are read once
    (about ten times each otherwise, one per signal that walks them)."""
    if _READ_ONCE.get() is not None:
        yield
        return
    token = _READ_ONCE.set(_ReadOnce())
    try:
        yield
    finally:
        _READ_ONCE.reset(token)


def signals_of(messages: Sequence[Message]) -> Signals:
    """The signals of a span, in one pass over its messages (in id order); inside a
    :func:`shared_signals` block, once for the same messages."""
    shared = _SHARED.get()
    if shared is None:
        with _reading_once():
            return _signals_of(messages)
    key = tuple(map(id, messages))
    if key not in shared:
        shared[key] = (tuple(messages), _signals_of(messages))
    return shared[key][1]


def _signals_of(messages: Sequence[Message]) -> Signals:
    requests = [r for r in _requests(messages) if r.text]
    instructions: list[Statement] = []
    decisions: list[Statement] = []
    for r in requests:
        for sentence in _sentences(own_words(r.text) if quotes_to_reject(r.text) else r.text):
            _file_statement(sentence, r.message_id, r.text, instructions, decisions)
    # The options the user picked from the agent's questions are decisions, one for the
    # answers given at once; a question answered again keeps its last answer. (The notes
    # written under them are not read as instructions.)
    last: dict[str, tuple[str, int | None]] = {}
    for said, message_id, picked in question_answers(messages):
        if picked:
            last.pop(said.split(":", 1)[0], None)
            last[said.split(":", 1)[0]] = (said, message_id)
    chosen: dict[int | None, list[str]] = {}
    for said, message_id in last.values():
        chosen.setdefault(message_id, []).append(said)
    for message_id, options in chosen.items():
        said = "; ".join(options)
        decisions.append(Statement(f"Chosen: {said}", message_id, request=said))
    at: dict[int | None, int] = {m.id: i for i, m in enumerate(messages)}
    decisions.sort(key=lambda d: at.get(d.message_id, len(messages)))  # in the span's order
    instructions = _replacing(instructions)
    goal = _goal(messages, requests)
    latest = requests[-1] if requests else None
    if latest is None and goal is not None:
        # A command-driven run: the command with its arguments is what was asked.
        asked = " ".join(p for p in (goal.command, goal.arguments) if p) or goal.text
        latest = Request(goal.message_id, asked)
    return Signals(
        goal=goal,
        latest_request=latest,
        requests=requests,
        tasks=_done_since(_tasks(messages), messages),
        failures=_failures(messages),
        files_changed=[
            c if c.request or goal is None else replace(c, request=goal.text)
            for c in _files_changed(messages)
        ],
        instructions=instructions,
        decisions=decisions,
        current_work=_current_work(messages),
    )


# Tools through which the agent asks the user and the user picks an answer (Claude Code's
# ``AskUserQuestion``, Codex's ``request_user_input``): the answers are the user's words.
QUESTION_TOOLS = frozenset({"askuserquestion", "request_user_input"})
_NOTE = re.compile(r"^\s*user_note:\s*", re.I)
_ANSWERED = re.compile(r'"(?P<q>[^"\n]{2,300})"\s*=\s*"(?P<a>[^"\n]{1,500})"')
_RECOMMENDED = re.compile(r"\s*\(recommended\)\s*$", re.I)


def question_answers(messages: Sequence[Message]) -> list[tuple[str, int | None, bool]]:
    """What the user answered to the agent's questions (``QUESTION_TOOLS``), in order: each
    option it chose as ``(topic: option, result's message id, True)``, where the topic is the
    question's header or the question; each note the user wrote as ``(note, id, False)``."""
    asked: dict[str, dict[str, Any]] = {
        c["id"]: c
        for m in messages
        if m.role == "assistant"
        for c in m.calls()
        if call_name(c).lower() in QUESTION_TOOLS
    }
    out: list[tuple[str, int | None, bool]] = []
    for m in messages:
        call = asked.get(m.tool_call_id or "") if m.role == "tool" else None
        if call is None:
            continue
        topics = {
            str(q.get("id") or q.get("question")): str(q.get("header") or q.get("question") or "")
            for q in arguments_of(call).get("questions") or []
            if isinstance(q, dict)
        }
        text = m.content or ""
        try:
            answers = json.loads(text).get("answers")
        except (ValueError, AttributeError):
            answers = None
        if isinstance(answers, dict):  # Codex: {"answers": {id: {"answers": [...]}}}
            for key, value in answers.items():
                picked = value.get("answers") if isinstance(value, dict) else None
                for answer in picked if isinstance(picked, list) else []:
                    if not isinstance(answer, str):  # null or an object: no option named
                        continue
                    answer = answer.strip()
                    if _NOTE.match(answer):
                        out.append((_NOTE.sub("", answer), m.id, False))
                    elif answer:
                        topic = topics.get(key) or key
                        out.append((f"{topic}: {_RECOMMENDED.sub('', answer)}", m.id, True))
            continue
        for found in _ANSWERED.finditer(text):  # Claude Code: "Question"="Answer", …
            answer = _RECOMMENDED.sub("", found.group("a").strip())
            out.append((f"{found.group('q').strip()}: {answer}", m.id, True))
    return out


def _file_statement(
    sentence: str,
    message_id: int | None,
    request: str,
    instructions: list[Statement],
    decisions: list[Statement],
) -> None:
    """A sentence of the user's filed as an instruction or a decision, or neither: a question,
    a rejected option ("nahhh") and a one-off order ("let's do a new release") are none."""
    if _is_question(sentence) or is_rejection(sentence):
        return
    if _USER_WILL.match(sentence):
        # "i will make sure the jsonl upstream is fine": what the user decided to do.
        decisions.append(Statement(sentence, message_id, request=request))
    elif (no := _prohibition(sentence)) or (_is_rule(sentence) and not is_one_off(sentence)):
        forbidden = _forbidden(sentence[no.start() :]) if no else None
        instructions.append(Statement(sentence, message_id, bool(no), request, forbidden or None))
    elif _is_decision(sentence):
        decisions.append(Statement(sentence, message_id, request=request))


def _replacing(instructions: list[Statement]) -> list[Statement]:
    """The instructions that stand: one a later one overrides is left out, and the later one
    says what it replaces."""
    later = superseded([st.text for st in instructions])
    out = []
    for n, st in enumerate(instructions):
        if later[n] is not None:
            continue
        replaced = [instructions[i].text for i, j in enumerate(later) if j == n]
        out.append(replace(st, replaces=replaced[-1]) if replaced else st)
    return out


def _requests(messages: Sequence[Message]) -> list[Request]:
    """What the user asked, in order: each typed request, and each slash command with its
    arguments (its expansion is context; a command the runtime answered itself, such as
    ``/model`` or ``/clear``, asked the agent nothing)."""
    out = []
    for i, m in enumerate(messages):
        kind = user_text_kind(m)
        if kind is UserText.REQUEST:
            text = request_text(m.content or "")
            out.append(Request(m.id, text, answered_question(text, _said_before(messages, i))))
        elif kind is UserText.COMMAND and not _answered_locally(messages[i + 1 : i + 2]):
            out.append(Request(m.id, slash_command(m.content or "")))
    return out


MAX_REPLY_CHARS = 80  # a reply this short leans on the question it answers
QUESTION_CHARS = 240
# A bare pick of a numbered option: "2", "选 2", "option 2", "#2".
_PICKED = re.compile(
    r"\A(?:(?:option|choice|number|no\.?|pick|go with|选择?|方案|第)\s*|#)?(\d{1,2})"
    r"\s*(?:个|号|项)?\s*[.!。]?\Z",
    re.I,
)
_NUMBERED = re.compile(r"^[^\S\n]*(\d{1,2})[.)、][^\S\n]+(.+?)[^\S\n]*$", re.M)
_QUESTION_END = re.compile(r"[?？]\W*\Z")
# How a reply to a yes/no or either/or question opens ("yes, in old pi link url as 666666").
_ANSWER_WORD = re.compile(
    r"\A(?:yes|yeah|yep|yup|no|nope|nah|sure|ok(?:ay)?|go ahead|do it|please|correct|right|"
    r"agreed|both|neither|the (?:first|second|third|latter|former))\b",
    re.I,
)


def _said_before(messages: Sequence[Message], i: int) -> str:
    """The agent's last words before ``messages[i]`` in the same stretch (no request between)."""
    for m in reversed(messages[:i]):
        if is_request(m):
            return ""
        if m.role == "assistant" and (m.content or "").strip():
            return m.content or ""
    return ""


def answered_question(reply: str, said: str) -> str | None:
    """What a short reply (``MAX_REPLY_CHARS``) answers in the agent's words just before it
    (``said``): the option of its last numbered list a bare pick names ("选 2", "option 2")
    when the agent offered options (a question asks to choose); else the question its words
    end on, when the reply is an answer word ("yes", "ok, go ahead") with at most words that
    echo the question. None for a reply that goes on to something new ("ok, now add dark
    mode"): a request, not an answer."""
    reply = " ".join(reply.split())
    if not reply or len(reply) > MAX_REPLY_CHARS or not said.strip():
        return None
    picked = _PICKED.match(reply)
    if picked:
        options = [(int(n), text) for n, text in _NUMBERED.findall(said)]
        last = max((k for k, (n, _) in enumerate(options) if n == 1), default=None)
        chosen = [t for n, t in options[last or 0 :] if n == int(picked.group(1))]
        if chosen and last is not None and _offers_options(said, options[last:]):
            return _cut(chosen[0].replace("**", ""), QUESTION_CHARS)
    text = said.strip()
    answer = _ANSWER_WORD.match(reply)
    if not _QUESTION_END.search(text) or not answer or _QUESTION_END.search(reply):
        return None
    sentences = [t for t in _SENTENCE_BREAK.split(text) if t.strip()]
    question = " ".join(sentences[-1].replace("**", "").split())
    rest = _REPLY_FILLER.sub(" ", reply[answer.end() :])
    terms, asked = _reply_terms(rest), _reply_terms(question)
    echoed = [t for t in terms if any(t in a or (len(a) > 3 and a in t) for a in asked)]
    if terms and len(echoed) * 2 < len(terms):
        return None  # goes on to something the question did not ask
    return _cut(question, QUESTION_CHARS)


# Words a bare answer goes on with that add no topic ("yes please", "ok, go ahead, thanks").
_REPLY_FILLER = re.compile(
    r"\b(?:please|thanks|thank you|go ahead|do it|sounds good|great|perfect|lgtm|proceed|"
    r"continue|that works|fine|yes|yeah|sure|ok(?:ay)?)\b",
    re.I,
)
# A question that asks to choose among options ("Which would you prefer?", "您希望我：").
_CHOOSE = re.compile(
    r"\b(?:which|choose|prefer|pick|option|would you like|want me)\b|还是|哪|选|希望", re.I
)


def _reply_terms(text: str) -> set[str]:
    """The words of a reply or a question that say its topic (three letters or more)."""
    return {w.lower() for w in re.findall(r"\w{3,}", text)}


def _offers_options(said: str, options: list[tuple[int, str]]) -> bool:
    """The agent's numbered list offers options: an item is a question, or a question asking
    to choose comes with the list; a list of things done asks nothing."""
    if len(options) < 2:
        return False
    if any(_QUESTION_END.search(t) for _, t in options):
        return True
    return any(
        _QUESTION_END.search(s) and _CHOOSE.search(s)
        for s in _SENTENCE_BREAK.split(said)
        if not _NUMBERED.match(s)
    )


def in_reply(request: Request) -> str:
    """A request as a summary says it: a short reply with what it answers."""
    if not request.answers:
        return request.text
    return f"{request.text} (in reply to: {request.answers})"


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut after a whole word."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(" ,;:") + " …"


def _answered_locally(after: Sequence[Message]) -> bool:
    """The command's record is followed by the runtime's own output (``<local-command-stdout>``)."""
    return (
        bool(after)
        and after[0].role == "user"
        and bool(_LOCAL_OUTPUT.match(after[0].content or ""))
    )


_LOCAL_OUTPUT = re.compile(r"^\s*<local-command-(stdout|stderr)>")


# Calls that keep the agent's books or wait on a running command: no work of their own.
BOOKKEEPING_TOOLS = frozenset(
    {"todowrite", "taskcreate", "taskupdate", "tasklist", "taskget", "update_plan", "write_stdin"}
)


def is_bookkeeping(call: dict[str, Any]) -> bool:
    """A call that keeps the agent's books or polls a running command (``BOOKKEEPING_TOOLS``):
    never the work the agent was doing."""
    return (call["function"]["name"] or "").lower() in BOOKKEEPING_TOOLS


def _current_work(messages: Sequence[Message]) -> CurrentWork | None:
    said = next(
        (m for m in reversed(messages) if m.role == "assistant" and (m.content or "").strip()),
        None,
    )
    worked = [
        (m, c)
        for m in messages
        if m.role == "assistant"
        for c in work_calls(m)
        if not is_bookkeeping(c)
    ]
    acted, call = worked[-1] if worked else (None, None)
    if said is None and acted is None:
        return None
    statement = " ".join((said.content or "").split())[:1200] if said else None
    action = _command_of(call) if call else None
    tool = call["function"]["name"] if call else None
    latest = max((m for m in (said, acted) if m is not None), key=lambda m: m.id)
    result = _results_by_call(messages).get(call["id"]) if call else None
    shown = " ".join(unwrapped_output(result.content or "").split())[:300] if result else None
    return CurrentWork(statement, action, tool, latest.id, shown or None)


# -- goal -----------------------------------------------------------------------------------------

_TITLE_FIELD = re.compile(r'"(?:plan_|issue_|pr_)?title"\s*:\s*"([^"]{4,200})"')
_HEADING = re.compile(r"^\s*(?:\d+→)?#\s+(.{4,200})$", re.M)


def command_parts(text: str) -> tuple[str, str | None] | None:
    """(name, arguments) of a runtime's record of a slash command the user typed (Claude Code's
    ``<command-name>``/``<command-args>``); None when ``text`` names no command."""
    name = _COMMAND_NAME.search(text)
    if not name:
        return None
    args = _COMMAND_ARGS.search(text)
    return name.group(1), (args.group(1) if args and args.group(1) else None)


def slash_command(text: str) -> str:
    """``/name args`` of a slash command record: the user's words, though wrapped."""
    parts = command_parts(text)
    return " ".join(p for p in parts if p) if parts and parts[0] else text.strip()


def _goal(messages: Sequence[Message], requests: list[Request]) -> Goal | None:
    for i, m in enumerate(messages):
        kind = user_text_kind(m)
        if kind is UserText.REQUEST:
            break
        if kind is UserText.COMMAND:
            text = m.content or ""
            name, args = command_parts(text) or ("", None)  # a COMMAND text names one
            if args and is_bare_url(args):
                args = issue_reference(args) or args
            if args and has_placeholder(args):
                args = without_placeholders(args) or None  # never `(<title>)`
            title = _title_after(messages[i + 1 :])
            purpose = _expansion_purpose(messages[i + 1 : i + 3])
            shown = " ".join(p for p in (name, args, f"({title})" if title else None) if p)
            if purpose:
                shown = f"{shown}: {purpose}"
            return Goal(shown, name, args, title, m.id)
    if not requests:
        return None
    first = requests[0]
    text = own_words(first.text) if quotes_to_reject(first.text) else first.text
    if is_bare_url(text):
        text = issue_reference(text) or text.strip()
    if has_placeholder(text):
        text = without_placeholders(text) or text
    return Goal(text, message_id=first.message_id)


def _expansion_purpose(messages: Sequence[Message]) -> str | None:
    """The first sentence of the text a command expanded to (what the command is for)."""
    for m in messages:
        if m.role == "user" and _details(m).get("is_meta"):
            for line in (m.content or "").splitlines():
                line = line.strip()
                if line and not line.startswith(("#", "<", "/")):
                    return re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0][:300]
    return None


# A step of a command's expansion: a heading "### Step 12: Submit PR", and the command
# lines of the fenced blocks under it.
_STEP_HEADING = re.compile(r"^#{2,4}\s+Step\s+(\d+)[a-z]?\s*[:.)-]\s*(.+?)\s*$", re.I | re.M)
_FENCE = re.compile(r"^```[\w-]*\n(.*?)^```", re.M | re.S)
STEP_WORDS = 4  # the words of a step's command that a run must share to have run it


def command_steps(expansion: str) -> list[tuple[str, list[str]]]:
    """The numbered steps of a command's expansion (``### Step 12: Submit PR``), each as its
    heading and the first line of each of its fenced blocks (what it runs), in order."""
    found = list(_STEP_HEADING.finditer(expansion))
    out = []
    for n, heading in enumerate(found):
        end = found[n + 1].start() if n + 1 < len(found) else len(expansion)
        body = expansion[heading.end() : end]
        commands = [
            line.strip()
            for block in _FENCE.findall(body)
            for line in block.splitlines()[:1]
            if line.strip() and not line.lstrip().startswith("#")
        ]
        out.append((f"Step {heading.group(1)}: {heading.group(2)}", commands))
    return out


def steps_not_run(steps: list[tuple[str, list[str]]], commands: Sequence[str]) -> list[str]:
    """The steps after the last one whose command a run ran (its first ``STEP_WORDS`` words
    begin a step of a run's command line, word for word: ``ls`` is no run of ``false``) that
    run a command none of the runs ran, each as ``Step N: title (`command`)``: the invoked
    command's work still to do. None before any step ran."""
    run_steps = [step for c in commands for step in shell_steps(c)]

    def ran(command: str) -> bool:
        head = next(iter(shell_steps(command)), [])[:STEP_WORDS]
        return bool(head) and any(step[: len(head)] == head for step in run_steps)

    last = max((n for n, (_, cmds) in enumerate(steps) if any(map(ran, cmds))), default=None)
    if last is None:
        return []
    return [
        f"{title} (`{next(c for c in cmds if not ran(c))}`)"
        for title, cmds in steps[last + 1 :]
        if cmds and not all(map(ran, cmds))
    ]


def invoked_steps_left(messages: Sequence[Message]) -> list[str]:
    """The steps of the latest slash command's expansion the span has not run yet
    (:func:`steps_not_run` over the span's command lines); none once a request of the user's
    followed it (a cancel, another ask)."""
    start = max(
        (i for i, m in enumerate(messages) if user_text_kind(m) == UserText.COMMAND), default=None
    )
    if start is None:
        return []
    expansion = next(
        (
            m.content or ""
            for m in messages[start + 1 : start + 3]
            if m.role == "user" and user_text_kind(m) == UserText.CONTEXT
        ),
        "",
    )
    steps = command_steps(expansion)
    if not steps or any(is_request(m) for m in messages[start + 1 :]):
        return []  # the user asked for something else since: the command's run was left
    runs = [
        c
        for m in messages[start:]
        if m.role == "assistant"
        for call in work_calls(m)
        if (c := command_run(call))
    ]
    return steps_not_run(steps, runs)


# Where a result says the work's branch is: a tool's JSON ("branch": "…"), git's own words.
_BRANCH_SAID = re.compile(
    r"\"branch(?:_name)?\"\s*:\s*\"(?P<a>[\w./-]{2,120})\"|"
    r"^On branch (?P<b>[\w./-]{2,120})$|"
    r"Switched to (?:a new )?branch '(?P<c>[\w./-]{2,120})'|"
    r"Already on (?:(?:\w+ )?branch )?'(?P<d>[\w./-]{2,120})'|"
    r"^Deleted branch (?P<gone>[\w./-]{2,120}) \(was",
    re.M,
)
_BRANCH_MADE = re.compile(
    r"\bgit\s+(?:checkout\s+-[bB]|switch\s+(?:-c|--create)|worktree\s+add\b.*?\s-b)\s+"
    r"(?P<a>[\w./-]{2,120})"
)
_DEFAULT_BRANCHES = frozenset({"main", "master", "HEAD", "trunk", "develop"})


def working_branch(messages: Sequence[Message]) -> str | None:
    """The branch the work is on at the cut, when it is no default branch: the last one a
    command made or switched to (``git checkout -b``) or a result named (a tool's JSON
    ``"branch"``, git's "On branch …", "Switched to branch '…'"). A later default branch
    (``git checkout main``: the work was merged or left) or the branch's deletion clears it."""
    found: str | None = None
    calls = _calls_by_id(messages)
    for m in messages:
        texts: list[tuple[re.Pattern[str], str]] = []
        call = calls.get(m.tool_call_id or "") if m.role == "tool" else None
        if call is not None:
            output = unwrapped_output(m.content or "")
            # a file read may name any branch (asked only of results that name one)
            if _BRANCH_SAID.search(output) and not _looked(call):
                texts.append((_BRANCH_SAID, output))
        elif m.role == "assistant":
            texts += [(_BRANCH_MADE, c) for call in work_calls(m) if (c := command_run(call))]
        for pattern, text in texts:
            for hit in pattern.finditer(text):
                name = next(g for g in hit.groups() if g)
                if hit.lastgroup == "gone":
                    found = None if name == found else found
                else:
                    found = None if name in _DEFAULT_BRANCHES else name
    return found


# What a written file loads by a relative path: a page's script or stylesheet, a module's
# relative import.
_LOADS = re.compile(
    r"""(?:\bsrc|\bhref)\s*=\s*["'](?P<a>(?:\./)?[\w./-]+\.(?:m?js|tsx?|jsx|css|vue|svelte))["']|"""
    r"""\b(?:from|import)\s+["'](?P<b>\.{1,2}/[\w./-]+)["']|"""
    r"""\brequire\(\s*["'](?P<c>\.{1,2}/[\w./-]+)["']\s*\)"""
)


_CODE_FILE = re.compile(r"\.(?:html?|[mc]?js|tsx?|jsx|vue|svelte)$", re.I)


def _stem(path: str) -> str:
    name = re.split(r"[/\\]", path)[-1]
    return name.split(".", 1)[0].lower()


_UNCHECKED = re.compile(r"^\s*[-*+] \[ \]\s+(.+?)\s*$", re.M)
MAX_CHECKLIST = 6


def checklist_left(messages: Sequence[Message]) -> list[str]:
    """The unchecked items (``- [ ] …``) of the checklists the agent wrote since the latest
    request into a file it has not changed since (a memory or plan file's to-do list, written
    as the turn's work ended): work it left open. A list edited again later is left to the
    list's later state, which an edit shows only in part. A template's boxes (under
    ``.github/``, a ``*template*`` file) are for its readers, not the agent's work; an item the
    span did after the list was written is not left: a later change of a file it names, a
    later successful run of a command it names, the agent's later report of it done."""
    start = max((i for i, m in enumerate(messages) if is_request(m)), default=-1)
    by_file: dict[str, tuple[int, list[str]]] = {}
    for i, m in enumerate(messages[start + 1 :], start + 1):
        if m.role != "assistant":
            continue
        for call in work_calls(m):
            paths = modified_paths(call)
            if not paths:
                continue
            new, old = written_texts(call)
            for path in paths:
                by_file.pop(path, None)  # changed again: its earlier list is not the last word
            if not old and len(paths) == 1 and not _TEMPLATE.search(paths[0]):
                items = _UNCHECKED.findall(new)
                if items:
                    by_file[paths[0]] = (i, items)
    if not by_file:
        return []
    changes = _changes_by_index(messages)
    runs = [r for r in _runs(messages) if not r.failed]
    said = [
        (i, m.content or "")
        for i, m in enumerate(messages)
        if m.role == "assistant" and reported_done(m.content or "")
    ]

    def done_after(item: str, written: int) -> bool:
        names = {n.lower() for n in _NAMED_FILE.findall(item)}
        if any(
            i > written and (p.lower() in names or re.split(r"[/\\]", p)[-1].lower() in names)
            for i, p in changes
        ):
            return True
        if any(r.index > written and _names_command(item, r.command) for r in runs):
            return True
        return any(i > written and same_work(item, text, 0.8) for i, text in said)

    return [
        item
        for written, items in by_file.values()
        for item in items
        if not done_after(item, written)
    ][:MAX_CHECKLIST]


# A file a checklist's item names ("Add tests in test_parser.py", "Fill TOOLS.md").
_NAMED_FILE = re.compile(r"[\w./-]*\w\.[A-Za-z]\w{0,5}\b")
# A file of boxes for its readers to tick: a pull-request or issue template.
_TEMPLATE = re.compile(r"(?:^|[/\\])\.github[/\\]|template", re.I)


def _names_command(item: str, command: str) -> bool:
    """A checklist item names a command line that ran: its program is a word of the item, and
    each word of the item after it that looks like an argument (a flag, a path) is in it."""
    words = command.split()
    if not words:
        return False
    program = re.split(r"[/\\]", words[0])[-1]
    said = item.replace("`", " ").split()
    if program not in said:
        return False
    after = said[said.index(program) + 1 :]
    return all(w in words for w in after if w.startswith("-") or "/" in w)


# A comment in code the agent wrote that leaves something for later: "// Replace with your
# deployed program ID after `anchor deploy`", "# TODO: …", "FIXME".
_LEFT_FOR_LATER = re.compile(
    r"[ \t]*(?://|#|/\*|\*|<!--|--)[ \t]*(?P<note>(?-i:TODO|FIXME)(?:\([^)]{0,30}\))?:.{3,150}?|"
    r"(?:replace|fill in|set) (?:this |it )?(?:with|to) (?:your|the real|a real|the actual)\b.{3,150}?)"
    r"[ \t]*(?:\*/|-->)?[ \t]*$",
    re.I,
)
# Files whose notes are for their reader, not work left: docs, and the templates a user fills
# in ("# Replace with your real OpenAI API key" in .env.example).
_NOTES_FOR_READER = re.compile(
    r"\.(?:md|mdx|markdown|rst|txt|adoc)$|\.(?:example|sample|template|dist)(?:\.\w+)?$"
    r"|(?:^|/)[^/]*template[^/]*$",
    re.I,
)
MAX_LEFT_IN_CODE = 4


def left_in_code(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """The comments the agent's writes added to the code for later (``_LEFT_FOR_LATER``: a
    ``TODO:``, a value to replace with the real one), each once with its file, in order; one
    a later edit of the file replaced is gone. Docs and templates are left out."""
    out: dict[tuple[str, str], None] = {}
    for m in messages:
        if m.role != "assistant":
            continue
        for call in work_calls(m):
            paths = modified_paths(call)
            if len(paths) != 1:
                continue
            if _NOTES_FOR_READER.search(paths[0]):
                continue
            new, old = written_texts(call)
            for key in [k for k in out if k[0] == paths[0] and k[1] in old]:
                del out[key]
            kept = set(old.splitlines())  # an edit's unchanged context is not what it left
            for line in new.splitlines():
                found = None if line in kept else _LEFT_FOR_LATER.match(line)
                if found:
                    out.setdefault((paths[0], found.group("note").strip()), None)
    return list(out)[:MAX_LEFT_IN_CODE]


def _is_write(call: dict[str, Any] | None) -> bool:
    """A call that wrote files; a result whose call is not in the span (an orphan, or its
    call before the span began) is no write."""
    return call is not None and bool(modified_paths(call))


def loaded_not_written(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """The files a file the span wrote loads by a relative path (``<script src="app.js">``,
    ``import … from './store'``) that the span never wrote and no result of it named (so
    not known to exist): work still to do, as ``(the file loaded, the file loading it)``."""
    written: dict[str, str] = {}  # loaded -> loading
    changed: set[str] = set()
    for m in messages:
        for call in work_calls(m) if m.role == "assistant" else []:
            paths = modified_paths(call)
            changed.update(_stem(p) for p in paths)
            code = [p for p in paths if _CODE_FILE.search(p)]  # a doc's quoted import loads none
            new, _ = written_texts(call) if code else ("", "")
            for hit in _LOADS.finditer(new):
                loaded = next(g for g in hit.groups() if g).removeprefix("./")
                written.setdefault(loaded, code[0])
    if not written:  # most spans: no result need be read
        return []
    calls = _calls_by_id(messages)
    said = " ".join(  # what the results said, a write's echo of its own text left out
        (m.content or "").lower()
        for m in messages
        if m.role == "tool" and not _is_write(calls.get(m.tool_call_id or ""))
    )
    return [
        (loaded, by)
        for loaded, by in written.items()
        if _stem(loaded) not in changed and re.split(r"[/\\]", loaded)[-1].lower() not in said
    ]


def _looked(call: dict[str, Any]) -> bool:
    """A call that read or searched (``outcomes.is_exploratory``): what it printed is a
    file's text, not the state of the work."""
    command = command_run(call)
    name = call_name(call)
    return is_exploratory(Run(name, command or name, False, path_of(call)))


def _title_after(messages: Sequence[Message]) -> str | None:
    """The plan or issue title a command's expansion or its first results carry: a ``title``
    field of a JSON result, else the first heading of a plan or issue file read."""
    for m in messages:
        if is_request(m):
            return None
        text = m.content or ""
        found = _TITLE_FIELD.search(text)
        if found:
            return re.sub(r"^\[[^\]]+\]\s*", "", found.group(1))
    for m in messages:
        if is_request(m):
            return None
        if m.role == "tool":
            heading = _HEADING.search(m.content or "")
            if heading and not heading.group(1).startswith("/"):
                return heading.group(1).strip()
    return None


# -- tasks ----------------------------------------------------------------------------------------


def _tasks(messages: Sequence[Message]) -> list[Task]:
    """The task list at the end of the span: the last TodoWrite / update_plan replaces it,
    TaskCreate adds and TaskUpdate changes one entry."""
    tasks: dict[str, Task] = {}
    results = _results_by_call(messages)
    for m in messages:
        for call in work_calls(m) if m.role == "assistant" else []:
            name = call["function"]["name"] or ""
            args = arguments_of(call)
            if name == "TodoWrite" and isinstance(args.get("todos"), list):
                tasks = {}
                for n, todo in enumerate(args["todos"], 1):
                    if isinstance(todo, dict):
                        task_id = str(todo.get("id") or n)
                        tasks[task_id] = Task(
                            task_id, str(todo.get("content") or ""), str(todo.get("status"))
                        )
            elif name == "update_plan" and isinstance(args.get("plan"), list):
                tasks = {}
                for n, step in enumerate(args["plan"], 1):
                    if isinstance(step, dict):
                        tasks[str(n)] = Task(
                            str(n), str(step.get("step") or ""), str(step.get("status"))
                        )
            elif name == "TaskCreate":
                result = results.get(call["id"])
                numbered = re.search(r"#(\d+)", result.content or "") if result else None
                task_id = numbered.group(1) if numbered else str(len(tasks) + 1)
                content = str(args.get("subject") or args.get("description") or "")
                tasks[task_id] = Task(task_id, content, "pending")
            elif name == "TaskUpdate" and args.get("taskId") is not None:
                task_id = str(args["taskId"])
                old = tasks.get(task_id, Task(task_id, "", "pending"))
                tasks[task_id] = Task(
                    task_id,
                    str(args.get("subject") or old.content),
                    str(args.get("status") or old.status),
                )
    return list(tasks.values())


_TASK_TOOLS = frozenset({"TodoWrite", "update_plan", "TaskCreate", "TaskUpdate"})


def updates_tasks(messages: Sequence[Message]) -> bool:
    """The messages update the agent's task list (a TodoWrite, update_plan or TaskUpdate)."""
    return any(
        c["function"]["name"] in _TASK_TOOLS
        for m in messages
        if m.role == "assistant"
        for c in work_calls(m)
    )


def _done_since(tasks: list[Task], messages: Sequence[Message]) -> list[Task]:
    """The task list with each open task that a successful call after the list's last update
    carried out marked completed (``work_state.done_by_action``): a list the agent stopped
    updating ("Phase 10: Submit PR" in progress after ``erk pr submit`` ran) is stale."""
    if not any(t.open for t in tasks):
        return tasks
    last = max(
        (
            i
            for i, m in enumerate(messages)
            if m.role == "assistant"
            for c in work_calls(m)
            if c["function"]["name"] in _TASK_TOOLS
        ),
        default=-1,
    )
    actions = successful_actions(messages, after=last)
    return [
        replace(t, status="completed") if t.open and done_by_action(t.content, actions) else t
        for t in tasks
    ]


_NO_CALL: dict[str, Any] = {"function": {"arguments": ""}}


PLAN_RECENCY = 2  # of the agent's last statements, those whose plan is still ahead of it


def planned_steps_left(messages: Sequence[Message]) -> list[str]:
    """The steps the agent's last plan since the latest request names ("…, then run a quick
    syntax check again", ``work_state.planned_steps``) that the turn has not done: none when
    the plan is older than its last ``PLAN_RECENCY`` statements or its words since report
    work finished; else each that no successful run since carried out and no file changed
    since is the subject of (``work_state.steps_left``)."""
    start = max((i for i, m in enumerate(messages) if is_request(m)), default=-1)
    where = [
        i
        for i, m in enumerate(messages[start + 1 :], start + 1)
        if m.role == "assistant" and (m.content or "").strip()
    ]
    said = [messages[i].content or "" for i in where]
    planning = max((n for n, words in enumerate(said) if planned_steps([words])), default=None)
    if planning is None or planning < len(said) - PLAN_RECENCY:
        return []  # an older plan: the agent has gone on past it
    if any(reported_done(words) for words in said[planning:]):
        return []  # a plan the agent has since reported on is no longer ahead of it
    sentences = re.split(r"(?<=[.!?])\s+|\n+", said[planning])
    steps = planned_steps(["\n".join(s for s in sentences if not _NOT_A_PLAN.search(s))])
    after = {m.id for m in messages[start + 1 :]}
    changed = [c.path for c in _files_changed(messages) if c.message_id in after]
    later = [(i, p) for i, p in _changes_by_index(messages) if i > where[planning]]
    changed += [p for _, p in later]
    deleted = [p for i, p in later if _deletes(messages[i], p)]
    return steps_left(steps, said, successful_actions(messages, start), changed, deleted)


# A "then" that sequences no plan: "if it passes, then I'd say …", "since then", "until then".
_NOT_A_PLAN = re.compile(
    r"\b(?:if|since|until|unless|once|when)\b[^.!?\n]*\bthen\b|\bthen,? I['\u2019]d\b|"
    r"\bI['\u2019]d say\b",
    re.I,
)


def _deletes(message: Message, path: str) -> bool:
    """A call of the message deletes ``path``: a patch's ``*** Delete File:``, an ``rm``."""
    name = re.split(r"[/\\]", path)[-1]
    for call in work_calls(message):
        patch = _patch_of(call) or ""
        command = command_run(call) or ""
        if "*** Delete File: " in patch and name in patch.split("*** Delete File: ", 1)[1][:300]:
            return True
        if re.search(r"(?:^|[;&|]\s*)(?:git\s+)?rm\b[^;&|]*" + re.escape(name), command):
            return True
    return False


# The agent choosing a way and saying why: "Since no custom commands are available, I'll
# decompose …", "I'll try the installer in bash with approval since it downloads …".
_REASONED_CHOICE = re.compile(
    r"(?:^|(?<=[.!?]\s))((?:Since|Because|As) [^.!?\n]{5,160}, (?:I['\u2019]ll|I will|let me|"
    r"we['\u2019]ll)[^.!?\n]{5,200}[.!]|I['\u2019]ll [^.!?\n]{5,160} (?:since|because) "
    r"[^.!?\n]{5,200}[.!])",
    re.I | re.M,
)
MAX_AGENT_CHOICES = 3


def agent_choices(messages: Sequence[Message]) -> list[str]:
    """The ways the agent chose and said why (``_REASONED_CHOICE``), the newest
    ``MAX_AGENT_CHOICES``, each once: a decision of the work though not the user's."""
    found = [
        choice.group(1)
        for m in messages
        if m.role == "assistant" and m.content
        for choice in _REASONED_CHOICE.finditer(m.content)
    ]
    return list(dict.fromkeys(found))[-MAX_AGENT_CHOICES:]


# The runtime's words when the user refused a call the agent asked to make (Claude Code).
_REFUSED = re.compile(r"tool use was rejected|doesn't want to proceed with this tool use", re.I)


def rejected_calls(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """The calls the user refused to let run, as (tool, what it was to act on: its URL
    without the scheme, its path or command), in order: no error of the work, but what the
    user would not have done."""
    calls = _calls_by_id(messages)
    out = []
    for run in _runs(messages):
        text = unwrapped_output(run.result.content or "")
        refused = _REFUSED.search(text[:OPENING])
        if not refused or not _REFUSAL_PREFIX.fullmatch(text[: refused.start()]):
            continue  # not the runtime's refusal: output that quotes it (a grep for it)
        call = calls.get(run.result.tool_call_id or "")
        target = (url_of(call) or path_of(call) or command_run(call) or "") if call else ""
        out.append((run.tool, re.sub(r"^https?://", "", target)[:120]))
    return out


OPENING = 300
# What may come before the runtime's refusal in its result: nothing, or an error's mark.
_REFUSAL_PREFIX = re.compile(r"\s*(?:<tool_use_error>|\[?error\]?:?)?\s*(?:the user )?", re.I)


def successful_actions(messages: Sequence[Message], after: int = -1) -> list[str]:
    """What each successful run after index ``after`` did: its command line (or tool and
    path) and the purpose the agent gave it (``work_state.done_by_action`` reads them)."""
    calls = _calls_by_id(messages)
    actions = []
    for run in _runs(messages):
        if run.index <= after or run.failed:
            continue
        call = calls.get(run.result.tool_call_id or "") or _NO_CALL
        purpose = arguments_of(call).get("description")
        actions.append(f"{run.command} {purpose if isinstance(purpose, str) else ''}".strip())
    return actions


# -- failures -------------------------------------------------------------------------------------

COMMAND_TOOLS = frozenset(
    {
        "bash",
        "shell",
        "shell_command",
        "exec_command",
        "local_shell",
        "run_command",
        "run_terminal_cmd",
        "execute",
    }
)
_EXIT = re.compile(
    r"(?:exit code:?|exited with code|process exited with code|\"exit_code\"\s*:)\s*(-?\d+)", re.I
)
# Lines that say what went wrong, the clearest first: a result's last line of the first kind
# that has one is its error (a code listing that mentions "Error" is no error line).
_ERROR_LINES = (
    re.compile(
        r"(^\s*(npm )?(error|fatal|panic)\b|\b\w*(Error|Exception):|\berror\s*\[?[A-Z]+\d+\]?:|"
        r"^Traceback|\bFAILED\b|^Diff in \S+:\d+:|^curl: \(\d+\)|"
        r"command not found|No such file|Cannot find|permission denied|haven't granted)",
        re.I,
    ),
    re.compile(r"(\b\w*(Error|Exception)\b|\berror\b|not found|denied|failed|aborted)", re.I),
)


@dataclass(frozen=True)
class _Run:
    """One run of a tool or a command: the agent's call with its result, or a shell command
    the user ran (Pi's ``$ cmd``), which is its own result."""

    index: int  # of its call in the span (of its message, for the user's command)
    tool: str
    command: str
    result: Message
    failed: bool


def is_user_shell_command(m: Message) -> bool:
    """A command the user ran in the runtime's prompt (Pi's ``$ cmd``), stored with its output
    as a user message: a run like the agent's, though never a request."""
    return m.role == "user" and _details(m).get("source_role") == "bashExecution"


def _runs(messages: Sequence[Message]) -> list[_Run]:
    """Every run of the span in the order the results came: the one walk that says what ran
    and whether it failed (the failures and the commands that succeeded are both read here)."""
    calls = _calls_by_id(messages)
    where = {
        c["id"]: i for i, m in enumerate(messages) if m.role == "assistant" for c in work_calls(m)
    }
    runs: list[_Run] = []
    running: dict[str, tuple[int, str, str]] = {}  # a code-mode cell still running: its call
    for i, m in enumerate(messages):
        if m.role == "tool" and m.tool_call_id in calls:
            call = calls[m.tool_call_id]
            tool = call["function"]["name"] or "?"
            command = _command_of(call)
            index = where[m.tool_call_id]
            script = script_result(m.content or "")
            if script and script[0] == "running" and script[1]:
                running[script[1]] = (index, tool, command)
                continue  # its output comes with the ``wait`` on its cell
            cell = arguments_of(call).get("cell_id") if tool == "wait" else None
            if isinstance(cell, (str, int)) and str(cell) in running:
                index, tool, command = running.pop(str(cell))
            runs.append(_Run(index, tool, command, m, _failed(m, tool, command)))
        elif is_user_shell_command(m):
            # Pi writes "$ {command}\n{output}"; the command is spaced as _command_of spaces it.
            command = " ".join((m.content or "").removeprefix("$").split("\n", 1)[0].split())
            runs.append(_Run(i, "bash", command, m, _failed(m, "bash", command)))
    return runs


def runs_of(messages: Sequence[Message], runs: Sequence[_Run] | None = None) -> list[Run]:
    """The span's runs as the outcome rule reads them (``core.outcomes``): tool, command line,
    the path it worked on, failed or not, its error line and the request's turn it ran in.
    ``runs``: the span's runs when read already (:func:`_runs`)."""
    calls = _calls_by_id(messages)
    turns = _turns(messages)
    out = []
    for run in _runs(messages) if runs is None else runs:
        call = calls.get(run.result.tool_call_id or "")
        path = (path_of(call) or next(iter(modified_paths(call)), None)) if call else None
        error = _error_line(run.result.content or "") if run.failed else ""
        remedy = remedy_named(unwrapped_output(run.result.content or "")) if run.failed else ""
        if run.failed and not remedy and run.tool.lower() in COMMAND_TOOLS:
            said = reaction_after(messages, run.index)
            remedy = alternative_remedy(run.command, said.content or "") if said else ""
            another_way = bool(remedy)
        else:
            another_way = False
        out.append(
            Run(
                run.tool,
                run.command,
                run.failed,
                path,
                error,
                turns[run.index],
                remedy,
                another_way,
                "" if run.failed else run.result.content or "",
            )
        )
    return out


def _turns(messages: Sequence[Message]) -> list[int]:
    """For each index of the span, how many requests came before it (its turn)."""
    out, turn = [], 0
    for m in messages:
        turn += is_request(m)
        out.append(turn)
    return out


def _failures(messages: Sequence[Message]) -> list[Failure]:
    """Each failure that was an error, fixed when a later run succeeded on its target (the
    file, the test or build family, the git operation, the URL: ``core.outcomes``)."""
    runs = _runs(messages)
    plain = runs_of(messages, runs)
    changes = _changes_by_index(messages)
    edits = _edits_by_index(messages)
    where = {id(r): n for n, r in enumerate(plain)}
    failures = []
    for outcome in outcomes(plain):
        run = runs[where[id(outcome.failure)]]
        later = runs[where[id(outcome.fixed_by)]] if outcome.fixed_by is not None else None
        # What changed between the failure and the run that succeeded (that run excluded).
        between = (
            tuple(dict.fromkeys(p for j, p in changes if run.index < j < later.index))
            if later
            else ()
        )
        code = (
            tuple(dict.fromkeys(c for j, c in edits if run.index < j < later.index))
            if later
            else ()
        )
        failures.append(
            Failure(
                run.result.id,
                run.tool,
                run.command,
                outcome.failure.error,
                fixed=later is not None,
                fixed_by_message_id=later.result.id if later else None,
                changed_between=between,
                then=_said_after(messages, run.result),
                fixed_by=later.command if later and later.command != run.command else None,
                retry=outcome.retry,
                changed_code=code[:MAX_CHANGED_CODE],
            )
        )
    return failures + _warnings_fixed(messages, runs)


# A compiler's or linter's warning and the file it names: rustc's ``warning: unused imports:
# `A` and `B``` with ``--> src/main.rs:10:5`` under it; ``path:line:col: warning: …`` (gcc,
# clang, tsc); biome's ``path:line:col lint/correctness/noUnusedImports``; Python's
# ``path.py:284: SyntaxWarning: …``.
_WARNINGS = (
    re.compile(r"^warning: (?P<msg>[^\n]{3,200})\n\s*--> (?P<path>[^\s:]+):\d+", re.M),
    re.compile(r"^(?P<path>[\w./@-]+\.\w+):\d+:\d+:? (?P<msg>warning:? [^\n]{3,200})$", re.M),
    re.compile(r"^(?P<path>[\w./@-]+\.\w+):\d+:\d+ (?P<msg>lint/\S+)", re.M),
    re.compile(r"^(?P<path>[\w./@-]+\.py):\d+: (?P<msg>\w*Warning: [^\n]{3,200})$", re.M),
)
MAX_WARNINGS = 4


def _same_file(named: str, path: str) -> bool:
    """A path a warning names (relative, maybe ``../``) and the path an edit wrote are one file:
    one ends with the other's components."""
    a = [p for p in re.split(r"[/\\]", named) if p not in ("", ".", "..")]
    b = [p for p in re.split(r"[/\\]", path) if p not in ("", ".")]
    return bool(a) and b[-len(a) :] == a


def _warnings_fixed(messages: Sequence[Message], runs: Sequence[_Run]) -> list[Failure]:
    """The warnings of command runs that succeeded which a later edit of the file each names
    removed: an edit of that file follows the last run that printed it, and a later run of the
    same program (its output whole, not cut by ``head``/``tail``/``grep``) no longer prints it.
    As fixed failures marked ``warning``: what was warned of and where, the edit that fixed it.
    A warning never acted on, or printed again, is left out: a build's standing warnings are
    no news. Each run's output is read once and each distinct warning judged once."""
    changes = _changes_by_index(messages)
    first: dict[tuple[str, str], tuple[int, str]] = {}  # warning -> its first run, its target
    last_print: dict[tuple[str, str], int] = {}  # warning -> the last run (any) printing it
    whole_runs: dict[str, list[int]] = {}  # target -> runs whose output is whole, in order
    for n, run in enumerate(runs):
        if run.failed or run.tool.lower() not in COMMAND_TOOLS:
            continue
        target = command_target(run.command)
        if not _CUT_OUTPUT.search(run.command):
            whole_runs.setdefault(target, []).append(run.index)
        text = unwrapped_output(run.result.content or "")
        if "warning" not in text.lower() and "lint/" not in text:
            continue
        for pattern in _WARNINGS:
            for found in pattern.finditer(text):
                key = (found.group("msg").strip(), found.group("path"))
                first.setdefault(key, (n, target))
                last_print[key] = run.index
    by_name: dict[str, list[tuple[int, str]]] = {}  # a changed file's base name -> its changes
    for i, p in changes:
        by_name.setdefault(re.split(r"[/\\]", p)[-1], []).append((i, p))
    edits_of: dict[str, list[int]] = {}
    out: list[Failure] = []
    for (msg, named), (n, target) in first.items():
        if len(out) >= MAX_WARNINGS:
            break
        if named not in edits_of:
            base = re.split(r"[/\\]", named)[-1]
            edits_of[named] = [i for i, p in by_name.get(base, ()) if _same_file(named, p)]
        printed = last_print[(msg, named)]
        edit = next((i for i in edits_of[named] if i > printed), None)
        if edit is None or not any(i > edit for i in whole_runs.get(target, ())):
            continue  # never acted on, or not run again since: not known to be gone
        run = runs[n]
        fix = next((c for c in work_calls(messages[edit])), None)
        same = next(
            (
                k
                for k, f in enumerate(out)
                if f.message_id == run.result.id and f.error.startswith(f"{msg} (")
            ),
            None,
        )
        if same is not None:  # a run's warning in several files: said once, each named
            out[same] = replace(out[same], error=f"{out[same].error[:-1]}, {named})")
            continue
        out.append(
            Failure(
                run.result.id,
                run.tool,
                run.command,
                f"{msg} ({named})",
                fixed=True,
                fixed_by_message_id=messages[edit].id,
                fixed_by=_command_of(fix) if fix else None,
                warning=True,
            )
        )
    return out


# A command whose output a pipe cuts (``| tail -3``, ``| head``, ``| grep error``): a warning
# missing from it may only have been cut.
_CUT_OUTPUT = re.compile(r"\|\s*(?:head|tail|grep|rg|sed|awk|less|wc)\b")


MAX_CHANGED_CODE = 2
CHANGED_CODE_CHARS = 80


def _edits_by_index(messages: Sequence[Message]) -> list[tuple[int, str]]:
    """The first line each edit call brought in (:func:`first_added_line`), by index."""
    return [
        (i, line)
        for i, m in enumerate(messages)
        if m.role == "assistant"
        for call in work_calls(m)
        if modified_paths(call) and (line := first_added_line(call))
    ]


def first_added_line(call: dict[str, Any]) -> str | None:
    """The first line an edit brings in that the text it replaces did not have, with a word
    in it (no lone brace), within ``CHANGED_CODE_CHARS``; None for a whole file written (its
    first line says nothing of a fix) or an edit that adds none."""
    new, old = _edit_texts(call)
    if new is None:
        return None
    before = {line.strip() for line in old.splitlines()}
    for line in new.splitlines():
        text = " ".join(line.split())
        if (
            text
            and text not in before
            and re.search(r"[A-Za-z]{2}", text)
            and not text.startswith(("#", "//", "/*", "*", "--", "<!--"))  # a comment is no fix
        ):
            return text if len(text) <= CHANGED_CODE_CHARS else text[:CHANGED_CODE_CHARS] + "…"
    return None


def _edit_texts(call: dict[str, Any]) -> tuple[str | None, str]:
    """The new and the replaced text of an edit (a patch's + and - lines, an Edit's new and
    old strings); (None, "") for a call that writes a whole file."""
    args = arguments_of(call)
    patch = _patch_of(call)
    if patch is not None:
        lines = patch.splitlines()
        new = [x[1:] for x in lines if x.startswith("+") and not x.startswith("+++")]
        old = [x[1:] for x in lines if x.startswith("-") and not x.startswith("---")]
        return "\n".join(new), "\n".join(old)
    listed = args.get("edits")
    edits: list[Any] = listed if isinstance(listed, list) else [args]
    olds = [
        str(e.get(k) or "")
        for e in edits
        if isinstance(e, dict)
        for k in ("old_string", "old_str", "oldText")
    ]
    if not any(olds):
        return None, ""
    news = [
        str(e.get(k) or "")
        for e in edits
        if isinstance(e, dict)
        for k in ("new_string", "new_str", "newText")
    ]
    return "\n".join(news), "\n".join(olds)


def succeeded_commands(messages: Sequence[Message]) -> set[str]:
    """The command lines the span ran that succeeded, the user's own runs among them: a
    failure an earlier summary carried as open is fixed once one of them is its command."""
    return {r.command for r in _runs(messages) if not r.failed}


def succeeded_targets(messages: Sequence[Message]) -> set[str]:
    """What the span's successful runs acted on (``core.outcomes.target_of``): a carried
    failure of the same target is fixed."""
    return resolved_targets(runs_of(messages))


REACTION_WINDOW = 7  # messages after a failure the agent's reaction is looked for in


def reaction_after(messages: Sequence[Message], i: int) -> Message | None:
    """The agent's first message with words after ``messages[i]`` (a failed result, an error
    the user pasted), within ``REACTION_WINDOW`` messages and before the next request: what
    it made of it. The one rule the summary and the evaluator's reference answers both use."""
    for m in messages[i + 1 : i + 1 + REACTION_WINDOW]:
        if is_request(m):
            return None
        if m.role == "assistant" and (m.content or "").strip():
            return m
    return None


def _said_after(messages: Sequence[Message], result: Message) -> str | None:
    start = next((i for i, m in enumerate(messages) if m is result), len(messages))
    said = reaction_after(messages, start)
    return " ".join((said.content or "").split())[:300] if said else None


def _failed(result: Message, tool: str, command: str = "") -> bool:
    """Failed by the record's flags, or, for a command tool only, by the exit code it printed,
    or stopped by the user:
    a Read whose text holds "exit code 1" succeeded, and so did a search that found nothing
    (grep and rg exit 1 for no match)."""
    if aborted(unwrapped_output(result.content or "")):
        return True  # not done (``outcomes`` keeps no error of it)
    details = _details(result)
    code = details.get("exit_code")
    script = script_result(result.content or "")
    if script is not None and not isinstance(code, int):
        # Codex's code mode: the script's end is said, the command's exit code never is
        if script[0] == "failed":
            return True
        if tool.lower() in COMMAND_TOOLS and not _SEARCH_LAST.search(command):
            return output_failed(script[2])
    if not isinstance(code, int) and tool.lower() in COMMAND_TOOLS:
        text = result.content or ""
        found = _EXIT.search(text[:600]) or _EXIT.search(text[-600:])
        code = int(found.group(1)) if found else None
    if code == 1 and _SEARCH_LAST.search(command):
        return False
    if details.get("is_error"):
        return True
    said = reported_failure(unwrapped_output(result.content or ""))
    if code in (None, 0) and tool.lower() in COMMAND_TOOLS and said is not None:
        return True  # its output says it failed: `|| true` made the exit code 0
    if code is None and tool.lower() in COMMAND_TOOLS:
        # No exit code printed: a result that opens with "error:" failed (apply_patch's
        # "error: invalid hunk at line 4 …").
        return bool(_ERROR_FIRST.match(unwrapped_output(result.content or "")))
    if code is None and _says_its_failures(tool):
        # a custom tool says it failed in its text (``❌ Could not parse …``, "… failed."),
        # or in a JSON record ({"error": "invalid cron.add params: …"}) when it runs no
        # command line (a command's failure is its exit code's to say)
        return said_failed(unwrapped_output(result.content or "")) or (
            said is not None and not _runs_a_command(tool, command)
        )
    return isinstance(code, int) and code != 0


def _runs_a_command(tool: str, command: str) -> bool:
    """The call ran a command line (OpenClaw's ``exec``), not a tool on its arguments
    (``cron``, ``fetch_url https://…``)."""
    return bool(command) and command != tool and not command.startswith(f"{tool} ")


def _says_its_failures(tool: str) -> bool:
    """A tool whose result's opening says whether it failed: no command (its exit code says),
    no look at a file's text, no sub-agent's report, no task list."""
    name = tool.lower()
    return not (
        name in COMMAND_TOOLS
        or name in _SUB_AGENTS
        or tool in _TASK_TOOLS
        or is_exploratory(Run(tool, tool, failed=True))
    )


# A result that opens with its error: apply_patch's "error: invalid hunk …", Codex's
# "execution error: Io(…)" when the sandbox could not start the command.
_ERROR_FIRST = re.compile(r"^\s*(?:execution\s+)?(error|fatal)\b:", re.I)


# A command line whose last stage is a search: its exit code 1 means "no match".
_SEARCH_LAST = re.compile(r"(?:^|[|;&]\s*)(?:git\s+)?(?:e|f|z)?(?:grep|rg|ag)\b[^|;&]*$")


def _error_line(text: str) -> str:
    """What went wrong, from the clearest kind of error line a result has: its first two
    (a compiler names the cause first) and its last (a test run or npm sums up last)."""
    text = unwrapped_output(text)
    said = reported_failure(text)
    if said is not None:
        return said[:300]
    lines = [line.strip()[:200] for line in text.splitlines() if line.strip()]
    for pattern in _ERROR_LINES:
        errors = list(dict.fromkeys(line for line in lines if pattern.search(line)))
        if errors:
            return " | ".join(errors[:2] + errors[2:][-1:])
    if lines and said_failed(text):
        return lines[0]  # a tool that says it failed says why first (``❌ Could not parse …``)
    return lines[-1] if lines else ""


# Codex's frame around a shell command's output: its exit code and time, then the output.
_COMMAND_HEADER = re.compile(r"\A(?:Exit code: -?\d+\s*\n)?Wall time: [^\n]*\n(?:Output:\n)?")


def unwrapped_output(text: str) -> str:
    """Codex's ``{"output": …, "metadata": …}`` result, or its code mode's script result, as
    its output text."""
    script = script_result(text)
    if script is not None:
        text = script[2] if script[0] != "failed" else script[2].removeprefix("\nScript error:\n")
    text = _COMMAND_HEADER.sub("", text, count=1)
    if text.startswith('{"output"'):
        try:
            value = json.loads(text)
            if isinstance(value, dict) and isinstance(value.get("output"), str):
                return str(value["output"])
        except ValueError:
            pass
    return re.sub(r"</?tool_use_error>", "", text)


def command_run(call: dict[str, Any]) -> str | None:
    """The command line a call ran (a ``command`` or ``cmd`` argument, Codex's list of words
    joined), spaced once; None for a call that runs none."""
    args = arguments_of(call)
    command = args.get("command", args.get("cmd"))
    if isinstance(command, list):
        command = " ".join(str(c) for c in command)
    if isinstance(command, str) and command.strip():
        return " ".join(command.split())
    return None


def path_of(call: dict[str, Any]) -> str | None:
    """The path a call's arguments name (under any of ``PATH_KEYS``), None when none."""
    paths = _paths_of(call)
    return paths[0] if paths else None


def _command_of(call: dict[str, Any]) -> str:
    """The command line a call ran, or its tool and path for a tool that runs none."""
    command = command_run(call)
    if command is not None:
        return command
    name = call["function"]["name"] or "?"
    path = path_of(call) or url_of(call)
    return f"{name} {path}" if path else name


_URL_KEYS = ("url", "uri", "source", "href", "link")


def url_of(call: dict[str, Any]) -> str | None:
    """The URL a tool's arguments name (``fetch_url``, ``WebFetch``, a citation's source): what
    it acted on, so a failure on it is fixed by a later success on the same URL."""
    args = arguments_of(call)
    for key in _URL_KEYS:
        value = args.get(key)
        if isinstance(value, str) and re.match(r"https?://\S+$", value.strip()):
            return value.strip()
    return None


# -- files ----------------------------------------------------------------------------------------

# Tools that write the file their path argument names (Claude Code, Pi, OpenAI-style agents).
_EDIT_TOOLS = frozenset(
    {
        "edit",
        "write",
        "multiedit",
        "multi_edit",
        "notebookedit",
        "create_file",
        "write_file",
        "edit_file",
        "str_replace",
        "create",
    }
)
# An editor tool (SWE-agent's str_replace_editor, Anthropic's text editor) writes with these
# commands; ``view`` only reads.
_EDITOR_COMMANDS = frozenset({"create", "str_replace", "insert", "undo_edit", "write"})
_PATCH_START = "*** Begin Patch"
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)
_PATCH_MOVE = re.compile(r"^\*\*\* Move to: (.+)$", re.M)
PATH_KEYS = ("file_path", "path", "filePath", "notebook_path", "filename", "target_file")


def _paths_of(call: dict[str, Any]) -> list[str]:
    args = arguments_of(call)
    for key in PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return [value.strip()]
    return []


def _patch_of(call: dict[str, Any]) -> str | None:
    """The patch text a call applies: an ``apply_patch`` tool's input, Codex's
    ``["apply_patch", patch]`` command, or a patch fed to ``apply_patch`` in a shell line."""
    args = arguments_of(call)
    for value in _string_values(args):
        if _PATCH_START in value:
            return value
    if (call["function"]["name"] or "").lower() == "apply_patch":
        return str(args.get("input") or args.get("patch") or "")
    return None


def _string_values(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _string_values(v)]
    if isinstance(value, list):
        return [s for v in value for s in _string_values(v)]
    return [value] if isinstance(value, str) else []


def modified_paths(call: dict[str, Any]) -> list[str]:
    """The files a tool call writes, [] for a call that writes none: the one rule for it
    (``core.touched_files`` counts the same). Edit/Write/MultiEdit, an editor's
    create/str_replace, and a patch however it is applied (an ``apply_patch`` tool, Codex's
    ``["apply_patch", patch]`` shell command, a heredoc in a shell line)."""
    patch = _patch_of(call)
    if patch is not None:
        found = _PATCH_FILE.findall(patch) + _PATCH_MOVE.findall(patch)
        return list(dict.fromkeys(p.strip() for p in found))
    name = (call["function"]["name"] or "").lower()
    if name in _EDIT_TOOLS:
        return _paths_of(call)
    if "edit" in name or "editor" in name:
        command = arguments_of(call).get("command")
        if command in _EDITOR_COMMANDS:
            return _paths_of(call)
    return []


def _files_changed(messages: Sequence[Message]) -> list[FileChange]:
    results = _results_by_call(messages)
    latest: str | None = None
    said: str | None = None
    changes: dict[str, FileChange] = {}
    added: dict[str, dict[str, None]] = {}
    last_edit: dict[str, int] = {}
    for m in messages:
        if is_request(m):
            latest, said = request_text(m.content or ""), None
        if m.role == "assistant" and (m.content or "").strip():
            said = " ".join((m.content or "").split())[:300]
        for call in work_calls(m) if m.role == "assistant" else []:
            paths = modified_paths(call)
            result = results.get(call["id"])
            if not paths or (result is not None and _failed(result, call["function"]["name"])):
                continue
            brought = _identifiers_added(call)
            for path in paths:
                # The first request a file served says why it changed; later edits keep it.
                changes.setdefault(
                    path, FileChange(path, call["function"]["name"] or "?", m.id, latest, said)
                )
                added.setdefault(path, {}).update(dict.fromkeys(brought))
                last_edit[path] = m.id or 0
    for reported_path, change in _reported_changes(messages, results).items():
        path = listed_as(reported_path, changes)  # a bare name of a file edited is that file
        change = replace(change, path=path)
        old = changes.get(path)
        if old is not None and last_edit.get(path, 0) > (change.message_id or 0):
            continue  # written again after it was removed: it is there, modified
        if old is None:
            changes[path] = FileChange(
                path,
                change.tool,
                change.message_id,
                None,
                kind=change.kind,
                old_path=change.old_path,
            )
            added.setdefault(path, {})
        if change.added:  # a report's keys of what it made, newest first
            added[path] = dict.fromkeys(change.added) | added.get(path, {})
        if old is not None and change.kind in (DELETED, RENAMED):
            changes[path] = replace(old, kind=change.kind, old_path=change.old_path)
        if change.kind == RENAMED and change.old_path in changes:
            changes.pop(change.old_path)  # listed under its new path, "renamed from" the old
    return [replace(c, added=tuple(list(added[c.path])[:MAX_ADDED])) for c in changes.values()]


# Commands whose output lists the work tree's changes.
GIT_STATUS = re.compile(r"(?:^|[;&|]\s*)git(?:\s+-C\s+\S+)?\s+status\b")
# ``git diff --stat`` of the work tree (or the index) against a commit; never another commit's
# changes (``git show <hash> --stat``, ``git log --stat``, ``git diff a..b --stat``).
_GIT_STAT = re.compile(r"(?:^|[;&|]\s*)git(?:\s+-C\s+\S+)?\s+diff\b(?![^|;&]*\.\.)[^|;&]*--stat\b")
_SUB_AGENTS = frozenset({"task", "agent", "taskoutput"})
# Calls that return a running command's output (Codex's ``wait`` on a cell, ``write_stdin``,
# OpenClaw's ``process`` poll): that command's words ("Updating crates.io index"), never a
# tool's report of what it made.
_OUTPUT_POLLS = frozenset({"wait", "write_stdin", "process"})
MAX_LISTED_CHANGES = 40


def _reported_changes(
    messages: Sequence[Message], results: dict[str, Message]
) -> dict[str, FileChange]:
    """Changes the span shows beyond the agent's own edit calls: a patch's deletions and
    moves, a shell line's ``mv``/``rm``, what ``git status`` and ``git diff --stat`` listed,
    and the files a sub-agent's report names (``core.changes``)."""
    out: dict[str, FileChange] = {}
    names: dict[str, list[str]] = {}

    def add(change: Change, tool: str, message_id: int | None) -> None:
        if change.kind in (DELETED, RENAMED) or change.path not in out:
            out[change.path] = FileChange(
                change.path, tool, message_id, None, kind=change.kind, old_path=change.old_path
            )

    for n, m in enumerate(messages):
        if m.role == "assistant" and _closes_turn(messages, n):
            # the agent's own report at the end of a turn: the files made by calls whose
            # record says nothing (a redacted shell line, a script)
            for change in reported_changes(m.content or "", deletions=False):
                add(change, "report", m.id)
        for call in work_calls(m) if m.role == "assistant" else []:
            result = results.get(call["id"])
            name = call["function"]["name"] or "?"
            if result is None or _failed(result, name):
                continue
            patch = _patch_of(call)
            found: list[Change] = []
            if patch is not None:
                found = [c for c in patch_changes(patch) if c.kind in (DELETED, RENAMED)]
            elif (command := command_run(call)) is not None:
                output = unwrapped_output(result.content or "")
                found = shell_changes(command)
                listed = []
                if GIT_STATUS.search(command):
                    listed += git_status_changes(output)
                if _GIT_STAT.search(command):
                    listed += diff_stat_changes(output)
                # a tree with hundreds of changes (a vendored directory) is no list to carry
                found += listed if len(listed) <= MAX_LISTED_CHANGES else []
            elif name.lower() in _SUB_AGENTS:
                found = reported_changes(result.content or "")
            elif (
                _says_its_failures(name)
                and name.lower() not in _OUTPUT_POLLS
                and not modified_paths(call)
            ):
                # a custom tool's report of what it made ("✅ Created and indexed 2
                # documents: …", "New citation created. … Appended to: ref.bib")
                report = _before_code(unwrapped_output(result.content or ""))
                found = reported_changes(report) if opens_with_report(report) else []
                for change in found:  # its keys, newest first ("Citekey: @kistner2025")
                    names[change.path] = report_names(report) + names.get(change.path, [])
            for change in found:
                add(change, name, m.id)
    return {
        path: replace(c, added=tuple(dict.fromkeys(names.get(path, [])))) for path, c in out.items()
    }


def _before_code(text: str) -> str:
    """A report's text before its first code block (the record it made, shown whole)."""
    return re.split(r"^\s*(?:```|~~~)", text, maxsplit=1, flags=re.M)[0]


def _closes_turn(messages: Sequence[Message], i: int) -> bool:
    """Message ``i`` is the agent's text with no call, and the turn ends on it: nothing but
    the user's next request (or the span's end) comes after it."""
    m = messages[i]
    if not (m.content or "").strip() or work_calls(m):
        return False
    later = next(
        (x for x in messages[i + 1 :] if x.role in ("assistant", "tool") or is_request(x)), None
    )
    return later is None or is_request(later)


MAX_ADDED = 24


def _identifiers_added(call: dict[str, Any]) -> list[str]:
    """The names a write brings in that the text it replaces did not have (the new text of an
    Edit/MultiEdit/editor call, a Write's content, a patch's added lines): the packages it
    loads by version first (``vue@3``, ``bootstrap@5.3.2``), then the names in code; a
    stylesheet's properties and values (``box-sizing: border-box``, ``width=device-width``)
    are no names of the work."""
    new, old = written_texts(call)
    before = set(CODE_NAME.findall(old)) | set(_HEADING.findall(old))
    styled = set(_STYLE_PROPERTY.findall(new)) | set(_STYLE_VALUE.findall(new))
    # a document's new headings say what it gained ("Step 5: Upload Planning Session")
    document = any(p.lower().endswith(_DOCUMENTS) for p in modified_paths(call))
    headings = [h.strip() for h in _HEADING.findall(new)] if document else []
    ranked = (
        headings
        + _PACKAGE_VERSION.findall(new)
        + [n for n in CODE_NAME.findall(new) if n not in styled]
    )
    return [n for n in dict.fromkeys(ranked) if n not in before]


_DOCUMENTS = (".md", ".mdx", ".markdown", ".rst")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.{3,80}?)[ \t#]*$", re.M)


# A package loaded by version, in a URL or an import: ``unpkg.com/vue@3/…``, ``bootstrap@5.3.2``.
_PACKAGE_VERSION = re.compile(r"(?<![\w@.-])((?:@[\w-]+/)?[A-Za-z][\w.-]*@\d[\w.]*)")
# A stylesheet's property and its value, an attribute's value list (``width=device-width``).
_KEBAB = r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+"
_STYLE_PROPERTY = re.compile(rf"({_KEBAB})\s*:(?!:)")
_STYLE_VALUE = re.compile(rf"[:=,][ \t]*({_KEBAB})\b")


def written_texts(call: dict[str, Any]) -> tuple[str, str]:
    """The new text a write brings and the text it replaces ("" for a whole file)."""
    new, old = _edit_texts(call)
    if new is not None:
        return new, old
    args = arguments_of(call)
    listed = args.get("edits")
    edits: list[Any] = listed if isinstance(listed, list) else [args]
    keys = ("new_string", "new_str", "content", "file_text", "newText")
    return "\n".join(str(e.get(k) or "") for e in edits if isinstance(e, dict) for k in keys), ""


def _changes_by_index(messages: Sequence[Message]) -> list[tuple[int, str]]:
    return [
        (i, path)
        for i, m in enumerate(messages)
        if m.role == "assistant"
        for call in work_calls(m)
        for path in modified_paths(call)
    ]


# -- user statements ------------------------------------------------------------------------------


def _words(*alternatives: str) -> str:
    """``\b(a|b|...)\b`` led by a lookahead of the alternatives' first letters: the re module
    then passes over a position where no alternative can start at once, where ``\b`` first
    tried each of them. Each alternative starts with its
    first letter, written out."""
    assert all(a[0].isalpha() for a in alternatives), alternatives
    return rf"(?=[{''.join(sorted({a[0] for a in alternatives}))}])\b({'|'.join(alternatives)})\b"


# The negations both a prohibition and what it forbids are found by (in this order: the first
# alternative that matches wins).
_NEGATIONS = (
    "never",
    "don'?t",
    "do not",
    "must not",
    "mustn'?t",
    "should ?n[o']t",
    "shall not",
    "no more",
)
# Each of these is an anchored start and a search for words, tried apart: one pattern of both
# alternatives tried the anchored one at every position of the sentence, and these run on
# every sentence the user wrote (the same matches: the anchored one can only match at 0).
_PROHIBITION_START = re.compile(r"^\s*(no(?!,)|never|don'?t|do not|stop|avoid|without)\b", re.I)
_PROHIBITION_WORDS = re.compile(
    _words(
        *_NEGATIONS,
        r"stop \w+ing",
        r"without \w+ing",
        "you (cannot|can'?t|can not|may not|are not allowed to)",
    ),
    re.I,
)
_RULE_WORDS = re.compile(
    _words("always", "must", "make sure", "only", "from now on", "keep the", "keep it"), re.I
)
_RULE_START = re.compile(
    r"^\s*(please )?(use|keep|prefer|make it|leave|ignore|skip|put|render|show|hide)\b", re.I
)
_DECISION_START = re.compile(r"^\s*(no|yes|actually),", re.I)
_ARROW = re.compile(r"\s(->|→)\s")
_DECISION_WORDS = re.compile(
    _words(
        "let'?s (go with|use|keep|do)",
        "we('ll| will) (use|go|keep)",
        "go with",
        "decided",
        "i (actually |really |only )?want",
        "we (actually |really |only )?want",
        "i prefer",
        "we prefer",
        "instead of",
        "rather than",
        "not needed",
        "no longer",
        r"rename \S+ (to|as|just)",
        "keep the old",
        "for reference",
    ),
    re.I,
)
# The searches for words, each with the words one of which every match holds: most sentences
# hold none of them and are passed over without the search (core.keyed_patterns).
_PROHIBITION_KEYED = KeyedPattern(
    _PROHIBITION_WORDS,
    (
        "never",
        "don",
        "do not",
        "must",
        "should",
        "shall not",
        "no more",
        "stop ",
        "without ",
        "you ",
    ),
)
_RULE_KEYED = KeyedPattern(
    _RULE_WORDS, ("always", "must", "make sure", "only", "from now on", "keep the", "keep it")
)
_DECISION_KEYED = KeyedPattern(
    _DECISION_WORDS,
    (
        "let",
        "we",
        "go with",
        "decided",
        "want",
        "prefer",
        "instead of",
        "rather than",
        "not needed",
        "no longer",
        "rename",
        "keep the old",
        "for reference",
    ),
)
_ARROW_KEYED = KeyedPattern(_ARROW, ("->",))


def _prohibition(sentence: str) -> re.Match[str] | None:
    """Where a prohibition's negation is: the sentence's start, else its first negation."""
    return _PROHIBITION_START.match(sentence) or _PROHIBITION_KEYED.search(sentence)


def _is_rule(sentence: str) -> bool:
    return bool(_RULE_KEYED.search(sentence) or _RULE_START.match(sentence))


def _is_decision(sentence: str) -> bool:
    return bool(
        _DECISION_KEYED.search(sentence)
        or _DECISION_START.match(sentence)
        or _ARROW_KEYED.search(sentence)
    )


_NEGATION_WORD = re.compile(
    _words(
        *_NEGATIONS,
        "stop",
        "without",
        "avoid",
        "no",
        "cannot",
        "can'?t",
        "can not",
        "may not",
        "not allowed to",
    ),
    re.I,
)


def _forbidden(text: str) -> str | None:
    """What a prohibition forbids: the words after its negation ("editing files")."""
    no = _NEGATION_WORD.search(text)
    rest = text[no.end() :] if no else text
    return rest.strip(" .!:;,") or None


_USER_WILL = re.compile(r"^\s*(i|we)( will|'ll)\b", re.I)
_QUESTION_START = re.compile(
    r"^\s*(why|what|how|where|when|who|which|can|could|would|is|are|do|does|did|will|should|"
    r"shall|isn'?t|aren'?t|won'?t|wouldn'?t|any)\b",
    re.I,
)


# Where a request's sentences part: after an end mark, at line breaks. Led by a lookahead of
# the whitespace both start with, so re passes over every other position at once.
_SENTENCE_BREAK = re.compile(r"(?=\s)(?:(?<=[.!?])\s+|\n+)")


def _sentences(text: str) -> list[str]:
    """The sentences of a request; one that ends with a colon goes on with the list after it."""
    parts = _SENTENCE_BREAK.split(text)
    out: list[str] = []
    listing = False
    for part in parts:
        text = " ".join(part.split())
        listing = listing and bool(re.match(r"([-*+]|\d+[.)])\s", text))
        if out and (out[-1].endswith(":") or listing) and len(out[-1]) < 400:
            out[-1] = f"{out[-1]} {text}"
            listing = True
        elif len(part.split()) >= 2 or part.strip().endswith("!"):
            out.append(text)
    return out


def _is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") or bool(_QUESTION_START.match(sentence))


# -- tool calls -----------------------------------------------------------------------------------


# A call a runtime recorded as code (Codex's code mode: ``const r = await
# tools.exec_command({"cmd": …}); text(r.output);``, or ``tools.apply_patch(patch)`` after
# ``const patch = "*** Begin Patch…"``): the tool it calls and the value it passes.
_CODE_CALL = re.compile(r"\btools\.(\w+)\(\s*(\{.*\}|[A-Za-z_]\w*)\s*\)", re.S)


def work_calls(message: Message) -> list[dict[str, Any]]:
    """A message's calls as the work they do: a call written as code that calls one tool is
    read as that tool's call with its arguments (:func:`unwrapped`)."""
    once = _READ_ONCE.get()
    if once is None:
        return [unwrapped(c) for c in message.calls()]
    held = once.calls.get(id(message))
    if held is None or held[0] is not message:
        held = once.calls[id(message)] = (message, [unwrapped(c) for c in message.calls()])
    return held[1]


def unwrapped(call: dict[str, Any]) -> dict[str, Any]:
    """The tool call a code call makes (its name and JSON arguments; a patch passed by a
    variable as ``{"input": patch}``), or ``call`` itself when it is none or calls several."""
    raw = call["function"]["arguments"]
    if not isinstance(raw, str) or "tools." not in raw or raw.lstrip().startswith("{"):
        return call
    found = list(_CODE_CALL.finditer(raw))
    if len(found) != 1:
        return call
    name, value = found[0].group(1), found[0].group(2)
    if value.startswith("{"):
        arguments = value
        try:
            json.loads(value)
        except ValueError:
            return call
    else:
        assigned = re.search(
            rf"\b(?:const|let|var)\s+{value}\s*=\s*(\"(?:[^\"\\]|\\.)*\")", raw, re.S
        )
        try:
            arguments = json.dumps({"input": json.loads(assigned.group(1))}) if assigned else ""
        except ValueError:
            arguments = ""
        if not arguments:
            return call
    return {**call, "function": {**call["function"], "name": name, "arguments": arguments}}


def arguments_of(call: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments as an object ({} when they are a JSON value of another kind, and
    ``{"input": text}`` when they are no JSON)."""
    raw = call["function"]["arguments"]
    once = _READ_ONCE.get()
    if once is None or not isinstance(raw, str):
        return _arguments(raw)
    value = once.arguments.get(raw)
    if value is None:
        value = once.arguments[raw] = _arguments(raw)
    return value


def _arguments(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {"input": raw}
    return value if isinstance(value, dict) else {}


def _calls_by_id(messages: Sequence[Message]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for m in messages if m.role == "assistant" for c in work_calls(m) if c["id"]}


def _results_by_call(messages: Sequence[Message]) -> dict[str, Message]:
    return {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
