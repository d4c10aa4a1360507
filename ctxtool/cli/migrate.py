"""`ctxtool migrate ...`: status, up, baseline, repair."""

from __future__ import annotations

import click

from ..db import check_connection, mask_url
from ..db.dialects import dialect_of_url
from ..errors import MissingDatabase, SchemaNotCurrent
from ..migrate import Migrator, load_migrations, migration_states
from ..output import OutputFormat, output_options, print_rows
from . import main, pass_app


def _migrator(app, create: bool = False) -> Migrator:
    engine = app.engine(create=create)
    check_connection(engine)
    return Migrator(engine)


@main.group()
def migrate():
    """Create and upgrade the store's schema from the versioned sql/ files.

    Example: ctxtool migrate up
    """


@migrate.command()
@output_options
@pass_app
def status(app, output: OutputFormat):
    """Show every migration: applied (when, how long), pending, failed or changed.

    Exits 3 when anything is pending, failed or drifted, so it can gate a deploy.

    Example: ctxtool migrate status --json
    """
    try:
        migrator = _migrator(app)
    except MissingDatabase as missing:
        # Nothing applied yet, and status must not create the file to say so.
        states = migration_states(load_migrations(dialect_of_url(app.url).name), {})
        where = f"{missing.path} (does not exist yet)"
    else:
        states = migrator.status()
        where = f"{mask_url(app.engine().url)} ({migrator.dialect.name})"
    if not output.machine:
        click.echo(f"database: {where}")
    print_rows([s.as_dict() for s in states], output)
    bad = [s for s in states if not s.ok]
    if bad:
        raise SchemaNotCurrent(
            f"{len(bad)} migration(s) not applied cleanly: "
            + ", ".join(f"{s.version} {s.state}" for s in bad)
        )


@migrate.command()
@click.option("--to", "to", metavar="VERSION", help="Stop after this version (e.g. 0001).")
@click.option("--dry-run", is_flag=True, help="Print the SQL that would run; change nothing.")
@pass_app
def up(app, to, dry_run):
    """Apply pending migrations in order, recording each in ctxtool_schema_history.

    Example: ctxtool --db mysql+pymysql://root@127.0.0.1/agents migrate up
    """
    if dry_run:
        try:
            pending = _migrator(app).up(to=to, dry_run=True)
        except MissingDatabase:  # a dry run never creates the file: every file would run
            pending = [m for m in load_migrations(dialect_of_url(app.url).name)
                       if to is None or m.version <= to]
        if not pending:
            click.echo("schema is up to date; nothing to apply")
        for m in pending:
            click.echo(f"-- {m.filename} (checksum {m.checksum[:12]})")
            for statement in m.statements():
                click.echo(statement + ";\n")
        return
    migrator = _migrator(app, create=True)

    def report(m):
        click.echo(f"applied {m.filename}")

    applied = migrator.up(to=to, on_applied=report)
    if not applied:
        click.echo("schema is up to date; nothing to apply")
    else:
        click.echo(f"{len(applied)} migration(s) applied to {mask_url(app.engine().url)}")


@migrate.command()
@click.option("--version", "version", default="0001", show_default=True,
              help="Record every migration up to this one as already applied.")
@pass_app
def baseline(app, version):
    """Adopt a database whose seed tables an agent runtime created.

    Records migrations up to VERSION as present without running them (no data is touched);
    `migrate up` then adds ctxtool's columns and indexes.

    Example: ctxtool migrate baseline --version 0001 && ctxtool migrate up
    """
    marked = _migrator(app).baseline(version)
    for m in marked:
        click.echo(f"baselined {m.filename}")


@migrate.command()
@click.argument("version", required=False)
@pass_app
def repair(app, version):
    """Clear failed or interrupted records and accept changed checksums.

    Run it after fixing by hand what a failed migration left behind (see `migrate status`), or
    to accept a deliberate edit of an applied file.

    Example: ctxtool migrate repair 0002
    """
    actions = _migrator(app).repair(version)
    if not actions:
        click.echo("nothing to repair")
    for v, what in actions:
        click.echo(f"{v}: {what}")
