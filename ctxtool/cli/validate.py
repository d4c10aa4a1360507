"""`ctxtool validate`: are a store's checkpoints consistent and its restored contexts valid."""

from __future__ import annotations

from collections import Counter

import click

from ..compaction.plan import CompactionSettings
from ..errors import CtxtoolError
from ..output import OutputFormat, Progress, print_rows
from ..store import Store, validate
from ..terminal import fit_table, table_width
from ..validation import ERROR
from .app import pass_app
from .options import output_options, session_argument, window_options
from .root import main


@main.command("validate")
@session_argument(required=False, old_option=True)
@window_options
@click.option("--errors-only", is_flag=True, help="Show only the errors (not the warnings).")
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

    Exits 1 when any error is found (warnings alone exit 0: a summary that kept little of what
    it replaced, a call still waiting for its result).

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

        issues, checked = validate(engine, session_id, settings, checked_some)
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
        # Per rule, errors first: 65 unanswered_tool_call warnings must not bury one error.
        totals = Counter((i.severity != ERROR, i.rule, i.severity) for i in issues)
        for (_, rule, severity), n in sorted(totals.items()):
            click.echo(f"  {rule}: {n} {severity}{'s' * (n > 1)}", err=True)
        # over_window is measured against this: a run of `compact --context-window N` is
        # only checked against N when validate is given it too.
        window = (
            f"window: {settings.context_window} tokens"
            if settings.context_window is not None
            else "over_window checked against each session model's window; "
            "--context-window N checks the one compact was given"
        )
        click.echo(
            f"{checked} session(s) checked: {len(errors)} error(s), "
            f"{len(issues) - len(errors)} warning(s) ({window})",
            err=True,
        )
    if errors:
        raise CtxtoolError(f"{len(errors)} consistency error(s) found")
