"""What a summarized span says that the next step needs, read deterministically (pure).

The goal (a slash command with its arguments and the plan or issue title it names, else the
first request), every request the user typed (acknowledgements and pasted logs are not
requests), the latest one whole, the open task list at the end (TodoWrite, TaskCreate +
TaskUpdate, update_plan), each failed command and whether a later run of it succeeded, each
file changed and the agent's stated reason, the user's instructions (imperatives, never
questions), decisions, and the work under way at the end. The runtime's injections (skill
expansions, AGENTS.md, system reminders, continuation notices) are never read as the user's.
Secrets are masked in everything returned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...quality import failed_result_signature, is_real_request
from ...records import Message
from ..calls import call_arguments, call_name
from ..touched_files import WRITE_TOOLS, is_patch, paths_of
from .base import slash_command

TASK_TOOLS = ("TodoWrite", "update_plan", "TaskCreate", "TaskUpdate")
LATEST_REQUEST_CHARS = 1500
REQUEST_CHARS = 300
STATEMENT_CHARS = 240
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_READ_ONLY = re.compile(
    r"^(read|read_file|readfile|view|cat|open|glob|grep|ls|list_dir|search|webfetch|websearch)$",
    re.I,
)
_ACK = re.compile(
    r"^(ok(ay)?|yes|yep|yo|wow|nice|cool|great|thanks?( you)?|ty|lgtm|go( on| ahead)?|"
    r"continue|sure|perfect|good|done|hm+|k)\W*$",
    re.I,
)
_QUESTION = re.compile(
    r"\?\s*$|^(what|why|how|when|where|who|which|is|are|does|do|did|can|could|would|should|"
    r"will|isn'?t|aren'?t|doesn'?t)\b",
    re.I,
)
_INSTRUCTION = re.compile(
    r"\b(must|never|don'?t(?! (think|tink|know|understand|see|get|care|like))|do not|always|"
    r"avoid|make sure|instead of|no more|stop|should ?n[o']t|only|prefer)\b|"
    r"^(no\s+[a-z]|keep|use|stop|please)\b|^\S+(\s+\S+){2,}!\s*$",
    re.I,
)
# A sentence about the speaker ("i don't think…", "i will make sure…") instructs nobody.
_ABOUT_SELF = re.compile(
    r"^(i|i'm|i'll|i've|i'd|we're)\b(?!.*\b(want|need|would like|prefer)\b)", re.I
)
# Search tools and comparisons exit 1 for "nothing found" / "different": no failure.
_EXIT_ONE_IS_AN_ANSWER = re.compile(
    r"^(bash -lc |sh -c )?['\"]?(cd \S+ && )?(grep|rg|egrep|fgrep|diff|test|cmp)\b"
)
_EXIT_ONE = re.compile(r"(exit code:?|exited with code|\"exit_code\":)\s*1\b", re.I)
_DECISION = re.compile(
    r"\b(let'?s (go with|use|do|keep|drop)|we('ll| will) (use|go with|keep)|decided|"
    r"decision|go with|rather than|instead of|chose|settled on)\b",
    re.I,
)
_TITLE = re.compile(r'"(?:plan|issue|pr|pull_request)_?title"\s*:\s*"([^"]{3,200})"', re.I)
_TASK_ID = re.compile(r"Task #?(\w+)")
_SECRETS = (
    (re.compile(r"\b(sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,})"), "[redacted]"),
    (re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), "[redacted]"),
    (re.compile(r"\b(AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,})"), "[redacted]"),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{16,}"), r"\1 [redacted]"),
    (re.compile(r"(?i)(://[^/\s:@]+:)[^@\s/]+@"), r"\1[redacted]@"),
    (
        re.compile(
            r"(?i)\b((?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password|passwd)"
            r"\s*[=:]\s*)[\"']?[^\s\"',;]{4,}"
        ),
        r"\1[redacted]",
    ),
)


def masked(text: str) -> str:
    """``text`` with credentials (API keys, tokens, passwords, a URL's password) masked."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def whole_sentences(text: str, limit: int) -> str:
    """``text`` on one line within ``limit`` characters, shortened only by leaving out whole
    sentences at the end (marked "[…]"); a first sentence longer than the limit is kept whole
    up to its last word within the limit."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = 0
    for match in _SENTENCE_END.finditer(text):
        if match.start() > limit:
            break
        cut = match.start()
    if not cut:
        cut = text.rfind(" ", 0, limit) if " " in text[:limit] else limit
    return text[:cut].rstrip() + " […]"


@dataclass
class Task:
    text: str
    status: str  # pending | in_progress | completed


@dataclass
class SpanNotes:
    """What :func:`read_span` found; empty lists where the span says nothing."""

    command: str | None = None
    plan_title: str | None = None
    expansion: str | None = None  # the first sentence of the text the command expanded to
    requests: list[str] = field(default_factory=list)  # whole, in order, secrets masked
    tasks: list[Task] | None = None  # None: no task list in the span
    errors: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path -> why ("" when unstated)
    constraints: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    current_work: list[str] = field(default_factory=list)

    @property
    def goal(self) -> str | None:
        """The command and its plan title, or the first request."""
        if self.command and self.plan_title:
            return f"{self.command} (plan: {self.plan_title})"
        if self.command and self.expansion and " " not in self.command:
            return f"{self.command}: {self.expansion}"  # a bare command says what it does
        if self.command:
            return self.command
        if self.requests:
            return whole_sentences(self.requests[0], REQUEST_CHARS)
        return None

    @property
    def latest_request(self) -> str | None:
        return self.requests[-1] if self.requests else None


def user_request(m: Message) -> str | None:
    """The request ``m`` states, when the user typed one: a slash command (as ``/name args``)
    or a real message that asks for something (not an acknowledgement, not a pasted log)."""
    if m.role != "user":
        return None
    command = slash_command(m.content or "")
    if command:
        return command
    if not is_real_request(m):
        return None
    text = re.sub(r"<system-reminder>.*?</system-reminder>", "", m.content or "", flags=re.S)
    text = text.strip()
    if not text or _ACK.match(text) or _pasted_data(text) or not re.search(r"[A-Za-z]{2}", text):
        return None
    return text


def _pasted_data(text: str) -> bool:
    """A pasted JSON document or log, not words to the agent."""
    if text[0] in "{[":
        try:
            json.loads(text)
            return True
        except ValueError:
            pass
    letters = sum(c.isalpha() or c.isspace() for c in text)
    return len(text) > 200 and letters / len(text) < 0.6


def read_span(messages: Sequence[Message]) -> SpanNotes:
    """The notes of a span (see the module's docstring)."""
    notes = SpanNotes()
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    tasks: dict[str, Task] = {}
    runs: list[tuple[str, str | None, int]] = []  # (command key, error or None, edits before)
    edits: list[str] = []  # every path changed, in order
    for i, m in enumerate(messages):
        request = user_request(m)
        if request is not None:
            if request.startswith("/") and notes.command is None and not notes.requests:
                notes.command = request
            notes.requests.append(masked(request))
            if not request.startswith("/"):
                for sentence in _SENTENCES.split(request):
                    _classify(notes, sentence.strip())
        elif m.role == "user" and notes.command and notes.expansion is None:
            notes.expansion = _first_sentence(m.content or "")
        if m.role == "tool" and notes.plan_title is None and notes.command:
            found = _TITLE.search(m.content or "")
            if found:
                notes.plan_title = masked(found.group(1))
        if m.role != "assistant":
            continue
        said = _statement(messages, i)
        for call in m.calls():
            name = call_name(call)
            args = _arguments(call)
            if name in TASK_TOOLS:
                _track_tasks(tasks, name, args, results.get(call["id"]))
                notes.tasks = list(tasks.values())
                continue
            if WRITE_TOOLS.match(name) or is_patch(name, call_arguments(call)):
                for path in paths_of(name, call_arguments(call), args):
                    notes.files[path] = notes.files.get(path) or said
                    edits.append(path)
            result = results.get(call["id"])
            if result is not None:
                runs.append((_command_key(name, args), _failure(name, args, result), len(edits)))
    notes.errors = _errors_and_fixes(runs, edits, messages)
    notes.current_work = _current_work(messages)
    return notes


def _first_sentence(text: str) -> str:
    """The first sentence of a text that is not a heading."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    first = _SENTENCES.split(" ".join(lines[:3]).strip())[0] if lines else ""
    return masked(whole_sentences(first, STATEMENT_CHARS))


def _classify(notes: SpanNotes, sentence: str) -> None:
    """A sentence of a request: an instruction (imperative, not a question) or a decision."""
    if len(sentence) < 6 or _QUESTION.search(sentence) or _ABOUT_SELF.match(sentence):
        return
    if "\\n" in sentence or _pasted_data(sentence) or not re.search(r"[a-z]{3}", sentence):
        return
    if _DECISION.search(sentence):
        notes.decisions.append(masked(whole_sentences(sentence, STATEMENT_CHARS)))
    elif _INSTRUCTION.search(sentence):
        notes.constraints.append(masked(whole_sentences(sentence, STATEMENT_CHARS)))


def _arguments(call: dict) -> dict:
    try:
        args = json.loads(call_arguments(call) or "{}")
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


def _statement(messages: Sequence[Message], i: int) -> str:
    """What the agent said it was doing at message ``i``: its own text, else the nearest
    earlier assistant text of the same turn."""
    for j in range(i, max(-1, i - 8), -1):
        m = messages[j]
        if m.role == "user" and user_request(m):
            break
        if m.role == "assistant" and (m.content or "").strip():
            return masked(last_sentences(m.content, STATEMENT_CHARS))
    return ""


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


def _track_tasks(tasks: dict[str, Task], name: str, args: dict, result: Message | None) -> None:
    """Apply one task-list call: TodoWrite and update_plan replace the list, TaskCreate adds
    a task (its id from the result, else its position), TaskUpdate changes one."""
    if name in ("TodoWrite", "update_plan"):
        entries = args.get("todos") if name == "TodoWrite" else args.get("plan")
        if not isinstance(entries, list):
            return
        tasks.clear()
        for n, entry in enumerate(e for e in entries if isinstance(e, dict)):
            text = entry.get("content") or entry.get("step") or entry.get("subject")
            if isinstance(text, str) and text.strip():
                tasks[str(n + 1)] = Task(masked(text.strip()), str(entry.get("status") or ""))
    elif name == "TaskCreate":
        text = args.get("subject") or args.get("description")
        if not isinstance(text, str):
            return
        found = _TASK_ID.search(result.content or "") if result is not None else None
        task_id = found.group(1) if found else str(len(tasks) + 1)
        tasks[task_id] = Task(masked(text.strip()), "pending")
    else:
        task = tasks.get(str(args.get("taskId") or args.get("id") or ""))
        if task is None:
            return
        if isinstance(args.get("status"), str):
            task.status = args["status"]
        if isinstance(args.get("subject"), str):
            task.text = masked(args["subject"])


def _failure(name: str, args: dict, result: Message) -> str | None:
    """The error a call's result reports. Only a shell command's output is read for an exit
    code: a file that was read, or a subagent's report, may quote "exit code 1" and still be
    a success; for those only the transcript's own flags count."""
    if _is_shell(args) and not _READ_ONLY.match(name):
        if _EXIT_ONE_IS_AN_ANSWER.match(_command_key(name, args)) and _EXIT_ONE.search(
            result.content or ""
        ):
            return None
        return failed_result_signature(result)
    details = result.details if isinstance(result.details, dict) else {}
    code = details.get("exit_code")
    if details.get("is_error") or (isinstance(code, int) and code != 0):
        return failed_result_signature(result)
    return None


def _is_shell(args: dict) -> bool:
    return bool(args.get("command") or args.get("cmd"))


def _command_key(name: str, args: dict) -> str:
    """What identifies a run of the same command: the shell command, else the tool and its
    path."""
    command = args.get("command") or args.get("cmd")
    if isinstance(command, list):
        command = " ".join(str(c) for c in command)
    if isinstance(command, str) and command.strip():
        return " ".join(command.split())
    paths = [str(args[k]) for k in ("file_path", "path") if isinstance(args.get(k), str)]
    return " ".join([name] + paths)


def _errors_and_fixes(
    runs: list[tuple[str, str | None, int]], edits: list[str], messages: Sequence[Message]
) -> list[str]:
    """Each distinct failure, and whether a later run of the same command succeeded (with the
    files changed in between) or it is still open."""
    out: dict[str, str] = {}
    for n, (key, error, edited) in enumerate(runs):
        if error is None:
            continue
        label = f"`{whole_sentences(key, 120)}` failed: {error}"
        later = [r for r in runs[n + 1 :] if _same_command(r[0], key)]
        if later and later[-1][1] is None:
            fixed_at = next(r[2] for r in later if r[1] is None)
            changed = list(dict.fromkeys(edits[edited:fixed_at]))
            how = f" after changing {', '.join(changed[:4])}" if changed else ""
            out[error] = masked(f"{label} — fixed: a later run succeeded{how}")
        else:
            out[error] = masked(f"{label} — still open")
    # results no call of the span answers (their call was cut away): reported as they are
    called = {c["id"] for m in messages for c in m.calls()}
    for m in messages:
        if m.role == "tool" and m.tool_call_id not in called:
            error = failed_result_signature(m)
            if error and error not in out:
                out[error] = masked(error)
    return list(out.values())


def _same_command(a: str, b: str) -> bool:
    return a == b or a.split()[:3] == b.split()[:3]


def _current_work(messages: Sequence[Message]) -> list[str]:
    """The agent's last statement and its last tool calls, each with its outcome."""
    out: list[str] = []
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    calls: list[str] = []
    for m in reversed(messages):
        if m.role == "user" and user_request(m):
            break
        if m.role != "assistant":
            continue
        for call in reversed(m.calls()):
            if len(calls) < 3 and call_name(call) not in TASK_TOOLS:
                calls.append(_call_line(call, results.get(call["id"])))
        if not out and (m.content or "").strip():
            out.append(masked(whole_sentences(m.content, STATEMENT_CHARS)))
        if out and len(calls) >= 3:
            break
    return out + [f"- {c}" for c in reversed(calls)]


def _call_line(call: dict, result: Message | None) -> str:
    """One tool call and its outcome, output elided: ``Bash `make test` → failed: …``."""
    name = call_name(call)
    key = _command_key(name, _arguments(call))
    what = name if key == name else f"{name} `{whole_sentences(key.removeprefix(name + ' '), 100)}`"
    if result is None:
        return masked(f"{what} (no result yet)")
    error = _failure(name, _arguments(call), result)
    return masked(f"{what} → failed: {error}" if error else f"{what} → ok")
