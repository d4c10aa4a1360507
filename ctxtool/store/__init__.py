"""The context store behind one engine: every query ctxtool runs on the three tables.

``reads`` (sessions, messages, checkpoints, restored contexts, validation input) is used by
everyone; the write paths live beside it, one module per kind of write. The store reads and
writes; the rules it applies are pure modules below it (``records``, ``context_size``,
``validation``, ``core.plan``), and nothing here imports a service above it.
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
