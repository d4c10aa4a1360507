"""Reading a session's restored suffix for compaction, with odd rows made harmless.

Every path that measures or compacts a session reads it here: the session, its latest
checkpoint, and its messages from that checkpoint's cut on (never the whole history), with
missing token counts filled in (in memory, or stored where the caller may write). Malformed
``tool_calls`` are read through ``Message.calls()`` everywhere, so they count as no calls.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from ..records import Message, RestoredContext, Session, restore_context
from ..store import Store
from ..store.counts import count_loaded_messages
from ..tokens import count_messages, encoding_for_model


def read_suffix(
    store: Store, conn: Connection, session_id: int, encoding: str | None, store_counts: bool
) -> tuple[Session, RestoredContext, str]:
    """(session, restored context, encoding). ``store_counts``: write the counts the runtime
    left out (the caller commits); otherwise count them in memory and write nothing."""
    session = store.session(session_id, conn)
    enc = encoding_for_model(session.model, encoding).name
    latest = store.latest_compaction(session_id, conn)
    suffix = store.messages(session_id, latest.first_kept_message_id if latest else None, conn=conn)
    if store_counts:
        count_loaded_messages(conn, suffix, enc)
    else:
        count_in_memory(suffix, enc)
    return session, restore_context(session_id, session.system_prompt, latest, suffix), enc


def count_in_memory(messages: list[Message], encoding: str) -> None:
    missing = [m for m in messages if m.token_count is None or m.token_encoding != encoding]
    for m, n in zip(missing, count_messages([m.text() for m in missing], encoding)):
        m.token_count, m.token_encoding = n, encoding
