"""A configuration file's values as the defaults of every option (click's ``default_map``),
each checked against its option before any command runs, and said with the file's name."""

from __future__ import annotations

import datetime

import click

from ..config_file import load_config
from ..errors import CtxtoolError


def default_map_for(command: click.Command, table: dict, where: str = "") -> dict:
    """A config table keyed the way click's ``default_map`` wants it: an option written as in
    the command line (``summarizer``, ``keep-recent-tokens``) becomes its parameter's name.
    A key that is neither a subcommand's table nor an option of the command is an error (a
    misspelt setting must not be ignored in silence)."""
    out: dict = {}
    for key, value in table.items():
        name = f"{where}.{key}" if where else key
        sub = command.commands.get(key) if isinstance(command, click.Group) else None
        if sub is not None:
            if not isinstance(value, dict):
                raise CtxtoolError(f"[{name}] must be a table of {key}'s options")
            out[key] = default_map_for(sub, value, name)
            continue
        flag = "--" + key.replace("_", "-")
        param = next(
            (
                p
                for p in command.params
                if isinstance(p, click.Option) and (p.name == key or flag in p.opts)
            ),
            None,
        )
        if param is None:
            raise CtxtoolError(f"{name}: no such command or option")
        _check_value(param, value, name)
        out[param.name] = value
    return out


def _check_value(param: click.Parameter, value, name: str) -> None:
    """A file's value must be one its option takes, said with the setting's name: TOML has
    arrays, tables, dates and floats such as ``1e400`` (inf), which click would take for a
    list of arguments, truncate (``4.5`` workers) or fail on inside its conversion."""
    option = "/".join(param.opts)
    dates = (datetime.date, datetime.time)
    if isinstance(value, (list, dict)) or (
        isinstance(value, dates) and not getattr(param.type, "takes_dates", False)
    ):
        kind = (
            "an array"
            if isinstance(value, list)
            else "a table"
            if isinstance(value, dict)
            else "a date or time"
        )
        raise CtxtoolError(f"{name} ({option}): {kind} is not a value of this option ({value!r})")
    if getattr(param, "is_flag", False) and not isinstance(value, bool):
        raise CtxtoolError(f"{name} ({option}): {value!r} is not true or false")
    try:
        param.type.convert(value, param, None)  # conversions are pure; the file is named here
    except click.BadParameter as exc:
        raise CtxtoolError(f"{name} ({option}): {exc.message}") from None


def load_config_defaults(ctx, _param, value):
    """Eager: the configuration file is read before any other option, so its values become
    the defaults of every option (click's ``default_map``)."""
    try:
        config = load_config(value)  # its errors name the file
    except CtxtoolError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param_hint="--config") from None
    try:
        defaults = default_map_for(ctx.command, config.option_defaults())
    except CtxtoolError as exc:
        raise click.BadParameter(f"{config.path}: {exc}", ctx=ctx, param_hint="--config") from None
    ctx.default_map = {**defaults, **(ctx.default_map or {})}
    ctx.meta["ctxtool.config"] = config
    return value
