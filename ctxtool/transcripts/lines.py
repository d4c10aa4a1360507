"""Reading a transcript's lines: each checked to be a JSON object a database can store (valid
UTF-8 and Unicode, no NaN, not nested past what the parser copes with), the format detected from
the first records, and a file whose records mostly do not fit the format refused before anything
is written. A pretty-printed JSON document (an OpenAI message list) is told apart from JSONL.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable, Iterator

import orjson

from . import FORMATS, PARSERS, Line, Transcript, TranscriptError, parse
from .walk import main_line_ids

_PEEK_RECORDS = 100  # records read ahead to detect and check the format
_PEEK_LINES = 400
_PEEK_BYTES = 4 * 1024 * 1024  # read ahead no more than this (records can be megabytes each)


class LineReader:
    """JSON lines from a binary stream, with line numbers, clear errors and optional skipping."""

    def __init__(self, path: str, stream: Iterable[bytes], skip_invalid: bool, skipped: Counter):
        self.path = path
        self.stream = stream
        self.skip_invalid = skip_invalid
        self.skipped = skipped

    def __iter__(self) -> Iterator[Line]:
        loads, decode_error = orjson.loads, orjson.JSONDecodeError
        for number, raw in enumerate(self.stream, start=1):
            try:  # the usual line first, in one call: decode_line's checks, inlined
                obj = loads(raw)
            except decode_error:
                obj = None
            if type(obj) is dict:
                yield Line(number, obj)
                continue
            if not raw.strip():
                continue
            obj, problem = decode_line(raw)
            if not raw.endswith(b"\n") and problem.startswith(("malformed", "invalid UTF-8")):
                # An unterminated last line: the agent is still writing it. Not an error;
                # the next import of the grown file picks it up.
                self.skipped["incomplete_last_line"] += 1
            elif not self.skip_invalid:
                raise TranscriptError(
                    self.path, number, problem + " (use --skip-invalid to skip such lines)"
                )
            else:
                self.skipped["invalid_line"] += 1


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


_strict_decode = json.JSONDecoder(parse_constant=_reject_constant).decode


def decode_line(raw: bytes) -> tuple[object, str | None]:
    """(the line's object, None), or (None, what is wrong with it).

    orjson decodes (three times the standard library's speed on real transcripts) and refuses by
    itself what a database cannot store: invalid UTF-8, lone surrogates, NaN and Infinity, numbers
    beyond a double, nesting past 1024 levels. Only a line it refuses is read again with the
    standard library, for an error message that points at the problem."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return None, _diagnose(raw, exc)
    if type(obj) is not dict:
        return None, f"expected a JSON object, found {type(obj).__name__}"
    return obj, None


def _diagnose(raw: bytes, refused: orjson.JSONDecodeError) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"invalid UTF-8 at byte {exc.start} of the line"
    if b"\x00" in raw:
        return "binary data, not a text transcript"
    try:
        _strict_decode(text)
    except json.JSONDecodeError as exc:
        snippet = text.strip()[:40].encode("unicode_escape").decode("ascii")
        reason = exc.msg[:-3] if exc.msg.endswith(" at") else exc.msg
        return f"malformed JSON ({reason} at column {exc.colno}): {snippet!r}"
    except ValueError as exc:  # NaN/Infinity, an integer of thousands of digits
        return f"malformed JSON ({str(exc).splitlines()[0][:80]})"
    except RecursionError:
        return "malformed JSON (nested too deeply)"
    if "surrogate" in refused.msg:
        return "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff): not valid Unicode"
    return f"malformed JSON ({refused.msg} at column {refused.colno})"


def read_transcript(
    path: str,
    stream: Iterable[bytes],
    fmt: str | None,
    skip_invalid: bool = False,
    main: set[str] | None = None,
) -> Transcript:
    """Detect the format (unless given) from the first records, check the file's records fit
    it, and start parsing (lazily: records stream as the caller consumes them)."""
    raw_iter = iter(stream)
    peeked: list[bytes] = []
    samples: list[dict] = []
    first_bad: tuple[int, str, bytes] | None = None
    peeked_bytes = 0
    for raw in raw_iter:
        peeked.append(raw)
        peeked_bytes += len(raw)
        stripped = raw.strip()
        if not stripped:
            continue
        if b"\x00" in raw:
            raise TranscriptError(path, len(peeked), "binary data, not a text transcript")
        obj, problem = decode_line(raw)
        if (
            problem is not None
            and not samples
            and first_bad is None
            and stripped[:1] in (b"[", b"{")
            and stripped.endswith((b"{", b"[", b","))
        ):
            # Not JSONL: one pretty-printed JSON document (an OpenAI message list), whose
            # first line opens an object or array.
            return _whole_document(path, peeked, raw_iter, fmt, skip_invalid)
        if problem is None:
            samples.append(obj)
        elif first_bad is None:
            first_bad = (len(peeked), problem, raw)
            if not samples and problem.startswith("expected a JSON object, found list"):
                return _whole_document(path, peeked, raw_iter, fmt, skip_invalid)
        if (
            len(samples) >= _PEEK_RECORDS
            or len(peeked) >= _PEEK_LINES
            or (samples and peeked_bytes >= _PEEK_BYTES)
        ):
            break
    if not any(r.strip() for r in peeked):
        raise TranscriptError(path, None, "file is empty")
    if not samples:
        _no_records(path, first_bad)
    first = samples[0]
    if (
        len(samples) == 1
        and "role" not in first
        and (isinstance(first.get("messages"), list) or isinstance(first.get("history"), list))
    ):
        # One compact JSON document on one line ({"messages": [...]}), not JSONL of messages.
        return _whole_document(path, peeked, raw_iter, fmt, skip_invalid)
    fmt = fmt or detect_format(first, path, samples)
    check_fit(path, fmt, samples)
    parser = PARSERS[fmt]()
    lines = LineReader(path, itertools.chain(peeked, raw_iter), skip_invalid, parser.skipped)
    return parse(parser, lines, path, skip_invalid, main)


def _no_records(path: str, first_bad: tuple[int, str, bytes] | None):
    """No line of the first ones is a JSON object: this is no JSONL transcript (skipping
    lines would not help), or only an unterminated first line has been written so far."""
    number, problem, raw = first_bad
    if raw.endswith(b"\n"):
        raise TranscriptError(path, number, f"{problem}; this is not a JSONL transcript")
    raise TranscriptError(path, None, "no complete JSON record in the first lines")


def check_fit(path: str, fmt: str, samples: list[dict]) -> None:
    """Refuse a file whose first records mostly do not fit ``fmt`` (a wrong --format, or a
    file that is no transcript), naming the format they do look like."""
    fitting = sum(1 for s in samples if PARSERS[fmt].fits(s))
    if fitting * 2 > len(samples):
        return
    scores = {name: sum(1 for s in samples if p.fits(s)) for name, p in PARSERS.items()}
    best = max(scores, key=scores.get)
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
    return main_line_ids(PARSERS[fmt], LineReader(path, stream, skip_invalid, Counter()))


def _whole_document(path, peeked, raw_iter, fmt, skip_invalid: bool = False) -> Transcript:
    """One JSON document (an OpenAI message list): its messages are numbered as its lines
    (their fallback source ids are ``L<n>``), and errors name them as messages."""
    data = b"".join(itertools.chain(peeked, raw_iter))
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            line = data.count(b"\n", 0, bad.start) + 1
            raise TranscriptError(path, line, "invalid UTF-8") from None
        raise TranscriptError(
            path, exc.lineno, f"malformed JSON ({exc.msg} at column {exc.colno})"
        ) from None
    fmt = fmt or detect_format(doc, path)
    if fmt != "openai-chat":
        raise TranscriptError(
            path, None, f"a single JSON document cannot be a {fmt} transcript (JSONL expected)"
        )
    messages = (
        doc
        if isinstance(doc, list)
        else next((doc[k] for k in ("messages", "history") if isinstance(doc.get(k), list)), None)
    )
    if not isinstance(messages, list):
        raise TranscriptError(path, None, "expected a list of messages")
    parser = PARSERS[fmt]()
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
    return transcript


def detect_format(first: dict | list, path: str, samples: list[dict] = ()) -> str:
    """Name the format of a transcript from its first JSON record (or whole-file JSON value);
    when that one does not tell (a file without its header), the format most of ``samples``
    fit."""
    if isinstance(first, list) or (
        isinstance(first, dict)
        and (isinstance(first.get("history"), list) or isinstance(first.get("messages"), list))
    ):
        return "openai-chat"
    if not isinstance(first, dict):
        raise TranscriptError(path, None, "not a transcript: the first record is not a JSON object")
    kind = first.get("type")
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
    if "role" in first:
        return "openai-chat"
    scores = {name: sum(1 for s in samples if p.fits(s)) for name, p in PARSERS.items()}
    best = max(scores, key=scores.get)
    if scores[best] * 2 > len(samples):
        return best
    keys = ", ".join(sorted(str(k)[:40] for k in first)[:8])
    raise TranscriptError(
        path,
        1,
        f"cannot tell the transcript format (first record has keys "
        f"{keys}); pass --format {{{','.join(FORMATS)}}}",
    )
