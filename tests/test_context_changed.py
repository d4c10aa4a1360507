"""`context show` reads a context in two passes (counts, then text); a session changed in
between, by a message that commits with a lower id than the first pass's last one, ends the
output with one line naming the session, never counts on the wrong rows or an IndexError."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from ctxtool.context_text import text_lines
from ctxtool.core.errors import CtxtoolError
from ctxtool.db.schema import agent_message, agent_session
from ctxtool.store.outline import stream_context
from ctxtool.store.reads import SessionHistory, Store


def _gapped_session(db) -> list[int]:
    """Messages 1-20 and 31-40 (a gap an earlier writer may still fill), different lengths so
    a count moved onto its neighbour's row shows."""
    ids = [*range(1, 21), *range(31, 41)]
    with db.engine.begin() as conn:
        conn.execute(agent_session.insert().values(session_id=1, model="gpt-4o"))
        conn.execute(
            agent_message.insert(),
            [
                {
                    "id": i,
                    "session_id": 1,
                    "role": ("user", "assistant")[n % 2],
                    "content": "word " * (1 + n * 7),
                }
                for n, i in enumerate(ids)
            ],
        )
    return ids


def _insert(db, ids: list[int]) -> None:
    with db.engine.begin() as conn:
        conn.execute(
            agent_message.insert(),
            [{"id": i, "session_id": 1, "role": "user", "content": "late"} for i in ids],
        )


def _stream(db):
    return stream_context(SessionHistory(Store(db.engine), 1), page_entries=7)


def _shown_before(db) -> list[tuple[int | None, int]]:
    return [(i.id, i.tokens) for i in SessionHistory(Store(db.engine), 1).view().items]


@pytest.mark.parametrize("late", [[25], [21, 25, 30]])
def test_a_message_committed_between_the_passes_is_one_error_line(db, late):
    """`show` prints its header after the first pass; a message committed then, with an id
    in the range already counted, ends the text with one line naming the session."""
    _gapped_session(db)
    pieces = text_lines(_stream(db))
    next(pieces)  # the header: the first pass has run
    _insert(db, late)
    with pytest.raises(
        CtxtoolError, match=f"^session 1 changed while it was shown: message {late[0]} is new;"
    ):
        list(pieces)


def test_no_item_is_given_a_neighbours_count(db):
    """Every item yielded before the change is seen has its own count (an extra row shifted
    each later count onto the wrong row, and past the end raised an IndexError)."""
    _gapped_session(db)
    expected = _shown_before(db)
    stream = _stream(db)
    stream.first_pass()
    _insert(db, [25])
    seen = []
    with pytest.raises(CtxtoolError, match="^session 1 changed while it was shown"):
        for item in stream.items():
            seen.append((item.id, item.tokens))
    assert seen == expected[: len(seen)] and len(seen) < len(expected)


def test_a_message_deleted_and_one_added_is_seen_though_the_number_is_the_same(db):
    """A row gone and a row come between the passes leave the number read unchanged: the ids
    are compared, not only counted."""
    _gapped_session(db)
    stream = _stream(db)
    stream.first_pass()
    with db.engine.begin() as conn:
        conn.execute(sa.delete(agent_message).where(agent_message.c.id == 35))
    _insert(db, [25])
    with pytest.raises(CtxtoolError, match="^session 1 changed while it was shown: message 25"):
        list(stream.items())


def test_a_message_after_the_last_one_counted_is_left_for_the_next_show(db):
    """The second pass stops at the first pass's last id: a message written since is not part
    of the context shown, and no change."""
    _gapped_session(db)
    expected = _shown_before(db)
    stream = _stream(db)
    stream.first_pass()
    _insert(db, [41])
    assert [(i.id, i.tokens) for i in stream.items()] == expected
