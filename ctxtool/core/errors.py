"""The one error type the library raises for conditions a user can act on.

The CLI turns it into a one-line message and ``exit_code``; library callers catch it.
"""

from __future__ import annotations

from pathlib import Path


class CtxtoolError(Exception):
    """A failure with a message meant for the operator (never a traceback)."""

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class SchemaNotCurrent(CtxtoolError):
    """The database is behind (or ahead of, or drifted from) the migrations this ctxtool ships."""

    exit_code = 3


class MissingDatabase(SchemaNotCurrent):
    """A SQLite store that does not exist yet (only `migrate up` creates one)."""

    def __init__(self, message: str, path: Path):
        super().__init__(message)
        self.path = path


class InvalidSettings(CtxtoolError):
    """Settings no session can be run with (a reserve that takes the whole window, a duration
    that is no duration): a usage error, never one session's failure."""

    exit_code = 2


class PartialFailure(CtxtoolError):
    """A batch finished but some items failed; the report says which."""

    exit_code = 4
