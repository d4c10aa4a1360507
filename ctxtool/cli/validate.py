"""`ctxtool validate`: are a store's checkpoints consistent and its restored contexts valid."""

from __future__ import annotations

from collections import Counter

import click

from ..core.errors import CtxtoolError
from ..core.plan import CompactionSettings
from ..core.validation import ERROR, NOTE, WARNING
from ..output import OutputFormat, Progress, print_rows
from ..store import Store
from ..terminal import fit_table, table_width, wrap
from .app import pass_app
from .options import output_options, session_argument, window_options
from .root import main


@main.command("validate")
@session_argument(required=False, old_option=True)
@window_options
@click.option(
    "--errors-only", is_flag=True, help="Show only the errors (not the warnings and notes)."
)
@click.option(
    "--rule",
    "rules",
    multiple=True,
    metavar="RULE",
    help="Show only the findings of this rule (repeatable), e.g. unanswered_tool_call.",
)
@output_options
@pass_app
def validate_cmd(
    app, session, settings: CompactionSettings, errors_only, rules, output: OutputFormat
):
    """Check checkpoint consistency: cuts point at messages of their session and never orphan a
    tool result, checkpoints form one chain, no message inside a summarized range was left out
    of its summary, restored contexts are valid for an API and fit their window.

    Exits 1 when any error is found: what the store got wrong. Warnings alone exit 0 (a
    session waiting for compaction, a summary that kept little of what it replaced, a call
    still waiting for its result), and so do notes (a session over its window that an
    operator acknowledged with `sessions mark N --over-window-ok`).

    Each context is checked against the threshold its latest checkpoint was cut for (what
    `compact` used), else its model's window; --context-window / --reserve-tokens check
    against those instead.

    SESSION (its id, source id or a unique prefix) checks one session; default: all.

    \b
    Examples:
      ctxtool validate --json
      ctxtool validate fe5e1c67
    """
    engine = app.checked_engine()
    # A plain id without its agent_session row may still have checkpoints: validate's
    # session_missing finding, not "does not exist".
    session_id = Store(engine).resolve_session(session, leftovers=True) if session else None
    with Progress(None, "validating sessions", bar=False) as progress:

        def checked_some(n: int, total: int) -> None:
            progress.total = total
            progress.update(n)

        issues, checked = Store(engine).validate(session_id, settings, checked_some)
    if errors_only:
        issues = [i for i in issues if i.severity == ERROR]
    if rules:
        issues = [i for i in issues if i.rule in rules]
    headers = ["session_id", "severity", "rule", "compaction_id", "message_id", "message"]
    if output.machine:
        print_rows([i.as_dict() for i in issues], output, headers=headers)
    else:
        # The message names its checkpoint and message: the id columns go first at 80.
        labels = dict(zip(headers, ["session", "severity", "rule", "checkpoint", "msg", "message"]))
        click.echo(
            fit_table(
                [{labels[k]: v for k, v in i.as_dict().items()} for i in issues],
                output,
                labels.values(),
                table_width(None),
                ["message"],
                optional=["checkpoint", "msg"],
                wrapped=["message"],
                readable=30,
            )
        )
    errors = [i for i in issues if i.severity == ERROR]
    if not output.machine:
        _print_totals(issues, checked, settings)
    if errors:
        raise CtxtoolError(f"{len(errors)} consistency error(s) found")


def _print_totals(issues: list, checked: int, settings: CompactionSettings) -> None:
    """Per rule, errors first (65 unanswered_tool_call warnings must not bury one error), then
    one sentence, wrapped to the terminal: how many of each, and which window was checked."""
    order = {ERROR: 0, WARNING: 1, NOTE: 2}
    totals = Counter((order[i.severity], i.rule, i.severity) for i in issues)
    for (_, rule, severity), n in sorted(totals.items()):
        click.echo(f"  {rule}: {n} {severity}{'s' * (n > 1)}", err=True)
    counts = Counter(i.severity for i in issues)
    window = (
        f"window: {settings.context_window} tokens"
        if settings.context_window is not None
        else "each context against the threshold compact cut it for, else its model's "
        "window; --context-window N overrides"
    )
    notes = f", {counts[NOTE]} note(s)" if counts[NOTE] else ""
    sentence = (
        f"{checked} session(s) checked: {counts[ERROR]} error(s), "
        f"{counts[WARNING]} warning(s){notes} ({window})"
    )
    click.echo(wrap(sentence, table_width(None), "  "), err=True)
