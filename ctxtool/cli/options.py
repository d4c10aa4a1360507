"""Options several commands share, declared once each (as sqlite-utils' ``output_options``):
the same spelling, help and checks wherever they appear. The output options (``--json``,
``--nl``, ``--csv``, ``--fmt``) are :func:`ctxtool.output.output_options` and ``json_option``."""

from __future__ import annotations

import functools

import click

from ..compaction.plan import DEFAULT_RESERVE_TOKENS, CompactionSettings
from ..errors import InvalidSettings
from .types import WholeNumber


def window_options(func):
    """Add ``--context-window`` and ``--reserve-tokens``; the command receives ``settings: a
    CompactionSettings``, which refuses a reserve that swallows the window (a usage error)."""

    @click.option(
        "--context-window",
        type=WholeNumber(1024),
        metavar="TOKENS",
        help="The context window to assume instead of each session model's.",
    )
    @click.option(
        "--reserve-tokens",
        type=WholeNumber(0),
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


def session_argument(required: bool = True, *, old_option: bool = False):
    """Add the ``SESSION`` argument: a session's id, its source id (e.g. the transcript's UUID)
    or a unique prefix of either, resolved by ``Store.resolve_session``. The command receives
    ``session: str | None``. ``old_option`` also takes ``--session`` (hidden, the spelling before
    0.2)."""

    def decorate(func):
        @click.argument("session", required=required)
        @functools.wraps(func)
        def wrapper(*args, session, session_option=None, **kwargs):
            return func(*args, session=session or session_option, **kwargs)

        if old_option:
            wrapper = click.option("--session", "session_option", hidden=True)(wrapper)
        return wrapper

    return decorate
