"""Reading a transcript's records, whatever layout the file holds them in, and detecting its
format.

Layouts, told apart from the bytes and reported (never guessed silently): JSON Lines (one record
a line, CRLF or LF, a UTF-8 byte order mark dropped); JSON values concatenated on a line
(``{...}{...}``, as two writers appending at once leave them) or spread over lines
(pretty-printed records); and one JSON document (an array of messages or of OpenHands events,
or an object holding them in ``messages`` or ``history``). Each record keeps the number of the line it starts on, so
the ids of formats that number their records by line never depend on the layout or on what was
skipped. A record is checked to be a JSON object a database can store (valid UTF-8 and
Unicode, no NaN, not nested past what the parser copes with); a file whose records mostly do
not fit the format is refused before anything is written.

A live transcript is read up to the length it had when the import started (see
``discover.SourceFile``); a last record not finished by then (no newline yet, or a
pretty-printed record still open) is left for the next import, never reported as invalid.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import orjson

from ..core.source_records import MAX_RECORD_BYTES, FileLayout, SourceSession
from . import FORMATS, PARSERS, Line, Transcript, TranscriptError, parse
from .walk import main_line_ids

_PEEK_RECORDS = 100  # records read ahead to detect and check the format
_PEEK_LINES = 400
_PEEK_BYTES = 4 * 1024 * 1024  # read ahead no more than this (records can be megabytes each)
_RECOVER_TRIES = 200  # start positions tried when recovering records glued after a broken one

# What decides where a JSON value ends: strings (whose brackets do not count), brackets, and a
# quote left open at the end of the line (a string cut short: JSON strings hold no newline).
_TOKEN = re.compile(rb'"(?:[^"\\\n]|\\.)*"|[][{}]|"')
_OPEN, _CLOSE, _QUOTE = frozenset(b"{["), frozenset(b"}]"), ord('"')


@dataclass(slots=True)
class Broken:
    """A record that is not valid JSON (or not finished: ``incomplete`` at the end of the
    file), found at line ``number``."""

    number: int
    problem: str
    incomplete: bool = False
    # Bad whatever the file's writer adds next (its brackets closed, or it is already too long):
    # never a record still being written, even on the file's unfinished last line.
    final: bool = False


class RecordReader:
    """JSON values from a transcript's binary lines, one after another, whatever the layout.

    The usual JSONL line costs one orjson call; only a line that is not one JSON value on its
    own is scanned for where its values begin and end. ``values()`` yields :class:`Line` (any
    JSON value) and :class:`Broken`; ``records()`` turns them into the records a parser reads.
    """

    def __init__(self, path: str, lines: Iterable[bytes], skip_invalid: bool, skipped: Counter):
        self.path = path
        self.lines = lines
        self.skip_invalid = skip_invalid
        self.skipped = skipped
        self.layout = FileLayout()
        self.bytes_read = 0
        # True once a record ended on the line it started on: from then on a line that is a
        # record of its own ends any record left open above it (that one was cut short).
        self.one_per_line: bool | None = None

    def records(self, values: Iterable[Line | Broken] | None = None) -> Iterator[Line]:
        """Only JSON objects; anything else is a ``file:line`` error, or a counted skip."""
        for value in self.values() if values is None else values:
            if isinstance(value, Line):
                if type(value.obj) is dict:
                    yield value
                    continue
                item = Broken(
                    value.number, f"expected a JSON object, found {_json_name(value.obj)}"
                )
            else:
                item = value
            if item.incomplete:
                self.skipped["incomplete_last_line"] += 1
            elif not self.skip_invalid:
                raise TranscriptError(
                    self.path,
                    item.number,
                    item.problem + " (use --skip-invalid to skip such lines)",
                )
            else:
                self.skipped["invalid_line"] += 1

    def values(self) -> Iterator[Line | Broken]:
        loads, decode_error = orjson.loads, orjson.JSONDecodeError
        open_value: _OpenValue | None = None
        for number, raw in enumerate(self.lines, start=1):
            self.bytes_read += len(raw)
            last = not raw.endswith(b"\n")  # not finished when the import started
            if open_value is None or (self.one_per_line and raw[:1] == b"{"):
                try:  # the usual line first, in one call
                    obj = loads(raw)
                except decode_error:
                    obj = _NOTHING
                if type(obj) is dict or (obj is not _NOTHING and not last and open_value is None):
                    if open_value is not None:
                        # JSONL so far, and this line is a record: the one left open was cut.
                        yield _decode(open_value.number, b"".join(open_value.parts))
                        open_value = None
                    if self.one_per_line is None:
                        self.one_per_line = True
                    yield Line(number, obj)
                    continue
                if open_value is None and not raw.strip():
                    continue
            items: list[Line | Broken]
            if b"\x00" in raw:
                items, open_value = [Broken(number, "binary data, not a text transcript")], None
            else:
                items, open_value = self._scan(
                    number, raw + b"\n" if last else raw, open_value, at_end=last
                )
            if not last:
                yield from items
                continue
            for item in items:
                if type(item) is not Line:
                    if type(item) is Broken and item.incomplete:
                        yield item  # a value open since an earlier line, cut by the file's end
                        return
                    if self.one_per_line is None and raw.lstrip()[:1] not in (b"{", b"["):
                        # The file's only line, unfinished, and no JSON record being written
                        # (plain text, a binary's head): no transcript, not one to wait for.
                        yield item
                        return
                    if type(item) is Broken and item.final:
                        # A JSON value's brackets close only at its end, so no writer's
                        # unfinished record looks like that. Malformed, not waiting.
                        yield item
                        continue
                    break
                yield item
            else:
                if open_value is None:
                    return
            opened = open_value.number if open_value is not None else number
            yield Broken(opened, "record not finished", incomplete=True)
            return
        if open_value is not None:
            text = b"".join(open_value.parts)
            if self.one_per_line is False or text[:1] in (b"{", b"[") and not text[1:2].strip():
                # Pretty-printed (a record opened alone on its line): still being written.
                yield Broken(open_value.number, "record not finished", incomplete=True)
            else:  # JSON lines: a line ended, and the record with it
                yield _decode(open_value.number, text)

    def _scan(
        self, number: int, raw: bytes, open_value: _OpenValue | None, at_end: bool = False
    ) -> tuple[list[Line | Broken], _OpenValue | None]:
        """The values of a line that is not one JSON value by itself, and the value it leaves
        open (going on at the next line), if any. ``at_end``: the line is the file's last and
        unfinished, so a string it cuts in a value open since an earlier line (a pretty-printed
        record, a whole document) is that value not finished yet, not a malformed one."""
        items: list[Line | Broken] = []
        depth = open_value.depth if open_value else 0
        parts = open_value.parts if open_value else []
        first_number = open_value.number if open_value else number
        start = gap = 0  # where the value being read starts; where text outside values starts
        for m in _TOKEN.finditer(raw):
            at = m.start()
            token = raw[at]
            if depth == 0:
                if raw[gap:at].strip() or token not in _OPEN:
                    return self._found(items + self._recover(number, raw, gap)), None
                depth, start, first_number, parts = 1, at, number, []
            elif token == _QUOTE and m.end() - at == 1:
                # A string cut by the end of the line (JSON strings hold no newline).
                if not parts:
                    return self._found(items + self._recover(number, raw, start)), None
                if at_end:
                    items.append(Broken(first_number, "record not finished", incomplete=True))
                    return self._found(items), None
                items.append(_decode(first_number, b"".join(parts) + raw[start:]))
                return self._found(items), None
            elif token in _OPEN:
                depth += 1
            elif token in _CLOSE:
                depth -= 1
                if depth:
                    continue
                whole = b"".join(parts) + raw[start : m.end()]
                if parts and len(whole) > MAX_RECORD_BYTES:  # the limit of a record still open
                    items.append(Broken(first_number, _too_long(), final=True))
                    parts, gap = [], m.end()
                    continue
                item = _decode(first_number, whole)
                if type(item) is Broken:
                    if not parts:
                        found = self._recover(number, raw, start)
                        if type(found[0]) is Broken:
                            found[0].final = True
                        return self._found(items + found), None
                    item.final = True
                if parts:
                    self.layout.name = "multiline"
                if self.one_per_line is None:
                    self.one_per_line = not parts
                items.append(item)
                parts, gap = [], m.end()
        if depth == 0:
            if raw[gap:].strip():
                items += self._recover(number, raw, gap)
            return self._found(items), None
        parts = [*parts, raw[start:]]
        if sum(len(p) for p in parts) > MAX_RECORD_BYTES:
            items.append(Broken(first_number, _too_long(), final=True))
            return self._found(items), None
        return self._found(items), _OpenValue(first_number, depth, parts)

    def _found(self, items: list[Line | Broken]) -> list[Line | Broken]:
        """Count the records recovered from a line holding several values."""
        if len(items) > 1:
            self.layout.recovered["recovered_concatenated"] += sum(
                1 for i in items if type(i) is Line
            )
            if self.layout.name == "jsonl":
                self.layout.name = "concatenated"
        return items

    @staticmethod
    def _recover(number: int, raw: bytes, start: int) -> list[Line | Broken]:
        """The rest of a line from ``start``, where a value is broken: the broken part (one
        Broken), then any intact records glued after it, so skipping the broken one never
        drops its neighbours. Only a ``{`` that cannot be inside the broken record (not after
        ``:``, ``,`` or ``[``) is tried as the start of a glued one."""
        text = raw[start:].decode("utf-8", "surrogateescape")
        tries = 0
        at = text.find("{", 1)
        while at != -1 and tries < _RECOVER_TRIES:
            if text[:at].rstrip()[-1:] not in (":", ",", "["):
                tries += 1
                glued = _decode_sequence(number, text, at)
                if glued:
                    return [_decode(number, text[:at].encode("utf-8", "surrogateescape")), *glued]
            at = text.find("{", at + 1)
        item = _decode(number, raw[start:])
        if type(item) is Line and type(item.obj) not in (dict, list):
            return [Broken(number, f"expected a JSON object, found {_json_name(item.obj)}")]
        return [item]


_NOTHING = object()


def _too_long() -> str:
    return f"a record longer than {MAX_RECORD_BYTES >> 20} MB"


@dataclass(slots=True)
class _OpenValue:
    """A value that goes on past the end of its first line."""

    number: int
    depth: int
    parts: list[bytes]


_decoder = json.JSONDecoder()


def _decode_sequence(number: int, text: str, at: int) -> list[Line | Broken]:
    """Values from ``text[at:]`` to the end of the line, each a JSON object; [] if anything
    else is there."""
    out: list[Line | Broken] = []
    end = len(text.rstrip())
    while at < end:
        try:
            _, stop = _decoder.raw_decode(text, at)
        except (json.JSONDecodeError, RecursionError):
            return []
        # Decoded again as any record is (orjson refuses NaN, lone surrogates...).
        item = _decode(number, text[at:stop].encode("utf-8", "surrogateescape"))
        if type(item) is not Line or type(item.obj) is not dict:
            return []
        out.append(item)
        at = stop
        while at < end and text[at].isspace():
            at += 1
    return out


def _decode(number: int, raw: bytes) -> Line | Broken:
    """The value of a record starting at line ``number``; when it is malformed, the Broken
    names the line the fault is on (a pretty-printed record spans many)."""
    try:
        return Line(number, orjson.loads(raw))
    except orjson.JSONDecodeError as exc:
        below, problem = _diagnose(raw, exc)
        return Broken(number + below, problem)


def _json_name(value) -> str:
    return {list: "an array", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number"
    )


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


_strict_decode = json.JSONDecoder(parse_constant=_reject_constant).decode


def decode_line(raw: bytes, any_value: bool = False) -> tuple[object, str | None]:
    """(the line's object, None), or (None, what is wrong with it).

    orjson decodes (three times the standard library's speed on real transcripts) and refuses by
    itself what a database cannot store: invalid UTF-8, lone surrogates, NaN and Infinity, numbers
    beyond a double, nesting past 1024 levels. Only a line it refuses is read again with the
    standard library, for an error message that points at the problem."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return None, _diagnose(raw, exc)[1]
    if type(obj) is not dict and not any_value:
        return None, f"expected a JSON object, found {_json_name(obj)}"
    return obj, None


def _diagnose(raw: bytes, refused: orjson.JSONDecodeError) -> tuple[int, str]:
    """What is wrong with a record orjson refused, and on which of its lines (0: the first)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return 0, f"invalid UTF-8 at byte {exc.start} of the line"
    if b"\x00" in raw:
        return 0, "binary data, not a text transcript"
    try:
        _strict_decode(text)
    except json.JSONDecodeError as exc:
        # As JSON counts lines (not at U+2028 or U+0085); a fault past the final newline is
        # on the last line.
        lines = text.removesuffix("\n").split("\n")
        below = min(exc.lineno, len(lines)) - 1
        snippet = (lines[below] if below else text).strip()[:40]
        snippet = snippet.encode("unicode_escape").decode("ascii")
        reason = exc.msg[:-3] if exc.msg.endswith(" at") else exc.msg
        column = exc.colno if below == exc.lineno - 1 else len(lines[below]) + 1
        return below, f"malformed JSON ({reason} at column {column}): {snippet!r}"
    except ValueError as exc:  # NaN/Infinity, an integer of thousands of digits
        return 0, f"malformed JSON ({str(exc).splitlines()[0][:80]})"
    except RecursionError:
        return 0, "malformed JSON (nested too deeply)"
    if "surrogate" in refused.msg:
        return 0, "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff): not valid Unicode"
    return 0, f"malformed JSON ({refused.msg} at column {refused.colno})"


def read_transcript(
    path: str,
    stream: Iterable[bytes],
    fmt: str | None,
    skip_invalid: bool = False,
    main: set[str] | None = None,
) -> Transcript:
    """Detect the layout and the format (unless given) from the first records, check the
    file's records fit it, and start parsing (lazily: records stream as the caller consumes
    them)."""
    reader = RecordReader(path, stream, skip_invalid, Counter())
    values = reader.values()
    peeked: list[Line | Broken] = []
    samples: list[dict] = []
    first_bad: Broken | None = None
    for item in values:
        peeked.append(item)
        if type(item) is Line:
            if not samples and first_bad is None and _is_document(item.obj):
                return _whole_document(path, item, values, reader, fmt, skip_invalid)
            if type(item.obj) is dict:
                samples.append(item.obj)
            elif first_bad is None:
                first_bad = Broken(
                    item.number, f"expected a JSON object, found {_json_name(item.obj)}"
                )
        elif first_bad is None and isinstance(item, Broken):
            first_bad = item
        if (
            len(samples) >= _PEEK_RECORDS
            or len(peeked) >= _PEEK_LINES
            or (samples and reader.bytes_read >= _PEEK_BYTES)
        ):
            break
    if not samples:
        if first_bad is None:
            # Nothing written yet (a runtime creates its file before its first record): no
            # error, as an unfinished first record is none; the next import reads what comes.
            reader.skipped["empty_file"] += 1
            return Transcript("", SourceSession(""), iter(()), reader.skipped)
        return _no_records(path, first_bad, reader)
    fmt = fmt or detect_format(samples[0], path, samples)
    check_fit(path, fmt, samples)
    parser = PARSERS[fmt]()
    parser.skipped = reader.skipped
    records = reader.records(itertools.chain(peeked, values))
    transcript = parse(parser, records, path, skip_invalid, main)
    transcript.layout = reader.layout
    return transcript


def _is_document(value) -> bool:
    """One JSON document holding the whole transcript: a list, or an object with its messages
    (and no role: a message holding a ``messages`` field is no document)."""
    return type(value) is list or (
        type(value) is dict
        and "role" not in value
        and (type(value.get("messages")) is list or type(value.get("history")) is list)
    )


def _no_records(path: str, first_bad: Broken, reader: RecordReader) -> Transcript:
    """No value of the first ones is a JSON object: this is no transcript (skipping lines would
    not help); or only an unfinished first record has been written so far, which is no error:
    the next import reads it."""
    if not first_bad.incomplete:
        raise TranscriptError(
            path, first_bad.number, f"{first_bad.problem}; this is not a JSONL transcript"
        )
    reader.skipped["incomplete_last_line"] += 1
    return Transcript("", SourceSession(""), iter(()), reader.skipped)  # no format yet


def check_fit(path: str, fmt: str, samples: list[dict], among: Sequence[str] = ()) -> None:
    """Refuse a file whose first records mostly do not fit ``fmt`` (a wrong --format, or a
    file that is no transcript), naming the format they do look like (one of ``among`` when
    given: the formats the file's layout can be)."""
    fitting = sum(1 for s in samples if PARSERS[fmt].fits(s))
    if fitting * 2 > len(samples):
        return
    scores = {
        name: sum(1 for s in samples if p.fits(s))
        for name, p in PARSERS.items()
        if not among or name in among
    }
    best = max(scores, key=scores.__getitem__)
    hint = (
        f"they look like {best} ({scores[best]} fit); use --format {best}"
        if scores[best] > fitting
        else "they fit no known format"
    )
    raise TranscriptError(
        path,
        None,
        f"{len(samples) - fitting} of the first {len(samples)} "
        f"records are not {fmt} records: {hint}",
    )


def main_line_of(path: str, stream: Iterable[bytes], fmt: str, skip_invalid: bool) -> set[str]:
    """First pass over a branched tree file (see :func:`ctxtool.transcripts.tree.main_line`)."""
    reader = RecordReader(path, stream, skip_invalid, Counter())
    return main_line_ids(PARSERS[fmt], reader.records())


def _whole_document(path, first: Line, values, reader: RecordReader, fmt, skip_invalid):
    """One JSON document (an OpenAI message list, an OpenHands trajectory): its records are
    numbered by their place in it (their fallback source ids are ``L<n>``), and errors name
    them as messages. A document none of whose first records fits the format is refused."""
    reader.layout.name = "document"
    for item in values:
        if type(item) is Broken and item.incomplete:
            continue
        raise TranscriptError(
            path, item.number, "more after the JSON document (one document, or JSON lines)"
        )
    doc = first.obj
    fmt = fmt or detect_format(doc, path)
    if fmt not in ("openai-chat", "openhands"):
        raise TranscriptError(
            path, None, f"a single JSON document cannot be a {fmt} transcript (JSONL expected)"
        )
    messages = (
        doc
        if isinstance(doc, list)
        else next((doc[k] for k in ("messages", "history") if isinstance(doc.get(k), list)), None)
    )
    assert messages is not None, "a document holds its message list (_is_document)"
    samples = [m for m in messages[:_PEEK_RECORDS] if isinstance(m, dict)]
    if samples and not any(PARSERS[fmt].fits(s) for s in samples):
        # none fits (an OpenHands trajectory as openai-chat); a document is one of these two
        check_fit(path, fmt, samples, among=("openai-chat", "openhands"))
    parser = PARSERS[fmt]()
    parser.skipped = reader.skipped
    lines = []
    for i, m in enumerate(messages, start=1):
        if isinstance(m, dict):
            lines.append(Line(i, m))
        elif skip_invalid:
            parser.skipped["invalid_record"] += 1
        else:
            raise TranscriptError(
                path,
                None,
                f"message #{i} is not a JSON object (use --skip-invalid to skip such messages)",
            )
    transcript = parse(parser, lines, path, skip_invalid)
    transcript.numbered_by_message = True
    transcript.layout = reader.layout
    return transcript


def detect_format(first: dict | list, path: str, samples: Sequence[dict] = ()) -> str:
    """Name the format of a transcript from its first JSON record (or whole-file JSON value);
    when that one does not tell (a file without its header), the format most of ``samples``
    fit."""
    events: object = first
    if isinstance(first, dict):  # OpenHands' evaluation output: {"instance_id", "history": [...]}
        events = next(
            (first[k] for k in ("history", "messages") if isinstance(first.get(k), list)), None
        )
    if (
        isinstance(events, list)
        and events
        and isinstance(events[0], dict)
        and PARSERS["openhands"].fits(events[0])
    ):
        return "openhands"  # a trajectory: an array of events
    if isinstance(first, list) or (
        isinstance(first, dict)
        and (isinstance(first.get("history"), list) or isinstance(first.get("messages"), list))
    ):
        return "openai-chat"
    if not isinstance(first, dict):
        raise TranscriptError(path, None, "not a transcript: the first record is not a JSON object")
    kind = first.get("type")
    if kind == "ctxtool_session":
        return "ctxtool-archive"
    if kind == "session" and ("cwd" in first or "version" in first or "id" in first):
        return "pi"
    if (
        kind in ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
        and "payload" in first
    ):
        return "codex"
    if "record_type" in first or (
        kind is None
        and {"id", "timestamp"} <= set(first)
        and ("instructions" in first or "git" in first)
    ):
        return "codex"
    if (
        "sessionId" in first
        or kind in ("summary", "queue-operation", "file-history-snapshot")
        or ("uuid" in first and kind in ("user", "assistant", "system"))
    ):
        return "claude-code"
    if "source" in first and ("action" in first or "observation" in first):
        return "openhands"
    if "role" in first:
        return "openai-chat"
    scores = {name: sum(1 for s in samples if p.fits(s)) for name, p in PARSERS.items()}
    best = max(scores, key=scores.__getitem__)
    if scores[best] * 2 > len(samples):
        return best
    keys = ", ".join(sorted(str(k)[:40] for k in first)[:8])
    raise TranscriptError(
        path,
        1,
        f"cannot tell the transcript format (first record has keys "
        f"{keys}); pass --format {{{','.join(FORMATS)}}}",
    )
