"""The root ``ctxtool`` group: the command classes every command is made of (``--db`` after
the command's name too, whole first paragraphs in a group's help, negative numbers as
arguments), and the one place where a command's failure becomes a line on stderr with an
exit code (see ctxtool.failures; a closed pipe is no failure).

It is also the one place where start-up loads late: every command and group is named here
with the module that defines it and its one-line help (``COMMANDS``), and its module is
imported only when the command is resolved to run (or its own ``--help``). ``ctxtool --help``,
``--version``, a group's ``--help`` and a Tab on a command name load click and this module,
not SQLAlchemy, tabulate or the vocabularies; the modules only a running command needs (the
engine, the failure descriptions) are imported in ``_runtime``. This is start-up, not an
import loop dodged: the command modules import the layers below them at their top.
"""

from __future__ import annotations

import errno
import importlib
import os
from types import ModuleType

import click
from click.shell_completion import CompletionItem

from .. import __version__
from ..config_file import DEFAULT_URL, URL_ENV, URL_ENVS
from ..escapes import visible
from ..interrupts import INTERRUPTED, caused_by_interrupt
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


def _runtime() -> ModuleType:
    """ctxtool.failures, loaded when a command runs (it brings SQLAlchemy)."""
    return importlib.import_module("ctxtool.failures")


ROOT_SETTINGS = "ctxtool.root"  # (URL, configuration, the URL's variable): see cli.app


def _use_url(ctx: click.Context, check_config: bool = True) -> None:
    """``--db`` after a command's or a group's name wins over the one before it."""
    url = ctx.params.pop("db_url", None)
    _refuse_empty(ctx, url)  # put off if a --help was an option's value: raised just below
    if check_config:
        raise_config_error(ctx)
    if url:
        root = ctx.find_root()
        if root.obj is not None:
            root.obj.use_url(url)
        else:
            root.meta[ROOT_SETTINGS] = (url, root.meta[ROOT_SETTINGS][1], None)


def _db_option() -> click.Option:
    return click.Option(
        ["--db", "db_url"],
        metavar="URL",
        expose_value=True,
        help=f"Database URL (overrides the one before the command) [env {URL_ENV}].",
    )


class _Command(click.Command):
    """Every command takes ``--db`` (also after its name) and lists its whole first paragraph
    in the parent's help, not 45 characters of it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.params.append(_db_option())

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, negative_numbers_as_arguments(self, ctx, args))

    def invoke(self, ctx):
        _use_url(ctx)
        return super().invoke(ctx)

    def get_short_help_str(self, limit: int = 45) -> str:
        return self.short_help or _first_paragraph(self.help)


class _Group(click.Group):
    """A group whose commands are loaded when one is resolved: ``lazy`` names each with the
    module that defines it (relative to this package) and its one-line help, which the
    group's help and a Tab on a command name show without importing it. A test checks that
    each one-line help is the command's own."""

    command_class = _Command
    group_class = type  # subgroups are _Groups too

    def __init__(self, *args, lazy: dict[str, tuple[str, str]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = lazy or {}
        if not isinstance(self, _Root):
            self.params.append(_db_option())  # `ctxtool sessions --db URL list`

    def invoke(self, ctx):
        if not isinstance(self, _Root):
            _use_url(ctx, check_config=False)  # the subcommand checks it, after its --help
        return super().invoke(ctx)

    def list_commands(self, ctx):
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self.commands and cmd_name in self.lazy:
            importlib.import_module(self.lazy[cmd_name][0], __package__)
        return self.commands.get(cmd_name)

    def _short_help(self, name: str) -> str:
        command = self.commands.get(name)
        return command.get_short_help_str() if command else self.lazy[name][1]

    def format_commands(self, ctx, formatter):
        rows = [(name, self._short_help(name)) for name in self.list_commands(ctx)]
        rows = [r for r in rows if not getattr(self.commands.get(r[0]), "hidden", False)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def shell_complete(self, ctx, incomplete):
        if incomplete.startswith("-"):
            return super().shell_complete(ctx, incomplete)
        return [
            CompletionItem(name, help=self._short_help(name))
            for name in self.list_commands(ctx)
            if name.startswith(incomplete) and not getattr(self.commands.get(name), "hidden", False)
        ]

    def get_short_help_str(self, limit: int = 45) -> str:
        return self.short_help or _first_paragraph(self.help)


class _Root(_Group):
    """Reports every failure as one line and an exit code: ``CtxtoolError`` carries its code,
    database errors are described without credentials, a closed pipe (``| head``) is not an
    error, output that cannot be written is one line (exit 1), and anything else is a bug,
    said as such (``CTXTOOL_DEBUG=1`` shows the traceback)."""

    group_class = _Group  # type: ignore[assignment]  # its groups are _Groups, not roots

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
            if isinstance(exc, KeyboardInterrupt):
                _fail("interrupted", INTERRUPTED)
            if isinstance(exc, OutputFailed):
                quiet_closed_pipe()  # what is still buffered goes nowhere, not to a traceback
            app = ctx.find_root().obj
            url = app.url if app is not None else ctx.meta.get(ROOT_SETTINGS, (None,))[0]
            try:
                runtime = _runtime()
            except BaseException as broken:
                # An interrupt that landed while a module loaded leaves it half-made, and
                # importing it again fails: said as the interrupt it was. (A command's own
                # report of an interrupt, such as compact's summary, is said as it is.)
                if caused_by_interrupt(exc) or caused_by_interrupt(broken):
                    _fail("interrupted", INTERRUPTED)
                raise
            failure = runtime.describe_failure(exc, url=url)
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


# Each command: the module that defines it, and its one-line help (its docstring's first
# paragraph, which tests/test_startup.py checks), shown without importing it.
COMMANDS: dict[str, tuple[str, str]] = {
    "compact": (
        ".compact",
        "Compact a session's context: summarize old messages, keep recent ones verbatim.",
    ),
    "completion": (".shell", "Print the shell completion script for SHELL."),
    "config": (
        ".config",
        "Show the settings in force and where each comes from (option, environment, config "
        "file or default). Passwords are masked.",
    ),
    "eval": (
        ".eval",
        "Ask a checkpoint the questions a continuing agent has, and say which its restored "
        "context answers.",
    ),
    "import": (".imports", "Import Claude Code, Codex CLI, Pi or OpenAI-chat transcripts."),
    "search": (
        ".searches",
        "Find what was said: messages (content, tool-call arguments, tool results) and "
        "checkpoint summaries across sessions, newest first, and where each hit stands in its "
        "session's restored context today: kept verbatim, summarized and still held by the "
        "latest summary, or summarized and lost (at which checkpoint).",
    ),
    "validate": (
        ".validate",
        "Check checkpoint consistency: cuts point at messages of their session and never orphan "
        "a tool result, checkpoints form one chain, no message inside a summarized range was "
        "left out of its summary, restored contexts are valid for an API and fit their window.",
    ),
}
CONTEXT_COMMANDS = {
    "checkpoints": (
        ".context",
        "Every checkpoint of a session in order: parent, time, summarizer and model, cut, "
        "messages summarized, tokens before / after, summary tokens, and the quality gate's "
        "figures (the probe score, fabrications and missed probes, as `ctxtool eval` measures).",
    ),
    "diff": (
        ".context",
        "What changed from checkpoint A to checkpoint B: the summaries as a unified diff, how "
        "far the cut moved, and the messages that went from kept to summarized.",
    ),
    "export": (
        ".context",
        "Export a session's restored context (the latest, or --at a checkpoint).",
    ),
    "show": (".context_show", "Show system prompt + summary + the messages kept since its cut."),
    "trace": (
        ".searches",
        "Trace a fact through a session's checkpoints: the message(s) where it appeared, then "
        "every checkpoint since, saying whether its summary or its kept messages still hold it. "
        "The first checkpoint that dropped it is why the agent forgot.",
    ),
}
MIGRATE_COMMANDS = {
    "baseline": (".migrations", "Adopt a database whose seed tables an agent runtime created."),
    "repair": (".migrations", "Clear failed or interrupted records and accept changed checksums."),
    "status": (
        ".migrations",
        "Show every migration: applied (when, how long), pending, failed or changed.",
    ),
    "up": (
        ".migrations",
        "Apply pending migrations in order, recording each in ctxtool_schema_history.",
    ),
}
SESSIONS_COMMANDS = {
    "archive": (
        ".archive",
        "Write sessions to an archive folder: one re-importable JSONL file per session (its "
        "messages and checkpoints; `ctxtool import` brings it back as it was) and a manifest "
        "with counts and a checksum, which `sessions purge` checks before deleting anything.",
    ),
    "delete": (
        ".sessions",
        "Remove sessions completely — messages, checkpoints and the session — for real mistakes "
        "such as a transcript imported with the wrong format. One transaction: all or nothing.",
    ),
    "list": (
        ".sessions",
        "Sessions with their last activity (the time of their newest message), message and "
        "checkpoint counts, newest first (--sort last-activity: most recently active first).",
    ),
    "mark": (".sessions", "Record what an operator decided about a session."),
    "purge": (
        ".archive",
        "Delete sessions from the store that an archive written by ctxtool holds.",
    ),
}
TOKENS_COMMANDS = {
    "count": (
        ".token_counts",
        "Fill agent_message token counts where missing or counted with another encoding.",
    ),
    "report": (
        ".token_counts",
        "Per session: messages, full-history tokens, effective (restored) tokens, summary "
        "tokens, compression ratio, and the context size the provider reported, where the "
        "transcript had it.",
    ),
}


@click.group(
    cls=_Root,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
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
    # The AppContext is made when a command asks for it (cli.app.pass_app), not for a --help.
    ctx.meta[ROOT_SETTINGS] = (
        url,
        ctx.meta.get("ctxtool.config"),
        shared_env if shared_env != URL_ENV else None,
    )


@main.group(lazy=CONTEXT_COMMANDS)
def context():
    """Inspect the restored (effective) context of a session, now or at any checkpoint.

    Example: ctxtool context show fe5e1c67 --full
    """


@main.group(lazy=MIGRATE_COMMANDS)
def migrate():
    """Create and upgrade the store's schema from the versioned sql/ files.

    Example: ctxtool migrate up
    """


@main.group(lazy=SESSIONS_COMMANDS)
def sessions():
    """Find sessions to inspect.

    Example: ctxtool sessions list --search "failing test" --limit 20
    """


@main.group(lazy=TOKENS_COMMANDS)
def tokens():
    """Exact token counts per message (tiktoken, offline).

    Example: ctxtool tokens count --all && ctxtool tokens report
    """
