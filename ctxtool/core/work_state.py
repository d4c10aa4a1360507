"""Where the work stands at a cut, and what the user's words are (pure; plain strings in).

A continuing agent needs the goal as the work names it (a plan's heading and number, an
issue's title and number, a command's arguments), the work that remains (open tasks, the
agent's last "next: …"), and nothing the span has overtaken: a task completed later, a next
step already reported done, a carried summary's pending item the span finished. The user's
words need their label: a rejected option is no decision, a one-off order is no standing
constraint, and a later instruction that overrides an earlier one replaces it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .keyed_patterns import KeyedPattern

# -- the goal ---------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(
    r"<[a-z][\w -]{0,40}>|\{\{?\s*[a-z_]\w*\s*\}?\}|\$ARGUMENTS\b|\[TODO\]", re.I
)
_URL_ONLY = re.compile(r"^\s*<?https?://\S+>?\s*$")
_ISSUE_URL = re.compile(
    r"https?://[^\s/]+/([\w.-]+)/([\w.-]+)/(issues|pull|pulls|merge_requests)/(\d+)"
)
# The user complaining about text they pasted: what they quote is what they reject.
_COMPLAINT = re.compile(
    r"\b(this is wrong|that'?s wrong|is wrong|not what i (asked|wanted)|you (said|wrote|answered)|"
    r"wrong answer|incorrect|doesn'?t make sense|makes no sense|why did you|that'?s not|nonsense|"
    r"bullshit|garbage|you got it wrong|this answer)\b",
    re.I,
)


def has_placeholder(text: str) -> bool:
    """A template's unfilled slot (``<title>``, ``{{name}}``, ``$ARGUMENTS``)."""
    return bool(_PLACEHOLDER.search(text))


def without_placeholders(text: str) -> str:
    """The text with its unfilled slots and the brackets around them taken out."""
    text = re.sub(r"\(\s*(?:" + _PLACEHOLDER.pattern + r")\s*\)", "", text, flags=re.I)
    return " ".join(_PLACEHOLDER.sub("", text).split()).strip(" :-")


def is_bare_url(text: str) -> bool:
    return bool(_URL_ONLY.match(text))


def issue_reference(url: str) -> str | None:
    """``owner/repo#42`` (``!42`` for a merge request) of an issue or pull-request URL."""
    found = _ISSUE_URL.search(url)
    if not found:
        return None
    owner, repo, kind, number = found.groups()
    return f"{owner}/{repo}{'!' if kind == 'merge_requests' else '#'}{number}"


def own_words(text: str) -> str:
    """A request without what the user quoted in it (``>`` lines, fenced blocks, a long
    passage in quotation marks): the user's own words."""
    if not any(mark in text for mark in ("```", "~~~", ">", '"', "“")):
        return " ".join(text.split())  # nothing quoted: each step below would leave it as it is
    text = re.sub(r"(?ms)^[^\S\n]*(```|~~~).*?(^[^\S\n]*\1|\Z)", " ", text)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(">"))
    text = re.sub(r"[\"“]([^\"”]{120,})[\"”]", " ", text)
    return " ".join(text.split())


def quotes_to_reject(text: str) -> bool:
    """The user pasted text to complain about it: what they quoted is no request of theirs."""
    own = own_words(text)
    return own != " ".join(text.split()) and bool(_COMPLAINT.search(own))


@dataclass(frozen=True)
class GoalSource:
    """What the goal may be read from, the firmest first: a plan file's heading and number,
    an issue or PR's title and number, the invoked command and its arguments, the first
    request."""

    plan_title: str | None = None
    plan_number: str | None = None
    issue_title: str | None = None
    issue_number: str | None = None
    command: str | None = None
    arguments: str | None = None
    first_request: str | None = None


def goal_of(source: GoalSource) -> str | None:
    """The goal as the work names it, never a placeholder, a bare URL or text the user
    quoted to reject."""
    for title, number in (
        (source.plan_title, source.plan_number),
        (source.issue_title, source.issue_number),
    ):
        if title and not has_placeholder(title):
            return f"{title} ({number})" if number and number not in title else title
    args = source.arguments
    if args and (has_placeholder(args) or is_bare_url(args)):
        ref = issue_reference(args) if is_bare_url(args) else None
        args = ref or without_placeholders(args) or None
    if source.command:
        command = without_placeholders(source.command)
        return " ".join(p for p in (command, args) if p) or None
    request = source.first_request
    if request:
        if quotes_to_reject(request):
            request = own_words(request)
        if is_bare_url(request):
            return issue_reference(request) or request.strip()
        return without_placeholders(request) or None
    return args


# -- remaining work ------------------------------------------------------------------------------

_REPORTED_DONE = re.compile(
    r"(^|\b)(all done|done[.!]|is (now )?(complete|done|finished)|are (now )?(complete|done)|"
    r"(have|has|i'?ve) (now |successfully )?(finished|completed|implemented|fixed|pushed|"
    r"merged|released|created|built|written|set up)|"
    r"successfully (implemented|completed|pushed|merged|released|deployed|created|built)|"
    r"is (now )?ready (for use|to use)|"
    # a report's heading line: "**SFX added:**", "Bug fixed."
    r"^[^\w\n]*\w[\w .-]{0,40} (added|fixed|updated|removed|implemented|created)[^\w\n]*$|"
    r"everything (is )?(in place|done)|all \w+ (tests )?pass(ed)?|changes made:|"
    # a closing report that opens with what it did ("Updated only JavaScript as requested")
    r"\A\s*(updated|implemented|fixed|created|refactored|removed|added|committed|pushed) "
    r"\S+[^\n?]*$)|✅",
    re.I | re.M,
)
# "Next I'm …" says the next step as surely as "next, I'll …"; "now I'm …" narrates the present.
_NEXT = re.compile(
    r"(?:\bnext(?: step)?s?\s*[:—-]\s*(?P<a>[^\n]{3,200})|"
    r"\b(?P<b>[A-Z]{1,5}-?\d+[\w.-]*)\s+(?:is\s+)?next\b|"
    r"\bnext,?\s+i(?:['\u2019](?:ll|m)| will| am)\s+(?P<c>[^\n.]{3,200})|"
    r"\b(?:then|now),? i(?:['\u2019]ll| will)\s+(?P<d>[^\n.]{3,200}))",
    re.I,
)


def reported_done(statement: str) -> bool:
    """The agent's words report the work finished ("All done", "is complete", "I've pushed")
    and name no next step."""
    return bool(_REPORTED_DONE.search(statement)) and not stated_next(statement)


def stated_next(statement: str) -> str | None:
    """The agent's last stated next step ("Next: wire the CLI", "WP14 next", "next, I'll …")."""
    found = list(_NEXT.finditer(statement))
    if not found:
        return None
    last = found[-1]
    text = next(g for g in last.groups() if g)
    if last.group("b"):
        return f"{text} next"
    return text.strip().rstrip(".")


_WORD = re.compile(r"[a-z0-9][\w./-]{2,}", re.I)
_COMMON = frozenset({"the", "and", "for", "with", "from", "into", "that", "this", "add", "fix"})


def _terms(text: str) -> set[str]:
    return {w.lower().strip("./-") for w in _WORD.findall(text)} - _COMMON


def same_work(a: str, b: str, share: float = 0.6) -> bool:
    """Two descriptions of one piece of work: most of the shorter one's words are the
    other's."""
    ta, tb = _terms(a), _terms(b)
    small = min(len(ta), len(tb))
    return small > 0 and len(ta & tb) / small >= share


# A task's numbering ("Phase 10:", "Step 3 -", "2.") names no part of its action.
_TASK_NUMBER = re.compile(r"^\s*(?:(?:phase|step|part|stage|task)\s*)?\d+[a-z]?\s*[:.)-]\s*", re.I)
_ACTION_WORD = re.compile(r"[a-z0-9]+", re.I)
_FILLER = frozenset(
    {"a", "an", "the", "and", "or", "to", "for", "of", "with", "via", "in", "on", "it", "all"}
)
# Quoted text and heredocs of a command (a commit message) say what it wrote, not what it did.
_QUOTED = re.compile(r"\$\((?:[^()]|\([^()]*\))*\)|\"(?:[^\"\\]|\\.)*\"|'[^']*'", re.S)


def _action_words(text: str) -> list[str]:
    return [w for w in _ACTION_WORD.findall(text.lower()) if w not in _FILLER]


def _same_word(a: str, b: str) -> bool:
    """One word in two forms ("submit", "submitted"; "push", "pushing"): equal, or one the
    other's start when both have at least four letters."""
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 4 and long_.startswith(short[: max(4, min(len(short), 6))])


def done_by_action(task: str, actions: Sequence[str]) -> bool:
    """An open task that a later successful call carried out: every word of the task's action
    (its numbering aside; two words at least, five at most) is a word of one call, its command
    line (quoted text and heredocs left out: a commit message is no action) or the purpose the
    agent gave it. "Phase 10: Submit PR" is done by ``erk pr submit``; "Write tests" by no
    ``pytest`` run."""
    words = _action_words(_TASK_NUMBER.sub("", task))
    if not 2 <= len(words) <= 5:
        return False
    for action in actions:
        done = _action_words(_QUOTED.sub(" ", action))
        if all(any(_same_word(w, d) for d in done) for w in words):
            return True
    return False


_MADE = re.compile(
    r"^\W*(?:\[ \]\s*)?(?:\d+[.)]\s*)?(?:create|add|write|copy|scaffold|generate)\b", re.I
)
_NAMED_PATH = re.compile(r"`([^`\s]*[/.][^`\s]*)`|((?:[\w.@-]+/)+[\w.@-]*\w)")


def done_by_file(item: str, changed: Sequence[str]) -> bool:
    """A pending item that makes a file ("Create `src/cli-new.ts` pointing to main-new.ts")
    whose file, or a file under whose directory, the span changed."""
    if not _MADE.match(item):
        return False
    named = [a or b for a, b in _NAMED_PATH.findall(item)]
    first = named[0].strip("/") if named else ""
    if not first or first.startswith("http"):
        return False
    return any(
        path.rstrip("/") == first or path.endswith("/" + first) or f"/{first}/" in path
        for path in changed
    )


# A step that changes a file by its verb, and the first file it names, bare or with a path
# ("remove the old remaining files (main.ts, cli.ts)"). Only a step that asks to remove a file
# is done by its deletion: "create a new interactive-mode.ts" is not done by ``rm`` of the old.
_CHANGING_VERBS = [
    "remove",
    "delete",
    "rename",
    "move",
    "update",
    "edit",
    "change",
    "add",
    "create",
    "write",
    "fix",
]
_REMOVING_VERBS = ["remove", "delete"]
TYPO_VERB_LETTERS = 5  # a verb this long is read through one swap of adjacent letters


def _typed(verbs: Sequence[str]) -> re.Pattern[str]:
    """The verbs, and each of at least ``TYPO_VERB_LETTERS`` letters with two adjacent
    letters swapped (the commonest slip of a typist: "remoev", "udpate")."""
    forms = dict.fromkeys(verbs)
    for verb in verbs:
        if len(verb) >= TYPO_VERB_LETTERS:
            for i in range(len(verb) - 1):
                forms[verb[:i] + verb[i + 1] + verb[i] + verb[i + 2 :]] = None
    return re.compile(r"\b(?:" + "|".join(sorted(forms, key=len, reverse=True)) + r")\b", re.I)


_CHANGING = _typed(_CHANGING_VERBS)
_REMOVING = _typed(_REMOVING_VERBS)
# A step that opens with an article names the thing the step before asks for ("…, and add a
# code map to AGENTS.md, and a DEVELOPMENT.md …"): it takes that step's verb.
_ARTICLE_LED = re.compile(r"^\W*(?:a|an|the)\s", re.I)
_FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w.@-]+/)*[\w@-][\w.@-]*\.[A-Za-z]\w{0,5})(?![\w/-])")


def changed_named_file(
    step: str, changed: Sequence[str], deleted: Sequence[str] = (), verb: str | None = None
) -> bool:
    """A step that changes a file (``_CHANGING``, or ``verb``: the step before's, for a step
    that opens with an article) whose first named file the span wrote (``changed``), or
    deleted (``deleted``) when the step asks to remove it: "remove the old files (main.ts,
    cli.ts)" after ``rm main.ts``; or a step that opens with the file it makes
    ("lib/constants.ts — PROGRAM_ID, …"). ``changed`` and ``deleted``: the files changed
    since the request, not before it (an earlier turn's edit does no step of a later ask)."""
    found = _CHANGING.search(step)
    if found is None and verb and _ARTICLE_LED.match(step):
        step = f"{verb} {step}"
        found = _CHANGING.match(step)
    named = _FILE_NAME.search(step, found.end()) if found else None
    if named is None:  # a step that is a file to make ("2. lib/constants.ts — PROGRAM_ID, …")
        named = _FILE_NAME.match(_TASK_NUMBER.sub("", step.strip("-*` ")))
    if named is None:
        return False
    name = named.group(1)
    gone = deleted if found and _REMOVING.fullmatch(found.group(0)) else ()
    return any(p == name or p.endswith(("/" + name, "\\" + name)) for p in [*changed, *gone])


def _verb_of(step: str) -> str | None:
    """The verb by which a step changes a file (``_CHANGING``), None when it names none."""
    found = _CHANGING.search(step)
    return found.group(0).lower() if found else None


def retired(pending: Sequence[str], finished: Sequence[str]) -> list[bool]:
    """For each pending item (a carried summary's, a stated next step): whether the span
    finished it (a task completed later names the same work)."""
    return [any(same_work(p, f) for f in finished) for p in pending]


# A plan left behind: the agent stopped updating its list while its work went on for this
# many calls, and its words since report checks passing.
STALE_PLAN_CALLS = 30
_CHECKS_PASS = re.compile(
    r"\b(tests?|checks?|builds?|clippy|lint)\b[^.\n]{0,100}?\b(now )?pass(es|ed)?\b", re.I
)


def stale_plan_done(
    items: Sequence[str], words_since: Sequence[str], calls_since: int
) -> list[bool]:
    """For each item of the agent's plan (in its order), whether the span finished it though
    the plan says otherwise: the plan was not updated for ``STALE_PLAN_CALLS`` calls or more
    (``calls_since``) while the agent's words since (``words_since``) report checks passing,
    and a report since names the item's work, or a later item's (a plan is done in order:
    the steps before a finished one were done first). ``retired`` compares the work; a named
    subject goes by ``finished_by_report``."""
    if calls_since < STALE_PLAN_CALLS or not any(_CHECKS_PASS.search(w) for w in words_since):
        return [False] * len(items)
    reports = [t for w in words_since for label, t in report_parts(w) if label == REPORT]
    named = [
        any(same_work(item, r, 0.4) for r in reports) or finished_by_report(item, words_since)
        for item in items
    ]
    last = max((i for i, done in enumerate(named) if done), default=-1)
    return [i <= last for i in range(len(items))]


# -- the user's words ----------------------------------------------------------------------------

# Led by a lookahead of its alternatives' first letters (d, h, i, n, s, t, u, y): the re module
# passes over the other positions at once instead of trying each alternative there.
_REJECTION = re.compile(
    r"(?=[dhinstuy])\b(na+h+|nope|no,? (that'?s|this is|it'?s) (horrible|terrible|awful|bad|ugly|wrong|not it)|"
    r"that'?s (horrible|terrible|awful|ugly|bad)|(i )?(don'?t|do not) (like|want) (that|this|it)|"
    r"(i )?hate (that|this|it)|ugh|yuck|scrap (that|this|it)|not that|no way)\b",
    re.I,
)
_STANDING = re.compile(
    r"\b(always|never|from now on|every ?time|whenever|each time|in general|by default|"
    r"going forward|in future|must|should always|don'?t ever|only ever)\b",
    re.I,
)
_ONE_OFF = re.compile(
    r"^\s*(please\s+|now\s+|ok,?\s+|okay,?\s+|then\s+)?(let'?s|go ahead and|can you|could you|"
    r"(do|make|cut|tag|ship|push|commit|merge|deploy|publish|release|run|bump|build|open|create|"
    r"rebase|squash|revert|restart|install|update|upgrade)\b)",
    re.I,
)
_OVERRIDE = re.compile(
    r"\b(instead|actually|scratch that|forget (that|it|what i said)|on second thought|"
    r"change of plan|no longer|rather than|not anymore|any more)\b",
    re.I,
)
_NEGATION = re.compile(r"\b(no|not|never|don'?t|do not|stop|without|avoid)\b", re.I)


# Every rejection holds one of these words: a sentence without them is passed over unsearched.
_REJECTION_KEYED = KeyedPattern(
    _REJECTION, ("na", "no", "that", "don", "hate", "ugh", "yuck", "scrap")
)


def is_rejection(sentence: str) -> bool:
    """The user turning an option down ("custom tool nahhh", "no, that's horrible")."""
    return bool(_REJECTION_KEYED.search(sentence))


def is_one_off(sentence: str) -> bool:
    """An order for one action now ("let's do a new release"), not a rule that stands."""
    return bool(_ONE_OFF.match(sentence)) and not _STANDING.search(sentence)


def overrides(earlier: str, later: str) -> bool:
    """A later instruction replaces an earlier one: it is about the same thing and says
    "instead"/"actually", or it turns the earlier one's polarity round."""
    if not same_work(earlier, later, 0.5):
        return False
    if _OVERRIDE.search(later):
        return True
    return bool(_NEGATION.search(earlier)) != bool(_NEGATION.search(later))


def superseded(instructions: Sequence[str]) -> list[int | None]:
    """For each instruction, the index of the later one that replaces it (None: it stands)."""
    out: list[int | None] = []
    for i, earlier in enumerate(instructions):
        out.append(
            next(
                (j for j in range(i + 1, len(instructions)) if overrides(earlier, instructions[j])),
                None,
            )
        )
    return out


# -- what the user's words state: a rule or a decision, or something else ----------------------

# A plan's step ("**Phase 1**: Sufficiency check", "Step 2 - build"): work to do, no rule.
_PLAN_STEP = re.compile(r"^\W*(?:phase|step|stage|part)\s*\d+[a-z]?\b[*_\s]*[:.)—–-]", re.I)
# The user asking the agent for work ("I want you to research that", "Can you …").
_ASKS_AGENT = re.compile(
    r"^\W*(?:(?:so|and|also|ok|okay|now),?\s+)?(?:(?:i|we) (?:want|need|would like|'d like) you to|"
    r"(?:can|could|would) you|please)\b",
    re.I,
)
WRAPPED_LINE = 70  # a line this long that ends with no mark goes on in the next


def is_plan_step(sentence: str) -> bool:
    """A step of a plan ("**Phase 1**: Sufficiency check …"): work to do, not a rule."""
    return bool(_PLAN_STEP.match(sentence))


def asks_the_agent(sentence: str) -> bool:
    """A request to the agent ("I want you to do a research on that as well."): what it is
    asked to do, not a decision taken."""
    return bool(_ASKS_AGENT.match(sentence))


def _goes_on(line: str, following: str) -> bool:
    """A long line ending with no mark, and a next line going on in lower case: one sentence
    wrapped (a pasted paragraph, voice typing without marks)."""
    return len(line) >= WRAPPED_LINE and line[-1:].isalnum() and following[:1].islower()


def cut_mid_sentence(sentence: str, source: str) -> bool:
    """The sentence is one line of a longer sentence ``source`` wraps over lines: the line
    before it goes on into it, or it goes on into the next. A piece of a sentence states no
    rule or decision."""
    lines = [" ".join(line.split()) for line in source.splitlines() if line.strip()]
    text = " ".join(sentence.split())
    for n, line in enumerate(lines):
        if line.startswith(text[:40]) and n and _goes_on(lines[n - 1], line):
            return True
        if line.endswith(text[-40:]) and n + 1 < len(lines) and _goes_on(line, lines[n + 1]):
            return True
    return False


# -- the agent's last words: what they report finished, what they leave open --------------------

REPORT, OPEN_PART, OTHER = "report", "open", "other"
# A sentence naming work still to do: a plan, the work under way, a question, an offer, a
# condition; and, weaker (a report may name what it fixed), a failure or a gap.
_LEFT_OPEN = re.compile(
    # "Now commit the files:", not "Now: crypto RNG" (a label), "now uses" nor "Now invalid
    # themes will:" (a new state)
    r"\?\s*\**\s*$|^\W*now,?\s+(?!\w+s\b|that\b|(?!i\b|we\b)[^.:\n]{0,60}?\bwill\b)\w|\b(i'?m|we'?re) (now )?\w+ing\b|"
    r"\b(next(?![.-]\w)|then i|let me|let'?s|i'?ll|i will|i'?m going to|going to|still|"
    r"remaining|remains? to|what remains|left to|not yet|pending|in progress|if you (want|need|prefer|like)|"
    r"should i|want me to|would you like|do you want|shall i|(?<!you )needs? to|has to|"
    r"blocked|blocker|waiting|awaits?|after that)\b",
    re.I,
)
_GAP = re.compile(r"\b(fail(s|ed|ing|ure)?|broken|missing)\b", re.I)
# A sentence reporting work finished: the report phrases of ``reported_done``, a line opening
# with what was done ("- Added the scrubber"), a check that passed.
_FINISHED = re.compile(
    r"^\W*(added|updated|created|fixed|removed|deleted|generated|wrote|written|implemented|"
    r"refactored|moved|renamed|committed|pushed|merged|installed|replaced|changed|configured|"
    r"built|ran|verified|tested|cleaned|extracted|converted|migrated|enabled|disabled|wired|"
    r"rewrote|restored|reverted|bumped|released|published|deployed|documented|split|"
    r"simplified|saved|set up)\b|"
    r"\b(pass(es|ed|ing)|succeed(s|ed)|succeeded|worked|works now|now works|is (now )?(done|complete|"
    r"completed|finished|ready|in place|fixed|live|green)|are (now )?(done|complete|in place|"
    r"fixed|green)|what i (changed|did)|changes made|summary of (the )?changes|"
    r"\b(tests?|checks?|builds?) (all )?pass\b|"
    r"(i'?ve|i have|we'?ve|has been|have been|was|were|is|are) (now |successfully |also )?"
    r"(added|updated|created|fixed|removed|deleted|generated|written|implemented|refactored|"
    r"moved|renamed|committed|pushed|merged|installed|replaced|changed|configured|built|"
    r"verified|tested|wired|set up|completed|finished)|i (added|updated|created|fixed|removed|"
    r"deleted|generated|wrote|implemented|refactored|moved|renamed|committed|pushed|merged|"
    r"installed|replaced|changed|configured|built|ran|verified|tested|wired|set up))\b|✅|✓|"
    # "WP15 complete.", "**Phase 1 complete**:", not "complete CRUD operations"
    r"\b(complete|completed|done|finished)\b(?!\s+\w)",
    re.I,
)
# A sentence ends at ". " after a word or a closing mark, never after a list's number ("1. ").
_SENTENCE = re.compile(r"(?<=[a-z)\]`'\"*][.!])\s+(?=[A-Z*`\"(])")


# Where a sentence that reports one thing and leaves another open divides: "The build passes,
# so let me commit", "Pushed the branch; want me to open the PR?"
_CLAUSE = re.compile(
    r"(?<=[;,:—])\s+(?=(?:so|and|but|now|then|next|let|i'?ll|want|should)\b)|(?<=;)\s+", re.I
)


def _parts_of(sentence: str) -> list[tuple[str, str]]:
    """The sentence's label, or its clauses' labels when it both reports and leaves open."""
    label = _part_of(sentence)
    if label != OPEN_PART or not (_FINISHED.search(sentence) or _REPORTED_DONE.search(sentence)):
        return [(label, sentence)]
    return [(_part_of(c), c) for c in _CLAUSE.split(sentence) if c.strip()]


def _part_of(sentence: str) -> str:
    if _LEFT_OPEN.search(sentence):
        return OPEN_PART
    if _FINISHED.search(sentence) or _REPORTED_DONE.search(sentence):
        return REPORT
    return OPEN_PART if _GAP.search(sentence) else OTHER


def report_parts(words: str) -> list[tuple[str, str]]:
    """The agent's words, line by line and sentence by sentence within a line, each labelled
    ``report`` (it says work finished: "Build passes.", "- Added the scrubber"), ``open`` (it
    names work still to do: a plan, "Now commit …", a question, "the raw file still exists")
    or ``other`` (a finding). A line ending in ":" takes the label of the line it introduces,
    and a line it introduces that is no sentence (a path, a command) takes its label. Adjacent
    sentences with one label are joined again: ``[(label, text), …]`` in order."""
    pieces: list[tuple[str, str, bool]] = []  # (label, text, starts a line)
    for line in words.splitlines():
        if not line.strip():
            continue
        for n, sentence in enumerate(_SENTENCE.split(line.strip())):
            for m, (label, text) in enumerate(_parts_of(sentence)):
                pieces.append((label, text, n == 0 and m == 0))
    # a heading line ("What I changed:", "Important:") labels what it introduces and is
    # labelled by it; what it introduces that is no sentence (a path, code) follows its label
    for i in range(len(pieces) - 2, -1, -1):
        label, text, starts = pieces[i]
        if label == OTHER and text.rstrip("*").endswith(":") and pieces[i + 1][2]:
            pieces[i] = (pieces[i + 1][0], text, starts)
    for i in range(1, len(pieces)):
        label, text, starts = pieces[i]
        before = pieces[i - 1][1].rstrip("*")
        if starts and label == OTHER and before.endswith(":") and not _is_list_item(text):
            pieces[i] = (pieces[i - 1][0], text, starts)
    # the list a heading introduces goes with it: its items that are no sentence of their own
    # kind ("1. Run the tests" under "Next steps:") take the heading's label
    heading = None
    for i, (label, text, starts) in enumerate(pieces):
        if starts and text.rstrip("*").endswith(":") and not _is_list_item(text):
            heading = label
        elif starts and not _is_list_item(text):
            heading = None
        elif starts and heading not in (None, OTHER) and label == OTHER:
            pieces[i] = (heading, text, starts)
    out: list[tuple[str, str]] = []
    for label, text, starts in pieces:
        if out and out[-1][0] == label:
            out[-1] = (label, out[-1][1] + ("\n" if starts else " ") + text)
        else:
            out.append((label, text))
    return out


def _is_list_item(text: str) -> bool:
    return bool(re.match(r"^\s*([-*+]|\d+[.)])\s", text))


# A name that picks out one piece of work: a numbered item (WP15, FW-005, #42, Phase 7), a file
# name with its extension, a name in backticks.
_IDENTIFIER = re.compile(
    r"`([^`\s]{3,60})`|\b((?:phase|step|part|stage|task|issue|pr|wp)\s?-?\d+[a-z]?)\b|"
    r"(#\d+)\b|\b([A-Z]{1,6}-?\d+[\w.-]*)|\b([\w-]+\.(?:py|ts|tsx|js|jsx|mjs|md|json|toml|yml|"
    r"yaml|rs|go|java|kt|rb|sh|ps1|html|css|sql|txt))\b",
    re.I,
)


def subject_of(item: str) -> str | None:
    """The first name in a pending item that picks out its work ("WP15", "`cli-new.ts`")."""
    found = _IDENTIFIER.search(_TASK_CHECKBOX.sub("", item))
    if not found:
        return None
    return next(g for g in found.groups() if g).lower()


_TASK_CHECKBOX = re.compile(r"^\W*\[(?: |x|in progress)\]\s*", re.I)


def finished_by_report(item: str, statements: Sequence[str]) -> bool:
    """A pending item whose subject the agent's words last name in a report of finished work
    ("WP15 complete", "Committed `cli-new.ts`"), not in a sentence leaving it open: the span
    finished it. ``statements``: the agent's words in order."""
    subject = subject_of(item)
    if subject is None:
        return False
    last = None
    pattern = re.compile(r"(?<![\w-])" + re.escape(subject) + r"(?![\w-])", re.I)
    for words in statements:
        if subject not in words.lower():
            continue
        for label, text in report_parts(words):
            if pattern.search(text):
                last = label
    return last == REPORT


# -- what the user typed, apart from what the runtime put in their message ----------------------

# A runtime's notice in the user's message ("System: [2026-03-06 21:42:42 GMT+8] Exec failed
# (dawn-pra, code 1) :: …"), the message's id trailer, and the time stamp before their words.
_NOTICE_LINE = re.compile(r"^[ \t]*System:[ \t]*\[[^\]\n]{6,40}\][^\n]*$", re.M)
_MESSAGE_ID = re.compile(r"^[ \t]*\[message_id:[^\]\n]*\][ \t]*$", re.M | re.I)
_STAMP = re.compile(
    r"^[ \t]*\[(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,? \d{4}-\d\d-\d\d[^\]\n]{0,24}\][ \t]*",
    re.M | re.I,
)


def users_own_words(text: str) -> str:
    """A user message without the runtime's notices in it (a command's exit reported as
    "System: [time] Exec failed …"), its message id and its time stamp: what the user typed.
    Empty when the message is only notices."""
    if "System:" not in text and "[" not in text:
        return text
    own = _STAMP.sub("", _MESSAGE_ID.sub("", _NOTICE_LINE.sub("", text)))
    return (
        "\n".join(line for line in own.strip().splitlines() if line.strip())
        if own != text
        else text
    )


# -- the latest request's steps, and those the span has not done --------------------------------

# A request's own list of steps: "**Phase 3**: Fetch and cite", "Step 2 -", "1.", "- ".
_STEP_LINE = re.compile(
    r"^\s*(?:[-*+]\s+|\d+[.)]\s+|\**(?:phase|step|stage|part)\s*\d+[a-z]?\**\s*[:.)-])", re.I
)
_LABELLED_STEP = re.compile(r"^\s*\**(?:phase|step|stage)\s*\d+[a-z]?\**\s*[:.)-]", re.I)
MAX_LISTED_REQUEST = 1_200
# Where a request in prose goes on to a later step: "…, then update X", "After that, help …",
# and its closing step: "When you're satisfied …, submit", "Finally, …".
_LATER_STEP = re.compile(
    r"(?:[,;.:]\s+(?:and\s+)?|\s+and\s+)(then|after that|afterwards|finally|once (?:that|this|it|you)|"
    r"when (?:you'?re|you are|that'?s|it'?s) (?:done|satisfied|finished))\b,?\s*",
    re.I,
)


def request_steps(request: str) -> list[str]:
    """The steps of a request, in order: its own list of steps when it has one (a plan's
    phases, a numbered or bulleted list); in prose, the later steps it signposts ("…, then
    update X", "After that, help decide Y", "When you're satisfied …, submit"), each up to the
    end of its sentence."""
    lines = [line.strip() for line in request.splitlines() if line.strip()]
    labelled = [line for line in lines if _LABELLED_STEP.match(line)]
    if len(labelled) >= 2:
        return labelled
    listed = [line for line in lines if _STEP_LINE.match(line)]
    # a short request's list is its steps; a long one's (a template's tips) may be anything
    if len(listed) >= 2 and len(request) <= MAX_LISTED_REQUEST:
        return listed
    text = " ".join(request.split())
    out = []
    for found in _LATER_STEP.finditer(text):
        rest = text[found.end() :]
        end = re.search(
            r"(?<=[.!?])\s|(?:[,;.]\s*|\s)(?:and\s+)?(?:then|after that|finally)\b", rest
        )
        step = rest[: end.start()] if end else rest
        lead = found.group(1)
        if lead.lower().startswith(("once", "when")):
            step = f"{lead} {step}"
        if step.strip(" .,;"):
            out.append(step.strip().rstrip(",;"))
    return out or _joined_steps(text)


# A request in prose that strings its asks together with ", and …" at least twice
# ("remove the old files, and add a code map to AGENTS.md, and a DEVELOPMENT.md …").
_AND_JOIN = re.compile(r",\s+and\s+(?:also\s+)?", re.I)
MIN_JOINED = 3


def _joined_steps(text: str) -> list[str]:
    """The asks of one prose sentence joined by ", and" (``MIN_JOINED`` or more), in order:
    a request that lists its steps without numbers."""
    sentences: list[str] = []
    for part in re.split(r"(?<=[.!?])\s+", text):
        if sentences and sentences[-1].count("(") > sentences[-1].count(")"):
            sentences[-1] += " " + part  # "(… right? nothing else)" ends no sentence
        else:
            sentences.append(part)
    for sentence in sentences:
        parts = [p.strip(" .") for p in _AND_JOIN.split(sentence)]
        if len(parts) >= MIN_JOINED and all(len(p.split()) >= 2 for p in parts):
            return parts
    return []


# The agent saying what it will do ("I'll rename …", "Let me …", "Next I'm …") and the later
# step it names after "then" in the same sentence ("…, then run a quick syntax check again").
_PLANNING = re.compile(
    r"\b(?:i(?:['\u2019]ll| will| am going to|['\u2019]m going to)|let me|next,? i(?:['\u2019]m| am))\s",
    re.I,
)
_THEN_STEP = re.compile(
    r"(?:,\s*|\s)(?:and\s+)?then,?\s+(?:i(?:['\u2019]ll| will)\s+)?(?P<step>(?:[^\n.;!?]|\.(?=\w)){3,160})",
    re.I,
)


def planned_steps(statements: Sequence[str]) -> list[str]:
    """The later steps the agent's words plan, in order: in a sentence where it says what it
    will do, each part after "then" ("I'll rename the files …, then run a quick syntax check
    again" plans "run a quick syntax check again")."""
    out = []
    for words in statements:
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", words):
            planning = _PLANNING.search(sentence)
            if planning is None:
                continue
            for found in _THEN_STEP.finditer(sentence, planning.end()):
                step = found.group("step").strip().rstrip(",:")
                if step not in out:
                    out.append(step)
    return out


def steps_left(
    steps: Sequence[str],
    statements: Sequence[str],
    actions: Sequence[str] = (),
    changed: Sequence[str] = (),
    deleted: Sequence[str] = (),
) -> list[str]:
    """The steps the span has not done: not one its agent's words last report finished
    ("Phase 1 complete"), that a successful run carried out, or that made a file it wrote
    (``changed``) or removed one it deleted (``deleted``), both since the request. Each step
    is judged on its own: only a plan's phase the agent reports finished ("Phase 3 complete")
    says the phases before it are done too (a plan goes in order); a file written for a later
    step says nothing of the steps before it."""
    done, reported = [], []
    verb = None
    for step in steps:
        by_report = finished_by_report(step, statements)
        reported.append(by_report and bool(_LABELLED_STEP.match(step)))
        done.append(
            by_report
            or done_by_action(step, actions)
            or done_by_file(step, changed)
            or changed_named_file(step, changed, deleted, verb)
        )
        verb = _verb_of(step) or (verb if _ARTICLE_LED.match(step) else None)
    last = max((n for n, r in enumerate(reported) if r), default=-1)
    return [s for n, s in enumerate(steps) if n > last and not done[n]]


# -- what edits bring into a file -----------------------------------------------------------------

# A name in code: snake_case, camelCase, PascalCase with two humps, a --flag, a kebab-name.
CODE_NAME = re.compile(
    r"(?<![\w-])(--[a-z][\w-]+|[A-Za-z]\w*_\w+|[a-z]+[A-Z]\w*|[A-Z][a-z]+[A-Z]\w*|"
    r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+)(?![\w-])"
)


def names_brought_in(new: str, old: str = "") -> list[str]:
    """The code names the new text has that the text it replaces had not, in order."""
    before = set(CODE_NAME.findall(old))
    return [n for n in dict.fromkeys(CODE_NAME.findall(new)) if n not in before]
