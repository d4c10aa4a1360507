"""Negative numbers as arguments: ``context diff 42 -1 -2`` means the latest two checkpoints,
where click would take ``-1`` for an unknown option."""

from __future__ import annotations

import re

import click

_NEGATIVE = re.compile(r"-[0-9]+\Z")


def negative_numbers_as_arguments(
    command: click.Command, ctx: click.Context, args: list[str]
) -> list[str]:
    """Put the arguments after a ``--``, in their order, and the options (with their values:
    ``--at -1``) before it, when a negative number is one of the arguments."""
    if "--" in args or not any(_NEGATIVE.match(a) for a in args):
        return args
    takes_value = {
        name: not (p.is_flag or p.count)
        for p in command.get_params(ctx)
        if isinstance(p, click.Option)
        for name in (*p.opts, *p.secondary_opts)
    }
    options, arguments, i = [], [], 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-") and len(arg) > 1 and not _NEGATIVE.match(arg):
            options.append(arg)
            if takes_value.get(arg) and i + 1 < len(args):  # "--at=-1" carries its own
                i += 1
                options.append(args[i])
        else:
            arguments.append(arg)
        i += 1
    if not any(_NEGATIVE.match(a) for a in arguments):
        return args
    return [*options, "--", *arguments]
