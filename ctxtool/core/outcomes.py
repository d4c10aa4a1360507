"""Outcomes of failed runs, keyed on what they acted on (pure; plain lists in).

A failure is resolved by a later success on the same *target*, not only by the same command
line: a test run that crashed a worker is fixed by the test run with another flag, a rebase
conflict by ``git rebase --continue``, an edit refused before a read by the edit after the
read, stale build output by building again. The target is what the run acted on: the file a
tool wrote or read, the test or build command family, the git operation, the URL, else the
program and its first argument. An error that names its remedy ("Call `batch_extract_failed`
to process the queued URLs", "run npm install first") is fixed by that remedy's success too.

Some failures were never errors worth carrying: a search that found nothing, a command the
user aborted, an exploratory look (``ls``, ``cat``, ``which``) that missed where the next look
found what it wanted. :func:`outcomes` drops them. A same-target retry the agent made at once
("file has not been read yet", "old string not found", a patch's hunk not found) is kept as a
resolved retry: one line for all of its kind says what the agent learnt, and it is the first
thing cut. The summary's errors section then holds the open errors and the fixes worth
remembering (cause → fix).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from .records import Message

# Programs and sub-commands that run a project's tests or builds: one family each, so a run
# with other flags, another test file or another package is the same target.
_TEST_PROGRAMS = frozenset(
    {"pytest", "py.test", "jest", "vitest", "mocha", "tox", "nox", "rspec", "phpunit", "ctest"}
)
_COPIES = frozenset({"cp", "mv", "install", "rsync", "scp", "ln"})
_BUILD_PROGRAMS = frozenset({"tsc", "webpack", "vite", "esbuild", "rollup", "gradle", "mvn"})
_RUNNERS = frozenset({"npm", "pnpm", "yarn", "bun", "cargo", "go", "make", "dotnet", "deno"})
_TEST_WORDS = frozenset({"test", "tests", "check", "spec", "e2e", "unit"})
_BUILD_WORDS = frozenset({"build", "compile", "bundle", "typecheck", "tsc", "lint"})
# Words that make a run of a test, build or git command ask only for information (its version,
# its help, what it would run or do) and so test, build or change nothing: ``pytest --version``,
# ``pytest --collect-only``, ``cargo --version``, ``git push --dry-run``, ``make -n``.
_INFO_FLAGS = frozenset(
    {"--version", "--help", "-h", "--collect-only", "--co", "--dry-run", "--dryrun",
     "--just-print", "--recon", "--list", "-list", "--list-tests", "--listtests", "--fixtures",
     "--markers", "--showconfig", "--show-config", "--print-config", "--info", "--list-sdks",
     "--listenvs", "--list-envs", "--setup-plan"}
)  # fmt: skip
_GIT_DRY_N = frozenset({"git:push", "git:clean", "git:add", "git:mv", "git:rm"})
# ``-v``/``-V`` alone asks for the version, except where it means "verbose" (``pytest -v`` runs
# every test); ``-n`` is a dry run only for make and some git operations (``pytest -n 2`` runs
# workers, ``git commit -n`` skips the hooks).
_VERBOSE_ALONE = frozenset({("-v", "pytest"), ("-v", "py.test"), ("-v", "tox"), ("-v", "nox"),
                            ("-V", "ctest")})  # fmt: skip
_FAMILY_PROGRAMS = _TEST_PROGRAMS | _BUILD_PROGRAMS | _RUNNERS | {"git"}
# Words in front of the program that do not change what it acts on.
_PREFIXES = frozenset(
    {"sudo", "time", "env", "nice", "exec", "command", "npx", "bunx", "pnpx", "uvx", "noglob"}
)
_WRAPPER_RUNS = (("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("bundle", "exec"))
_EXPLORATORY = frozenset(
    {"ls", "cat", "head", "tail", "find", "which", "stat", "file", "test", "type", "readlink",
     "realpath", "tree", "less", "wc", "du", "pwd", "echo", "printenv", "whereis", "sed", "awk",
     # PowerShell's looks: which, ls, cat, test -e
     "get-command", "get-childitem", "get-content", "get-item", "test-path", "resolve-path"}
)  # fmt: skip
# A shell a line runs its script through (``bash -lc "…"``, ``& 'C:\…\bash.exe' -lc "…"``):
# what the script acts on is the target, whichever shell ran it.
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "pwsh", "powershell", "cmd"})
_SEARCH = frozenset({"grep", "rg", "ag", "egrep", "fgrep", "zgrep", "ack"})
_PATCH = re.compile(r"^\s*apply_patch\b|\*\*\* Begin Patch")
_URL = re.compile(r"https?://[^\s'\"<>|;)]+")
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
# ``bash -lc``, ``/bin/sh -c``, PowerShell's ``& 'C:\\Program Files\\Git\\bin\\bash.exe' -lc``.
_SHELL_NAME = r"(?:ba|z|da)?sh(?:\.exe)?"
_SHELL_WRAPPER = re.compile(
    rf"^\s*(?:&\s*)?(?:'(?:[^']*[/\\])?{_SHELL_NAME}'|\"(?:[^\"]*[/\\])?{_SHELL_NAME}\"|"
    rf"(?:\S*[/\\])?{_SHELL_NAME})\s+-l?c\s+"
)
# A tool's complaint that the agent retries at once, in the same turn: no error of the work.
RETRY_NOISE = re.compile(
    r"has not been read yet|not been read|read it first|must read|old_string not found|"
    r"string to replace not found|old string not found|no match(?:es)? found for|"
    r"found \d+ matches of the string|not unique in the file|file has been modified since|"
    r"could not find the exact text|failed to find expected lines|invalid hunk|"
    r"expected update hunk",
    re.I,
)
# A run the user stopped: nothing failed.
ABORTED = re.compile(
    r"interrupted by user|the user doesn't want to proceed|user (?:rejected|denied|declined)|"
    r"aborted by (?:the )?user|operation was aborted|turn_aborted|tool use was rejected|"
    r"^\s*command aborted",
    re.I,
)
# A run that returned while its command goes on (a process, a sub-agent, a code cell started,
# OpenClaw's "Command still running (session …)"): neither done nor failed yet.
_STILL_RUNNING = re.compile(
    r"\A\W*(?:Process running with session ID|Async agent launched|Command running in background|"
    r"Script running with cell ID)|^\W*(?:Command|Process) still running\b",
    re.I | re.M,
)
_OPENING_CHARS = 300


def still_running(output: str) -> bool:
    """A result that says its command is still running: no outcome yet."""
    return bool(_STILL_RUNNING.search(output[:_OPENING_CHARS]))


def aborted(output: str) -> bool:
    """A result whose first line says the user stopped the run ("aborted by user after
    77.1s", "[Request interrupted by user for tool use]"): not done, and no error to fix."""
    first = next((line for line in output.splitlines() if line.strip()), "")
    return bool(ABORTED.search(first))


# A word that names a sub-command (no path, no file name, no value).
_SUBCOMMAND = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_EXIT_ONE = re.compile(r"^\s*(command )?exit(ed)?( with)? (code|status) 1\.?\s*$", re.I)


@dataclass(frozen=True)
class Run:
    """One run as the outcome rule reads it: which tool, the command line it ran (or the tool
    and path), the path it worked on, whether it failed and the line that says why."""

    tool: str
    command: str
    failed: bool
    path: str | None = None
    error: str = ""
    turn: int = 0  # which request's turn it ran in (a retry noise is the same turn's)
    # The tool or program the error told the agent to run (``Call `batch_extract_failed```,
    # "run npm install first"): a later success of it is the failure's fix.
    remedy: str = ""
    # The remedy is the failed program itself, which the agent said it would try another way
    # (``alternative_remedy``): only its next command or a run on the same file fixes it.
    another_way: bool = False
    # What the run printed: a success that prints a failure's error again got no further
    # (``| head`` hid its exit code), so it fixes nothing.
    output: str = ""


@dataclass(frozen=True)
class Outcome:
    """A failure that matters: its run, and the later run on the same target that succeeded
    (None: still open)."""

    failure: Run
    fixed_by: Run | None = None
    # A tool's complaint the agent retried past at once (``RETRY_NOISE``): a fix worth one
    # line for all its kind, the first thing cut when the summary is short of room.
    retry: bool = False

    @property
    def fixed(self) -> bool:
        return self.fixed_by is not None

    def fix(self) -> str | None:
        """What fixed it, in a few words: the succeeding command when it is another line,
        else "the same command succeeded later"."""
        if self.fixed_by is None:
            return None
        if self.fixed_by.command != self.failure.command:
            return f"`{self.fixed_by.command}` succeeded"
        return "the same command succeeded later"


# What a command's output says when it failed though no exit code came with it (Codex's code
# mode prints none): a compiler's error, a failed test run, a formatter's check that found a
# diff, npm's or curl's error, a traceback. A warning or a line that merely mentions an error
# is none of these.
_OUTPUT_FAILED = re.compile(
    r"^\s*(?:error(?:\[E\d+\])?:|npm (?:ERR!|error)\b|Traceback \(most recent call last\)|"
    r"FAILED\b|test result: FAILED|Diff in \S+:\d+:|curl: \(\d+\)|\S+\(\d+,\d+\): error TS\d+)",
    re.M,
)
# Codex's code mode: a script's result says how the script ended, never the command's exit code.
_SCRIPT_RESULT = re.compile(
    r"^Script (completed|failed|running with cell ID (\S+))\s*\n(?:Wall time[^\n]*\n)?(?:Output:\n)?"
)


def script_result(text: str) -> tuple[str, str | None, str] | None:
    """A Codex code-mode result as (how the script ended: ``completed``, ``failed`` or
    ``running``; the cell a later ``wait`` reads a running one from; the output), None for
    any other result."""
    found = _SCRIPT_RESULT.match(text)
    if not found:
        return None
    status = found.group(1).split()[0]
    return status, found.group(2), text[found.end() :]


def output_failed(output: str) -> bool:
    """A command's output that says it failed, for a result with no exit code: an error line
    of a compiler, a test run or a check (``_OUTPUT_FAILED``), or a JSON object saying so."""
    return bool(_OUTPUT_FAILED.search(output)) or reported_failure(output) is not None


_REASON_KEYS = ("error_type", "error", "reason", "message", "detail")


def reported_failure(output: str) -> str | None:
    """What a command's output says went wrong when it is a JSON object saying it failed
    (``{"success": false, "error_type": …}``, ``{"uploaded": false, "reason": …}``,
    ``{"error": "…"}``): a failure though the exit code is 0 (``|| true``) or not printed.
    Its reasons joined, or the object on one line when it gives none; None: no such output."""
    text = output.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    reasons = [
        " ".join(v.split())
        for k in _REASON_KEYS
        if isinstance(v := value.get(k), str) and v.strip()
    ]
    said_false = value.get("success") is False or value.get("ok") is False
    if (
        not said_false
        and not (isinstance(value.get("error"), str) and value["error"].strip())
        and not (reasons and any(v is False for v in value.values()))
    ):
        return None
    return " | ".join(dict.fromkeys(reasons)) or json.dumps(value)


# A tool's own result that opens by saying it failed, though its record carries no error flag
# (a custom tool reports its failure as text): an error mark, "Error:"/"Failed to …", or a
# first line that ends "… failed."
_SAID_FAILED = re.compile(
    r"\A\s*(?:[❌✗✖⛔🚫]|(?:error|fatal|failed|failure)\b(?:\s*:|\s+to\b)|"
    r"[^\n]{0,160}\bfailed[.!]?[ \t]*(?:\n|\Z))",
    re.I,
)
# What an error tells the agent to run: "Call `X`", "run `X` first", "Run X first", "use `X`".
_REMEDY = re.compile(
    r"\b(?:call|run|use|try)\s+(?:`([^`\n]{1,80})`|'([^'\n]{1,80})'|([\w.:-]{2,40}(?:\s+[\w.:/@-]+){0,3}?)\s+first\b)",
    re.I,
)


def said_failed(text: str) -> bool:
    """A tool's result that says it failed at its start (``_SAID_FAILED``): for a tool whose
    record has no error flag and whose result is no file's text nor a report."""
    return bool(_SAID_FAILED.match(text))


def remedy_named(text: str) -> str:
    """The program or tool an error tells the agent to run (``Call `batch_extract_failed` to
    process…``, "run npm install first"), its first word; "" when it names none."""
    for found in _REMEDY.finditer(text):
        named = next(g for g in found.groups() if g)
        words = _work_step(named)
        if words and re.fullmatch(r"[\w.:-]+", words[0]):
            return words[0]
    return ""


# The agent's words after a failure that say it goes at the work another way ("Let me try a
# different approach:", "use another method"): a verb of trying and "a different"/"another";
# "I'll add a method", "alternatively, let me check" change no way.
_ANOTHER_WAY = re.compile(
    r"\b(?:try|tries|trying|use|using|take|taking)\s+(?:a\s+different|another)\s+"
    r"(?:approach|way|method)\b",
    re.I,
)


def alternative_remedy(command: str, reaction: str) -> str:
    """The program of a failed command line when the agent's reaction says it tries another
    way: a later success of that program on the same script or file, or as the very next
    command, got past the failure (:func:`runs_another_way`); "" otherwise."""
    words = _work_step(command)
    if not words or not _ANOTHER_WAY.search(reaction):
        return ""
    return words[0]


def _file_arguments(words: Sequence[str]) -> set[str]:
    """The words of a step that name a script or a file (a path or a name with an extension),
    its program left out."""
    return {w for w in words[1:] if not w.startswith("-") and re.fullmatch(r"[\w./~-]*[./]\w+", w)}


def runs_another_way(failed: Run, run: Run, next_command: bool) -> bool:
    """``run`` is the other way the agent said it would try after ``failed``: a success of the
    failed program that is the agent's next command (failed tries of it aside), or works on the same script or file
    (``python train.py --bs 16`` after ``python train.py --bs 64``); ``python -c …`` after a
    failed ``python train.py`` is a look aside, not the way past it."""
    if not failed.another_way or run.failed or not _is_command_line(run):
        return False
    words = _work_step(run.command)
    if not words or words[0] != failed.remedy:
        return False
    return next_command or bool(
        _file_arguments(_work_step(failed.command)) & _file_arguments(words)
    )


def runs_remedy(run: Run, remedy: str) -> bool:
    """``run`` is the remedy an error named: that tool, or a command line whose program it is."""
    if not remedy:
        return False
    if run.tool == remedy:
        return True
    words = _work_step(run.command) if _is_command_line(run) else []
    return bool(words) and words[0] == remedy


def _next_other_command(failed: Run, later: Sequence[Run]) -> int:
    """Where in ``later`` the agent first ran a command line of another program than the
    failed one (its failed tries of the same program aside); ``len(later)`` when it never did."""
    if not failed.another_way:
        return len(later)
    return next(
        (
            k
            for k, r in enumerate(later)
            if _is_command_line(r) and _work_step(r.command)[:1] != [failed.remedy]
        ),
        len(later),
    )


def _fixes(failed: Run, run: Run, next_command: bool) -> bool:
    """``run`` succeeded where ``failed`` failed: on its target, as the remedy its error named,
    or as the other way the agent said it would try (``next_command``: no other program's
    command came between)."""
    if run.failed or repeats_error(failed.error, run.output):
        return False
    if _answered(target_of(failed), targets_done(run)):
        return True
    if target_of(run).startswith("info:"):
        return False  # ``npm -v`` is no run of the ``npm install`` an error named
    if failed.another_way:
        return runs_another_way(failed, run, next_command)
    return runs_remedy(run, failed.remedy)


MIN_REPEATED_ERROR = 16  # characters of an error line that, printed again, are the same error


def repeats_error(error: str, output: str) -> bool:
    """``output`` prints one of the lines of a failure's ``error`` again (a line long enough
    to be that error, not a word of it): the run that printed it met the same failure,
    whatever its exit code said (``pnpm --version | head -5`` exits 0)."""
    return any(
        len(line) >= MIN_REPEATED_ERROR and line in output
        for line in (part.strip() for part in error.split(" | "))
    )


_STEP_SEPARATOR = re.compile(r"\s*(?:&&|\|\||;|\n)\s*")
_STAGE_END = re.compile(r"\s+\|\s*|\s+2>&1|\s+>")
_QUOTE = re.compile(r"['\"]")
_SINGLE_QUOTED = re.compile(r"'[^']*'")
_DOUBLE_OPENED = re.compile(r"\"(?:[^\"\\]|\\.)*")  # a double-quoted part without its close


def _quoted_spans(line: str) -> list[tuple[int, int]]:
    """The quoted parts of ``line``, left to right: ``'…'``, or ``"…"`` with its backslash
    escapes (what ``'[^']*'|"(?:[^"\\]|\\.)*"`` finds), in one pass. A double quote that opens
    nothing closing scans to where it fails; every double quote before that point is escaped
    within that scan, so it would fail the same way and is not tried again (the regex alone
    retries each: a 40 KB line of escaped quotes took 22 s)."""
    spans: list[tuple[int, int]] = []
    i, failed_until = 0, 0
    while (found := _QUOTE.search(line, i)) is not None:
        i = found.start()
        if line[i] == "'":
            single = _SINGLE_QUOTED.match(line, i)
            if single is None:
                i += 1
            else:
                spans.append(single.span())
                i = single.end()
        elif i < failed_until:
            i += 1
        else:
            opened = _DOUBLE_OPENED.match(line, i)  # matches: line[i] is its opening quote
            end = opened.end() if opened else i + 1
            if end < len(line) and line[end] == '"':
                spans.append((i, end + 1))
                i = end + 1
            else:
                failed_until, i = end, i + 1
    return spans


def _unquoted_split(line: str, separator: re.Pattern[str]) -> list[str]:
    """``line`` split where ``separator`` matches outside quotes: the ``;`` of a script quoted
    to ``python -c`` or ``tsx -e`` ends no step of the line."""
    quoted = _quoted_spans(line)
    parts, start, q = [], 0, 0
    for found in separator.finditer(line):
        # one walk over the sorted quoted spans beside the sorted matches: linear in the line
        while q < len(quoted) and quoted[q][1] <= found.start():
            q += 1
        if q < len(quoted) and quoted[q][0] <= found.start():
            continue
        parts.append(line[start : found.start()])
        start = found.end()
    return parts + [line[start:]]


def shell_line(command: str) -> str:
    """A command line with its ``bash -lc`` wrapper and the quotes around the script taken
    off: the line the shell inside runs."""
    line = _SHELL_WRAPPER.sub("", command).strip()
    if len(line) > 1 and line[0] == line[-1] and line[0] in "'\"":
        line = line[1:-1]
    return line


def shell_steps(command: str) -> list[list[str]]:
    """The words of each step of a shell line (``&&``, ``||``, ``;`` split; a pipe's first
    stage only), a ``bash -lc`` wrapper taken off."""
    line = shell_line(command)
    out = []
    for step in _unquoted_split(line, _STEP_SEPARATOR):
        first = _unquoted_split(step.strip(), _STAGE_END)[0]
        try:
            words = shlex.split(first)
        except ValueError:
            words = first.split()
        if words:
            out.append(words)
    return out


def _program(words: list[str]) -> list[str]:
    """The words from the program on: assignments, ``sudo``/``npx``/``timeout N`` and
    ``uv run``-style wrappers dropped, ``python -m X`` read as ``X``."""
    words = list(words)
    while words:
        head = words[0]
        if _ASSIGNMENT.match(head) or head in _PREFIXES or head == "&":  # PowerShell's call
            words = words[1:]
        elif _wrapped(words):
            words = words[2:]
        else:
            break
    if words:
        words[0] = program_name(words[0])
    return words


def program_name(word: str) -> str:
    """A program as its name alone: its directory (either slash) and ``.exe`` left out."""
    name = re.split(r"[/\\]", word)[-1]
    return name[:-4] if name.lower().endswith(".exe") else name


def _script_of(words: list[str]) -> str | None:
    """The script a shell runs with ``-c`` (``bash -lc "…"``), None for any other step."""
    if len(words) > 2 and words[0].lower() in _SHELLS and words[1] in ("-c", "-lc", "-ic"):
        return words[2]
    return None


def _wrapped(words: list[str]) -> bool:
    """``timeout N cmd``, ``uv run cmd``, ``python -m cmd``: two words before the program."""
    head = words[0].rsplit("/", 1)[-1]
    return (
        (head == "timeout" and len(words) > 1)
        or tuple(words[:2]) in _WRAPPER_RUNS
        or (bool(re.fullmatch(r"python[\d.]*", head)) and words[1:2] == ["-m"])
    )


def _work_step(command: str) -> list[str]:
    """The step of a line that does the work: the last one that is no ``cd``, ``export``,
    ``source`` or activation."""
    steps = [_program(s) for s in shell_steps(command)]
    steps = [
        s
        for s in steps
        if s and s[0] not in ("cd", "export", "source", ".", "set", "pushd", "true", ":")
    ]
    return steps[-1] if steps else []


def command_target(command: str) -> str:
    """What a command line acts on, as a key two runs share when one can fix the other:
    ``test:pytest``, ``build:npm``, ``git:rebase``, ``url:host/path``, ``to:dest`` for a copy
    or a move, else the program and its first argument that is no flag."""
    url = _URL.search(command)
    words = _work_step(command)
    if not words:
        return command.strip()
    script = _script_of(words)
    if script is not None:
        return command_target(script)
    target = _step_target(words, url)
    return "info:" + target if asks_only_information(words, target) else target


def asks_only_information(words: Sequence[str], target: str) -> bool:
    """A step of a test, build or git command (its words from the program on, its target)
    that asks only for its version, its help, a listing or a dry run (``pytest --version``,
    ``pytest --co``, ``cargo --version``, ``npm -v``, ``git push --dry-run``): it tested,
    built or changed nothing, so it neither fixes nor fails that command's own target."""
    program = words[0].lower() if words else ""
    if program not in _FAMILY_PROGRAMS:
        return False
    args = list(words[1:])
    if "--" in args and not target.startswith("test:"):
        args = args[: args.index("--")]  # the words the program runs with (``cargo run -- -h``)
    flags = {w.split("=", 1)[0] for w in args if w.startswith("-")}
    if flags & _INFO_FLAGS or {f.lower() for f in flags if f.startswith("--")} & _INFO_FLAGS:
        return True
    if len(args) == 1 and args[0] in ("-v", "-V"):
        return (args[0], program) not in _VERBOSE_ALONE
    if "-n" in flags and (program == "make" or target in _GIT_DRY_N):
        return True
    rest = [w for w in args if not w.startswith("-")]
    if program in _TEST_PROGRAMS or not rest:
        return False  # ``pytest help`` runs the tests under ``help/``
    return rest[0] == "help" or rest == ["version"] or (program == "gradle" and rest[0] == "tasks")


def _step_target(words: list[str], url: re.Match[str] | None) -> str:
    """The target of one step's words (:func:`command_target`), whatever its flags ask."""
    program = words[0].lower()
    # no flag, nor a flag's number (``grep -A 3 pattern``: the pattern is what it acts on)
    rest = [
        w
        for before, w in zip(words, words[1:])
        if not w.startswith("-") and not (before.startswith("-") and w.isdigit())
    ]
    if url and program in ("curl", "wget", "http", "https", "xh"):
        return "url:" + url.group(0).split("://", 1)[1].split("?", 1)[0].rstrip("/")
    if program == "git":
        args = words[1:]
        while args[:1] in (["-C"], ["-c"]):  # a repository or a setting, not the operation
            args = args[2:]
        operation = next((w for w in args if not w.startswith("-") and "=" not in w), "")
        return f"git:{operation}"
    if program in _COPIES and len(rest) > 1:
        # a copy or a move acts on where it puts the file: another source to the same
        # destination fixes it (``cp $(npm root -g)/…/dark.json x.json``, then ``cp src/dark.json
        # x.json``)
        return "to:" + rest[-1].rstrip("/")
    if program in _TEST_PROGRAMS:
        return f"test:{program}"
    if program in _BUILD_PROGRAMS:
        return f"build:{program}"
    if program in _RUNNERS:
        sub = [w.lower() for w in rest if w not in ("run", "run-script", "workspace")][:1]
        word = re.split(r"[:_-]", sub[0])[0] if sub else ""
        if word in _TEST_WORDS:
            return f"test:{program}"
        if word in _BUILD_WORDS or (program == "make" and not sub):
            return f"build:{program}"
        return f"{program}:{sub[0] if sub else ''}"
    if len(rest) > 1 and _SUBCOMMAND.fullmatch(rest[0]) and _SUBCOMMAND.fullmatch(rest[1]):
        # a command group and its command (``erk exec upload-session``, ``gh pr create``):
        # another command of the group acts on something else
        return f"{program}:{rest[0]} {rest[1]}"
    return f"{program}:{rest[0]}" if rest else program


def target_of(run: Run) -> str:
    """The target of a run: a command's (:func:`command_target`), else the path the tool
    worked on (a tool that writes and one that reads the same file share it; a patch, however
    it is applied, works on its first file)."""
    if run.path and (not _is_command_line(run) or _PATCH.search(run.command)):
        return "file:" + run.path
    return command_target(run.command)


def _is_command_line(run: Run) -> bool:
    return run.command != run.tool and not run.command.startswith(f"{run.tool} ")


def is_exploratory(run: Run) -> bool:
    """A look around (``ls``, ``cat``, ``which``, a search): its miss is no error when a later
    look succeeds."""
    words = _work_step(run.command) if _is_command_line(run) else []
    tool = run.tool.lower()
    return (bool(words) and words[0].lower() in _EXPLORATORY | _SEARCH) or tool in (
        "read", "read_file", "view", "glob", "grep", "ls", "list_dir", "search",
    )  # fmt: skip


def is_non_error(run: Run, later: Sequence[Run]) -> bool:
    """A failed run that was never an error of the work: a search that found nothing, a run
    the user aborted, a retry noise the same turn retried past, an exploratory miss that a
    later look in the same turn got past."""
    if ABORTED.search(run.error):
        return True
    words = _work_step(run.command) if _is_command_line(run) else []
    if words and words[0] in _SEARCH and (not run.error.strip() or _EXIT_ONE.search(run.error)):
        return True
    same_turn = [r for r in later if r.turn == run.turn]
    reach = _next_other_command(run, later)
    if any(_fixes(run, r, k <= reach) for k, r in enumerate(later)):
        return False  # what it looked at was got later: a failure with its fix
    if is_exploratory(run) and not run.error.strip():
        return True  # a look that found nothing and said nothing: no error to carry
    if is_exploratory(run) and not RETRY_NOISE.search(run.error):
        return any(not r.failed and is_exploratory(r) for r in same_turn)
    return False


def outcomes(runs: Sequence[Run]) -> list[Outcome]:
    """Each failed run that was an error, with the first later success on its target (None
    while it stays open), in order."""
    out = []
    for n, run in enumerate(runs):
        if not run.failed:
            continue
        later = runs[n + 1 :]
        if is_non_error(run, later):
            continue
        reach = _next_other_command(run, later)
        fixed_by = next((r for k, r in enumerate(later) if _fixes(run, r, k <= reach)), None)
        retry = (
            fixed_by is not None
            and fixed_by.turn == run.turn
            and bool(RETRY_NOISE.search(run.error))
        )
        out.append(Outcome(run, fixed_by, retry))
    return out


def resolved_targets(runs: Sequence[Run]) -> set[str]:
    """The targets the runs succeeded on: a failure an earlier summary carried as open is
    fixed once its target is among them."""
    done = {t for r in runs if not r.failed for t in targets_done(r)}
    # a real run answers its information runs too (``pytest tests/`` a ``pytest --version``)
    return done | {"info:" + t for t in done if not t.startswith("info:")}


def targets_done(run: Run) -> set[str]:
    """What a successful run acted on: its target, and each step's of a line that chains them
    with ``&&`` (every step ran and succeeded: ``cargo fmt && cargo clippy && cargo test``
    fixes a clippy failure)."""
    done = {target_of(run)}
    if _is_command_line(run) and not _PATCH.search(run.command):
        line = shell_line(run.command)
        done |= {command_target(step) for step in line.split("&&") if step.strip()}
    return done


def _answered(target: str, done: set[str]) -> bool:
    """A failure's ``target`` is among what a success acted on (``done``): the same target,
    or an information run's (``pytest --version``) whose command then really ran and passed;
    never the other way."""
    return target in done or (target.startswith("info:") and target[len("info:") :] in done)


def failed_turn_error(m: Message) -> str | None:
    """The error a model turn ended with, as its runtime recorded it (Pi's ``stopReason``
    "error" with its ``errorMessage``: "Request timed out."), or None."""
    details = m.details if isinstance(m.details, dict) else {}
    error = details.get("errorMessage")
    if m.role != "assistant" or details.get("stopReason") != "error" or not isinstance(error, str):
        return None
    return " ".join(error.split())[:200] or None
