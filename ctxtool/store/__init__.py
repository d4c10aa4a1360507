"""The context store behind one engine: every query ctxtool runs on the three tables.

``reads`` holds :class:`Store` (sessions, messages, checkpoints, restored contexts, the session's
head) used by everyone; beside it one module per kind of write (``import_writes``,
``checkpoints``, ``leases``, ``counts``, ``removal``, ...) and of read (``search``,
``completion``, ``checks``, ...). The rules it applies are ``ctxtool.core``; it imports only
them and ``ctxtool.db``.
"""

from .checks import validate
from .reads import SESSIONS_PER_RANGE_QUERY, Store, suffix_ranges
from .session_list import list_sessions

__all__ = [
    "SESSIONS_PER_RANGE_QUERY",
    "Store",
    "list_sessions",
    "suffix_ranges",
    "validate",
]
