"""`ctxtool sessions archive` and `ctxtool sessions purge`: retention made explicit, previewed
and reversible (see ctxtool.retention)."""

from __future__ import annotations

import click

from ..core.errors import CtxtoolError, PartialFailure
from ..output import OutputFormat, Progress, print_rows
from ..redaction import FINDING_COLUMNS, Redactor
from ..retention import archive_sessions, parse_age, purge_sessions, select_sessions
from .app import pass_app
from .options import complete_session, output_options, redact_options
from .root import sessions


@sessions.command("archive")
@click.argument("sessions_", metavar="[SESSION...]", nargs=-1, shell_complete=complete_session)
@click.option(
    "--older-than",
    metavar="AGE",
    help="Only sessions whose last message is older than AGE: days (30, 30d), 12h, 2w.",
)
@click.option("--project", "project_id", help="Only sessions of this project_id.")
@click.option(
    "-o",
    "--output-dir",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder to write the archive to (created if missing; an archive there is added to).",
)
@redact_options
@output_options
@pass_app
def sessions_archive(
    app, sessions_, older_than, project_id, out_dir, redact, redact_preview, output: OutputFormat
):
    """Write sessions to an archive folder: one re-importable JSONL file per session (its
    messages and checkpoints; `ctxtool import` brings it back as it was) and a manifest with
    counts and a checksum, which `sessions purge` checks before deleting anything.

    Without SESSION, every session (narrowed by --older-than and --project). With --redact
    the files hold placeholders instead of secrets (the store is untouched); such an archive
    cannot be purged against.

    \b
    Examples:
      ctxtool sessions archive --older-than 90d -o /backup/ctx-2026-12
      ctxtool sessions archive 42 43 -o ./archive --redact
    """
    engine = app.checked_engine()
    age = parse_age(older_than) if older_than else None
    ids = select_sessions(engine, sessions_, age, project_id)
    if not ids:
        raise CtxtoolError("no session matches: nothing archived")
    redactor = Redactor(keep_findings=redact_preview) if redact or redact_preview else None
    with Progress(len(ids), "archiving") as progress:
        done = archive_sessions(
            engine,
            ids,
            out_dir,
            redactor,
            on_session=lambda _: progress.update(1),
            preview=redact_preview,
        )
    if redactor is not None and redactor.findings is not None:  # --redact-preview
        print_rows([f.as_dict() for f in redactor.findings], output, headers=FINDING_COLUMNS)
        return
    print_rows([d.as_dict() for d in done], output)


@sessions.command("purge")
@click.argument("sessions_", metavar="[SESSION...]", nargs=-1, shell_complete=complete_session)
@click.option(
    "-a",
    "--archive",
    "archive_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="The archive folder `sessions archive` wrote.",
)
@click.option("--dry-run", is_flag=True, help="Check and list what would go; delete nothing.")
@output_options
@pass_app
def sessions_purge(app, sessions_, archive_dir, dry_run, output: OutputFormat):
    """Delete sessions from the store that an archive written by ctxtool holds.

    Each session is checked first: its archive file read back must give the manifest's
    message and checkpoint counts and checksum, and the store must still hold exactly that
    (a session that grew since is kept: archive it again). Checked and deleted in one
    transaction per session. Without SESSION, every session in the archive.

    \b
    Examples:
      ctxtool sessions purge -a /backup/ctx-2026-12 --dry-run
      ctxtool sessions purge -a /backup/ctx-2026-12
    """
    engine = app.checked_engine()
    with Progress(None, "purging") as progress:
        checks = purge_sessions(
            engine, archive_dir, sessions_, dry_run, on_session=lambda _: progress.update(1)
        )
    print_rows([c.as_dict() for c in checks], output)
    kept = [c for c in checks if not c.purged and c.verdict != "would purge"]
    if kept:
        message = f"{len(kept)} of {len(checks)} session(s) kept: see the verdict column"
        if len(kept) == len(checks):
            raise CtxtoolError(message)
        raise PartialFailure(message)
