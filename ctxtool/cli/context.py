"""`ctxtool context show`: what a session restores to."""

from __future__ import annotations

import click

from ..output import OutputFormat, dumps, output_options, print_rows
from ..store import Store, restored_context_tokens
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
