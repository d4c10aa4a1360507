"""The import's fast MySQL literal renderer makes exactly what the driver's own escaping makes
(pure: no server)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pymysql.converters import escape_item

from ctxtool.db.dialects import _row_literal

values = st.one_of(st.none(), st.integers(-2 ** 63, 2 ** 63 - 1),
                   st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
                   st.sampled_from(["\\", "'", '"', "\n", "\r", "\0", "\x1a", "\\'", "é😀"]))


@settings(max_examples=500, deadline=None)
@given(st.lists(values, min_size=1, max_size=9))
def test_row_literal_equals_the_drivers_escaping(row):
    expected = "(" + ",".join(escape_item(v, "utf8mb4") for v in row) + ")"
    assert _row_literal(tuple(row)) == expected


def test_other_values_are_left_to_the_driver():
    assert _row_literal((1, 2.5)) is None
    assert _row_literal((b"bytes",)) is None
