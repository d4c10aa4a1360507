"""Stored times as a runtime may have written them.

A SQLite ``TEXT`` column holds whatever a runtime wrote: ctxtool's ``YYYY-MM-DD
HH:MM:SS.ffffff``, ISO 8601 with ``T`` and an offset, or a Unix epoch in seconds or
milliseconds (JavaScript's ``Date.now()``); MySQL and MariaDB without ``NO_ZERO_DATE`` (MariaDB's
default) keep ``0000-00-00`` and hand it over as text. SQLAlchemy's SQLite type accepted only
the first shape, and text reached code expecting a datetime: every read command ended in a
traceback. Read through :class:`StoredTime`, a time is a naive UTC datetime or None.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import sqlalchemy as sa

_EPOCH = re.compile(r"^-?\d+(\.\d+)?$")
_MILLISECONDS_FROM = 100_000_000_000  # a larger epoch is in milliseconds (after 5138 in seconds)
STORAGE_FORMAT = "%Y-%m-%d %H:%M:%S.%f"  # SQLAlchemy's, so rows it wrote compare as before


def parse_stored_time(value) -> datetime | None:
    """A stored time as a naive UTC datetime; None when there is none or it is not a time."""
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = str(value).strip()
    try:
        if isinstance(value, (int, float)) or _EPOCH.match(text):
            seconds = float(text)
            if abs(seconds) >= _MILLISECONDS_FROM:
                seconds /= 1000
            return datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)
        when = datetime.fromisoformat(text)
        if when.tzinfo is not None:  # 0001-01-01T00:00+01:00 is before the first UTC time
            when = when.astimezone(UTC).replace(tzinfo=None)
    except (ValueError, OverflowError, OSError):
        return None
    return when


class StoredTime(sa.types.TypeDecorator):
    """DATETIME, read in any shape above; on SQLite written as SQLAlchemy writes it (so text
    comparisons with rows it wrote hold), read as the raw text and parsed here."""

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name == "sqlite":
            return dialect.type_descriptor(sa.String())
        return dialect.type_descriptor(sa.DateTime())

    def process_bind_param(self, value, dialect):
        if dialect.name == "sqlite" and isinstance(value, datetime):
            if value.tzinfo is not None:
                value = value.astimezone(UTC).replace(tzinfo=None)
            return value.strftime(STORAGE_FORMAT)
        return value

    def process_result_value(self, value, dialect):
        return value if value is None or isinstance(value, datetime) else parse_stored_time(value)


# Unix seconds Python's datetime can hold (years 1 to 9999): a number outside them is no time.
_EPOCH_RANGE = (-62_135_596_800, 253_402_300_799)
_ISO_DATE = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*"
_OWN_SHAPE = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]*"


def sqlite_time_compare(
    column: sa.ColumnElement, op: str, when: datetime, *, no_time: bool, slack: float = 0.0
) -> sa.ColumnElement:
    """SQL (SQLite) for ``column <= when`` or ``column >= when`` (``op``) as
    :func:`parse_stored_time` reads the column, so that it holds for every shape a runtime
    wrote, not only for ctxtool's: compared as text, ``2026-12-01T09:46`` sorts after
    ``2026-12-01 10:42`` and the epoch ``1764582400`` before any date.

    ctxtool's own text (19, 23 or 26 characters) is compared as text, exactly, as before; an
    epoch in seconds or milliseconds as a number; other ISO 8601 text (``T``, an offset, ``Z``)
    through ``julianday()``, which takes offsets to UTC (to the millisecond). A value that is no
    time matches as ``no_time``. ``slack`` seconds widen the match, for a caller that re-checks
    each row exactly in Python and needs every row that may match.
    """
    if op not in ("<=", ">="):
        raise ValueError(f"op must be <= or >=, not {op!r}")
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    sign = 1 if op == "<=" else -1

    def compare(left, right):
        return left <= right if op == "<=" else left >= right

    raw = sa.type_coerce(column, sa.Text)
    text = sa.func.trim(sa.cast(column, sa.Text))
    own = sa.and_(raw.op("GLOB")(_OWN_SHAPE), sa.func.length(raw).in_((19, 23, 26)))
    matches_no_time = sa.literal(no_time)
    # -?\d+(\.\d+)?, as parse_stored_time's _EPOCH: starts with a digit, digits and at most one
    # dot, not last.
    digits = sa.case((text.op("GLOB")("-*"), sa.func.substr(text, 2)), else_=text)
    epoch = sa.and_(
        digits.op("GLOB")("[0-9]*"),
        sa.not_(digits.op("GLOB")("*[^0-9.]*")),
        sa.not_(digits.op("GLOB")("*.*.*")),
        sa.not_(digits.op("GLOB")("*.")),
    )
    number = sa.cast(text, sa.Float)
    seconds = sa.case((sa.func.abs(number) >= _MILLISECONDS_FROM, number / 1000.0), else_=number)
    bound = (when - datetime(1970, 1, 1)).total_seconds() + sign * slack
    by_number = sa.case(
        (sa.or_(seconds < _EPOCH_RANGE[0], seconds > _EPOCH_RANGE[1]), matches_no_time),
        else_=compare(seconds, bound),
    )
    day = sa.func.julianday(text)
    by_date = sa.case(
        (sa.or_(sa.not_(text.op("GLOB")(_ISO_DATE)), day.is_(None)), matches_no_time),
        else_=compare(
            day, sa.func.julianday(when.strftime(STORAGE_FORMAT)) + sign * slack / 86400.0
        ),
    )
    return sa.case(
        (own, compare(raw, when.strftime(STORAGE_FORMAT))), (epoch, by_number), else_=by_date
    )
