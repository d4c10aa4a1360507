"""What ``--redact-preview`` prints: the redaction findings of ``context export`` and
``sessions archive``, one table for both."""

from __future__ import annotations

import click

from ..output import OutputFormat, print_rows
from ..redaction import FINDING_COLUMNS
from ..terminal import fit_table, table_width


def print_findings(rows: list[dict], output: OutputFormat) -> None:
    """What --redact-preview finds, fitted to the terminal (--json: each whole)."""
    if output.machine:
        print_rows(rows, output, headers=FINDING_COLUMNS)
    else:
        shrinkable = ["where", "excerpt"]
        click.echo(fit_table(rows, output, FINDING_COLUMNS, table_width(None), shrinkable))
