"""`ctxtool migrate ...`: status, up, baseline, repair."""

from __future__ import annotations

from pathlib import Path

import click

from ..core.errors import MissingDatabase, SchemaNotCurrent
from ..db import create_database as create_database_if_missing
from ..db import mask_url, read_connection, resolve_url
from ..db.dialects import dialect_of_url
from ..db.engine import database_to_create
from ..migrate import Migrator, load_migrations, migration_states
from ..output import OutputFormat, print_document, print_rows
from ..store.session_touch import TRIGGER_NAME, drop_statements, trigger_statements
from ..terminal import clip, fit_table, table_width, wrap
from .app import pass_app
from .options import json_option, output_options
from .root import migrate


def _migrator(app, create: bool = False) -> Migrator:
    return Migrator(app.engine(create=create))


@migrate.command()
@output_options
@pass_app
def status(app, output: OutputFormat):
    """Show every migration: applied (when, how long), pending, failed or changed.

    Exits 3 when anything is pending, failed or drifted, so it can gate a deploy.

    Example: ctxtool migrate status --json
    """
    migrator: Migrator | None
    try:
        migrator = _migrator(app)
    except MissingDatabase as missing:
        # Nothing applied yet, and status must not create the file to say so.
        migrator = None
        states = migration_states(load_migrations(dialect_of_url(app.url).name), {})
        where = f"{missing.path} (does not exist yet)"
    else:
        states = migrator.status()
        where = f"{mask_url(app.engine().url)} ({migrator.dialect.name})"
    rows = [s.as_dict() for s in states]
    if output.machine:
        print_rows(rows, output)
    else:
        width = table_width()
        label = "database: "
        click.echo(label + clip(where, width - len(label) if width else None, from_left=True))
        click.echo(_status_table(rows, output))
        for version in skipped_versions([s.version for s in states]):
            line = (
                f"{version}: no migration of this number was ever shipped (the numbering skips "
                "it); nothing is missing"
            )
            click.echo(wrap(line, width, "  "), err=True)
    bad = [s for s in states if not s.ok]
    if bad:
        hint = ""
        if migrator is not None and migrator.runtime_tables_without_history():
            hint = (
                "; the store's tables exist but ctxtool never migrated this database: adopt "
                "it with `ctxtool migrate baseline --version 0001`, then `migrate up`"
            )
        raise SchemaNotCurrent(
            f"{len(bad)} migration(s) not applied cleanly: "
            + ", ".join(f"{s.version} {s.state}" for s in bad)
            + hint
        )


def skipped_versions(versions: list[str]) -> list[str]:
    """The numbers between the first and the last version that no migration has (0007)."""
    numbers = sorted(int(v) for v in versions if v.isdigit())
    if not numbers:
        return []
    width = len(versions[0])
    return [f"{n:0{width}d}" for n in range(numbers[0], numbers[-1]) if n not in set(numbers)]


# Short labels and times to the minute keep the table within 80 columns; --json has it all,
# and the checksums (a changed file's detail names both).
_STATUS_LABELS = {
    "version": "version",
    "name": "name",
    "state": "state",
    "applied_at": "applied (UTC)",
    "duration_ms": "ms",
    "detail": "detail",
}


def _status_table(rows: list[dict], output: OutputFormat) -> str:
    """The status rows for a person: the name and a failure's detail shortened, and the
    duration left out, when the terminal is too narrow for them."""
    table = [
        {
            _STATUS_LABELS[k]: (v[:16] if k == "applied_at" and v else v)
            for k, v in row.items()
            if k in _STATUS_LABELS
        }
        for row in rows
    ]
    return fit_table(
        table,
        output,
        _STATUS_LABELS.values(),
        table_width(),
        ["name", "detail"],
        optional=["ms"],
    )


@migrate.command()
@click.option("--to", "to", metavar="VERSION", help="Stop after this version (e.g. 0001).")
@click.option("--dry-run", is_flag=True, help="Print the SQL that would run; change nothing.")
@click.option(
    "--create-database",
    is_flag=True,
    help="Create the MySQL/MariaDB database the URL names when it does not exist (utf8mb4).",
)
@click.option(
    "--touch-session-trigger",
    is_flag=True,
    help="Also create a trigger that makes every message INSERT write its session's row, for "
    "a runtime on a multi-primary cluster that cannot do it itself (docs/distributed.md).",
)
@json_option
@pass_app
def up(app, to, dry_run, create_database, touch_session_trigger, output: OutputFormat):
    """Apply pending migrations in order, recording each in ctxtool_schema_history.

    A MySQL file that was interrupted (kill -9, lost connection) resumes at its first statement
    not done.

    \b
    Examples:
      ctxtool --db mysql+pymysql://root@127.0.0.1/agents migrate up
      ctxtool migrate up --dry-run
      ctxtool --db mysql://root@127.0.0.1/agents migrate up --create-database
      ctxtool migrate up --touch-session-trigger
    """
    if dry_run:
        drops: list[str] = []
        # The database --create-database would create: its CREATE, then every file.
        create = database_to_create(app.url) if create_database else None
        try:
            if create is not None:
                raise MissingDatabase(create, Path())
            migrator = _migrator(app)
            pending = migrator.up(to=to, dry_run=True)
            if touch_session_trigger:
                with read_connection(migrator.engine) as conn:
                    drops = drop_statements(conn)
        except MissingDatabase:  # a dry run never creates the file: every file would run
            pending = [
                m
                for m in load_migrations(dialect_of_url(app.url).name)
                if to is None or m.version <= to
            ]
        doc = {
            "dry_run": True,
            "pending": [
                {
                    "version": m.version,
                    "file": m.filename,
                    "checksum": m.checksum,
                    "statements": m.statements(),
                }
                for m in pending
            ],
        }
        if create is not None:
            doc["create_database"] = create
        human = (f"-- the database\n{create};\n\n" if create else "") + "\n".join(
            f"-- {m.filename} (checksum {m.checksum[:12]})\n"
            + "".join(st + ";\n\n" for st in m.statements())
            for m in pending
        )
        if touch_session_trigger:
            creates = trigger_statements(dialect_of_url(app.url))
            doc["trigger"] = creates[0]
            doc["triggers"] = creates + drops
            human += f"\n-- {TRIGGER_NAME}\n" + "".join(st + ";\n\n" for st in creates + drops)
        print_document(doc, output, human.rstrip("\n") or "schema is up to date; nothing to apply")
        return
    created = create_database_if_missing(app.url) if create_database else False
    # As given (masked): the engine's URL has the charset added and the name decoded.
    where = mask_url(resolve_url(app.url))
    if created and not output.json:
        click.echo(f"created database {where}")
    migrator = _migrator(app, create=True)
    report = None if output.json else (lambda m: click.echo(f"applied {m.filename}"))
    applied = migrator.up(to=to, on_applied=report, touch_session_trigger=touch_session_trigger)
    print_document(
        {
            "database": where,
            "created_database": created,
            "applied": [m.filename for m in applied],
            **({"trigger": TRIGGER_NAME} if touch_session_trigger else {}),
        },
        output,
        (
            f"{len(applied)} migration(s) applied to {where}"
            if applied
            else "schema is up to date; nothing to apply"
        )
        + (f"; trigger {TRIGGER_NAME} in place" if touch_session_trigger else ""),
    )


@migrate.command()
@click.option(
    "--version",
    "version",
    default="0001",
    show_default=True,
    help="Record every migration up to this one as already applied.",
)
@json_option
@pass_app
def baseline(app, version, output: OutputFormat):
    """Adopt a database whose seed tables an agent runtime created.

    Records migrations up to VERSION as present without running them (no data is touched);
    `migrate up` then adds ctxtool's columns and indexes.

    Example: ctxtool migrate baseline --version 0001 && ctxtool migrate up
    """
    marked = _migrator(app).baseline(version)
    print_document(
        {"baselined": [m.filename for m in marked]},
        output,
        "\n".join(f"baselined {m.filename}" for m in marked),
    )


@migrate.command()
@click.argument("version", required=False)
@json_option
@pass_app
def repair(app, version, output: OutputFormat):
    """Clear failed or interrupted records and accept changed checksums.

    Run it after fixing what made a migration fail (see `migrate status`): a MySQL file then
    resumes at its failed statement. Also accepts a deliberate edit of an applied file.

    Example: ctxtool migrate repair 0002
    """
    actions = _migrator(app).repair(version)
    print_document(
        {"repaired": [{"version": v, "action": what} for v, what in actions]},
        output,
        "\n".join(f"{v}: {what}" for v, what in actions) or "nothing to repair",
    )
