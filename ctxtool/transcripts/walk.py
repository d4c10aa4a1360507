"""The walk every format shares: lines in, records out, each line checked against its format.

A format is a :class:`FormatParser` subclass: one method per record kind (chosen by
``kind_of``), the state that spans records (a message being merged, ids seen) on the instance,
``skipped`` counting what maps to no message. The walk around it is written once: the main-line
filter of tree formats, and turning a record that does not fit into a ``file:line`` error, or a
counted skip with ``--skip-invalid``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

from ..core.source_records import (
    InvalidRecord,
    Line,
    Record,
    SourceMessage,
    SourceSession,
    Transcript,
    TranscriptError,
)
from .fields import UniqueIds, label, parse_time
from .titles import request_title
from .tree import MainLineFilter, main_line

# A method of the format's own parser class (hence Any: a subclass's self is no FormatParser
# a handler may be called with).
Handler = Callable[[Any, Line], "Iterable[Record] | None"]


class FormatParser:
    """One transcript of one format being parsed."""

    name: ClassVar[str] = ""
    handlers: ClassVar[dict[str, Handler]] = {}  # record kind -> method
    tree: ClassVar[bool] = False  # records carry (id, parent id) links
    # A session the file gives no title is titled by its first real request (titles.py).
    titled_by_request: ClassVar[bool] = True

    def __init__(self):
        self.session = SourceSession(self.name)
        self.skipped: Counter = Counter()
        self.ids = UniqueIds()

    # -- what a format defines ------------------------------------------------------------------

    @staticmethod
    def fits(obj: dict) -> bool:
        """Does this record look like one of this format? (Refusing a wrong --format.)"""
        raise NotImplementedError

    def kind_of(self, obj: dict) -> str:
        """The key of ``handlers`` for this record."""
        kind = obj.get("type")
        return kind if isinstance(kind, str) else label(kind)

    @staticmethod
    def link(obj: dict) -> tuple[str, str | None] | None:
        """(id, parent id) of a tree record; None outside the tree (and in linear formats)."""
        return None

    def observe(self, obj: dict) -> bool | None:
        """Sees every record first, on the main line or not (a session id in every record);
        True once it needs to see no more (the walk stops calling it)."""

    def unknown(self, kind: str, line: Line) -> None:
        self.skipped[kind] += 1

    def time(self, value, fallback=None):
        """``value`` as a time (see ``fields.parse_time``), else ``fallback``, else None. A time
        given but not readable as one (``yesterday``, an offset of +99:00, year 99999) is
        counted as ``invalid_timestamp``: the message then takes the time of the one before."""
        when = parse_time(value)
        if when is None:
            when = parse_time(fallback) if fallback is not None else None
            if when is None and (value is not None or fallback is not None):
                self.skipped["invalid_timestamp"] += 1
        return when

    def finish(self) -> Iterable[Record]:
        """Records still held when the file ends (a message being merged)."""
        return ()


def parse(
    parser: FormatParser,
    lines: Iterable[Line],
    path: str,
    skip_invalid: bool = False,
    main: set[str] | None = None,
) -> Transcript:
    """Parse ``lines`` with ``parser``; ``main`` (see :func:`main_line_ids`) keeps a tree
    format to its main line, and without it a branched file raises BranchedTranscript."""
    return Transcript(
        parser.name, parser.session, _walk(parser, lines, path, skip_invalid, main), parser.skipped
    )


def _walk(
    parser: FormatParser,
    lines: Iterable[Line],
    path: str,
    skip_invalid: bool,
    main: set[str] | None,
) -> Iterator[Record]:
    on_main_line = MainLineFilter(main) if parser.tree else None
    # Bound once: this loop runs for every line of files of millions of lines.
    observe = parser.observe if type(parser).observe is not FormatParser.observe else None
    kind_of, handlers, link, skipped = parser.kind_of, parser.handlers, parser.link, parser.skipped
    untitled: str | None = None  # the first real request's title, once met
    for line in lines:
        try:
            if observe and observe(line.obj):
                observe = None
            kind = kind_of(line.obj)
            if on_main_line and not on_main_line.keeps(link(line.obj), kind, skipped):
                continue
            handler = handlers.get(kind)
            if handler is None:
                parser.unknown(kind, line)
                continue
            out = handler(parser, line)
        except InvalidRecord as exc:
            _invalid(parser, path, line.number, str(exc), skip_invalid)
            continue
        except (TypeError, ValueError, AttributeError, KeyError, RecursionError) as exc:
            # A shape no check above foresaw: still this line's fault, never a traceback.
            _invalid(
                parser,
                path,
                line.number,
                f"unexpected record shape ({type(exc).__name__})",
                skip_invalid,
            )
            continue
        if out:
            if untitled is None:
                untitled = _first_request_title(out)
            yield from out
    last = list(parser.finish())
    if untitled is None:
        untitled = _first_request_title(last)
    yield from last
    if parser.session.title is None and parser.titled_by_request:
        parser.session.title = untitled


def _first_request_title(records: Iterable[Record]) -> str | None:
    for record in records:
        if isinstance(record, SourceMessage) and record.role == "user":
            title = request_title(record)
            if title:
                return title
    return None


def _invalid(parser: FormatParser, path: str, number: int, message: str, skip: bool) -> None:
    if not skip:
        raise TranscriptError(
            path,
            number,
            f"invalid {parser.name} record: {message} (use --skip-invalid to skip such records)",
        )
    parser.skipped["invalid_record"] += 1


def main_line_ids(parser_class: type[FormatParser], lines: Iterable[Line]) -> set[str]:
    """First pass over a branched file: the ids on the path from its newest record."""
    return main_line(lines, parser_class.link)
