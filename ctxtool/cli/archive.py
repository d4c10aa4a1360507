"""`ctxtool sessions archive` and `ctxtool sessions purge`: retention made explicit, previewed
and reversible (see ctxtool.retention)."""

from __future__ import annotations

import click

from ..core.cells import shorten
from ..core.errors import CtxtoolError, PartialFailure
from ..output import OutputFormat, Progress, print_rows
from ..redaction import Redactor
from ..retention import (
    ArchivedSession,
    PurgeCheck,
    archive_sessions,
    parse_age,
    purge_sessions,
    select_sessions,
)
from ..store import Store
from ..terminal import fit_table, table_width
from .app import pass_app
from .findings import print_findings
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
    store = Store(app.checked_engine())
    age = parse_age(older_than) if older_than else None
    ids = select_sessions(store, sessions_, age, project_id)
    if not ids:
        raise CtxtoolError("no session matches: nothing archived")
    redactor = Redactor(keep_findings=redact_preview) if redact or redact_preview else None
    with Progress(len(ids), "archiving") as progress:
        done = archive_sessions(
            store,
            ids,
            out_dir,
            redactor,
            on_session=lambda _: progress.update(1),
            preview=redact_preview,
        )
    if redactor is not None and redactor.findings is not None:  # --redact-preview
        print_findings([f.as_dict() for f in redactor.findings], output)
        return
    if output.machine:
        print_rows([d.as_dict() for d in done], output)
    else:
        click.echo(archived_table(done, output, redacted=redactor is not None))


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
    store = Store(app.checked_engine())
    with Progress(None, "purging") as progress:
        checks = purge_sessions(
            store, archive_dir, sessions_, dry_run, on_session=lambda _: progress.update(1)
        )
    if output.machine:
        print_rows([c.as_dict() for c in checks], output)
    else:
        click.echo(purge_table(checks, output))
    kept = [c for c in checks if not c.purged and c.verdict != "would purge"]
    if kept:
        message = f"{len(kept)} of {len(checks)} session(s) kept: see the verdict column"
        if len(kept) == len(checks):
            raise CtxtoolError(message)
        raise PartialFailure(message)


# A checksum is told apart by its first characters, as git shows a commit; --json has it whole.
CHECKSUM_SHOWN = 13


def archived_table(done: list[ArchivedSession], output: OutputFormat, redacted: bool) -> str:
    """What `sessions archive` wrote, as a table fitted to the terminal: the checksum cut
    short, the placeholders written (with --redact) as words, the file name left out before
    the source is cut below readable."""
    rows = [
        {
            "id": d.session_id,
            "source": d.source,
            "file": d.file,
            "msgs": d.messages,
            "checkpoints": d.checkpoints,
            "checksum": shorten(d.checksum, CHECKSUM_SHOWN),
            "redacted": redacted_words(d.redacted),
        }
        for d in done
    ]
    headers = ["id", "source", "file", "msgs", "checkpoints", "checksum"]
    headers += ["redacted"] if redacted else []
    shrinkable = ["source", "file", "checksum", "redacted"]
    return fit_table(
        rows,
        output,
        headers,
        table_width(None),
        shrinkable,
        optional=["file"],
        from_left=["file"],
        wrapped=["redacted"],
    )


def redacted_words(counts: dict[str, int]) -> str:
    """The placeholders written, by type, as a person reads them: "775 home-dir, 2 email"."""
    return ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "nothing"


def purge_table(checks: list[PurgeCheck], output: OutputFormat) -> str:
    """What `sessions purge` found and did, as a table fitted to the terminal: the verdict
    (which says whether it went) read whole, wrapped; the file left out before the source
    is cut below readable."""
    rows = [
        {
            "id": c.session_id,
            "source": c.source,
            "file": c.file,
            "msgs": c.messages,
            "checkpoints": c.checkpoints,
            "verdict": c.verdict,
        }
        for c in checks
    ]
    return fit_table(
        rows,
        output,
        ["id", "source", "file", "msgs", "checkpoints", "verdict"],
        table_width(None),
        ["source", "file", "verdict"],
        optional=["file"],
        from_left=["file"],
        wrapped=["verdict"],
    )
