"""The ``ctxtool`` command: a thin click layer over the library.

Each command group lives in its own module; this one builds the root group, resolves the database
URL once, and turns library errors into one-line messages with an exit code.
"""

from __future__ import annotations

import click
from sqlalchemy.exc import SQLAlchemyError

from .. import __version__
from ..db import DEFAULT_URL, URL_ENV, create_engine, describe_db_error
from ..errors import CtxtoolError


class _Group(click.Group):
    """Root group that reports CtxtoolError / database errors as ``Error: ...`` + exit code."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except CtxtoolError as exc:
            _fail(str(exc), exc.exit_code)
        except SQLAlchemyError as exc:
            url = ctx.obj.url if isinstance(ctx.obj, AppContext) else None
            _fail(describe_db_error(exc, url), 1)


def _fail(message: str, code: int):
    err = click.ClickException(message)
    err.exit_code = code
    raise err


class AppContext:
    """What every command needs: the database URL and, lazily, one engine for it."""

    def __init__(self, url: str | None):
        self.url = url
        self._engine = None
        self.engine_options: dict = {}

    @property
    def engine(self):
        if self._engine is None:
            self._engine = create_engine(self.url, **self.engine_options)
        return self._engine

    def store_engine(self, **engine_options):
        """The engine after checking the schema is current (every command but `migrate`).

        ``engine_options`` (e.g. a pool size for many workers) apply if no engine exists yet.
        """
        from ..migrate import Migrator

        if self._engine is None:
            self.engine_options.update(engine_options)
        Migrator(self.engine).require_current()
        return self.engine


pass_app = click.make_pass_decorator(AppContext)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", "url", envvar=URL_ENV, metavar="URL",
              help=f"Database URL, e.g. mysql+pymysql://user:pass@host:3306/db "
                   f"[env {URL_ENV}; default {DEFAULT_URL}]")
@click.version_option(__version__, prog_name="ctxtool")
@click.pass_context
def main(ctx, url):
    """Operations toolkit for the context stores of LLM agents kept in MySQL.

    Migrate the schema, import transcripts, count tokens, compact sessions offline and inspect
    the restored context of any session.

    Example: ctxtool --db mysql+pymysql://root@127.0.0.1/agents migrate up
    """
    ctx.obj = AppContext(url)


def _register() -> None:
    from . import compact, context, migrate, sessions, tokens, transcripts, validate  # noqa: F401  (each module adds its commands to `main`)


_register()
