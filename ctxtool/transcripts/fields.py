"""Typed access to the fields of a source record: every value is checked before it is used.

Transcripts are other programs' output and sometimes hostile (a list where an id belongs, a
number as a role): the accessors raise :class:`InvalidRecord` naming the field, which the
shared walk reports as ``file:line`` instead of a traceback deep in a parser. Fields that are
only informative (a usage count, a time) are read leniently: a wrong type reads as absent.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

import orjson

from ..core.source_records import InvalidRecord

# A source id plus the suffix a parser may add (``#text``, ``@L12345``) fits VARCHAR(191).
MAX_ID_CHARS = 160
# Names, tool call ids and models are VARCHAR(191) in the store.
MAX_NAME_CHARS = 191

_JSON_TYPES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    type(None): "null",
}


def json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def string(rec: dict, key: str, max_chars: int | None = None) -> str | None:
    """``rec[key]`` as a string, None when absent or null; anything else is invalid."""
    value = rec.get(key)
    if type(value) is str and (max_chars is None or len(value) <= max_chars):
        return value  # the usual case first: this runs several times for every record
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRecord(f"{key!r} must be a string, not {json_type(value)}")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidRecord(f"{key!r} is {len(value)} characters long (at most {max_chars})")
    return value


def identifier(rec: dict, key: str) -> str | None:
    """An id that becomes part of a stored key (a record uuid, a call id)."""
    value = rec.get(key)
    if type(value) is str and len(value) <= MAX_ID_CHARS:
        return value  # the usual case in one call: parsers ask for several ids a record
    return string(rec, key, MAX_ID_CHARS)


def name(rec: dict, key: str) -> str | None:
    """A short name stored in a VARCHAR(191) column (a tool name, a model)."""
    value = rec.get(key)
    if type(value) is str and len(value) <= MAX_NAME_CHARS:
        return value
    return string(rec, key, MAX_NAME_CHARS)


def obj(rec: dict, key: str) -> dict | None:
    """``rec[key]`` as a JSON object, None when absent or null."""
    value = rec.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise InvalidRecord(f"{key!r} must be an object, not {json_type(value)}")


INT_RANGE = range(-(2**31), 2**31)  # an INT column
COUNT_RANGE = range(2**31)  # a count of tokens an INT column holds


def integer(value: Any) -> int | None:
    """An informative count: an integer an INT column holds, or None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool) and value in INT_RANGE:
        return value
    return None


def token_count(value: Any) -> int | None:
    """A count of tokens (``preTokens``, ``tokensBefore``, a context window): a whole number
    from 0 that an INT column holds, or None (a negative count is no count)."""
    if isinstance(value, int) and not isinstance(value, bool) and value in COUNT_RANGE:
        return value
    return None


def parse_time(value: Any) -> datetime | None:
    """ISO-8601 text or epoch milliseconds as naive UTC; None for anything unparseable or
    outside the years a DATETIME column holds (1000-9999)."""
    if type(value) is str and value[-1:] == "Z":
        # The usual spelling (UTC) first: this runs for every record of a transcript.
        try:
            parsed = datetime.fromisoformat(value[:-1])
        except ValueError:
            return None
        if parsed.tzinfo is None:
            return parsed if parsed.year >= 1000 else None
    other = _parse_time(value)
    return other if other is not None and other.year >= 1000 else None


def _parse_time(value: Any) -> datetime | None:
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = value / 1000 if value > 1e11 else value
            return datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)
        if isinstance(value, str) and value:
            # Ending in Z (UTC) the time is already naive UTC once the Z is gone.
            parsed = datetime.fromisoformat(value[:-1] if value[-1] == "Z" else value)
            if parsed.tzinfo is not None:
                parsed = parsed.astimezone(UTC).replace(tzinfo=None)
            return parsed
    except (ValueError, OverflowError, OSError):
        return None
    return None


def text_of(content: Any, skipped=None, kinds: tuple[str, ...] = ("text",)) -> str:
    """Plain text of a string or a list of content blocks (only blocks of ``kinds``); the
    other blocks are counted in ``skipped`` as ``block:<type>``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                kind = block.get("type")
                if kind in kinds or (kind is None and "text" in block):
                    text = block.get("text")
                    parts.append(text if isinstance(text, str) else _as_text(text))
                elif skipped is not None:
                    skipped[f"block:{label(kind)}"] += 1
        return "\n".join(p for p in parts if p)
    return _as_text(content)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def label(kind: Any) -> str:
    """A record kind as a counter label: hostile kinds (objects, huge strings) stay short."""
    if kind is None:
        return "None"
    return kind[:64] if isinstance(kind, str) else json_type(kind)


# The fallback for what orjson does not serialise (integers beyond 64 bits).
_arguments_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def required(value: str | None, what: str) -> str:
    """A tool call's id or function name, which an API requires (a result is paired with its
    call by the id): a call without one (absent, null or empty) is an invalid record, never a
    call stored with ``""`` that validate then reports and no API accepts."""
    if not value:
        raise InvalidRecord(f"a tool call has no {what}")
    return value


def tool_call(call_id: str, name_: str, arguments: Any) -> dict:
    """An OpenAI-style tool call; non-string arguments are serialised as compact JSON (orjson:
    ten times the standard library's speed, and a tool call in every third message)."""
    if not isinstance(arguments, str):
        value = arguments if arguments is not None else {}
        try:
            arguments = orjson.dumps(value).decode("utf-8")
        except orjson.JSONEncodeError:
            arguments = _arguments_json(value)
    return {"id": call_id, "type": "function", "function": {"name": name_, "arguments": arguments}}


def normalise_usage(
    input_tokens: Any = None,
    output_tokens: Any = None,
    cache_read: Any = None,
    cache_write: Any = None,
) -> dict | None:
    """Provider usage in one shape; ``context_tokens`` is the prompt size the provider saw."""
    i, o, r, w = (
        _count(input_tokens),
        _count(output_tokens),
        _count(cache_read),
        _count(cache_write),
    )
    if i is None and o is None and r is None and w is None:
        return None
    i, o, r, w = i or 0, o or 0, r or 0, w or 0
    return {
        "input_tokens": i,
        "output_tokens": o,
        "cache_read_tokens": r,
        "cache_write_tokens": w,
        "context_tokens": i + r + w,
    }


def _count(value: Any) -> int | None:
    if type(value) is int:
        return value if value in COUNT_RANGE else None
    if value is None:
        return None
    if type(value) is float and math.isfinite(value):
        return token_count(int(value))
    return None


def source_key(value: str) -> str:
    """An id as stored. Ids are compared byte for byte, but MySQL's binary collation still pads
    with spaces ('a' = 'a '), so an id that ends in a space gets a '~' to stay distinct."""
    return value + "~" if value.endswith(" ") else value


class UniqueIds:
    """Source ids, made unique within a file: a repeated id gets its line number appended, and
    where that is taken too (three records glued on one line, or line ends a reader does not
    split at, all numbered by that line) the count of the id so far: ``L1``, ``L1@L1``,
    ``L1@L1:3``."""

    def __init__(self):
        self.seen: set[str] = set()

    def __call__(self, wanted: str | None, line: int, suffix: str = "") -> str:
        base = wanted + suffix if wanted else f"L{line}{suffix}"
        if base[-1] == " ":
            base = source_key(base)
        if base in self.seen:
            repeated, n = f"{base}@L{line}", 2
            while repeated in self.seen:
                n += 1
                repeated = f"{base}@L{line}:{n}"
            base = repeated
        self.seen.add(base)
        return base


_HEADING_MARKS = re.compile(r"^#{1,6}(\s+|$)")


def first_line_title(text: str | None, limit: int = 80) -> str | None:
    """The first line of ``text`` as a title, without the marks of a Markdown heading (a Pi
    request that opens with ``## Research Plan`` is titled "Research Plan")."""
    if not text or not text.strip():
        return None
    line = text.strip().splitlines()[0]
    line = _HEADING_MARKS.sub("", line) if line[0] == "#" else line
    return (line[: limit - 1] + "…") if len(line) > limit else (line or None)
