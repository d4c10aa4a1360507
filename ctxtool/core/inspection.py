"""A session's context at any point of its history, and what changed between checkpoints.

Pure functions over plain records (the store reads them, the CLI and the exports render them):
which context a checkpoint restored to, the checkpoint history with what each one summarized,
the difference between two checkpoints, and the :class:`ContextView` every rendering shares (the
exact messages sent to a model, with ids, times, token counts and tool names).

The context "at" a checkpoint is the one it restored to for as long as it was the latest: its
summary plus the messages from its cut that existed until the next checkpoint replaced it, or
every message after its cut when it is still the latest. "Existed until the next checkpoint" is
decided by id where the store knows (every message the next checkpoint summarized, ``id <
next.first_kept_message_id``, was there) and by time only for the messages the next checkpoint
kept (written no later than the next checkpoint): message times come from transcripts or the
runtime, checkpoint times from the database server, so ids are trusted first.
"""

from __future__ import annotations

import difflib
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from .cells import pad
from .cells import shorten as shorten
from .checkpoint_quality import describe_quality, quality_of
from .context_size import entry_token_counts, head_token_counts, total_tokens
from .errors import CtxtoolError
from .records import (
    MESSAGES_THROUGH,
    SUMMARY_PREFIX,
    Compaction,
    ContextEntry,
    Message,
    RestoredContext,
    Session,
    ToolResultPlacement,
)


@dataclass(frozen=True)
class ContextPoint:
    """Which restored context: after ``checkpoint`` (None: before the first one) until
    ``replaced_by`` (None: it is the latest, so up to now)."""

    checkpoint: Compaction | None
    replaced_by: Compaction | None

    @property
    def latest(self) -> bool:
        return self.replaced_by is None

    @property
    def first_id(self) -> int | None:
        """The first message id in this context (None: from the session's first message)."""
        return self.checkpoint.first_kept_message_id if self.checkpoint else None

    def describe(self) -> str:
        """One line saying which messages this context holds, and why."""
        if self.checkpoint is None and self.replaced_by is None:
            return "no checkpoint: every message of the session"
        where = (
            f"checkpoint {self.checkpoint.id} (cut at message "
            f"{self.checkpoint.first_kept_message_id})"
            if self.checkpoint
            else "before the first checkpoint"
        )
        if self.replaced_by is None:
            return f"{where}, the latest: its summary and every message after its cut"
        through = messages_through(self.replaced_by)
        by = (
            f"were stored by then (through message {through})"
            if through is not None
            else f"were written by its time ({_time(self.replaced_by.created_at)})"
        )
        return (
            f"{where}, as it stood until checkpoint {self.replaced_by.id} replaced it: the "
            f"messages checkpoint {self.replaced_by.id} summarized, and those it kept that "
            f"{by}"
        )

    def holds(self, m: Message) -> bool:
        """Whether message ``m`` (of this session) is in this context: after the cut, and
        stored before the checkpoint that replaced it was written. ctxtool's own checkpoints
        record the newest message stored then; for others (imported, a runtime's) the times
        tell, both from the same clock: the transcript's, or the runtime's."""
        if self.first_id is not None and m.id < self.first_id:
            return False
        nxt = self.replaced_by
        if nxt is None or m.id < nxt.first_kept_message_id:
            return True
        through = messages_through(nxt)
        if through is not None:
            return m.id <= through
        return m.created_at is None or nxt.created_at is None or m.created_at <= nxt.created_at


def messages_through(checkpoint: Compaction) -> int | None:
    """The newest message id stored when ``checkpoint`` was appended, where it was recorded."""
    details = checkpoint.details
    through = details.get(MESSAGES_THROUGH) if isinstance(details, dict) else None
    return through if type(through) is int else None


def point_in_history(
    compactions: Sequence[Compaction],
    checkpoint_id: int | None = None,
    before_first: bool = False,
    session_label: str = "",
) -> ContextPoint:
    """The point of ``--at CHECKPOINT`` / ``--before-first`` / the latest (neither), over a
    session's checkpoints in id order. A negative CHECKPOINT counts from the latest (-1). A
    checkpoint of another session is an error."""
    cps = list(compactions)
    if before_first:
        return ContextPoint(None, cps[0] if cps else None)
    if checkpoint_id is None:
        return ContextPoint(cps[-1] if cps else None, None)
    if checkpoint_id < 0 and -checkpoint_id <= len(cps):  # -1: the latest, -2: the one before
        i = len(cps) + checkpoint_id
        return ContextPoint(cps[i], cps[i + 1] if i + 1 < len(cps) else None)
    for i, cp in enumerate(cps):
        if cp.id == checkpoint_id:
            return ContextPoint(cp, cps[i + 1] if i + 1 < len(cps) else None)
    known = ", ".join(str(c.id) for c in cps) or "none"
    raise CtxtoolError(
        f"session {session_label}: checkpoint {checkpoint_id} is not one of its "
        f"checkpoints ({known}); see `ctxtool context checkpoints`"
    )


def context_at(
    session: Session, point: ContextPoint, messages: Sequence[Message]
) -> RestoredContext:
    """The restored context at ``point``, selected from ``messages`` (any superset of it)."""
    kept = sorted(
        (m for m in messages if m.session_id == session.session_id and point.holds(m)),
        key=lambda m: m.id,
    )
    return RestoredContext(session.session_id, session.system_prompt, point.checkpoint, kept)


# -- the checkpoint history -------------------------------------------------------------------


def checkpoint_rows(
    compactions: Sequence[Compaction], summarized: Sequence[int], summary_tokens: Sequence[int]
) -> list[dict[str, Any]]:
    """One row per checkpoint: ``summarized[i]`` is how many stored messages lie between the
    previous cut and checkpoint i's cut; ``summary_tokens[i]`` its summary's tokens (stored or
    counted). The quality figures are those the evaluation stored when the checkpoint was
    written (``details.quality``, see ``ctxtool.evaluation``): the probe score, the probes
    only the summary could answer and how many it did, the fabrications, the missed probes
    and the carry-over of the previous summary; None where a checkpoint has none (imported, a
    runtime's, or older figures, which ``quality`` still describes)."""
    rows = []
    previous: Compaction | None = None
    for cp, n, st in zip(compactions, summarized, summary_tokens):
        figures = quality_of(cp.details) or {}
        fabricated = figures.get("fabrications")
        rows.append(
            {
                "checkpoint_id": cp.id,
                "parent_id": cp.parent_compaction_id or None,
                "created_at": cp.created_at,
                "summarizer": cp.summarizer,
                "summarizer_model": cp.summarizer_model,
                "cut_from": previous.first_kept_message_id if previous else None,
                "first_kept_message_id": cp.first_kept_message_id,
                "messages_summarised": n,
                "tokens_before": cp.tokens_before,
                "tokens_after": cp.tokens_after,
                "summary_tokens": st,
                "score": figures.get("score"),
                "probes_answered": figures.get("held"),
                "probes_total": figures.get("summary_only_probes"),
                "fabrications": len(fabricated) if isinstance(fabricated, list) else None,
                "carry_over": figures.get("carry_over"),
                "missed": list(figures.get("missed") or []),
                "quality": describe_quality(figures or None),
                "source_id": cp.source_id,
            }
        )
        previous = cp
    return rows


@dataclass
class CheckpointDiff:
    """What changed from checkpoint ``a`` (None: before the first) to checkpoint ``b``."""

    a: Compaction | None
    b: Compaction
    summary_diff: list[str]
    newly_summarised: list[Message]  # from a's cut to b's: kept by a, summarized by b

    @property
    def cut_from(self) -> int:
        return self.a.first_kept_message_id if self.a else 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "from_checkpoint_id": self.a.id if self.a else None,
            "to_checkpoint_id": self.b.id,
            "cut_from": self.a.first_kept_message_id if self.a else None,
            "cut_to": self.b.first_kept_message_id,
            "cut_moved_back": self.b.first_kept_message_id < self.cut_from,
            "summary_before": self.a.summary if self.a else None,
            "summary_after": self.b.summary,
            "summary_diff": self.summary_diff,
            "newly_summarised": [
                {
                    "id": m.id,
                    "role": m.role,
                    "created_at": m.created_at,
                    "token_count": m.token_count,
                }
                for m in self.newly_summarised
            ],
        }


def diff_checkpoints(
    a: Compaction | None, b: Compaction, messages: Sequence[Message]
) -> CheckpointDiff:
    """The unified diff of the two summaries, and which of ``messages`` (any superset of the
    range) went from kept by ``a`` to summarized by ``b``: ids from a's cut up to b's."""
    before = (a.summary if a else "").splitlines()
    after = b.summary.splitlines()
    lines = list(
        difflib.unified_diff(
            before,
            after,
            f"checkpoint {a.id}" if a else "before first checkpoint",
            f"checkpoint {b.id}",
            lineterm="",
            n=2,
        )
    )
    start = a.first_kept_message_id if a else 0
    moved = [m for m in messages if start <= m.id < b.first_kept_message_id]
    return CheckpointDiff(a, b, lines, moved)


def side_by_side(before: str, after: str, width: int) -> list[str]:
    """Two summaries in two columns of ``width`` terminal columns in all, as ``diff -y`` does: ``|``
    changed, ``<`` only before, ``>`` only after. Long lines are shortened with "…"."""
    col = max((width - 3) // 2, 10)

    def cell(text: str) -> str:
        return pad(shorten(text, col), col)

    a, b = before.splitlines(), after.splitlines()
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        left, right = a[i1:i2], b[j1:j2]
        for k in range(max(len(left), len(right))):
            l_text = left[k] if k < len(left) else ""
            r_text = right[k] if k < len(right) else ""
            mark = (
                " "
                if tag == "equal"
                else "|"
                if k < len(left) and k < len(right)
                else "<"
                if k < len(left)
                else ">"
            )
            out.append(f"{cell(l_text)} {mark} {shorten(r_text, col)}".rstrip())
    return out


def pick_pair(
    compactions: Sequence[Compaction], a: int | None, b: int | None, session_label: str = ""
) -> tuple[Compaction | None, Compaction]:
    """The two checkpoints of ``context diff``: the given ids (0 = before the first; -1 the
    latest, -2 the one before, as ``--at``), by default the last two (or before-first and the
    only one)."""
    cps = list(compactions)
    if not cps:
        raise CtxtoolError(f"session {session_label} has no checkpoints to compare")
    by_id = {c.id: c for c in cps}

    def get(cid: int) -> Compaction:
        if cid < 0 and -cid <= len(cps):
            return cps[len(cps) + cid]
        if cid not in by_id:
            raise CtxtoolError(
                f"session {session_label}: checkpoint {cid} is not one of its "
                f"checkpoints ({', '.join(map(str, by_id))})"
            )
        return by_id[cid]

    if a is None and b is None:
        return (cps[-2] if len(cps) > 1 else None), cps[-1]
    if (b if b is not None else a) == 0:
        # 0 is a place (before the first checkpoint), the A side only: nothing comes before it.
        raise CtxtoolError(
            f"session {session_label}: 0 (before the first checkpoint) can only be "
            f"A, compared with a checkpoint B: context diff {session_label} 0 "
            f"{cps[0].id}"
        )
    if b is None:  # one id given: compare it with the checkpoint before it
        target = get(a)  # type: ignore[arg-type]
        i = cps.index(target)
        return (cps[i - 1] if i else None), target
    return (None if a == 0 else get(a)), get(b)  # type: ignore[arg-type]


# -- the view every rendering shares ---------------------------------------------------------


@dataclass
class ViewItem:
    """One message as sent to the model, with what a reader needs to know about it."""

    kind: str  # system_prompt, summary, message, synthetic_result, moved_result, orphan_result,
    # foreign_role
    openai: dict[str, Any]
    tokens: int
    message: Message | None = None
    answers: dict[str, Any] | None = None  # for a tool result: the call (id, name, arguments)

    @property
    def id(self) -> int | None:
        return self.message.id if self.message else None

    @property
    def created_at(self) -> datetime | None:
        return self.message.created_at if self.message and self.kind != "synthetic_result" else None

    def as_dict(self) -> dict[str, Any]:
        """The OpenAI message plus ``id``, ``created_at``, ``token_count`` and ``kind``."""
        return {
            "id": self.id,
            "created_at": self.created_at,
            "token_count": self.tokens,
            "kind": self.kind,
            **self.openai,
        }


@dataclass
class ContextView:
    """A session's restored context at one point, ready to render in any format."""

    session: Session
    point: ContextPoint
    context: RestoredContext
    encoding: str
    estimate: bool
    items: list[ViewItem] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return total_tokens(i.tokens for i in self.items)

    def count(self, kind: str) -> int:
        return sum(1 for i in self.items if i.kind == kind)

    def header(self) -> dict[str, Any]:
        return context_header(
            self.session,
            self.point,
            len(self.context.messages),
            self.count("synthetic_result"),
            self.tokens,
            self.encoding,
            self.estimate,
        )

    def document(self) -> dict[str, Any]:
        """The ``--json`` document: header, system prompt, summary and every message."""
        return {
            **self.header(),
            "system_prompt": self.context.system_prompt,
            "summary": self.context.summary,
            "messages": [i.as_dict() for i in self.items],
        }


def context_header(
    session: Session,
    point: ContextPoint,
    messages_kept: int,
    synthetic_results: int,
    tokens: int,
    encoding: str,
    estimate: bool,
) -> dict[str, Any]:
    """The header of a context view (``context show``'s first lines, its ``--json`` fields)."""
    cp = point.checkpoint
    return {
        "session_id": session.session_id,
        "title": session.title,
        "model": session.model,
        "source": f"{session.source_format}:{session.source_id}" if session.source_format else None,
        "at": point.describe(),
        "checkpoint_id": cp.id if cp else None,
        "replaced_by_checkpoint_id": point.replaced_by.id if point.replaced_by else None,
        "first_kept_message_id": cp.first_kept_message_id if cp else None,
        "summarizer": cp.summarizer if cp else None,
        "summary_quality": describe_quality(quality_of(cp.details)) if cp else None,
        "messages_kept": messages_kept,
        "synthetic_results": synthetic_results,
        "context_tokens": tokens,
        "encoding": encoding + (" (estimate)" if estimate else ""),
    }


def head_items(ctx: RestoredContext, counts: Sequence[int]) -> list[ViewItem]:
    """The system prompt and the summary as view items (``counts``: their tokens, in order)."""
    items = []
    if ctx.system_prompt:
        items.append(ViewItem("system_prompt", {"role": "system", "content": ctx.system_prompt}, 0))
    summary = ctx.summary_message()
    if summary is not None:
        items.append(ViewItem("summary", summary, 0))
    for item, n in zip(items, counts):
        item.tokens = n
    return items


class ItemMaker:
    """Turns a context's entries, in the order sent, into view items: what kind each is, and
    for a tool result the call it answers. Fed entry by entry (a whole list, or page by page):
    an answered result is always sent right after its call's message (``answer_tool_calls``),
    so the calls of the latest message that made some are all it needs to remember."""

    def __init__(self) -> None:
        self.calls: dict[str, dict[str, Any]] = {}

    def item(self, entry: ContextEntry, tokens: int) -> ViewItem:
        m = entry.message
        if m.role == "assistant" and m.tool_calls:
            made = m.calls()
            if made:
                self.calls = {
                    c["id"]: {
                        "id": c["id"],
                        "name": c["function"]["name"],
                        "arguments": c["function"]["arguments"],
                    }
                    for c in made
                }
        answers = (
            self.calls.get(str(m.tool_call_id)) if m.role == "tool" and not entry.orphan else None
        )
        return ViewItem(entry_kind(entry), entry.to_openai(), tokens, m, answers)


def entry_kind(entry: ContextEntry) -> str:
    """A :class:`ViewItem`'s kind for an entry of the context."""
    if entry.synthetic:
        return "synthetic_result"
    if entry.moved:
        return "moved_result"
    if entry.orphan:
        return "orphan_result"
    return "foreign_role" if entry.foreign else "message"


def _scanned_item(entry: ContextEntry, name: str | None, tokens: int) -> ViewItem:
    """The item of an entry as the first pass reads it: what it answers known by its tool's
    name alone (what the table shows)."""
    m = entry.message
    answers = {"name": name} if name is not None and m.role == "tool" and not entry.orphan else None
    return ViewItem(entry_kind(entry), entry.to_openai(), tokens, m, answers)


def build_view(
    session: Session,
    point: ContextPoint,
    ctx: RestoredContext,
    counts: Sequence[int],
    encoding: str,
    estimate: bool,
) -> ContextView:
    """Assemble the view; ``counts`` are the tokens of each message of ``ctx.to_openai()``."""
    items = head_items(ctx, counts)
    maker = ItemMaker()
    items += [maker.item(e, n) for e, n in zip(ctx.entries(), counts[len(items) :])]
    return ContextView(session, point, ctx, encoding, estimate, items)


# Messages per page when a context is streamed: each page is one read of its rows.
PAGE_ENTRIES = 500


class MessagePages(Protocol):
    """The store's keyset read of a context, a page at a time in id order (``text``: with
    contents; else the outline, ids, roles and tool-call links; ``through``: no id above it)."""

    def __call__(self, text: bool, through: int | None = None) -> Iterator[list[Message]]: ...


@dataclass(kw_only=True)
class _FirstPass:
    """What the first pass over a streamed context keeps for the second: where the results
    recorded away from their call go, the token counts (4 bytes a message, so none is
    counted twice) and the ids counted (8 bytes a message: the second pass must read the same
    rows, or a count lands on the wrong one)."""

    placement: ToolResultPlacement
    messages_kept: int
    synthetic_results: int
    last_id: int
    counted: bool
    counts: array[int]  # the head's, then each message's in id order, but the moved results'
    moved_tokens: dict[int, int]  # by id
    synthetic_tokens: int  # of each synthetic result (its text is the same for every one)
    first_id: int | None  # the first message sent (None: none)
    last_sent: tuple[bool, int | None]  # see ToolResultPlacement.last_sent
    ids: array[int]  # every message read, in id order


class ContextStream:
    """A restored context read page by page: what ``context show`` prints, in memory bounded by
    a page of messages whatever the context's length (a million messages, or one message with
    10,000 tool calls).

    Two passes over the store's pages (``pages``), whatever is printed: the first counts
    tokens and learns where the results recorded away from their call go
    (:class:`~ctxtool.core.records.ToolResultPlacement`), and shows each item to an ``observe``
    callback (the table measures its columns there); the second yields the items in the order
    sent, ``fetch`` (ids -> records) bringing a moved result when its call is reached. Yields
    what :class:`ContextView` holds, item for item (``tests/test_context.py`` compares them)."""

    def __init__(
        self,
        session: Session,
        point: ContextPoint,
        pages: MessagePages,
        fetch: Callable[[list[int]], Mapping[int, Message]],
        encoding: str,
        estimate: bool,
    ):
        self.session, self.point = session, point
        self.encoding, self.estimate = encoding, estimate
        self.head = RestoredContext(session.session_id, session.system_prompt, point.checkpoint)
        self.pages, self.fetch = pages, fetch
        self._first: _FirstPass | None = None
        # What each item goes through on its way out (a redaction), after it is counted.
        self.item_filter: Callable[[ViewItem], ViewItem] | None = None

    def first_pass(
        self, counted: bool = True, observe: Callable[[ViewItem], None] | None = None
    ) -> _FirstPass:
        """Read the context once (again, when ``observe`` is given): tokens (unless not
        ``counted``: the outline alone is read), and every message item shown to
        ``observe``, in id order rather than the order sent."""
        if self._first is not None and observe is None and (self._first.counted or not counted):
            return self._first
        counted = counted or observe is not None
        placement = ToolResultPlacement()
        head = head_token_counts(self.head, self.session.details, self.encoding) if counted else []
        counts = array("I", head)
        moved_tokens: dict[int, int] = {}
        kept, last_id, first_id = 0, -1, None
        ids = array("q")
        for page in self.pages(text=counted):
            scanned = [placement.scan(m.id, m) for m in page]
            ids.extend(m.id for m in page)
            first_id = page[0].id if first_id is None and page else first_id
            kept += len(page)
            last_id = page[-1].id if page else last_id
            if counted:
                page_counts = entry_token_counts([e for e, _ in scanned], self.encoding)
                for (entry, _), n in zip(scanned, page_counts):
                    if entry.moved:
                        moved_tokens[entry.message.id] = n
                    else:
                        counts.append(n)
                if observe is not None:
                    for (entry, name), n in zip(scanned, page_counts):
                        observe(_scanned_item(entry, name, n))
        synthetic = placement.finish()
        synthetic_tokens = 0
        if synthetic and counted:
            synthetic_tokens = entry_token_counts([synthetic[0][0]], self.encoding)[0]
            if observe is not None:
                for entry, name in synthetic:
                    observe(_scanned_item(entry, name, synthetic_tokens))
        self._first = _FirstPass(
            placement=placement,
            messages_kept=kept,
            synthetic_results=len(synthetic),
            last_id=last_id,
            counted=counted,
            counts=counts,
            moved_tokens=moved_tokens,
            synthetic_tokens=synthetic_tokens,
            first_id=first_id,
            last_sent=placement.last_sent(),
            ids=ids,
        )
        return self._first

    def header(self) -> dict[str, Any]:
        first = self.first_pass()
        total = (
            sum(first.counts)
            + sum(first.moved_tokens.values())
            + first.synthetic_tokens * first.synthetic_results
        )
        return context_header(
            self.session,
            self.point,
            first.messages_kept,
            first.synthetic_results,
            total_tokens([total]),
            self.encoding,
            self.estimate,
        )

    def head_items(self) -> list[ViewItem]:
        """The system prompt and the summary, counted (through ``item_filter``)."""
        items = head_items(self.head, self.first_pass().counts)
        return items if self.item_filter is None else [self.item_filter(i) for i in items]

    def document_head(self) -> dict[str, Any]:
        """The ``--json`` document but its messages (as :meth:`ContextView.document`)."""
        return {
            **self.header(),
            # The session's and the checkpoint's, which a redaction replaces (the head keeps
            # what was counted).
            "system_prompt": self.session.system_prompt,
            "summary": self.point.checkpoint.summary if self.point.checkpoint else None,
        }

    def items(self, counted: bool = True) -> Iterator[ViewItem]:
        """Every item of the view, in order (``counted=False``: tokens left at 0, no count):
        the second pass, after the first if it has not run; each through ``item_filter``."""
        items = self._items(counted)
        return items if self.item_filter is None else map(self.item_filter, items)

    def _items(self, counted: bool) -> Iterator[ViewItem]:
        first = self.first_pass(counted)
        head = head_items(self.head, first.counts if counted else ())
        yield from head
        ids = first.ids

        def keyed() -> Iterator[tuple[int, Message]]:
            # The rows counted, or none: a message committed with a lower id since the first
            # pass (or one deleted) would move every later count onto the wrong row.
            read = 0
            for page in self.pages(text=True, through=first.last_id):
                for m in page:
                    if read == len(ids) or m.id < ids[read]:
                        raise self._changed(f"message {m.id} is new")
                    if m.id != ids[read]:
                        raise self._changed(f"message {ids[read]} is gone")
                    read += 1
                    yield m.id, m
            if read != len(ids):
                raise self._changed(f"message {ids[read]} is gone")

        maker = ItemMaker()
        position = len(head)
        for entry in first.placement.entries(keyed(), self._fetch):
            if not counted:
                n = 0
            elif entry.synthetic:
                n = first.synthetic_tokens
            elif entry.moved:
                n = first.moved_tokens[entry.message.id]
            else:
                n = first.counts[position]
                position += 1
            yield maker.item(entry, n)

    def _fetch(self, ids: list[int]) -> Mapping[int, Message]:
        found = self.fetch(ids)
        gone = [i for i in ids if i not in found]
        if gone:
            raise self._changed(f"message {gone[0]} is gone")
        return found

    def _changed(self, what: str) -> CtxtoolError:
        # Written or deleted (sessions delete, purge) between the two passes.
        return CtxtoolError(
            f"session {self.session.session_id} changed while it was shown: {what}; show it again"
        )


def summary_text(item: ViewItem) -> str:
    """The summary as written by the summarizer (without the prefix sent to the model)."""
    content = item.openai.get("content") or ""
    return content[len(SUMMARY_PREFIX) :] if content.startswith(SUMMARY_PREFIX) else content


def _time(value: datetime | None) -> str:
    return value.isoformat(sep=" ", timespec="seconds") if value else "unknown time"
