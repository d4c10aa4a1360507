"""The configuration file: the database URL and any command's option defaults, in TOML.

Precedence is the usual one: a command-line option, then the environment, then this file,
then the built-in default. The file's tables are named after commands, so ``[compact]`` holds
``compact``'s options (``reserve_tokens = 2000``) and ``[database] url`` the store's URL;
``ctxtool config`` shows what is in force and where each value came from.

Looked up in order: ``--config PATH``, ``$CTXTOOL_CONFIG``, ``./ctxtool.toml``,
``$XDG_CONFIG_HOME/ctxtool/config.toml`` (``~/.config/...``). The first that exists wins.
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .core.errors import CtxtoolError

# The database URL's own settings, by precedence after --db (the command line's start-up reads
# these names without loading the database layer).
URL_ENV = "CTXTOOL_DATABASE_URL"
# Read after URL_ENV: the name twelve-factor tools and dbmate use for the same thing.
GENERIC_URL_ENV = "DATABASE_URL"
URL_ENVS = (URL_ENV, GENERIC_URL_ENV)
DEFAULT_URL = "sqlite:///ctxtool.db"

CONFIG_ENV = "CTXTOOL_CONFIG"
LOCAL_NAME = "ctxtool.toml"


@dataclass
class Config:
    """A loaded configuration file (or none): where it is, and what it says."""

    path: Path | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def database_url(self) -> str | None:
        value = (self.data.get("database") or {}).get("url")
        return str(value) if value else None

    def option_defaults(self) -> dict[str, Any]:
        """The file's command tables, keys as written (``reserve-tokens`` or
        ``reserve_tokens``: ``cli.config_defaults`` takes both), and ``[database] url`` as the
        root's ``url``."""
        out = {key: value for key, value in self.data.items() if key != "database"}
        if self.database_url:
            out["url"] = self.database_url
        return out

    def line_of(self, table: str, key: str) -> int | None:
        """The line where ``key`` is set in ``[table]`` ("" for the top), for an error to name;
        None when it cannot be found (an inline table, a dotted key)."""
        if self.path is None:
            return None
        try:
            lines = self.path.read_text("utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return None
        current = ""
        whole = f"{table}.{key}" if table else key
        for number, line in enumerate(lines, 1):
            header = _TABLE_HEADER.match(line)
            if header:
                current = ".".join(p.strip().strip("\"'") for p in header.group(1).split("."))
                if current == whole or current.startswith(whole + "."):
                    return number  # the key is a table: [compactt], [sessions.lst]
                continue
            found = _KEY.match(line)
            if found and current == table and found.group(1).strip("\"'") == key:
                return number
        return None


_TABLE_HEADER = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)\s*=")


def _check_database_table(data: dict, path: Path) -> None:
    """``[database]`` holds one string, ``url``; anything else is a mistake to name, not to
    drop (the default database would be used in silence)."""
    table = data.get("database")
    if table is None:
        return
    if not isinstance(table, dict):
        raise CtxtoolError(f'{path}: database must be a table: [database] url = "..."')
    unknown = sorted(set(table) - {"url"})
    if unknown:
        where = _at(path, "database", unknown[0])
        raise CtxtoolError(f"{where}: database.{unknown[0]}: no such setting (only url)")
    if not isinstance(table.get("url", ""), str):
        raise CtxtoolError(f"{_at(path, 'database', 'url')}: database.url must be a string")


def _at(path: Path, table: str, key: str) -> str:
    """``path:line`` of a setting, or the path alone when its line cannot be found."""
    line = Config(path).line_of(table, key)
    return f"{path}:{line}" if line else str(path)


def candidate_paths(explicit: str | None = None, cwd: Path | None = None) -> list[Path]:
    """Where a configuration file is looked for, in order."""
    if explicit:
        return [Path(explicit).expanduser()]
    found = []
    if os.environ.get(CONFIG_ENV):
        found.append(Path(os.environ[CONFIG_ENV]).expanduser())
    try:
        found.append((cwd or Path.cwd()) / LOCAL_NAME)
    except FileNotFoundError:  # the working directory was removed under us: no local file
        pass
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    found.append(Path(xdg) / "ctxtool" / "config.toml")
    return found


def toml_module() -> ModuleType:
    """tomllib, loaded by name when a configuration file is read: most runs have none, and
    every command's start-up would pay for its parser (issue #44)."""
    return importlib.import_module("tomllib")


def load_config(explicit: str | None = None) -> Config:
    """The configuration in force; an explicit path that does not exist is an error."""
    for path in candidate_paths(explicit):
        if not path.is_file():
            if explicit or (path == candidate_paths()[0] and os.environ.get(CONFIG_ENV)):
                what = (
                    "is a directory, not a file"
                    if path.is_dir()
                    else "is not a regular file"
                    if path.exists()  # /dev/null, a FIFO
                    else "does not exist"
                )
                raise CtxtoolError(f"configuration file {path} {what}")
            continue
        toml = toml_module()
        try:
            data = toml.loads(path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise CtxtoolError(f"{path}: cannot read the configuration file ({exc})") from None
        except toml.TOMLDecodeError as exc:
            raise CtxtoolError(f"{path}: invalid TOML: {exc}") from None
        _check_database_table(data, path)
        return Config(path, data)
    return Config()
