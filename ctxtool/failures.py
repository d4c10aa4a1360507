"""Any exception as what the operator reads: one line and an exit code.

The one translation used by the command line (a command's failure) and by batches (one
file's or one session's failure, which must not end the others): library errors carry their
own code, database errors are described without credentials, a file the system refused is
named, and anything else is a bug, said as such, unless ``CTXTOOL_DEBUG`` asks for the
traceback.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from .core.errors import CtxtoolError
from .db import describe_db_error, scrub
from .interrupts import INTERRUPTED

DEBUG_ENV = "CTXTOOL_DEBUG"  # set: a bug raises with its traceback instead of one line


@dataclass(frozen=True)
class FailureLine:
    """What to say (one line, credentials removed) and the exit code to end with."""

    message: str
    exit_code: int


def describe_failure(
    exc: BaseException,
    *,
    url: str | URL | None = None,
    secrets: Iterable[str | URL | None] = (),
    where: str | None = None,
) -> FailureLine:
    """``exc`` as a :class:`FailureLine`.

    ``url`` is the database the work was done on: a database error names it (masked) and its
    password is scrubbed from every message. ``secrets`` are further URLs whose passwords must
    not be shown (a summarizer's base URL). ``where`` (a file name) prefixes the messages that
    do not already say which file they are about. A bug re-raises ``exc`` when ``CTXTOOL_DEBUG``
    is set, so its traceback is seen.
    """
    prefix = f"{where}: " if where else ""
    if isinstance(exc, CtxtoolError):
        failure = FailureLine(str(exc), exc.exit_code)
    elif isinstance(exc, SQLAlchemyError):
        failure = FailureLine(prefix + describe_db_error(exc, url), 1)
    elif isinstance(exc, KeyboardInterrupt):
        failure = FailureLine("interrupted", INTERRUPTED)
    elif isinstance(exc, OSError):
        failure = FailureLine(_os_error(exc, where), 1)
    else:
        if os.environ.get(DEBUG_ENV):
            raise exc
        failure = FailureLine(prefix + internal_error(exc), 1)
    message = failure.message
    for secret in (url, *secrets):
        message = scrub(message, secret)
    return FailureLine(message, failure.exit_code)


def _os_error(exc: OSError, where: str | None) -> str:
    """``where: no such file or directory``: the system's reason, for the file it was about."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    reason = reason[:1].lower() + reason[1:]
    subject = where or (str(exc.filename) if exc.filename is not None else None)
    return f"{subject}: {reason}" if subject else reason


def internal_error(exc: BaseException) -> str:
    """A bug as one line: what it was and how to see the traceback."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return (
        f"internal error: {type(exc).__name__}: {text} — this is a bug in ctxtool; "
        f"{DEBUG_ENV}=1 shows the traceback"
    )
