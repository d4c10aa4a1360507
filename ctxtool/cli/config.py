"""`ctxtool config`: the settings in force and where each came from."""

from __future__ import annotations

import os

import click
from click.core import ParameterSource

from ..config_file import CONFIG_ENV, LOCAL_NAME
from ..db import DEFAULT_URL, URL_ENV, URL_ENVS, mask_url
from ..output import OutputFormat, print_rows
from ..terminal import fit_table, table_width
from .app import app_context
from .config_defaults import WINDOW_TABLE, default_map_for, setting_key, with_shared_window
from .options import output_options
from .root import main

_SOURCES = {
    ParameterSource.COMMANDLINE: "option",
    ParameterSource.ENVIRONMENT: "environment",
    ParameterSource.DEFAULT_MAP: "config file",
    ParameterSource.DEFAULT: "default",
}
# Shown only when set (in the file or the environment): output and selection flags, not settings.
_NOT_SETTINGS = {"table_fmt", "limit"}
_UNSET = getattr(click.core, "UNSET", None)  # click >= 8.2 marks "no default" with a sentinel
# Commands whose options a configuration file usually sets: shown even without a table.
_CONFIGURED_COMMANDS = ("compact", "import")


@main.command("config")
@output_options
@click.pass_context
def config_cmd(ctx, output: OutputFormat):
    """Show the settings in force and where each comes from (option, environment, config file
    or default). Passwords are masked.

    The one configuration file read, the database URL, and the options of every command the
    file has a table for (and of compact and import), under the keys the file uses.

    Example: ctxtool --config ./ctxtool.toml config
    """
    root = ctx.find_root()
    app = app_context(ctx)
    config = app.config
    url_source = _SOURCES.get(root.get_parameter_source("url"), "default")
    if app.url is None:
        url_source = "default"
    url_env = next((v for v in URL_ENVS if os.environ.get(v)), URL_ENV)
    rows: list[dict] = [
        {
            "setting": "config_file",
            "value": str(config.path.resolve()) if config and config.path else None,
            "source": _config_file_source(root, config),
        },
        {
            "setting": "database.url",
            "value": mask_url(app.url or DEFAULT_URL),
            "source": url_source if url_source != "environment" else f"environment {url_env}",
        },
    ]
    _load_every_command(main)  # every command's options are what this shows
    defaults = config.option_defaults() if config else {}
    tables: dict[str, dict] = {n: {} for n in _CONFIGURED_COMMANDS if n in main.commands}
    written = default_map_for(main, defaults)
    own_tables = _command_tables(main, written)
    tables.update(_command_tables(main, with_shared_window(main, written)))
    for path, section in tables.items():
        command: click.Command = main
        for name in path.split("."):
            command = command.commands[name]  # type: ignore[attr-defined]  # groups on the way
        for param in command.params:
            if not isinstance(param, click.Option) or param.name == "db_url" or param.hidden:
                continue
            value, source = _resolve(param, section)
            if source == "config file" and param.name not in own_tables.get(path, {}):
                source = f"config file [{WINDOW_TABLE}]"
            if (param.is_flag or param.name in _NOT_SETTINGS) and source == "default":
                continue
            rows.append(
                {"setting": f"{path}.{setting_key(param)}", "value": value, "source": source}
            )
    if output.machine:
        print_rows(rows, output)
        return
    headers = ["setting", "value", "source"]
    # The value is what people run this for: wrapped whole (a URL too), where the source
    # is shortened.
    click.echo(
        fit_table(rows, output, headers, table_width(), ["value", "source"], wrapped=["value"])
    )


def _load_every_command(group: click.Group) -> None:
    """Load each command's module (the root loads one when it runs, see cli.root)."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            _load_every_command(command)


def _command_tables(group: click.Group, default_map: dict, where: str = "") -> dict[str, dict]:
    """Every command the file has a table for, by its path (``sessions.list``), with the
    table as click's ``default_map`` holds it (parameter names)."""
    found: dict[str, dict] = {}
    for name, value in default_map.items():
        command = group.commands.get(name)
        if command is None or not isinstance(value, dict):
            continue
        path = f"{where}.{name}" if where else name
        if isinstance(command, click.Group):
            found.update(_command_tables(command, value, path))
        else:
            found[path] = value
    return found


def _config_file_source(root: click.Context, config) -> str:
    """How the one file read was found (files are never merged)."""
    if config is None or config.path is None:
        return f"none found ({', '.join(_LOOKED_UP)})"
    if root.get_parameter_source("config_path") == ParameterSource.COMMANDLINE:
        return "option --config"
    if os.environ.get(CONFIG_ENV):
        return f"environment {CONFIG_ENV}"
    return _LOOKED_UP[2] if config.path.name == LOCAL_NAME else _LOOKED_UP[3]


_LOOKED_UP = ("--config", CONFIG_ENV, f"./{LOCAL_NAME}", "$XDG_CONFIG_HOME/ctxtool/config.toml")


def _resolve(param: click.Option, section: dict):
    """An option's value before any command line: environment, config file, default."""
    envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
    for var in envvars:
        if os.environ.get(var):
            return _shown(param, os.environ[var]), f"environment {var}"
    if param.name in section:
        return _shown(param, section[param.name]), "config file"
    default = param.default if not callable(param.default) else param.default()
    return (None if default is _UNSET else _shown(param, default)), "default"


def _shown(param: click.Option, value):
    """A value as it may be printed: any URL, from wherever it came, has its password masked."""
    if isinstance(value, str) and ("url" in param.name or "://" in value or "@" in value):
        return mask_url(value)
    return value
