"""Database errors as one line an operator can act on: said once, at the edge, never with a
password in it."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from .urls import mask_url, scrub, sqlite_path

# MySQL error codes worth a sentence of their own.
_MYSQL_HINTS = {
    1045: "access denied: check the user and password in the URL",
    1698: "access denied: this user may not log in with a password here (e.g. root with "
    "unix_socket auth); create a user with a password, or connect over the socket",
    1049: "unknown database: create it with `ctxtool migrate up --create-database` "
    "(or CREATE DATABASE ... CHARACTER SET utf8mb4)",
    1044: "this user has no privilege on that database; --create-database also needs the "
    "CREATE privilege",
    2003: "cannot reach the server: is it running and listening there?",
    2005: "unknown host",
    2013: "lost connection to the server",
    1205: "another transaction held a row this one needed for longer than "
    "innodb_lock_wait_timeout (an import of the same transcript, a compaction, or the "
    "runtime); nothing of this one was written: run it again once that one is done",
}


def error_code(exc: BaseException) -> int | None:
    """The server's error number a driver exception carries (PyMySQL: ``args[0]``)."""
    args = getattr(getattr(exc, "orig", None), "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def describe_db_error(exc: BaseException, url: str | URL | None = None) -> str:
    """One line that says what went wrong talking to the database, without credentials."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        orig = exc.orig
        args: tuple[Any, ...] = getattr(orig, "args", ())
        code = error_code(exc)
        detail = str(args[1]) if code is not None and len(args) > 1 else str(orig)
        hint = _MYSQL_HINTS.get(code) if code is not None else None
        text = f"{detail} ({hint})" if hint else detail
        if code is not None:
            text = f"[{code}] {text}"
    else:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    where = f" at {mask_url(url)}" if url is not None else ""
    text = scrub(text, url)
    if "unable to open database file" in text and url is not None:
        text += _sqlite_file_hint(url)
    return f"database error{where}: {text}"


def _sqlite_file_hint(url) -> str:
    try:
        from sqlalchemy.engine import make_url

        path = sqlite_path(make_url(url))
    except Exception:  # a hint only: never fail while describing a failure
        return ""
    if path is None:
        return ""
    if not path.parent.is_dir():
        return f" ({path}: directory {path.parent} does not exist)"
    return f" ({path}: check the permissions of the file and its directory)"
