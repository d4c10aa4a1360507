"""The context store behind one engine: every query ctxtool runs on the three tables.

``reads`` (sessions, messages, checkpoints, restored contexts, validation input) is used by
everyone; the write paths live beside it, one module per kind of write.
"""

from .checks import validate
from .reads import (
    SESSIONS_PER_RANGE_QUERY,
    Store,
    list_sessions,
    restored_context_tokens,
    suffix_ranges,
)

__all__ = [
    "SESSIONS_PER_RANGE_QUERY",
    "Store",
    "list_sessions",
    "restored_context_tokens",
    "suffix_ranges",
    "validate",
]
