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
from datetime import datetime, timezone

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
            return datetime.fromtimestamp(seconds, timezone.utc).replace(tzinfo=None)
        when = datetime.fromisoformat(text)
    except (ValueError, OverflowError, OSError):
        return None
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc).replace(tzinfo=None)
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
                value = value.astimezone(timezone.utc).replace(tzinfo=None)
            return value.strftime(STORAGE_FORMAT)
        return value

    def process_result_value(self, value, dialect):
        return value if value is None or isinstance(value, datetime) else parse_stored_time(value)
