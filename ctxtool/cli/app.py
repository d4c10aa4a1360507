"""What every command is handed: the database URL, the configuration file and one engine."""

from __future__ import annotations

import functools
import importlib

import click
from sqlalchemy.engine import Engine

from ..config_file import Config
from ..core.errors import CtxtoolError, SchemaNotCurrent
from ..db import URL_ENV, create_engine, read_connection
from ..migrate.current import history_is_current
from .root import ROOT_SETTINGS


class AppContext:
    """What every command needs: the database URL and, lazily, one engine for it."""

    def __init__(self, url: str | None, config: Config | None = None, url_env: str | None = None):
        self.url = url
        self.config = config
        # The environment variable the URL came from, when it is a name other programs share.
        self.url_env = url_env
        self._engine: Engine | None = None
        self.engine_options: dict = {}

    def use_url(self, url: str) -> None:
        """A ``--db`` given after the subcommand wins over the one before it."""
        self.close()
        self.url = url
        self.url_env = None

    def close(self) -> None:
        """Dispose of the engine: its pooled connections would otherwise stay open until the
        garbage collector finds the engine (its event listeners make a cycle), and in-process
        runs (tests, a script calling ``main``) reach the server's connection limit."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def engine(self, *, create: bool = False, **engine_options) -> Engine:
        """The engine. Only `migrate up` may ``create`` a SQLite file; every other command
        names a missing one instead of leaving an empty file behind."""
        if self._engine is None:
            self.engine_options.update(engine_options)
            try:
                self._engine = create_engine(self.url, must_exist=not create, **self.engine_options)
            except CtxtoolError as exc:
                if self.url_env is None or isinstance(exc, SchemaNotCurrent):
                    raise
                # $DATABASE_URL may be another program's (a PostgreSQL URL): say whose it is.
                raise CtxtoolError(
                    f"{exc} (the URL is ${self.url_env}; --db or ${URL_ENV} chooses ctxtool's own)",
                    exc.exit_code,
                ) from None
        return self._engine

    def checked_engine(self, **engine_options) -> Engine:
        """The engine after checking the schema is current (every command but `migrate`).

        ``engine_options`` (e.g. a pool size for many workers) apply if no engine exists yet.
        """
        engine = self.engine(**engine_options)
        with read_connection(engine) as conn:
            current = history_is_current(conn)
        if not current:  # say what is amiss, as `migrate status` would
            # Loaded by name, as the root loads a command's module: only a store that is not
            # current (or cannot say) needs the migrator, its history writes and triggers.
            migrator = importlib.import_module("ctxtool.migrate.migrator")
            migrator.Migrator(engine).require_current()
        return engine


def app_context(ctx: click.Context) -> AppContext:
    """The AppContext of this run, made on the root context the first time a command asks for
    it (the root stores only its settings: a --help or `completion` loads no engine)."""
    root = ctx.find_root()
    if root.obj is None:
        root.obj = AppContext(*root.meta[ROOT_SETTINGS])
        root.call_on_close(root.obj.close)  # however the command ends: done, failed, interrupted
    return root.obj


def pass_app(func):
    """Hand a command its AppContext as the first argument."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(app_context(click.get_current_context()), *args, **kwargs)

    return wrapper
