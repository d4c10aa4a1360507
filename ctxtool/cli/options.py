"""Options several commands share, declared once each (as sqlite-utils' ``output_options``):
the same spelling, help and checks wherever they appear, each handing the command the value
the library takes (an OutputFormat, a CompactionSettings, a session reference)."""

from __future__ import annotations

import functools
import importlib

import click
from click.shell_completion import CompletionItem

from ..core.errors import InvalidSettings
from ..core.tokens import SHIPPED_VOCABULARIES
from ..core.windows import DEFAULT_RESERVE_TOKENS, CompactionSettings
from ..db import create_engine, read_connection
from ..output import DEFAULT_TABLE_FORMAT, OutputFormat, visible
from .types import EncodingName, TableFormat, TokenCount

COMPLETION_TIMEOUT = 1.0  # seconds: a Tab that waits longer for a server is worse than none


def output_options(func):
    """Add --json / --nl / --csv / --fmt to a command; it receives ``output: OutputFormat``."""
    return _row_formats(func, "Output a JSON array.")


def document_output_options(func):
    """The options of :func:`output_options` for a command that prints one document holding
    rows (a trace's steps, a diff's messages): --json prints the whole document, --nl, --csv
    and --fmt its rows. It receives ``output: OutputFormat``."""
    return _row_formats(func, "Output the whole result as one JSON document.")


def _row_formats(func, json_help: str):
    options = [
        click.option("--json", "as_json", is_flag=True, help=json_help),
        click.option("--nl", "as_nl", is_flag=True, help="Output newline-delimited JSON."),
        click.option("--csv", "as_csv", is_flag=True, help="Output CSV with a header row."),
        click.option(
            "--fmt",
            "table_fmt",
            default=DEFAULT_TABLE_FORMAT,
            show_default=True,
            type=TableFormat(),
            metavar="FORMAT",
            help="Table style (any tabulate format: simple, github, grid, plain, ...).",
        ),
    ]
    for option in reversed(options):
        func = option(func)

    @functools.wraps(func)
    def wrapper(*args, as_json, as_nl, as_csv, table_fmt, **kwargs):
        if sum((as_json, as_nl, as_csv)) > 1:
            raise click.UsageError("choose one of --json, --nl, --csv")
        return func(*args, output=OutputFormat(as_json, as_nl, as_csv, table_fmt), **kwargs)

    return wrapper


def json_option(func):
    """Add --json to a command that prints one document (not rows): it receives ``output:
    OutputFormat``. Row formats (--nl, --csv, --fmt) are offered only where there are rows."""

    @click.option("--json", "as_json", is_flag=True, help="Output JSON.")
    @functools.wraps(func)
    def wrapper(*args, as_json, **kwargs):
        return func(*args, output=OutputFormat(json=as_json), **kwargs)

    return wrapper


def redact_options(command):
    """--redact and --redact-preview, alike wherever a session is written out."""
    command = click.option(
        "--redact-preview",
        is_flag=True,
        help="List what --redact would replace, and where (never the secret); write nothing.",
    )(command)
    return click.option(
        "--redact",
        is_flag=True,
        help="Replace secrets (API keys, tokens, private keys, passwords), e-mail addresses "
        "and home directories by [REDACTED:type] placeholders in what is written.",
    )(command)


def window_options(func):
    """Add ``--context-window`` and ``--reserve-tokens``; the command receives ``settings: a
    CompactionSettings``, which refuses a reserve that swallows the window (a usage error)."""

    @click.option(
        "--context-window",
        type=TokenCount(1024),
        metavar="TOKENS",
        help="The context window to assume instead of each session model's (e.g. 32000 or 32k).",
    )
    @click.option(
        "--reserve-tokens",
        type=TokenCount(0),
        metavar="TOKENS",
        help="Room kept free for the model's answer: the compaction threshold is the window "
        f"less this [default: {DEFAULT_RESERVE_TOKENS}, at most a quarter of the window].",
    )
    @functools.wraps(func)
    def wrapper(*args, context_window, reserve_tokens, **kwargs):
        try:
            settings = CompactionSettings(
                context_window=context_window, reserve_tokens=reserve_tokens
            )
        except InvalidSettings as exc:
            raise click.UsageError(str(exc)) from None
        return func(*args, settings=settings, **kwargs)

    return wrapper


encoding_option = click.option(
    "--encoding",
    type=EncodingName(),
    help="Count tokens with this encoding instead of the session model's "
    f"(shipped: {', '.join(SHIPPED_VOCABULARIES)}).",
)


def session_argument(required: bool = True, *, old_option: bool = False):
    """Add the ``SESSION`` argument: a session's id, its source id (e.g. the transcript's UUID)
    or a unique prefix of either, resolved by ``Store.resolve_session``. The command receives
    ``session: str | None``. ``old_option`` also takes ``--session`` (hidden, the spelling before
    0.2)."""

    def decorate(func):
        @click.argument("session", required=required, shell_complete=complete_session)
        @functools.wraps(func)
        def wrapper(*args, session, session_option=None, **kwargs):
            return func(*args, session=session or session_option, **kwargs)

        if old_option:
            wrapper = click.option("--session", "session_option", hidden=True)(wrapper)
        return wrapper

    return decorate


def complete_session(ctx: click.Context, _param: click.Parameter, incomplete: str):
    """Shell completion of SESSION from the configured store (``--db`` before or after the
    command, the environment, the configuration file). Never an error: a store that cannot
    answer quickly completes nothing."""
    url = ctx.params.get("db_url") or ctx.find_root().params.get("url")
    try:
        engine = create_engine(url, must_exist=True, timeout=COMPLETION_TIMEOUT)
    except Exception:  # noqa: BLE001 - a bad URL completes nothing
        return []
    try:
        # store/completion.py alone, loaded by name on a Tab: no store reads, and no
        # command's start-up pays for it.
        completion = importlib.import_module("ctxtool.store.completion")
        with read_connection(engine) as conn:
            candidates = completion.session_candidates(conn, incomplete)
    except Exception:  # noqa: BLE001 - missing tables, a server that is down: nothing
        return []
    finally:
        engine.dispose()
    return [CompletionItem(c.value, help=visible(c.title)[:60] or None) for c in candidates]
