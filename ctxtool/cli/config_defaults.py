"""A configuration file's values as the defaults of every option (click's ``default_map``),
each checked against its option before any command runs, and said with the file's name."""

from __future__ import annotations

import datetime
import importlib

import click

from ..config_file import load_config
from ..core.errors import CtxtoolError
from ..escapes import visible


class SettingError(CtxtoolError):
    """A setting of the file that cannot be used, with the table and key that hold it, so
    the message can name the file's line."""

    def __init__(self, message: str, table: str, key: str):
        super().__init__(message)
        self.table, self.key = table, key


def default_map_for(command: click.Command, table: dict, where: str = "") -> dict:
    """A config table keyed the way click's ``default_map`` wants it: an option written as in
    the command line (``summarizer``, ``keep-recent-tokens``, or with underscores) becomes its
    parameter's name. A key that is neither a subcommand's table nor an option of the command
    is an error naming the nearest valid key (a misspelt setting must not be ignored in
    silence)."""
    out: dict = {}
    for key, value in table.items():
        name = f"{where}.{key}" if where else key
        sub = _subcommand(command, key)
        if sub is not None and sub.name is not None:
            if not isinstance(value, dict):
                raise SettingError(f"[{name}] must be a table of {key}'s options", where, key)
            out[sub.name] = default_map_for(sub, value, name)
            continue
        param = option_for_key(command, key)
        if param is None:
            raise SettingError(_unknown(command, key, name, where), where, key)
        _check_value(param, value, name, where, key)
        out[param.name] = value
    return out


# The options that say what a session's window is. Set once under [compact], they hold for
# every command that measures sessions against a window (validate's over_window, `sessions
# list --over-window`) unless that command's own table sets them: a store compacted at 100k
# must not be validated against the model's 200k.
WINDOW_SETTINGS = ("context_window", "reserve_tokens")
WINDOW_TABLE = "compact"


def _names(command: click.Command) -> list[str]:
    """The names of a group's commands, without loading their modules (see cli.root)."""
    if not isinstance(command, click.Group):
        return []
    return list(command.list_commands(click.Context(command)))


def _subcommand(command: click.Command, key: str) -> click.Command | None:
    """The command a table names (its module loaded: its options are what the table sets)."""
    for name in (key, key.replace("_", "-")):
        if name in _names(command):
            assert isinstance(command, click.Group)
            return command.get_command(click.Context(command), name)
    return None


def with_shared_window(group: click.Group, default_map: dict) -> dict:
    """``default_map`` with [compact]'s window settings given to every other command that
    takes them and does not set them itself."""
    own = default_map.get(WINDOW_TABLE, {})
    shared = {k: v for k, v in own.items() if k in WINDOW_SETTINGS}
    return _share(group, default_map, shared, top=True) if shared else default_map


def _share(group: click.Group, table: dict, shared: dict, top: bool = False) -> dict:
    """Every command's table that takes the window options gets the shared settings; a command
    not loaded yet gets them too (a command without the options ignores them: click reads a
    default only for a parameter it has), so no module is loaded to ask."""
    out = dict(table)
    for name in _names(group):
        if top and name == WINDOW_TABLE:
            continue
        command = group.commands.get(name)
        if isinstance(command, click.Group):
            sub = _share(command, table.get(name, {}), shared)
            if sub:
                out[name] = sub
        elif command is None or any(p.name == WINDOW_SETTINGS[0] for p in command.params):
            out[name] = {**shared, **table.get(name, {})}
    return out


def setting_key(param: click.Option) -> str:
    """The key a configuration file sets an option with: its long name (``summarizer`` for
    ``--summarizer``, whose parameter is ``kind``)."""
    longs = [o[2:] for o in param.opts if o.startswith("--")]
    return longs[0] if longs else str(param.name)


def option_for_key(command: click.Command, key: str) -> click.Option | None:
    flag = "--" + key.replace("_", "-")
    return next(
        (
            p
            for p in command.params
            if isinstance(p, click.Option) and (p.name == key.replace("-", "_") or flag in p.opts)
        ),
        None,
    )


def _unknown(command: click.Command, key: str, name: str, where: str) -> str:
    """ "no such option", with the nearest key the table can hold (difflib), if any is near."""
    subcommands = _names(command)
    options = [
        setting_key(p)
        for p in command.params
        if isinstance(p, click.Option) and not p.hidden and p.name not in ("help", "db_url")
    ]
    what = "command or option" if subcommands else "option"
    of = f" of `ctxtool {where.replace('.', ' ')}`" if where else ""
    # Loaded by name when a key is unknown: no command's start-up needs it.
    near = importlib.import_module("difflib").get_close_matches(
        key.replace("_", "-"), subcommands + options, n=1
    )
    hint = f"; did you mean {where + '.' if where else ''}{near[0]}?" if near else ""
    if not near and where:
        hint = f" (see `ctxtool {where.replace('.', ' ')} --help`)"
    return f"{name}: no such {what}{of}{hint}"


def _check_value(param: click.Parameter, value, name: str, table: str, key: str) -> None:
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
        raise SettingError(
            f"{name} ({option}): {kind} is not a value of this option ({value!r})", table, key
        )
    if getattr(param, "is_flag", False) and not isinstance(value, bool):
        raise SettingError(f"{name} ({option}): {value!r} is not true or false", table, key)
    try:
        param.type.convert(value, param, None)  # conversions are pure; the file is named here
    except click.BadParameter as exc:
        raise SettingError(f"{name} ({option}): {exc.message}", table, key) from None


def load_config_defaults(ctx, _param, value):
    """Eager: the configuration file is read before any other option, so its values become
    the defaults of every option (click's ``default_map``). A file that cannot be used is one
    line naming it (and the setting's line), exit 2; when ``--help`` was asked for, the help
    is printed without the file's defaults and the command, if it still runs (``--help`` was
    an option's value), fails then (``raise_config_error``)."""
    try:
        config = load_config(value)  # its errors name the file
        defaults = with_shared_window(
            ctx.command, default_map_for(ctx.command, config.option_defaults())
        )
    except SettingError as exc:
        line = config.line_of(exc.table, exc.key)
        refuse_unless_help(ctx, f"{config.path}{f':{line}' if line else ''}: {exc}")
        return value
    except CtxtoolError as exc:
        text = str(exc)
        refuse_unless_help(
            ctx, text if "config" in text or str(value or "") in text else f"{value}: {text}"
        )
        return value
    ctx.default_map = {**defaults, **(ctx.default_map or {})}
    ctx.meta["ctxtool.config"] = config
    return value


HELP_ASKED = "ctxtool.help_asked"
_DEFERRED = "ctxtool.config_error"


def raise_config_error(ctx) -> None:
    """The configuration file's error put off for ``--help``, raised when a command runs."""
    err = ctx.meta.pop(_DEFERRED, None)
    if err is not None:
        raise err


def refuse_unless_help(ctx, message: str):
    """A usage error (exit 2), put off while help is asked for: the help needs none of it,
    and the command, if it still runs (``--help`` was an option's value), fails then."""
    err = click.ClickException(visible(message))
    err.exit_code = 2  # type: ignore[misc]  # a usage error: nothing ran
    if ctx.meta.get(HELP_ASKED):
        ctx.meta[_DEFERRED] = err  # the help needs no file
        return
    raise err
