"""Where a database stands against the shipped migrations: pure functions over the files and
the history table's rows (no I/O), so every verdict `status`, `up` and `repair` act on can be
tested with plain lists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from ..core.errors import CtxtoolError
from .sql_files import Migration

# Statuses recorded in the history table.
APPLIED, BASELINE, RUNNING, FAILED = "applied", "baseline", "running", "failed"
# Further states shown by `status`.
PENDING, CHANGED, MISSING = "pending", "checksum changed", "file missing"


@dataclass(frozen=True)
class HistoryRow:
    version: str
    name: str
    checksum: str
    status: str
    started_at: object
    applied_at: object
    duration_ms: int | None
    statements_done: int | None
    failed_statement: str | None
    error: str | None


@dataclass(frozen=True)
class MigrationState:
    """What `status` reports for one version: the file, its history row, and the verdict."""

    version: str
    name: str
    state: str
    applied_at: object = None
    duration_ms: int | None = None
    checksum: str | None = None
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.state in (APPLIED, BASELINE)

    def as_dict(self) -> dict:
        return {
            "version": self.version,
            "name": self.name,
            "state": self.state,
            "applied_at": _fmt_time(self.applied_at),
            "duration_ms": self.duration_ms,
            "checksum": self.checksum[:12] if self.checksum else None,
            "detail": self.detail,
        }


def _fmt_time(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)[:19]


def migration_states(
    migrations: Sequence[Migration], history: Mapping[str, HistoryRow]
) -> list[MigrationState]:
    """Every known version with its state, in version order."""
    states: list[MigrationState] = []
    for m in migrations:
        row = history.get(m.version)
        if row is None:
            states.append(MigrationState(m.version, m.name, PENDING, checksum=m.checksum))
        elif row.status in (FAILED, RUNNING):
            detail = row.error or "interrupted before it finished"
            if row.statements_done is not None:
                detail += f"; {row.statements_done} of {len(m.statements())} statements done" + (
                    "; `up` resumes there" if row.status == RUNNING else ""
                )
            states.append(
                MigrationState(
                    m.version, m.name, row.status, row.started_at, None, row.checksum, detail
                )
            )
        elif not m.recorded_as(row.checksum):
            states.append(
                MigrationState(
                    m.version,
                    m.name,
                    CHANGED,
                    row.applied_at,
                    row.duration_ms,
                    m.checksum,
                    f"recorded {row.checksum[:12]}, file now {m.checksum[:12]}",
                )
            )
        else:
            states.append(
                MigrationState(
                    m.version, m.name, row.status, row.applied_at, row.duration_ms, row.checksum
                )
            )
    known = {m.version for m in migrations}
    for version, row in sorted(history.items()):
        if version not in known:
            states.append(
                MigrationState(
                    version,
                    row.name,
                    MISSING,
                    row.applied_at,
                    row.duration_ms,
                    row.checksum,
                    "recorded here but not shipped with this ctxtool",
                )
            )
    states.sort(key=lambda s: s.version)
    return states


def pending_migrations(
    migrations: Sequence[Migration], history: Mapping[str, HistoryRow], to: str | None = None
) -> list[Migration]:
    """The files `up` would apply, in order (up to and including ``to``): those never run, and
    one that was interrupted (it resumes at its first statement not done)."""
    return [
        m
        for m in migrations
        if (m.version not in history or history[m.version].status == RUNNING)
        and (to is None or m.version <= to)
    ]


def refuse_unsafe(
    migrations: Sequence[Migration], history: Mapping[str, HistoryRow], folder: str
) -> None:
    """Raise when `up` must not run: a file failed, or an applied file changed. The message
    says what to check and which command clears it. (An interrupted file is not refused: `up`
    resumes it, since holding the run lock proves its runner is gone.)"""
    files = {m.version: m for m in migrations}
    for v, row in sorted(history.items()):
        name = f"{v}_{row.name}.sql"
        if row.status == FAILED:
            stmt = (row.failed_statement or "").strip().splitlines()
            at = f" at statement: {stmt[0][:120]}" if stmt else ""
            done = (
                f" {row.statements_done} statement(s) before it took effect."
                if row.statements_done is not None
                else ""
            )
            raise CtxtoolError(
                f"migration {name} failed{at} ({row.error or 'no error recorded'}).{done} "
                f"Fix the cause (or finish that statement by hand), then run "
                f"`ctxtool migrate repair {v}`: `up` then resumes at the failed statement"
            )
        if v in files and not files[v].recorded_as(row.checksum):
            raise CtxtoolError(
                f"migration {folder}/{name} changed after it was applied (checksum "
                f"{row.checksum[:12]} recorded, {files[v].checksum[:12]} now); restore the "
                f"file, or accept it deliberately with `ctxtool migrate repair {v}`"
            )


def schema_is_current(
    migrations: Sequence[Migration], rows: Sequence[tuple[str, str, str]]
) -> bool:
    """Whether the history rows ``(version, checksum, status)`` record every shipped file
    applied (or baselined) unchanged and no other: the verdict on which
    :func:`not_current_message` says nothing, from the three columns each command's check
    reads."""
    recorded = {version: (checksum, status) for version, checksum, status in rows}
    if recorded.keys() != {m.version for m in migrations}:
        return False
    return all(
        recorded[m.version][1] in (APPLIED, BASELINE) and m.recorded_as(recorded[m.version][0])
        for m in migrations
    )


def not_current_message(states: Sequence[MigrationState]) -> str | None:
    """Why the schema is not current, in one line; None when every file is applied."""
    bad = [s for s in states if not s.ok]
    if not bad:
        return None
    first = bad[0]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return (
        f"database schema is not current: {first.version}_{first.name} is {first.state}"
        f"{more}; run `ctxtool migrate status`, then `ctxtool migrate up`"
    )


def with_note(states: Sequence[MigrationState], version: str, note: str) -> list[MigrationState]:
    """``states`` with ``note`` added to the detail of ``version``'s."""
    return [
        replace(s, detail=f"{s.detail}; {note}" if s.detail else note)
        if s.version == version
        else s
        for s in states
    ]
