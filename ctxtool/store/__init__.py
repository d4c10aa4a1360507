"""The context store behind one engine: every query ctxtool runs on the three tables.

``reads`` holds :class:`Store` (sessions, messages, checkpoints, restored contexts, the session's
head) used by everyone; beside it one module per kind of write (``import_writes``,
``checkpoints``, ``leases``, ``counts``, ``removal``, ...) and of read (``search``,
``completion``, ``checks``, ...). The rules it applies are ``ctxtool.core``; it imports only
them and ``ctxtool.db``.

The names below are loaded when first asked for: importing one small module of the package
(``store.session_touch`` for ``migrate``) does not load every rule ``validate`` applies.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .reads import SESSIONS_PER_RANGE_QUERY, Store, suffix_ranges

_HOMES = {
    "SESSIONS_PER_RANGE_QUERY": ".reads",
    "Store": ".reads",
    "suffix_ranges": ".reads",
}

__all__ = [
    "SESSIONS_PER_RANGE_QUERY",
    "Store",
    "suffix_ranges",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)
