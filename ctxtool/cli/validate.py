"""`ctxtool validate`: are a store's checkpoints consistent and its restored contexts valid."""

from __future__ import annotations

import click

from ..compaction.plan import DEFAULT_RESERVE_TOKENS, CompactionSettings
from ..errors import CtxtoolError
from ..output import OutputFormat, output_options, print_rows
from ..store import Store, validate
from ..store.reads import plain_session_id
from . import check_reserve, main, pass_app
from .types import WholeNumber


@main.command("validate")
@click.argument("session", required=False)
@click.option("--session", "session_option", hidden=True)  # the spelling before 0.2
@click.option(
    "--context-window",
    type=WholeNumber(1024),
    help="The window restored contexts must fit (default: each session model's).",
)
@click.option(
    "--reserve-tokens",
    type=WholeNumber(0),
    help="Tokens kept free for the answer: "
    "a restored context over window - reserve is reported as over_window "
    f"[default: {DEFAULT_RESERVE_TOKENS}, at most a quarter of the window].",
)
@output_options
@pass_app
def validate_cmd(
    app, session, session_option, context_window, reserve_tokens, output: OutputFormat
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
    ref = session or session_option
    check_reserve(context_window, reserve_tokens)
    settings = CompactionSettings(context_window=context_window, reserve_tokens=reserve_tokens)
    try:
        session_id = Store(engine).resolve_session(ref) if ref else None
    except CtxtoolError as unknown:
        # A plain id without its agent_session row may still have checkpoints: validate's
        # session_missing finding, not "does not exist".
        plain = plain_session_id(ref)
        if plain is None:
            raise
        try:
            issues, checked = validate(engine, plain, settings)
        except CtxtoolError:
            raise unknown from None
    else:
        issues, checked = validate(engine, session_id, settings)
    print_rows(
        [i.as_dict() for i in issues],
        output,
        headers=["session_id", "severity", "rule", "compaction_id", "message_id", "message"],
    )
    errors = [i for i in issues if i.severity == "error"]
    if not output.machine:
        click.echo(
            f"{checked} session(s) checked: {len(errors)} error(s), "
            f"{len(issues) - len(errors)} warning(s)",
            err=True,
        )
    if errors:
        raise CtxtoolError(f"{len(errors)} consistency error(s) found")
