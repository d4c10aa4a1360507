"""The migration files shipped in ``sql/<dialect>/NNNN_name.sql``: loading, checksums, and
splitting a file into statements. Pure apart from reading the package's own files."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from ..core.errors import CtxtoolError

_FILE_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# TiDB's table options, written as its executable comments (``/*T![auto_id_cache]
# AUTO_ID_CACHE=1 */``): TiDB reads them, MySQL and MariaDB take them as comments. A file that
# gained one is the same file to those two, so a database that applied it before keeps it as
# applied (TiDB takes such an option only in CREATE TABLE: `migrate status` says when a
# table on TiDB lacks it).
_TIDB_OPTION_RE = re.compile(r" ?/\*T!\[[a-z_]+\][^*]*\*/")
# Comments that are SQL to some server: MySQL's /*! */, MariaDB's /*M! */, TiDB's /*T! */.
_EXECUTABLE_COMMENTS = ("/*!", "/*M!", "/*T!")


@dataclass(frozen=True)
class Migration:
    """One ``.sql`` file shipped with ctxtool."""

    version: str
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return _checksum(self.sql)

    def recorded_as(self, checksum: str) -> bool:
        """Whether a history row's checksum is this file's: now, or before it gained TiDB
        table options (the same statements to MySQL and MariaDB)."""
        return checksum == self.checksum or checksum == _checksum(_TIDB_OPTION_RE.sub("", self.sql))

    @property
    def filename(self) -> str:
        return f"{self.version}_{self.name}.sql"

    def statements(self) -> list[str]:
        return split_statements(self.sql)


def _checksum(sql: str) -> str:
    return hashlib.sha256(sql.encode("utf-8")).hexdigest()


def split_statements(sql: str) -> list[str]:
    """Split a migration file into statements at top-level semicolons.

    Quotes and ``--``/``/* */`` comments are respected, so a semicolon inside a string literal
    does not end a statement. Comments are dropped, but for those some server executes
    (``/*!``, ``/*M!``, ``/*T!``), which stay in their statement. Comment-only chunks are
    dropped.
    """
    statements: list[str] = []
    buf: list[str] = []
    i, n = 0, len(sql)
    quote: str | None = None
    while i < n:
        ch = sql[i]
        if quote:
            buf.append(ch)
            if ch == "\\" and quote != "`" and i + 1 < n:
                buf.append(sql[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in ("'", '"', "`"):
            quote = ch
            buf.append(ch)
        elif sql.startswith("--", i) or ch == "#":
            end = sql.find("\n", i)
            i = n if end == -1 else end
            continue
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end == -1 else end + 2
            if sql.startswith(_EXECUTABLE_COMMENTS, i):
                buf.append(sql[i:end])
            i = end
            continue
        elif ch == ";":
            _flush(buf, statements)
            buf = []
        else:
            buf.append(ch)
        i += 1
    _flush(buf, statements)
    return statements


def _flush(buf: list[str], out: list[str]) -> None:
    text = "".join(buf).strip()
    if text:
        out.append(text)


def load_migrations(dialect: str) -> list[Migration]:
    """The migrations shipped for ``dialect`` ("mysql" or "sqlite"), in version order."""
    folder = resources.files("ctxtool.sql").joinpath(dialect)
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE_RE.match(entry.name)
        if match:
            found.append(Migration(match.group(1), match.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise CtxtoolError(f"two migration files share a version in sql/{dialect}/")
    return found
