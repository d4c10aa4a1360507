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


class FileFailure(CtxtoolError):
    """One file of an import that was not (wholly) imported, while the files after it were.

    It says the file as shown, where in it (``line``: a line, or a message's place in a JSON
    document; None for the file as a whole), what is wrong (``detail``, without the file), and
    what was committed before the failure: ``kept``, the messages the session then holds and
    its id, when bounded transactions committed a prefix, which importing the file again
    continues. ``said`` is the failure's line as its cause said it (naming the file where the
    cause did); the message is that line, then what was kept.
    """

    def __init__(
        self,
        said: str,
        file: str,
        detail: str,
        line: int | None = None,
        numbered_by_message: bool = False,
        kept: tuple[int, int | None] | None = None,
    ):
        self.said, self.file, self.detail, self.line = said, file, detail, line
        self.numbered_by_message, self.kept = numbered_by_message, kept
        super().__init__(said + self._kept_sentence())

    def _kept_sentence(self) -> str:
        if self.kept is None:
            return ""
        messages, session_id = self.kept
        return (
            f"; {messages:,} messages of session {session_id} are stored (committed before "
            "the failure), and importing the same file again continues from there"
        )

    @property
    def where(self) -> str | None:
        """``line 3`` or ``message #3``: the place in the file, without its name."""
        if self.line is None:
            return None
        return f"message #{self.line}" if self.numbered_by_message else f"line {self.line}"

    @property
    def message(self) -> str:
        """What is wrong and what was kept, without the file's name."""
        return self.detail + self._kept_sentence()
