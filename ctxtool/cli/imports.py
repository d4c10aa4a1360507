"""`ctxtool import`: load agent transcripts into the store."""

from __future__ import annotations

from collections import Counter

import click

from ..core.errors import CtxtoolError, PartialFailure
from ..importer import FileResult, Importer
from ..interrupts import INTERRUPTED
from ..output import OutputFormat, Progress, print_rows, visible
from ..terminal import fit_table, table_width, wrap
from ..transcripts import FORMATS
from ..transcripts.discover import expand_paths, file_sizes
from .app import pass_app
from .options import output_options
from .root import main
from .types import ByteCount

_KINDS_SHOWN = 12
# Short labels keep the table within 80 columns; the paths are shortened from the left (the
# file name stays); a failed file's row says so, its error is printed whole on stderr once;
# --json has it all.
_LABELS = {
    "file": "file",
    "format": "format",
    "session_id": "session",
    "added": "added",
    "present": "present",
    "skipped": "skipped",
    "compactions": "checkpoints",
    "error": "error",
}


@main.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    help="Transcript format (default: detected per file).",
)
@click.option(
    "--skip-invalid",
    is_flag=True,
    help="Skip (and count) malformed lines and records that do not fit their format "
    "instead of rejecting the file.",
)
@click.option(
    "--max-row-bytes",
    type=ByteCount(1),
    metavar="BYTES",
    help="Refuse a message larger than this (text, tool calls and details, in UTF-8 bytes): "
    "an engine's bound on a row that the server does not announce, such as TiDB's "
    "txn-entry-size-limit (6291456 by default). --skip-invalid does not skip it.",
)
@click.option(
    "--max-transaction-bytes",
    type=ByteCount(1),
    metavar="BYTES",
    help="Write each session's new messages in consecutive transactions of at most this many "
    "bytes of rows (a larger message goes alone), each a prefix of the session: for an "
    "engine's bound on a transaction, such as TiDB's txn-total-size-limit or Galera's "
    "wsrep_max_ws_size. A failure then keeps the committed prefix, and importing the file "
    "again continues. Default: one transaction per session. Both byte options take k "
    "(thousands) and m (millions): 64k is 64,000.",
)
@output_options
@pass_app
def import_cmd(
    app, paths, fmt, skip_invalid, max_row_bytes, max_transaction_bytes, output: OutputFormat
):
    """Import Claude Code, Codex CLI, Pi or OpenAI-chat transcripts.

    PATHS are files, directories (every .jsonl/.json/.traj under them, hidden folders such as
    .venv left out unless named) or - for standard input;
    .gz and .zst files, and .tar.gz/.zip archives of transcripts, are read as streams. A file
    still being written is read up to its length at the start: its unfinished end waits for
    the next import.
    Re-importing a file, or a longer version of it, adds only what is new; a file that
    disagrees with the session stored under its id is refused. Each file's session is written in
    one transaction (or several, --max-transaction-bytes): a file with a bad line is rejected
    whole, naming file:line, unless --skip-invalid; a bad file never stops the others (exit 1
    if every file failed, 4 if some did).

    \b
    Examples:
      ctxtool import ~/.claude/projects/my-project/
      ctxtool import --max-row-bytes 6291456 --max-transaction-bytes 50000000 sessions/  # TiDB
    """
    engine = app.checked_engine()
    files = expand_paths(paths)
    if not files:
        raise CtxtoolError("no transcript files found under " + ", ".join(paths))
    total = file_sizes(files) if Progress.shown() else None
    results: list[FileResult] = []
    with Progress(total, "importing", show_pos=False) as progress:  # counts bytes
        importer = Importer(
            engine,
            fmt,
            skip_invalid,
            on_bytes=progress.update if progress.enabled else None,
            max_row_bytes=max_row_bytes,
            max_transaction_bytes=max_transaction_bytes,
        )
        try:
            importer.import_files(files, results)  # already expanded above
        except KeyboardInterrupt:
            interrupted = True
        else:
            interrupted = False
    _report(results, output)
    if interrupted:
        # What was done is in the report above; the file being read wrote nothing (or, with
        # --max-transaction-bytes, its committed prefix).
        # A failed file is no import (its error is said above); an archive gives several.
        errors = sum(1 for r in results if r.error)
        raise CtxtoolError(
            f"interrupted: {len(results) - errors} transcript(s) of {len(files)} file(s) were "
            "imported before it (each committed)"
            + (f", {errors} failed (said above)" if errors else "")
            + "; importing the same paths again adds only what is new",
            INTERRUPTED,
        )
    failed = [r for r in results if r.error]
    if failed:
        kept = sum(1 for r in failed if r.failure is not None and r.failure.kept is not None)
        message = f"{len(failed)} of {len(results)} file(s) failed; " + (
            "nothing was written for them"
            if not kept
            else f"{kept} kept what was committed before the failure (said above), "
            "nothing was written for the others"
            if kept < len(failed)
            else "what was committed before each failure is kept (said above)"
        )
        if len(failed) == len(results):
            raise CtxtoolError(message)
        raise PartialFailure(message)


def _report(results: list[FileResult], output: OutputFormat) -> None:
    """The files' rows (--json etc.: every figure), or the table and the kinds skipped; each
    failure said once: its whole line on stderr, its row marked ``failed`` (the table's cell
    would cut it)."""
    rows = [r.as_dict() for r in results]
    if output.machine:
        print_rows(rows, output)
    else:
        width = table_width()
        table = [
            {label: row[key] for key, label in _LABELS.items()}
            | {"error": "failed" if result.error else None}
            for row, result in zip(rows, results, strict=True)
        ]
        click.echo(
            fit_table(
                table,
                output,
                _LABELS.values(),
                width,
                ["file", "error"],
                optional=["present", "checkpoints"],
                from_left=["file"],
            )
        )
        for label in ("skipped", "converted", "recovered"):
            totals: Counter = sum((getattr(r, label) for r in results), Counter())
            if totals:
                shown = ", ".join(f"{k}={v}" for k, v in totals.most_common(_KINDS_SHOWN))
                more = len(totals) - _KINDS_SHOWN
                text = f"{label} by kind: {shown}"
                click.echo(
                    wrap(
                        text + (f", and {more} more kinds (see --json)" if more > 0 else ""),
                        width,
                        "  ",
                    )
                )
    for r in results:
        if r.error:
            click.echo(f"Error: {visible(r.error)}", err=True)
