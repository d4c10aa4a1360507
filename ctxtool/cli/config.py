"""`ctxtool config` and `ctxtool completion`: what is in force, and shell completion."""

from __future__ import annotations

import os

import click
from click.core import ParameterSource
from click.shell_completion import get_completion_class

from ..db import DEFAULT_URL, URL_ENV, URL_ENVS, mask_url
from ..output import OutputFormat, print_rows
from .config_defaults import default_map_for
from .options import output_options
from .root import main

_SOURCES = {
    ParameterSource.COMMANDLINE: "option",
    ParameterSource.ENVIRONMENT: "environment",
    ParameterSource.DEFAULT_MAP: "config file",
    ParameterSource.DEFAULT: "default",
}
_NOT_SETTINGS = {"db_url", "table_fmt", "limit"}
_UNSET = getattr(click.core, "UNSET", None)  # click >= 8.2 marks "no default" with a sentinel
# Commands whose options a configuration file usually sets.
_CONFIGURED_COMMANDS = ("compact", "import")


@main.command("config")
@output_options
@click.pass_context
def config_cmd(ctx, output: OutputFormat):
    """Show the settings in force and where each comes from (option, environment, config file
    or default). Passwords are masked.

    Example: ctxtool --config ./ctxtool.toml config
    """
    root = ctx.find_root()
    app = ctx.obj
    config = app.config
    url_source = _SOURCES.get(root.get_parameter_source("url"), "default")
    if app.url is None:
        url_source = "default"
    url_env = next((v for v in URL_ENVS if os.environ.get(v)), URL_ENV)
    rows: list[dict] = [
        {
            "setting": "config_file",
            "value": str(config.path) if config and config.path else None,
            "source": "--config / CTXTOOL_CONFIG / ./ctxtool.toml / $XDG_CONFIG_HOME",
        },
        {
            "setting": "database.url",
            "value": mask_url(app.url or DEFAULT_URL),
            "source": url_source if url_source != "environment" else f"environment {url_env}",
        },
    ]
    defaults = config.option_defaults() if config else {}
    for name in _CONFIGURED_COMMANDS:
        command = main.commands.get(name)
        if command is None:
            continue
        section = default_map_for(command, defaults.get(name) or {})
        for param in command.params:
            if not isinstance(param, click.Option) or param.is_flag or param.name in _NOT_SETTINGS:
                continue
            value, source = _resolve(param, section)
            rows.append({"setting": f"{name}.{param.name}", "value": value, "source": source})
    print_rows(rows, output, headers=["setting", "value", "source"])


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


@main.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion_cmd(shell):
    """Print the shell completion script for SHELL.

    \b
    Examples:
      eval "$(ctxtool completion bash)"          # in ~/.bashrc
      ctxtool completion fish > ~/.config/fish/completions/ctxtool.fish
    """
    cls = get_completion_class(shell)
    click.echo(cls(main, {}, "ctxtool", "_CTXTOOL_COMPLETE").source())
