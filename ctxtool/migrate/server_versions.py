"""The oldest server each migration file, and the session trigger, run on.

Checked before `migrate up` applies anything, so an old server gets one line naming the file,
what it needs and the version that has it, instead of a syntax error part way through the
pending files. Pure: the version text is read by the caller (``Dialect.server_version_sql``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..db.dialects import (
    MARIADB,
    MYSQL,
    SQLITE,
    TIDB,
    ServerVersion,
    Version,
)
from .sql_files import Migration


@dataclass(frozen=True)
class Requirement:
    """What a file needs of a server product, and since which version the product has it
    (None: no version has it yet)."""

    product: str
    since: Version | None
    feature: str


# Versions a file needs beyond what every supported server has (MySQL 8.0, MariaDB 10.11 and
# SQLite 3.24's upserts are the floor the other files are written for).
FILE_REQUIREMENTS: dict[str, tuple[Requirement, ...]] = {
    "0009": (
        Requirement(SQLITE, (3, 31, 0), "generated columns"),
        Requirement(MYSQL, (8, 0, 23), "INVISIBLE columns"),
        Requirement(MARIADB, (10, 3, 3), "INVISIBLE columns"),
        Requirement(TIDB, None, "INVISIBLE columns (pingcap/tidb#7968)"),
    ),
}
# 0012's call_id: a generated, INVISIBLE column as 0009's.
FILE_REQUIREMENTS["0012"] = FILE_REQUIREMENTS["0009"]

# `migrate up --touch-session-trigger`: CREATE TRIGGER IF NOT EXISTS; TiDB has no triggers.
TRIGGER_REQUIREMENTS = (
    Requirement(MYSQL, (8, 0, 29), "CREATE TRIGGER IF NOT EXISTS"),
    Requirement(MARIADB, (10, 1, 4), "CREATE TRIGGER IF NOT EXISTS"),
    Requirement(TIDB, None, "triggers"),
)


def unmet(requirements: Sequence[Requirement], server: ServerVersion) -> Requirement | None:
    """The first requirement for this server's product that its version does not meet."""
    for req in requirements:
        if not server.version or req.product != server.product:
            continue  # another product's, or a version that could not be read
        if req.since is None or server.version < req.since:
            return req
    return None


def refusal(
    pending: Sequence[Migration], server: ServerVersion, *, trigger: bool = False
) -> str | None:
    """One line saying why `migrate up` cannot run on this server, or None when it can."""
    for migration in pending:
        req = unmet(FILE_REQUIREMENTS.get(migration.version, ()), server)
        if req is not None:
            return (
                f"{migration.filename} needs {req.feature}, {_has(req)}; this server is "
                f"{server} ({server.text}): nothing applied"
            )
    if trigger:
        req = unmet(TRIGGER_REQUIREMENTS, server)
        if req is not None:
            if req.since is None:
                return (
                    f"--touch-session-trigger: {server.product} has no {req.feature}; the "
                    "runtime must touch the session row itself (docs/distributed.md): nothing "
                    "applied"
                )
            return (
                f"--touch-session-trigger needs {req.feature}, {_has(req)}; this server is "
                f"{server}: nothing applied"
            )
    return None


def _has(req: Requirement) -> str:
    if req.since is None:
        return f"which {req.product} does not have"
    return f"which {req.product} has since {'.'.join(map(str, req.since))}"
