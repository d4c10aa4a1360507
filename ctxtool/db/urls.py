"""Database URLs: which one is in force, what it may say, and how it is printed.

A URL carries a password, and operators paste URLs wrong in every way there is (no scheme, a
missing colon, an unescaped ``@`` in the password, the password as a query argument). Masking
is therefore textual and works on any string, parsed or not; a URL that parses is also checked
here, so a bad port or an unknown option is one line before any driver sees it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from ..config_file import DEFAULT_URL as DEFAULT_URL
from ..config_file import URL_ENV as URL_ENV
from ..config_file import URL_ENVS
from ..core.errors import CtxtoolError

# What people type, and the driver ctxtool ships for it.
_DRIVER_ALIASES = {
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
    "sqlite": "sqlite",
    "sqlite+pysqlite": "sqlite",
}
_SUPPORTED = (
    "use mysql+pymysql://user:pass@host:3306/db (or mysql://, mariadb://), sqlite:///path.db "
    "or the SQLite file's path alone"
)

# Query arguments PyMySQL takes from a URL, and which of them are numbers.
_MYSQL_OPTIONS = {
    "charset",
    "collation",
    "connect_timeout",
    "read_timeout",
    "write_timeout",
    "unix_socket",
    "init_command",
    "local_infile",
    "ssl_ca",
    "ssl_cert",
    "ssl_key",
    "ssl_verify_cert",
    "ssl_verify_identity",
    "ssl_disabled",
    "program_name",
    "binary_prefix",
    "client_flag",
    "max_allowed_packet",
    "bind_address",
    "sql_mode",
}
_MYSQL_NUMERIC = {
    "connect_timeout",
    "read_timeout",
    "write_timeout",
    "client_flag",
    "max_allowed_packet",
    "local_infile",
}
# The ranges PyMySQL takes (outside them it raises ValueError, OverflowError or struct.error
# on connecting): timeouts of 1 s to a year, client flags that pack as a signed 32-bit int.
_MYSQL_RANGES = {
    "connect_timeout": (1, 31_536_000),
    "read_timeout": (1, 31_536_000),
    "write_timeout": (1, 31_536_000),
    "client_flag": (0, 2**31 - 1),
}
# Options PyMySQL accepts and then refuses to connect with (NotImplementedError).
_MYSQL_UNSUPPORTED = {
    "compress": "PyMySQL, the bundled driver, does not compress",
    # Each write would commit on its own: a failed or killed import would
    # leave the batches before the failure behind.
    "autocommit": "ctxtool's writes are transactions: an import stores all of a file or nothing",
}
# Query arguments Python's sqlite3 takes through SQLAlchemy, and which of them are numbers
# (SQLite URI parameters such as mode=ro go in a file: URI, with uri=true).
_SQLITE_OPTIONS = {
    "timeout",
    "isolation_level",
    "detect_types",
    "check_same_thread",
    "cached_statements",
    "uri",
}
_SQLITE_NUMERIC = {"timeout", "detect_types", "cached_statements"}
_MYSQL_FILES = {"ssl_ca", "ssl_cert", "ssl_key"}
# Yes/no options SQLAlchemy hands PyMySQL as the URL's text, where any non-empty text is true:
# ``ssl_disabled=false`` turned TLS off. Read here, passed on as booleans (``driver_booleans``).
_MYSQL_BOOLEAN = {"ssl_disabled", "ssl_verify_cert", "ssl_verify_identity", "binary_prefix"}
_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}
_COLLATION = re.compile(r"utf8mb4_[A-Za-z0-9_]{1,60}")
_SECRET_KEYS = (
    "password",
    "passwd",
    "pwd",
    "ssl_key_password",
    "secret",
    "token",
    "key",
    "api_key",
    "apikey",
    "access_token",
)

_QUERY_SECRET = re.compile(rf"(?i)([?&;](?:{'|'.join(_SECRET_KEYS)})=)[^&;#\s]*")


def resolve_url(url: str | None = None) -> str:
    """The URL to use: the explicit one, else ``$CTXTOOL_DATABASE_URL``, else ``$DATABASE_URL``,
    else ./ctxtool.db."""
    return url or next((os.environ[v] for v in URL_ENVS if os.environ.get(v)), DEFAULT_URL)


def is_bare_path(text: str) -> bool:
    """Whether ``text`` is a file path rather than a URL (``./agents.db``, ``/srv/x.sqlite``):
    a SQLite file, as in sqlite-utils. No scheme, no ``@`` and no ``:`` — anything with those
    is a URL typed wrong (``root:pw@host/db``), refused with the form to use. A ``:`` is
    taken in a path that starts as one (``./notes:2024.db``, ``/srv/a:b.db``): ``notes:2024``
    alone cannot be told from ``user:password``."""
    if not text or "://" in text or "@" in text:
        return False
    return ":" not in text or text.startswith(_PATH_STARTS)


_PATH_STARTS = ("/", "./", "../", "~")


def sqlite_url_for(path: str) -> str:
    """The SQLite URL of a file path, relative or absolute."""
    return f"sqlite:///{path}"


def mask_url(url: str | URL) -> str:
    """The URL as it may be printed: every password replaced by ``***``.

    Textual, so it also masks what does not parse (see ``_password_span``), and password-like
    query arguments.
    """
    if isinstance(url, str) and is_bare_path(url):
        return url  # a file's path (./notes:2024.db) holds no password
    parsed = _parsed(url)
    if parsed is not None and parsed.password is not None:
        # The parser knows where the password ends (it may hold '?', '/' or '@'). It decodes
        # %20 in the user and database names and renders it back as a space: a URL that no
        # longer pastes as one word.
        url = parsed.render_as_string(hide_password=True).replace(" ", "%20")
    elif isinstance(url, URL):
        url = url.render_as_string(hide_password=False)
    text = str(url)
    span = _password_span(text, parses=parsed is not None)
    if span is not None:
        text = text[: span[0]] + "***" + text[span[1] :]
    return _QUERY_SECRET.sub(r"\1***", text)


def _parsed(url: str | URL) -> URL | None:
    """The URL as SQLAlchemy reads it, or None when it does not parse."""
    if isinstance(url, URL):
        return url
    try:
        return make_url(url)
    except (ArgumentError, ValueError):
        return None


def _password_span(text: str, parses: bool) -> tuple[int, int] | None:
    """Where a password may sit in ``text``: from the user's colon to the ``@`` before the host.

    For a URL that parses, the parser found no password, so only a plain ``user:pw@`` before
    the query can be one. For text that does not parse nothing can be trusted: the password
    may hold ``?``, ``/`` or ``@``, and the host may be missing altogether (``root:pw``). The
    span then runs to the *last* ``@`` anywhere, or, with no ``@``, over what follows the
    colon up to the next ``/`` unless that is a port number. Masking too much in a URL that
    is wrong anyway costs nothing; masking too little prints a password.
    """
    scheme_end = text.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    if parses:
        q = text.find("?", start)
        end = len(text) if q < 0 else q
    else:
        end = len(text)
    at = text.rfind("@", start, end)
    if at >= 0:
        colon = text.find(":", start, at)
        return (colon + 1, at) if colon >= 0 and colon + 1 < at else None
    if parses:
        return None
    colon = text.find(":", start)
    if colon < 0:
        return None
    slash = text.find("/", colon + 1)
    stop = len(text) if slash < 0 else slash
    after = text[colon + 1 : stop]
    if not after or after.isdigit():
        return None
    return colon + 1, stop


def secrets_of(url: str | URL | None) -> list[str]:
    """The passwords a URL holds (in the authority or the query), for scrubbing driver text."""
    if url is None or (isinstance(url, str) and is_bare_path(url)):
        return []
    url = _parsed(url) or url
    if isinstance(url, URL):
        found = [str(url.password)] if url.password else []
        found += [str(v) for k, v in url.query.items() if k.lower() in _SECRET_KEYS]
        return [s for s in found if s]
    text = str(url)
    span = _password_span(text, parses=False)
    found = []
    if span is not None:  # the widest reading, and the password up to its first '@'
        found.append(text[span[0] : span[1]])
        first_at = text.find("@", span[0], span[1])
        if first_at > span[0]:
            found.append(text[span[0] : first_at])
    found += [m.group(0).split("=", 1)[1] for m in _QUERY_SECRET.finditer(text)]
    return [s for s in found if s and s != "***"]


def scrub(text: str, url: str | URL | None) -> str:
    """Remove the passwords of ``url`` from ``text`` wherever a driver may have echoed them.

    A short password is replaced only as a whole word, so "pw" does not mangle every "pw" in
    an error message the way a bare string replace would.
    """
    for secret in sorted(secrets_of(url), key=len, reverse=True):
        if len(secret) >= 6:
            text = text.replace(secret, "***")
        else:
            text = re.sub(rf"(?<![\w]){re.escape(secret)}(?![\w])", "***", text)
    return text


def parse_url(raw: str) -> URL:
    """A checked URL: driver aliases resolved (``mysql://`` is PyMySQL), the port a number,
    every query argument one the driver knows, with a value of the right kind."""
    if is_bare_path(raw):
        raw = sqlite_url_for(raw)
    if "://" not in raw:
        hint = ""
        if "@" not in raw and ":" in raw:
            hint = f"; a file whose name holds ':' is given as ./{mask_url(raw)}"
        raise CtxtoolError(
            f"invalid database URL {mask_url(raw)!r}: no scheme ({_SUPPORTED}){hint}"
        )
    try:
        url = make_url(raw)
    except (ArgumentError, ValueError) as exc:
        raise CtxtoolError(
            f"invalid database URL {mask_url(raw)!r}: {_reason(exc, raw)} ({_SUPPORTED})"
        ) from None
    if url.port is not None and not 1 <= url.port <= 65535:
        raise CtxtoolError(
            f"invalid database URL {mask_url(raw)!r}: port {url.port} is out of range (1-65535)"
        )
    if url.host and "@" in url.host:
        raise CtxtoolError(
            f"invalid database URL {mask_url(raw)!r}: the password holds an "
            "unescaped '@'; write it as %40"
        )
    scheme = url.drivername
    if scheme in _DRIVER_ALIASES:
        url = url.set(drivername=_DRIVER_ALIASES[scheme])
    elif url.get_backend_name() in ("mysql", "mariadb"):
        if url.get_driver_name() != "pymysql":
            raise CtxtoolError(
                f"database URL {mask_url(raw)!r}: driver {url.get_driver_name()!r} is not "
                f"installed with ctxtool; use {url.get_backend_name()}+pymysql:// (or "
                f"{url.get_backend_name()}://)"
            )
    elif url.get_backend_name() != "sqlite":
        raise CtxtoolError(f"unsupported database URL {mask_url(raw)!r}: {_SUPPORTED}")
    if url.get_backend_name() == "sqlite" and (url.host or url.username or url.port):
        # sqlite://ha.db: SQLAlchemy's own message is four lines, about its own forms.
        name = url.host or ""
        raise CtxtoolError(
            f"database URL {mask_url(raw)!r}: a SQLite URL has three slashes before a relative "
            f"path (sqlite:///{name or 'file.db'}) and four before an absolute one "
            f"(sqlite:////srv/{name or 'file.db'}); or give the path alone (--db ./{name or 'file.db'})"
        )
    if url.get_backend_name() in ("mysql", "mariadb"):
        if not url.database:  # SQLAlchemy would fail an assertion on the first query
            raise CtxtoolError(
                f"database URL {mask_url(raw)!r} names no database: add it after the host, "
                "e.g. mysql://root@127.0.0.1:3306/agents"
            )
        _check_mysql_options(url, raw)
    else:
        _check_sqlite_options(url, raw)
        if url.database and url.database.startswith("~"):
            # Expanded once, here: the file opened is the one the messages name.
            url = url.set(database=os.path.expanduser(url.database))
    return url


def _check_sqlite_options(url: URL, raw: str) -> None:
    """Options sqlite3 takes; any other was ignored with a warning (``mode=ro`` left the file
    writable), a bad number failed as a bare ValueError."""
    if str(url.query.get("uri", "")).lower() in _TRUE:
        return  # the others are the file: URI's own parameters, for SQLite to read
    for key, value in url.query.items():
        if key not in _SQLITE_OPTIONS:
            raise CtxtoolError(
                f"database URL {mask_url(raw)!r}: unknown option {key!r} for "
                f"SQLite (known: {', '.join(sorted(_SQLITE_OPTIONS))}; SQLite's "
                "own URI parameters need sqlite:///file:path?...&uri=true)"
            )
        values = value if isinstance(value, tuple) else (value,)
        if key in _SQLITE_NUMERIC:
            wrong = next((v for v in values if not _sqlite_number(v, key == "timeout")), None)
            if wrong is not None:
                kind = "a number of seconds" if key == "timeout" else "a whole number"
                raise CtxtoolError(
                    f"database URL {mask_url(raw)!r}: {key} must be {kind}, not {wrong!r}"
                )


def _sqlite_number(text: str, fraction: bool) -> bool:
    if text.isdigit():
        return True
    try:
        return fraction and 0 <= float(text) < float("inf")
    except ValueError:
        return False


def driver_booleans(url: URL) -> tuple[URL, dict[str, bool]]:
    """The URL without its yes/no options, and those options as booleans for the driver's
    connect arguments (checked by :func:`parse_url`)."""
    found = {k: str(v).lower() in _TRUE for k, v in url.query.items() if k in _MYSQL_BOOLEAN}
    return (url.difference_update_query(found) if found else url), found


def _reason(exc: Exception, raw: str) -> str:
    text = str(exc)
    if "int()" in text:
        return "the port is not a number"
    return scrub(text.splitlines()[0] if text else type(exc).__name__, raw)


def _check_mysql_options(url: URL, raw: str) -> None:
    for key, value in url.query.items():
        if key.lower() in _SECRET_KEYS:
            raise CtxtoolError(
                f"database URL {mask_url(raw)!r}: put the password in the user "
                "part (user:password@host), not in a query argument"
            )
        if key in _MYSQL_UNSUPPORTED:
            raise CtxtoolError(
                f"database URL {mask_url(raw)!r}: option {key!r} is not "
                f"supported ({_MYSQL_UNSUPPORTED[key]}); leave it out"
            )
        if key not in _MYSQL_OPTIONS:
            raise CtxtoolError(
                f"database URL {mask_url(raw)!r}: unknown option {key!r} "
                f"(known: {', '.join(sorted(_MYSQL_OPTIONS))})"
            )
        values = value if isinstance(value, tuple) else (value,)
        if key in _MYSQL_BOOLEAN and (len(values) > 1 or values[0].lower() not in _TRUE | _FALSE):
            raise CtxtoolError(
                f"database URL {mask_url(raw)!r}: {key} must be true or false "
                f"(once), not {values[-1]!r}"
            )
        if key in _MYSQL_NUMERIC and not all(v.isdigit() for v in values):
            raise CtxtoolError(
                f"database URL {mask_url(raw)!r}: {key} must be a whole number, not {values[0]!r}"
            )
        if key in _MYSQL_RANGES:
            low, high = _MYSQL_RANGES[key]
            wrong = next((v for v in values if not low <= int(v) <= high), None)
            if wrong is not None:
                raise CtxtoolError(
                    f"database URL {mask_url(raw)!r}: {key} must be from {low} "
                    f"to {high}, not {wrong}"
                )
        if key in _MYSQL_FILES:
            missing = next((v for v in values if not Path(v).expanduser().is_file()), None)
            if missing is not None:
                raise CtxtoolError(
                    f"database URL {mask_url(raw)!r}: {key} file {missing} "
                    "does not exist (or is not a file)"
                )
        if key == "charset" and any(v.lower() != "utf8mb4" for v in values):
            # The store is utf8mb4: another client charset loses characters, and a multi-byte
            # one (sjis, gbk, big5) can end a character in the byte of a backslash, which
            # breaks string escaping (an injection through transcript text).
            other = next(v for v in values if v.lower() != "utf8mb4")
            raise CtxtoolError(
                f"database URL {mask_url(raw)!r}: charset {other!r} is not "
                "supported (ctxtool needs utf8mb4; leave the option out)"
            )
        if key == "collation":
            if len(values) > 1:
                raise CtxtoolError(
                    f"database URL {mask_url(raw)!r}: collation is given "
                    f"{len(values)} times; give it once"
                )
            if not _COLLATION.fullmatch(values[0]):
                # Sent as an identifier in SET NAMES (see ctxtool.db.engine): only a name.
                raise CtxtoolError(
                    f"database URL {mask_url(raw)!r}: collation {values[0]!r} "
                    "is not a utf8mb4 collation (such as utf8mb4_bin)"
                )


def sqlite_path(url: URL) -> Path | None:
    """The absolute file of a SQLite URL; None for an in-memory database."""
    if url.database in (None, "", ":memory:") or str(url.database).startswith("file:"):
        return None
    return Path(url.database).expanduser().resolve()
