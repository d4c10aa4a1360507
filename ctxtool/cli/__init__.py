"""The ``ctxtool`` command: a thin click layer over the library.

Each command group lives in its own module; this one builds the root group, resolves the
database URL and the configuration file once, gives every command ``--db``, and is the one
place where errors become a line on stderr with an exit code (library errors, database errors,
a closed pipe, and — never silently — a bug).
"""

from __future__ import annotations

import datetime
import errno
import os
import re
import sys

import click

from .. import __version__
from ..config import load_config
from ..db import DEFAULT_URL, URL_ENV, create_engine
from ..errors import CtxtoolError
from ..failures import describe_failure
from ..output import visible


class AppContext:
    """What every command needs: the database URL and, lazily, one engine for it."""

    def __init__(self, url: str | None, config=None):
        self.url = url
        self.config = config
        self._engine = None
        self._must_exist = True
        self.engine_options: dict = {}

    def use_url(self, url: str) -> None:
        """A ``--db`` given after the subcommand wins over the one before it."""
        self.url = url
        self._engine = None

    def engine(self, *, create: bool = False, **engine_options):
        """The engine. Only `migrate up` may ``create`` a SQLite file; every other command
        names a missing one instead of leaving an empty file behind."""
        if self._engine is None:
            self.engine_options.update(engine_options)
            self._engine = create_engine(self.url, must_exist=not create, **self.engine_options)
        return self._engine

    def checked_engine(self, **engine_options):
        """The engine after checking the schema is current (every command but `migrate`).

        ``engine_options`` (e.g. a pool size for many workers) apply if no engine exists yet.
        """
        from ..migrate import Migrator

        engine = self.engine(**engine_options)
        Migrator(engine).require_current()
        return engine


pass_app = click.make_pass_decorator(AppContext)


def check_reserve(context_window: int | None, reserve_tokens: int | None) -> None:
    """A reserve that swallows the window given with it leaves no threshold: say so at once."""
    if (
        context_window is not None
        and reserve_tokens is not None
        and reserve_tokens >= context_window
    ):
        raise click.UsageError(
            f"--reserve-tokens {reserve_tokens} leaves nothing of a "
            f"--context-window of {context_window}"
        )


def _first_paragraph(help_text: str | None) -> str:
    paragraph = (help_text or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split())


_NEGATIVE = re.compile(r"-[0-9]+\Z")


def _negative_numbers_as_arguments(command: click.Command, ctx, args: list[str]) -> list[str]:
    """``context diff 42 -1 -2`` (the latest two): click takes ``-1`` for an unknown option.
    Put the arguments after a ``--``, in their order, and the options (with their values:
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
        return super().parse_args(ctx, _negative_numbers_as_arguments(self, ctx, args))

    def invoke(self, ctx):
        url = ctx.params.pop("db_url", None)
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


class OutputFailed(CtxtoolError):
    """Standard output refused what was written: a full disk or quota, ``> /dev/full``, EIO."""


class _GuardedOutput:
    """``sys.stdout`` while a command runs: a write or flush that fails becomes OutputFailed,
    said in one line, instead of an OSError taken for a bug. A closed pipe (``| head``) is no
    error and no reason to stop: what is written from then on is dropped, and the command
    ends as it would have, with its own exit code and its errors on stderr (a failing
    ``migrate status | head`` must not pass a deploy gate run under ``pipefail``)."""

    def __init__(self, stream, nowhere_to_report: bool = False):
        # stderr: a write that fails there cannot be reported anywhere, so every failure is
        # dropped (``2>&1 | head``: a failing command still ends with its own exit code).
        self._stream, self._nowhere = stream, nowhere_to_report

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as exc:
            if exc.errno != errno.EPIPE and not self._nowhere:
                raise _output_failed(exc) from None
            _quiet_closed_pipe(self._stream)
            return len(text)

    def flush(self):
        try:
            return self._stream.flush()
        except OSError as exc:
            if exc.errno != errno.EPIPE and not self._nowhere:
                raise _output_failed(exc) from None
            _quiet_closed_pipe(self._stream)
            try:
                self._stream.flush()  # what was buffered goes to /dev/null now
            except OSError:
                pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _output_failed(exc: OSError) -> OSError | OutputFailed:
    if exc.errno == errno.EPIPE:
        return exc
    try:
        where = os.readlink(f"/proc/self/fd/{sys.stdout.fileno()}")
    except (OSError, ValueError, AttributeError):
        where = "standard output"
    return OutputFailed(f"cannot write the output to {where}: {exc.strerror or exc}")


class _Root(_Group):
    """Reports every failure as one line and an exit code: ``CtxtoolError`` carries its code,
    database errors are described without credentials, a closed pipe (``| head``) is not an
    error, output that cannot be written is one line (exit 1), and anything else is a bug,
    said as such (``CTXTOOL_DEBUG=1`` shows the traceback)."""

    def main(self, *args, **kwargs):
        real, real_err = sys.stdout, sys.stderr
        sys.stdout = _GuardedOutput(real) if real is not None else real
        sys.stderr = _GuardedOutput(real_err, True) if real_err is not None else real_err
        try:
            try:
                return super().main(*args, **kwargs)
            finally:
                if sys.stdout is not None:  # None: started with stdout closed (>&-)
                    sys.stdout.flush()  # what is still buffered fails here, not at exit
                if sys.stderr is not None:
                    sys.stderr.flush()
        except OutputFailed as exc:  # while parsing (--help, --version), or the last flush
            _quiet_closed_pipe()
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)
        except BrokenPipeError:
            _quiet_closed_pipe()
            sys.exit(0)
        finally:
            sys.stdout, sys.stderr = real, real_err

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - never a traceback
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:  # BrokenPipeError too
                _quiet_closed_pipe()
                ctx.exit(0)
            if isinstance(exc, OutputFailed):
                _quiet_closed_pipe()  # what is still buffered goes nowhere, not to a traceback
            app = ctx.find_object(AppContext)
            failure = describe_failure(exc, url=app.url if app is not None else None)
            _fail(failure.message, failure.exit_code)


def _quiet_closed_pipe(stream=None) -> None:
    """The reader went away (``ctxtool ... | head``): what is written to ``stream`` (stdout by
    default) from now on goes to /dev/null, and nothing is said of it."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, (stream if stream is not None else sys.stdout).fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _fail(message: str, code: int):
    # One line, whatever a file name or an argument held (a newline, ESC): escaped as tables are.
    err = click.ClickException(visible(message))
    err.exit_code = code
    raise err


def _by_parameter_name(command: click.Command, table: dict, where: str = "") -> dict:
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
            out[key] = _by_parameter_name(sub, value, name)
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
        if param is None and not (command is main and key == "url"):
            raise CtxtoolError(f"{name}: no such command or option")
        if param is not None:
            _check_config_value(param, value, name)
        out[param.name if param is not None else key] = value
    return out


def _check_config_value(param: click.Parameter, value, name: str) -> None:
    """A file's value must be one its option takes, said with the setting's name: TOML has
    arrays, tables, dates and floats such as ``1e400`` (inf), which click would take for a
    list of arguments, truncate (``4.5`` workers) or fail on inside its conversion."""
    option = "/".join(param.opts)
    dates = (datetime.date, datetime.time)
    if isinstance(value, (list, dict)) or (
        isinstance(value, dates) and not getattr(param.type, "takes_dates", False)
    ):
        kind = {list: "an array", dict: "a table"}.get(type(value), "a date or time")
        raise CtxtoolError(f"{name} ({option}): {kind} is not a value of this option ({value!r})")
    if getattr(param, "is_flag", False) and not isinstance(value, bool):
        raise CtxtoolError(f"{name} ({option}): {value!r} is not true or false")
    try:
        param.type.convert(value, param, None)  # conversions are pure; the file is named here
    except click.BadParameter as exc:
        raise CtxtoolError(f"{name} ({option}): {exc.message}") from None


def _load_config(ctx, _param, value):
    """Eager: the configuration file is read before any other option, so its values become
    the defaults of every option (click's ``default_map``)."""
    try:
        config = load_config(value)  # its errors name the file
    except CtxtoolError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param_hint="--config") from None
    try:
        defaults = _by_parameter_name(ctx.command, config.option_defaults())
    except CtxtoolError as exc:
        raise click.BadParameter(f"{config.path}: {exc}", ctx=ctx, param_hint="--config") from None
    ctx.default_map = {**defaults, **(ctx.default_map or {})}
    ctx.meta["ctxtool.config"] = config
    return value


@click.group(
    cls=_Root, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.option(
    "--config",
    "config_path",
    metavar="PATH",
    is_eager=True,
    expose_value=False,
    callback=_load_config,
    help="Configuration file [env CTXTOOL_CONFIG; default ./ctxtool.toml, then "
    "$XDG_CONFIG_HOME/ctxtool/config.toml].",
)
@click.option(
    "--db",
    "url",
    envvar=URL_ENV,
    metavar="URL",
    help=f"Database URL, e.g. mysql+pymysql://user:pass@host:3306/db "
    f"[env {URL_ENV}; default {DEFAULT_URL}]",
)
@click.version_option(__version__, prog_name="ctxtool")
@click.pass_context
def main(ctx, url):
    """Operations toolkit for the context stores of LLM agents kept in MySQL.

    Migrate the schema, import transcripts, count tokens, compact sessions offline and inspect
    the restored context of any session.

    Example: ctxtool --db mysql+pymysql://root@127.0.0.1/agents migrate up
    """
    ctx.obj = AppContext(url, ctx.meta.get("ctxtool.config"))


def _register() -> None:
    # each module adds its commands to `main`
    from . import (  # noqa: F401
        compact,
        config,
        context,
        eval,
        imports,
        migrate,
        sessions,
        tokens,
        validate,
    )


_register()
