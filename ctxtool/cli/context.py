"""`ctxtool context show`, `ctxtool validate`, `ctxtool sessions list`: what a session
restores to, whether its checkpoints are consistent, and which sessions there are."""

from __future__ import annotations

import click

from ..errors import CtxtoolError
from ..output import OutputFormat, dumps, output_options, print_rows
from ..store import Store, list_sessions, restored_context_tokens, validate
from ..tokens import encoding_for_model
from . import main, pass_app


@main.group()
def context():
    """Inspect the restored (effective) context of a session.

    Example: ctxtool context show 42
    """


@context.command("show")
@click.argument("session_id", type=int)
@click.option("--openai", "as_openai", is_flag=True,
              help="Print only the OpenAI-style message list (JSON), ready to send to an API.")
@click.option("--width", default=100, show_default=True, type=click.IntRange(20),
              help="Characters of each message shown in the table.")
@output_options
@pass_app
def show(app, session_id, as_openai, width, output: OutputFormat):
    """Show system prompt + latest summary + the messages kept since its cut.

    Example: ctxtool context show 42 --json
    """
    store = Store(app.store_engine())
    session = store.session(session_id)
    ctx = store.restored_context(session_id)
    if as_openai:
        click.echo(dumps(ctx.to_openai()))
        return
    choice = encoding_for_model(session.model)
    tokens = restored_context_tokens(ctx, choice.name)
    cp = ctx.compaction
    header = {
        "session_id": session_id, "title": session.title, "model": session.model,
        "checkpoint_id": cp.id if cp else None,
        "first_kept_message_id": cp.first_kept_message_id if cp else None,
        "summarizer": cp.summarizer if cp else None,
        "messages_kept": len(ctx.messages), "context_tokens": tokens,
        "encoding": choice.name + (" (estimate)" if choice.estimate else ""),
    }
    if output.machine:
        click.echo(dumps({**header, "messages": ctx.to_openai()}))
        return
    for key, value in header.items():
        click.echo(f"{key + ':':24}{'-' if value is None else value}")
    if ctx.system_prompt:
        click.echo(f"\n[system prompt]\n{_clip(ctx.system_prompt, width * 3)}")
    if cp:
        click.echo(f"\n[summary of checkpoint {cp.id}]\n{cp.summary}")
    click.echo("")
    rows = []
    for m in ctx.messages:
        text = m.content or ""
        if m.tool_calls:
            text = (text + " " if text else "") + " ".join(
                f"→{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})"
                for c in m.tool_calls)
        rows.append({"id": m.id, "role": m.role, "tokens": m.token_count,
                     "tool_call_id": m.tool_call_id, "content": _clip(text, width)})
    print_rows(rows, output)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@main.command("validate")
@click.option("--session", "session_id", type=int, help="Only this session (default: all).")
@output_options
@pass_app
def validate_cmd(app, session_id, output: OutputFormat):
    """Check checkpoint consistency: cuts point at messages of their session and never orphan a
    tool result, checkpoints form one chain, restored contexts are valid for an API.

    Exits 1 when any error is found (warnings alone exit 0).

    Example: ctxtool validate --json
    """
    issues, checked = validate(app.store_engine(), session_id)
    print_rows([i.as_dict() for i in issues], output,
               headers=["session_id", "severity", "rule", "compaction_id", "message_id", "message"])
    errors = [i for i in issues if i.severity == "error"]
    if not output.machine:
        click.echo(f"{checked} session(s) checked: {len(errors)} error(s), "
                   f"{len(issues) - len(errors)} warning(s)", err=True)
    if errors:
        raise CtxtoolError(f"{len(errors)} consistency error(s) found")


@main.group()
def sessions():
    """Find sessions to inspect.

    Example: ctxtool sessions list --project shop --limit 20
    """


@sessions.command("list")
@click.option("--user", "user_id", help="Only this user_id.")
@click.option("--project", "project_id", help="Only this project_id.")
@click.option("--source-format", help="Only sessions imported from this format (e.g. claude-code).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1))
@output_options
@pass_app
def sessions_list(app, user_id, project_id, source_format, limit, output: OutputFormat):
    """The newest sessions with their message and checkpoint counts.

    Example: ctxtool sessions list --json
    """
    rows = list_sessions(app.store_engine(), user_id, project_id, source_format, limit)
    print_rows(rows, output, headers=None if output.machine else
               ["session_id", "title", "model", "source", "messages", "compactions",
                "last_message_id", "created_at"])
