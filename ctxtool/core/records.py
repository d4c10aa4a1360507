"""The restored context of a session, built from plain records (no I/O).

Restored context = system prompt + the latest checkpoint's summary + every message of the session
from that checkpoint's ``first_kept_message_id`` on, in id order. Never the whole history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from .tokens import MessageText, api_calls

SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n"
)


@dataclass(slots=True)
class Message:
    """One row of agent_message, as the library passes it around. Slotted: a history loads
    100k of them, and a per-record ``__dict__`` was a tenth of that load's time."""

    id: int  # None only for a synthetic tool result (see ContextEntry)
    session_id: int
    role: str
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    token_count: int | None = None
    token_encoding: str | None = None
    created_at: datetime | None = None
    source_id: str | None = None
    details: dict[str, Any] | None = None

    def calls(self) -> list[dict[str, Any]]:
        """The tool calls in the shape an API accepts: ``{id, type: function, function: {name,
        arguments (a JSON string)}}``. A runtime may have written odd values (``{"a": 1}``,
        ``["call_1"]``, ``[null]``, ``42``): entries that are not objects are left out here
        (``validate`` reports them), so reading such a row never fails."""
        return api_calls(self.tool_calls)

    @property
    def call_ids(self) -> tuple[str, ...]:
        """The ids of the calls this message makes as sent (an assistant's only), each once; a
        call stored without an id has the id ``""`` (see :func:`pair_tool_calls`)."""
        if self.role != "assistant" or not isinstance(self.tool_calls, list):
            return ()
        # The ids api_calls gives, without building the calls (every pairing asks, for every
        # message: it was a fifth of planning a 600k-message session).
        return tuple(
            dict.fromkeys(
                i if isinstance(i := c.get("id"), str) else str(i or "")
                for c in self.tool_calls
                if isinstance(c, dict)
            )
        )

    def text(self) -> MessageText:
        return MessageText(self.role, self.content, self.name, self.calls() or None)

    def to_openai(self) -> dict[str, Any]:
        """This message as an OpenAI chat-completions message."""
        out: dict[str, Any] = {"role": self.role, "content": self.content or ""}
        calls = self.calls() if self.role == "assistant" else []
        if calls:
            out["tool_calls"] = calls
            if not self.content:
                out["content"] = None
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
        if self.name and self.role != "tool":
            out["name"] = self.name
        return out


# The details key where ctxtool records the newest message stored when it appended a
# checkpoint: the one before restored up to it while it was the latest.
MESSAGES_THROUGH = "messages_through"
# In a checkpoint's details: the checkpoint kept nothing when it was written (an agent's
# compaction that is its transcript's last record: everything before it summarized). Its cut is
# the id after that message, the session's last then, so every message appended later is kept;
# no message need hold the cut's id (ids are shared by all sessions).
KEPT_AFTER_MESSAGE = "kept_after_message"


@dataclass
class Compaction:
    """One checkpoint (row of agent_compaction)."""

    id: int
    session_id: int
    summary: str
    first_kept_message_id: int
    tokens_before: int | None = None
    parent_compaction_id: int | None = 0  # None: written by a runtime that records none
    summary_tokens: int | None = None
    tokens_after: int | None = None
    summarizer: str | None = None
    summarizer_model: str | None = None
    source_id: str | None = None
    details: dict[str, Any] | None = None
    created_at: datetime | None = None


@dataclass(frozen=True)
class SummarizedSpan:
    """The messages a checkpoint summarizes: ``from_id <= id < to_id`` of one session (no lower
    bound for a first checkpoint), how many and the sum of their ids. What the append proves
    still stored, and what `validate` compares later."""

    session_id: int
    from_id: int | None
    to_id: int
    count: int
    id_sum: int


@dataclass
class Session:
    session_id: int
    user_id: str | None = None
    project_id: str | None = None
    title: str | None = None
    model: str | None = None
    system_prompt: str | None = None
    source_format: str | None = None
    source_id: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    details: dict[str, Any] | None = None


# The content of the tool result ctxtool adds for a call that has none (see ContextEntry).
NO_RESULT_TEXT = "No result was recorded for this tool call."
# Prefix of a tool result whose call is not in the context, sent as a user message instead.
ORPHAN_RESULT_PREFIX = "Result of tool call {call_id} (the call itself is not in this context):\n"
# In that prefix for a result a runtime stored without a call id (never "None" in what is sent).
NO_CALL_ID = "with no recorded id"


def orphan_result_prefix(call_id: str | None) -> str:
    return ORPHAN_RESULT_PREFIX.format(call_id=NO_CALL_ID if call_id is None else call_id)


# The roles a chat API takes. A runtime writes the role column itself: a message stored with
# another (a legacy ``function``, an empty or made-up role) is sent as a user message saying so.
CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
FOREIGN_ROLE_PREFIX = "Message stored with role {role!r}, which is not a chat role:\n"


@dataclass(frozen=True, slots=True)
class ContextEntry:
    """One message of a context in the order an OpenAI-style API accepts it.

    Chat Completions rejects a list where an assistant's ``tool_calls`` are not answered, each
    by one ``tool`` message, before the next other message. Stored histories break that rule
    (an interrupted run, a Codex export filtered to the conversation, a notice written between a
    call and its result), so the list sent to a model is the stored messages with: a result
    recorded later moved up to right after its call (``moved``); a call with no result answered
    by a synthetic result saying so (``synthetic``, as Pi does for orphaned calls); a result
    whose call is not in the context sent as a user message (``orphan``); a message of a role
    no chat API takes sent as a user message (``foreign``).
    """

    message: Message
    synthetic: bool = False
    moved: bool = False
    orphan: bool = False
    foreign: bool = False

    @property
    def as_user(self) -> bool:
        """Sent as a user message that says what it was (its stored count does not apply)."""
        return self.orphan or self.foreign

    def to_openai(self) -> dict[str, Any]:
        if self.orphan:
            return {
                "role": "user",
                "content": orphan_result_prefix(self.message.tool_call_id)
                + (self.message.content or ""),
            }
        if self.foreign:
            return {
                "role": "user",
                "content": FOREIGN_ROLE_PREFIX.format(role=self.message.role)
                + (self.message.content or ""),
            }
        return self.message.to_openai()

    def text(self) -> MessageText:
        if self.as_user:
            return MessageText("user", self.to_openai()["content"])
        return self.message.text()


class ToolLinked(Protocol):
    """What pairing needs of a message: its role, the ids of the calls it makes, and the call
    a tool result answers (a :class:`Message`, or the planner's ``PlanMessage``)."""

    @property
    def role(self) -> str: ...

    @property
    def call_ids(self) -> tuple[str, ...]: ...

    @property
    def tool_call_id(self) -> str | None: ...


@dataclass
class ToolPairing:
    """Which tool result answers which call in a list of messages (by index in that list)."""

    # (index of the calling message, call id) -> index of the result that answers it
    answers: dict[tuple[int, str], int] = field(default_factory=dict)
    orphans: list[int] = field(default_factory=list)  # results of a call not before them
    duplicates: list[int] = field(default_factory=list)  # results of a call answered already
    unanswered: list[tuple[int, str]] = field(default_factory=list)  # (index, call id)


class ToolCallPairer:
    """The one pairing rule, fed one message at a time: a result answers the latest earlier
    call of its id still without one. Holds only the calls still unanswered, so a stream of a
    million messages is paired in the memory of its open calls. ``key`` names the calling
    message (an index in a list, or a message id)."""

    def __init__(self) -> None:
        self.pending: dict[str, list[Any]] = {}  # call id -> keys of its calls still unanswered

    def answer(self, m: ToolLinked) -> Any | None:
        """The key of the call message that the tool result ``m`` answers (None: none)."""
        call_id = m.tool_call_id
        callers = self.pending.get(call_id) if call_id is not None else None
        if not callers:
            return None
        caller = callers.pop()
        if not callers:
            del self.pending[call_id]  # type: ignore[arg-type]
        return caller

    def call(self, key: Any, m: ToolLinked) -> None:
        """Record the calls ``m`` makes."""
        for call_id in m.call_ids:
            self.pending.setdefault(call_id, []).append(key)

    def unanswered(self) -> list[tuple[Any, str]]:
        """(key, call id) of every call no result answered, in key order."""
        return sorted((k, cid) for cid, callers in self.pending.items() for k in callers)


def pair_tool_calls(messages: Sequence[ToolLinked]) -> ToolPairing:
    """The one pairing rule (:class:`ToolCallPairer`) over a list: the planner's safe cuts,
    ``validate`` and the restored context all read tool calls through it, so a cut never
    leaves what is sent with an orphan.

    A runtime may reuse a call id in a later turn. An id is any string, the empty one too: a
    call stored without an id is sent with the id ``""`` (``Message.calls``), so a result
    stored with ``tool_call_id=""`` answers it, and the two are kept on one side of every cut.
    A result with no ``tool_call_id`` at all answers nothing. ``messages`` in id order."""
    pairing = ToolPairing()
    pairer = ToolCallPairer()
    seen: set[str] = set()
    for i, m in enumerate(messages):
        if m.role == "tool":
            caller = pairer.answer(m)
            if caller is not None:
                pairing.answers[(caller, m.tool_call_id or "")] = i
            else:
                (pairing.duplicates if m.tool_call_id in seen else pairing.orphans).append(i)
        pairer.call(i, m)
        seen.update(m.call_ids)
    pairing.unanswered = pairer.unanswered()
    return pairing


class _ResultRun:
    """Where each message goes in the order sent, read in id order: a result that follows its
    call with only other results of that call between keeps its place (``in_place``); another
    answered result is ``moved`` up to its call; a result that answers nothing is an
    ``orphan``; a message of a role no chat API takes is ``foreign``; any other is a
    ``message``. Both passes of :class:`ToolResultPlacement` step through it alike."""

    def __init__(self) -> None:
        self.pairer = ToolCallPairer()
        self.caller: Any = _NO_CALLER  # the calling message whose results still follow it

    def step(self, key: Any, m: Message) -> tuple[str, Any]:
        """(what ``m`` is, the key of the call message it answers)."""
        if m.role == "tool":
            caller = self.pairer.answer(m)
            if caller is not None and caller == self.caller:
                return "in_place", caller
            self.caller = _NO_CALLER
            return ("orphan" if caller is None else "moved"), caller
        self.caller = key if m.call_ids else _NO_CALLER
        self.pairer.call(key, m)
        return ("message" if m.role in CHAT_ROLES else "foreign"), None


_NO_CALLER = object()


def synthetic_result(call: Message, call_id: str) -> ContextEntry:
    """The result ctxtool sends for a call of ``call`` that no stored result answers."""
    return ContextEntry(
        Message(
            None,  # type: ignore[arg-type]
            call.session_id,
            "tool",
            NO_RESULT_TEXT,
            tool_call_id=call_id,
            created_at=call.created_at,
        ),
        synthetic=True,
    )


class ToolResultPlacement:
    """:func:`answer_tool_calls` in two passes over messages in id order, for a context too long
    to hold: :meth:`scan` (the first) learns which results are recorded away from their call
    and which calls none answers; :meth:`entries` (the second) yields the entries in the
    order sent, fetching a moved result by its key when its call is reached. Holds only those
    results and calls (and the calls still open): a well-formed history leaves it empty."""

    def __init__(self) -> None:
        self.moved: dict[Any, dict[str, Any]] = {}  # caller key -> call id -> result key
        self.unanswered: dict[Any, set[str]] = {}  # caller key -> call ids never answered
        self._scan = _ResultRun()
        self._names: dict[tuple[Any, str], str | None] = {}  # open calls' tool names
        self._last: Message | None = None
        self._last_key: Any = _NO_CALLER  # the last message that is not a moved result
        self._run: tuple[Any, tuple[str, ...]] = (_NO_CALLER, ())  # its calling message

    @property
    def calls_open(self) -> bool:
        """A call scanned so far still waits for its result."""
        return bool(self._scan.pairer.pending)

    def scan(self, key: Any, m: Message) -> tuple[ContextEntry, str | None]:
        """First pass: the entry ``m`` is (a moved result flagged, in id order rather than
        at its call), with the name of the tool a result answers."""
        kind, caller = self._scan.step(key, m)
        self._last = m
        if kind != "moved":
            self._last_key = key
            if kind != "in_place":
                self._run = (key, m.call_ids)
        if kind in ("in_place", "moved"):
            call_id = m.tool_call_id or ""
            name = self._names.pop((caller, call_id), None)
            if kind == "moved":
                self.moved.setdefault(caller, {})[call_id] = key
            return ContextEntry(m, moved=kind == "moved"), name
        if kind == "orphan":
            return ContextEntry(m, orphan=True), None
        for call in m.calls() if m.call_ids else ():  # the last of a reused id, as ItemMaker
            self._names[(key, call["id"])] = call["function"]["name"]
        return ContextEntry(m, foreign=kind == "foreign"), None

    def finish(self) -> list[tuple[ContextEntry, str | None]]:
        """End of the first pass: the synthetic results (with their tools' names), in order."""
        out = []
        for key, call_id in self._scan.pairer.unanswered():
            self.unanswered.setdefault(key, set()).add(call_id)
            assert self._last is not None, "a call was read"
            call = Message(None, self._last.session_id, "assistant")  # type: ignore[arg-type]
            out.append((synthetic_result(call, call_id), self._names.get((key, call_id))))
        self._names.clear()
        return out

    def last_sent(self) -> tuple[bool, Any]:
        """After :meth:`finish`: (whether anything is sent, the key of the entry sent last;
        None for a synthetic result): the last message not moved, or the last result moved
        up to, or made for, its calling message."""
        if self._last_key is _NO_CALLER:
            return False, None
        key, call_ids = self._run
        moved, missing = self.moved.get(key, {}), self.unanswered.get(key, ())
        tail = [moved.get(c) for c in call_ids if c in moved or c in missing]
        return True, tail[-1] if tail else self._last_key

    def entries(
        self,
        keyed: Iterable[tuple[Any, Message]],
        fetch: Callable[[list[Any]], Mapping[Any, Message]],
    ) -> Iterator[ContextEntry]:
        """Second pass: the entries in the order sent. ``fetch`` (keys -> messages) brings the
        results moved up to a call, when the call is reached."""
        run = _ResultRun()
        tail: tuple[Any, Message] | None = None  # a call whose moved or missing results follow
        for key, m in keyed:
            kind, _ = run.step(key, m)
            if kind == "in_place":
                yield ContextEntry(m)
                continue
            if tail is not None:
                yield from self._tail(*tail, fetch)
                tail = None
            if kind == "orphan":
                yield ContextEntry(m, orphan=True)
            elif kind != "moved":
                yield ContextEntry(m, foreign=kind == "foreign")
                if key in self.moved or key in self.unanswered:
                    tail = (key, m)
        if tail is not None:
            yield from self._tail(*tail, fetch)

    def _tail(
        self, key: Any, call: Message, fetch: Callable[[list[Any]], Mapping[Any, Message]]
    ) -> Iterator[ContextEntry]:
        """After a call's results in place: its other results, in the order of its calls."""
        moved = self.moved.get(key, {})
        missing = self.unanswered.get(key, ())
        found = fetch(list(moved.values())) if moved else {}
        for call_id in call.call_ids:
            if call_id in moved:
                yield ContextEntry(found[moved[call_id]], moved=True)
            elif call_id in missing:
                yield synthetic_result(call, call_id)


def answer_tool_calls(messages: Sequence[Message]) -> list[ContextEntry]:
    """The messages as an API-valid sequence (see :class:`ContextEntry`); pure, order kept
    otherwise. Synthetic results carry ``id=None`` and the call's id as ``tool_call_id``.
    The two passes of :class:`ToolResultPlacement` over the list, so a held context and a
    streamed one follow one rule."""
    in_place = _in_place(messages)
    if in_place is not None:
        return in_place[0]
    placement = ToolResultPlacement()
    for i, m in enumerate(messages):
        placement.scan(i, m)
    placement.finish()
    return list(placement.entries(enumerate(messages), lambda keys: {k: messages[k] for k in keys}))


def _in_place(messages: Sequence[Message]) -> tuple[list[ContextEntry], set[int]] | None:
    """The entries of a list already in the order sent, and the indices before which no call
    is open; None for any other list. In such a list (nearly every stored one) each call's
    results follow it at once, one for each of its calls, every role a chat role: each
    message is its own entry, in place. One pass, where :class:`ToolResultPlacement` takes
    two and pairs every call (most of a compaction's planning)."""
    entries: list[ContextEntry] = []
    closed: set[int] = set()
    open_ids: set[Any] = set()  # the calls of the last calling message not answered yet
    for i, m in enumerate(messages):
        if m.role == "tool":
            if m.tool_call_id not in open_ids:  # moved, orphan or a duplicate
                return None
            open_ids.discard(m.tool_call_id)
        else:
            if open_ids or m.role not in CHAT_ROLES:  # a call left unanswered, or foreign
                return None
            closed.add(i)
            open_ids = set(m.call_ids)
        entries.append(ContextEntry(m))
    if open_ids:
        return None
    return entries, closed


class AnsweredMessages:
    """:func:`answer_tool_calls` of a list, kept with the cuts where no call is open, so that a
    suffix starting at one is answered from the whole's entries: a compaction measures its
    context and then the messages it keeps, and pairing both was most of the plan's CPU.
    At such a cut no result after it answers a call before it (none is open), and every
    result before it is sent before its first message (a call's moved results follow it at
    the latest there), so the suffix's entries are the whole's from its first message on."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = messages
        in_place = _in_place(messages)
        self._aligned = in_place is not None  # entry i is message i
        if in_place is not None:
            self.entries, self._closed = in_place
            return
        placement = ToolResultPlacement()
        closed: set[int] = set()
        for i, m in enumerate(messages):
            if not placement.calls_open:
                closed.add(i)
            placement.scan(i, m)
        placement.finish()
        self._closed = closed
        self.entries = list(
            placement.entries(enumerate(messages), lambda keys: {k: messages[k] for k in keys})
        )

    def suffix(self, start: int) -> list[ContextEntry]:
        """``answer_tool_calls(self.messages[start:])``, taken from the whole's entries when
        no call is open at ``start``."""
        messages = self.messages
        if start >= len(messages):
            return []
        if start not in self._closed:
            return answer_tool_calls(messages[start:])
        if self._aligned:
            return self.entries[start:]
        first = messages[start]
        for j in range(len(self.entries) - 1, -1, -1):
            if self.entries[j].message is first:
                return self.entries[j:]
        raise AssertionError("every message of a list is one of its entries")


@dataclass
class RestoredContext:
    """What the model sees after a restart: built by :func:`restore_context`."""

    session_id: int
    system_prompt: str | None
    compaction: Compaction | None
    messages: list[Message] = field(default_factory=list)

    @property
    def summary(self) -> str | None:
        return self.compaction.summary if self.compaction else None

    def summary_message(self) -> dict[str, str] | None:
        if not self.compaction:
            return None
        return {"role": "user", "content": SUMMARY_PREFIX + self.compaction.summary}

    def entries(self) -> list[ContextEntry]:
        """The messages in the order sent to a model, tool calls all answered."""
        return answer_tool_calls(self.messages)

    def to_openai(self) -> list[dict[str, Any]]:
        """The context as an OpenAI-style message list, ready to send back to an API: system
        prompt, summary (as a user message), then :meth:`entries`."""
        out: list[dict[str, Any]] = []
        if self.system_prompt:
            out.append({"role": "system", "content": self.system_prompt})
        summary = self.summary_message()
        if summary:
            out.append(summary)
        out.extend(e.to_openai() for e in self.entries())
        return out

    def texts(self, head_only: bool = False) -> list[MessageText]:
        """Everything the model reads, as countable texts (system prompt, summary and synthetic
        tool results included); ``head_only``: the system prompt and the summary."""
        out: list[MessageText] = []
        if self.system_prompt:
            out.append(MessageText("system", self.system_prompt))
        summary = self.summary_message()
        if summary:
            out.append(MessageText("user", summary["content"]))
        if not head_only:
            out.extend(e.text() for e in self.entries())
        return out


def restore_context(
    session_id: int,
    system_prompt: str | None,
    latest_compaction: Compaction | None,
    messages: Sequence[Message],
) -> RestoredContext:
    """Select the restored context from a session's messages and its latest checkpoint.

    ``messages`` may be the whole history or already the suffix from the cut; either way only
    messages of this session with ``id >= first_kept_message_id`` are kept, in id order.
    """
    first_kept = latest_compaction.first_kept_message_id if latest_compaction else None
    kept = sorted(
        (
            m
            for m in messages
            if m.session_id == session_id and (first_kept is None or m.id >= first_kept)
        ),
        key=lambda m: m.id,
    )
    return RestoredContext(session_id, system_prompt, latest_compaction, kept)


# Tool calls as compaction reads them: through Message.calls(), in the API's shape, so nothing
# here needs to check types again.
def call_name(call: dict[str, Any]) -> str:
    """The function name of a call ('?' when it has none)."""
    return str(call["function"]["name"] or "?")


def call_arguments(call: dict[str, Any]) -> str:
    """The arguments of a call, a JSON string as the API sends it."""
    return str(call["function"]["arguments"])


def calls_of(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Every call made by ``messages``, in order."""
    return [c for m in messages for c in m.calls()]
