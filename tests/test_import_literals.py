"""The import's fast MySQL literal renderer: every value comes back from a real server exactly as
it was, whatever characters it holds, and only the two characters MySQL requires are escaped."""

from __future__ import annotations

import json

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxtool.db import dialect_of
from ctxtool.db.dialects import _row_literal

SPECIAL = ["\\", "'", '"', "\n", "\r", "\0", "\x1a", "\\'", "''", "\\\\'", "é😀", "%s", "`", "\t"]
texts = st.one_of(st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
                  st.lists(st.sampled_from(SPECIAL + ["a", " "]), max_size=12).map("".join))
values = st.one_of(st.none(), st.integers(-2 ** 63, 2 ** 63 - 1), texts)


def _unquote(literal: str) -> list:
    """Read a rendered SQL tuple back the way MySQL's lexer does (backslash escapes on)."""
    assert literal[0] == "(" and literal[-1] == ")"
    out, i, body = [], 0, literal[1:-1]
    while i < len(body):
        if body.startswith("NULL", i):
            out.append(None)
            i += 4
        elif body[i] == "'":
            chars, i = [], i + 1
            while body[i] != "'":
                if body[i] == "\\":
                    i += 1
                chars.append(body[i])
                i += 1
            out.append("".join(chars))
            i += 1
        else:
            end = body.find(",", i)
            end = len(body) if end < 0 else end
            out.append(int(body[i:end]))
            i = end
        assert i == len(body) or body[i] == ","
        i += 1
    return out


@settings(max_examples=500, deadline=None)
@given(st.lists(values, min_size=1, max_size=9))
def test_a_rendered_row_reads_back_as_its_values(row):
    assert _unquote(_row_literal(tuple(row))) == row


def test_only_backslash_and_quote_are_escaped():
    assert _row_literal(("a'b\\c", "x\ny\0\"\x1a", None, 7)) == "('a\\'b\\\\c','x\ny\0\"\x1a',NULL,7)"


def test_other_values_are_left_to_the_driver():
    assert _row_literal((1, 2.5)) is None
    assert _row_literal((b"bytes",)) is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(texts, texts), min_size=1, max_size=20))
def test_a_real_server_stores_every_character_as_given(mysql_empty_db, rows):
    """NUL, raw newlines, Ctrl-Z and double quotes go unescaped: the server must still store
    each text byte for byte, in a TEXT column and in a JSON one (as a JSON string)."""
    with mysql_empty_db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS lit (k INT PRIMARY KEY, t MEDIUMTEXT, "
                             "j JSON CHECK (JSON_VALID(j))) CHARACTER SET utf8mb4")
        conn.exec_driver_sql("DELETE FROM lit")
        inserts = dialect_of(conn).message_inserts(conn, sa.table("lit"), ["k", "t", "j"])
        inserts.send(inserts.render([(k, text, json.dumps(other, ensure_ascii=False))
                                     for k, (text, other) in enumerate(rows)]))
        back = conn.execute(sa.text("SELECT t, JSON_UNQUOTE(j) FROM lit ORDER BY k")).all()
    assert [tuple(r) for r in back] == rows
