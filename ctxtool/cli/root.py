"""The root ``ctxtool`` group: the command classes every command is made of (``--db`` after
the command's name too, whole first paragraphs in a group's help, negative numbers as
arguments), and the one place where a command's failure becomes a line on stderr with an
exit code (see ctxtool.failures; a closed pipe is no failure)."""

from __future__ import annotations

import errno
import os

import click

from .. import __version__
from ..db import DEFAULT_URL, URL_ENV, URL_ENVS
from ..failures import INTERRUPTED, describe_failure
from ..output import visible
from .app import AppContext
from .config_defaults import (
    HELP_ASKED,
    load_config_defaults,
    raise_config_error,
    refuse_unless_help,
)
from .negative_numbers import negative_numbers_as_arguments
from .streams import OutputFailed, guarded_streams, quiet_closed_pipe


def _first_paragraph(help_text: str | None) -> str:
    paragraph = (help_text or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split())


class _Command(click.Command):
    """Every command takes ``--db`` (also after its name) and lists its whole first paragraph
    in the parent's help, not 45 characters of it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.params.append(
            click.Option(
                ["--db", "db_url"],
                metavar="URL",
                expose_value=True,
                help=f"Database URL (overrides the one before the command) [env {URL_ENV}].",
            )
        )

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, negative_numbers_as_arguments(self, ctx, args))

    def invoke(self, ctx):
        url = ctx.params.pop("db_url", None)
        _refuse_empty(ctx, url)  # put off if a --help was an option's value: raised just below
        raise_config_error(ctx)
        if url:
            ctx.find_object(AppContext).use_url(url)
        return super().invoke(ctx)

    def get_short_help_str(self, limit: int = 45) -> str:
        return self.short_help or _first_paragraph(self.help)


class _Group(click.Group):
    command_class = _Command
    group_class = type  # subgroups are _Groups too

    def get_short_help_str(self, limit: int = 45) -> str:
        return self.short_help or _first_paragraph(self.help)


class _Root(_Group):
    """Reports every failure as one line and an exit code: ``CtxtoolError`` carries its code,
    database errors are described without credentials, a closed pipe (``| head``) is not an
    error, output that cannot be written is one line (exit 1), and anything else is a bug,
    said as such (``CTXTOOL_DEBUG=1`` shows the traceback)."""

    def main(self, *args, **kwargs):
        with guarded_streams():
            return super().main(*args, **kwargs)

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:  # click would say "Aborted!" on two lines, exit 1
            _fail("interrupted", INTERRUPTED)

    def parse_args(self, ctx, args):
        # Before the eager --config: a help asked for anywhere needs no configuration file.
        words = args[: args.index("--")] if "--" in args else args
        ctx.meta[HELP_ASKED] = any(w in ctx.help_option_names for w in words)
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - never a traceback
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:  # BrokenPipeError too
                quiet_closed_pipe()
                ctx.exit(0)
            if isinstance(exc, OutputFailed):
                quiet_closed_pipe()  # what is still buffered goes nowhere, not to a traceback
            app = ctx.find_object(AppContext)
            failure = describe_failure(exc, url=app.url if app is not None else None)
            _fail(failure.message, failure.exit_code)


def _refuse_empty(ctx, url: str | None) -> None:
    """``--db ''`` would mean the default database in silence (an unset variable in a script)."""
    if url is not None and not url.strip():
        refuse_unless_help(ctx, "--db is empty; give a database URL or a SQLite file's path")


def _fail(message: str, code: int):
    # One line, whatever a file name or an argument held (a newline, ESC): escaped as tables are.
    err = click.ClickException(visible(message))
    err.exit_code = code  # type: ignore[misc]  # click's is class-wide; a failure has its own
    raise err


@click.group(
    cls=_Root, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.option(
    "--config",
    "config_path",
    metavar="PATH",
    is_eager=True,
    expose_value=False,
    callback=load_config_defaults,
    help="Configuration file [env CTXTOOL_CONFIG; default ./ctxtool.toml, then "
    "$XDG_CONFIG_HOME/ctxtool/config.toml].",
)
@click.option(
    "--db",
    "url",
    envvar=list(URL_ENVS),
    metavar="URL",
    help=f"Database URL, e.g. mysql+pymysql://user:pass@host:3306/db, or a SQLite file's path "
    f"[env {', then '.join(URL_ENVS)}; default {DEFAULT_URL}]",
)
@click.version_option(__version__, prog_name="ctxtool")
@click.pass_context
def main(ctx, url):
    """Operations toolkit for the context stores of LLM agents kept in MySQL.

    Migrate the schema, import transcripts, count tokens, compact sessions offline and inspect
    the restored context of any session.

    Example: ctxtool --db mysql+pymysql://root@127.0.0.1/agents migrate up
    """
    _refuse_empty(ctx, url)
    from_env = ctx.get_parameter_source("url") == click.core.ParameterSource.ENVIRONMENT
    shared_env = next((v for v in URL_ENVS if os.environ.get(v)), None) if from_env else None
    ctx.obj = AppContext(
        url, ctx.meta.get("ctxtool.config"), shared_env if shared_env != URL_ENV else None
    )
    ctx.call_on_close(ctx.obj.close)  # however the command ends: done, failed, interrupted
