"""The server's test that every call in a suffix is answered by the session's next message
(``store.reads.calls_answered_next``): where it says yes, the pairing rule leaves no call
unanswered and no result without its call, and the summed counts are the exact context
(hypothesis, on SQLite and MariaDB); on a runtime's usual turns it says yes, whatever the ids
(a Galera node's every third, two sessions written at once: issue #30)."""

from __future__ import annotations

import itertools
import json

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxtool.core.records import pair_tool_calls
from ctxtool.db import read_connection
from ctxtool.store import Store
from ctxtool.store.candidates import exact_context_tokens, summed_context_tokens
from ctxtool.store.reads import calls_answered_next

_ids = itertools.count(1)


def call(call_id) -> str:
    return json.dumps([{"id": call_id, "type": "function", "function": {"name": "Read"}}])


# (role, tool_calls as stored text, tool_call_id): a usual turn is a request, one call and its
# result right after it, an answer; the rest is what breaks the usual shape.
USUAL = st.sampled_from(["usual"])
ODD = st.sampled_from(
    [
        "two_calls",  # one message, two calls, both answered after it
        "answered_late",  # a message between a call and its result
        "orphan",  # a result of no call
        "unanswered",  # a call never answered
        "reused",  # the same id called twice, answered twice
        "duplicate_key",  # {"id": "a", "id": "b"}: orjson reads b
        "escaped_key",  # {"id": "a", "\u0069d": "b"}
        "escaped_id",  # the id written with an escape
        "number_id",  # {"id": 5} answered by "5"
        "object",  # tool_calls an object, not an array
        "upper_role",  # a result stored as "Tool"
        "other_session",  # another session's row between a call and its result (usual)
        "case",  # a result answering "A" for the call "a"
        "user_calls",  # a user message with tool_calls
    ]
)


def rows_of(kind: str, n: int) -> list[tuple[str, str | None, str | None]]:
    a, b = f"call_{n}", f"call_{n}b"
    usual = [("user", None, None), ("assistant", call(a), None), ("tool", None, a)]
    if kind == "usual":
        return [*usual, ("assistant", None, None)]
    if kind == "two_calls":
        two = json.dumps([{"id": a}, {"id": b}])
        return [("assistant", two, None), ("tool", None, a), ("tool", None, b)]
    if kind == "answered_late":
        return [("assistant", call(a), None), ("assistant", None, None), ("tool", None, a)]
    if kind == "orphan":
        return [("tool", None, "nobody")]
    if kind == "unanswered":
        return [("assistant", call(a), None)]
    if kind == "reused":
        return [*usual, ("assistant", call(a), None), ("tool", None, a)]
    if kind == "duplicate_key":
        return [("assistant", f'[{{"id": "{a}", "id": "{b}"}}]', None), ("tool", None, a)]
    if kind == "escaped_key":
        return [("assistant", f'[{{"id": "{a}", "\\u0069d": "{b}"}}]', None), ("tool", None, a)]
    if kind == "escaped_id":
        return [("assistant", f'[{{"id": "call_\\u0041{n}"}}]', None), ("tool", None, f"call_A{n}")]
    if kind == "number_id":
        return [("assistant", f'[{{"id": {n}}}]', None), ("tool", None, str(n))]
    if kind == "object":
        return [("assistant", json.dumps({"id": a}), None), ("tool", None, a)]
    if kind == "upper_role":
        return [("assistant", call(a), None), ("Tool", None, a)]
    if kind == "other_session":
        return [("assistant", call(a), None), ("other", None, None), ("tool", None, a)]
    if kind == "case":
        return [("assistant", call(f"a{n}"), None), ("tool", None, f"A{n}")]
    if kind == "user_calls":
        return [("user", call(a), None), ("tool", None, a)]
    raise AssertionError(kind)


def store_session(
    db,
    kinds: list[str],
    gaps: list[int] | None = None,
    interleaved: bool = False,
    first_id: int | None = None,
) -> int:
    """A session of those turns, every message counted with o200k_base (gpt-4o's), written
    as a runtime writes rows (tool_calls as the text given); "other" rows go to a second
    session, between the first one's ids.

    The server numbers the rows, unless ``gaps``: the steps between their ids, in turn (3: a
    Galera node's), from ``first_id`` (default: clear of every other session's). With
    ``interleaved`` the second session is written at the same time: a copy of each of the
    first one's messages right after it."""
    sid = next(_ids)
    other = 1_000_000 + sid
    insert = sa.text(
        "INSERT INTO agent_message (id, session_id, role, content, tool_calls, tool_call_id,"
        " token_count, token_encoding) VALUES (:id, :sid, :role, :content, :calls, :call_id,"
        " :n, 'o200k_base')"
    )
    rows = []
    for n, kind in enumerate(kinds):
        for i, (role, calls, call_id) in enumerate(rows_of(kind, n)):
            row = {
                "sid": other if role == "other" else sid,
                "role": "assistant" if role == "other" else role,
                "content": f"message {n}.{i} of {kind}",
                "calls": calls,
                "call_id": call_id,
            }
            rows += [row, {**row, "sid": other}] if interleaved and role != "other" else [row]
    ids = (
        itertools.accumulate(itertools.cycle(gaps), initial=first_id or sid * 1000)
        if gaps
        else itertools.repeat(None)
    )
    with db.engine.begin() as conn:
        for s in (sid, other):
            conn.execute(
                sa.text(
                    "INSERT INTO agent_session (session_id, model, system_prompt)"
                    " VALUES (:s, 'gpt-4o', 'be brief')"
                ),
                {"s": s},
            )
        for row, id_ in zip(rows, ids):
            # Any count: a stored count is what is sent unless resent.
            conn.execute(insert, {**row, "id": id_, "n": 7 + len(row["content"]) // 3})
    return sid


def pairs_cleanly(db, sid: int) -> bool:
    """The pairing rule over the stored suffix: no orphan, duplicate or unanswered call."""
    messages = Store(db.engine).messages(sid)
    pairing = pair_tool_calls(messages)
    return not (pairing.orphans or pairing.duplicates or pairing.unanswered)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(kinds=st.lists(st.one_of(USUAL, USUAL, ODD), min_size=1, max_size=6))
def test_yes_only_where_every_call_is_answered(db, kinds):
    sid = store_session(db, kinds)
    with read_connection(db.engine) as conn:
        yes = calls_answered_next(conn, sid, None)
    if yes:
        assert pairs_cleanly(db, sid), kinds
    if set(kinds) <= {"usual", "other_session"}:
        assert yes


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kinds=st.lists(st.one_of(USUAL, USUAL, ODD), min_size=1, max_size=6),
    gaps=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    interleaved=st.booleans(),
)
def test_the_next_message_need_not_have_the_next_id(db, kinds, gaps, interleaved):
    """Issue #30: ids with gaps (a Galera node's, TiDB's) and two sessions written at once.
    A yes only where the pairing rule pairs everything; the usual turns, in both sessions,
    are a yes (the fast path) wherever their ids fall."""
    sid = store_session(db, kinds, gaps, interleaved)
    with read_connection(db.engine) as conn:
        answers = {s: calls_answered_next(conn, s, None) for s in (sid, 1_000_000 + sid)}
    for s, yes in answers.items():
        if yes:
            assert pairs_cleanly(db, s), (s, kinds, gaps, interleaved)
    if set(kinds) <= {"usual", "other_session"}:
        assert answers[sid], (kinds, gaps, interleaved)
    if set(kinds) == {"usual"}:  # the second session's copy has no "other" row in a turn
        assert all(answers.values()), (answers, kinds, gaps, interleaved)


def test_a_galera_nodes_ids(db):
    """One node of a three-node Galera cluster (auto_increment_increment=3) writes ids 1, 4,
    7, ...: its usual turns are answered, from any cut that keeps each result with its call;
    a call left unanswered, or a result whose call is before the cut, is not."""
    sid = store_session(db, ["usual"] * 3, gaps=[3], first_id=1)
    ids = [m.id for m in Store(db.engine).messages(sid)]
    assert ids == list(range(1, 36, 3))
    store = Store(db.engine)
    with read_connection(db.engine) as conn:
        assert calls_answered_next(conn, sid, None)
        assert calls_answered_next(conn, sid, ids[4])  # the second turn's request
        assert calls_answered_next(conn, sid, ids[-1] + 1)  # nothing kept
        assert not calls_answered_next(conn, sid, ids[6])  # its result, without its call
        assert exact_context_tokens(conn, sid, None) == store.context_tokens(sid)
    broken = store_session(db, ["usual", "unanswered", "usual"], gaps=[3], first_id=1000)
    with read_connection(db.engine) as conn:
        assert not calls_answered_next(conn, broken, None)
        assert not pairs_cleanly(db, broken)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(kinds=st.lists(st.one_of(USUAL, USUAL, USUAL, ODD), min_size=1, max_size=6))
def test_the_summed_measure_is_the_whole_measure(db, kinds):
    """The dry run's and the candidates' exact figure, from the sums where the server says
    every call is answered next, else read: what Store.context_tokens measures."""
    sid = store_session(db, kinds)
    store = Store(db.engine)
    with read_connection(db.engine) as conn:
        assert summed_context_tokens(conn, sid, None).tokens == store.context_tokens(sid)
        assert exact_context_tokens(conn, sid, None) == store.context_tokens(sid)


def test_a_count_made_with_another_spelling_of_the_encoding_is_recounted(db):
    """MySQL's collations compare ``O200K_BASE`` and ``'o200k_base '`` equal to
    ``o200k_base``; Python does not, and recounts such a row: the sums must agree (review
    finding: 14 summed against 214 measured on MariaDB)."""
    sid = store_session(db, ["usual"])
    store = Store(db.engine)
    store.context_tokens(sid)  # nothing stored yet: the baseline
    for spelling in ("O200K_BASE", "o200k_base "):
        with db.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "UPDATE agent_message SET token_count = 3, token_encoding = :e "
                    "WHERE session_id = :s"
                ),
                {"e": spelling, "s": sid},
            )
        with read_connection(db.engine) as conn:
            summed = summed_context_tokens(conn, sid, "o200k_base").tokens
            assert summed == store.context_tokens(sid, "o200k_base"), spelling
            assert exact_context_tokens(conn, sid, "o200k_base") == summed


def test_json_the_servers_read_and_orjson_refuses_is_read_too():
    """A number past a float's range is JSON to MariaDB's and SQLite's functions; the record
    reads it too (else the server sees a call the records do not: review finding)."""
    from ctxtool.store.reads import json_value

    calls = json_value('[{"id": "c1", "score": 1e400, "function": {"name": "f"}}]')
    assert isinstance(calls, list) and calls[0]["id"] == "c1"
    assert json_value("not json {") == "not json {"
    assert json_value("[" * 5000 + "]" * 5000) == "[" * 5000 + "]" * 5000


# Text a runtime may have stored as tool_calls: JSON of every shape near one call, and (SQLite
# does not check the column) text that is not JSON.
_ID = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["call_1", "Ä", "a\\u0041", "x" * 191, "y" * 192, "é" * 191, "tab\there"]),
)
_CALL = st.one_of(
    st.builds(lambda i: {"id": i, "type": "function"}, _ID),
    st.builds(lambda i: {"id": i}, st.one_of(st.integers(), st.none(), st.booleans())),
    st.just({"type": "function"}),
    st.just({"function": {"id": "inner"}}),
)
_TOOL_CALLS = st.one_of(
    st.builds(lambda calls: json.dumps(calls, ensure_ascii=False), st.lists(_CALL, max_size=3)),
    st.builds(lambda calls: json.dumps(calls), st.lists(_CALL, max_size=2)),  # \u escapes
    st.builds(lambda i: json.dumps({"id": i}), _ID),  # an object, not an array
    st.builds(lambda a, b: f'[{{"id": {json.dumps(a)}, "id": {json.dumps(b)}}}]', _ID, _ID),
    st.builds(lambda i: f'[{{"id": {json.dumps(i)}, "args": "\\"id\\""}}]', _ID),
    st.sampled_from(['[{"id": "a"}', "not json", '[{"id": "a"}] ', '  [{"id":"b"}]']),
)


# The shapes where the server's reading and the records' part: each must be NULL or agree.
_EDGES = [
    '[{"id": "a", "id": "b"}]',  # the server reads a duplicate key's first value, orjson its last
    '[{"id": "a", "\\u0069d": "b"}]',  # the key spelt with an escape
    '[{"id": "call_\\u0041"}]',  # the id with an escape
    '[{"id": "%s"}]' % ("y" * 192),  # longer than the column
    '[{"id": "%s"}]' % ("é" * 191),  # as long as the column, in characters
    '[{"id": 5}]',
    '[{"id": null}]',
    '{"id": "a"}',
    '[{"id": "a"}, {"id": "b"}]',
    '[{"function": {"id": "inner"}}]',
    '[{"id": "a", "args": "\\"id\\""}]',
    '[["id"]]',
    "[]",
    # Text MariaDB's JSON column takes and orjson refuses (review finding): the record holds
    # no call, so the index must hold none either.
    """[{"id": "it\\'s"}]""",
    '[{"id": "a\\qb"}]',
    '[{"id": "a\\x41"}]',
    '[{"id": "a", "n": 1.}]',
    '[{"id": "a", "n": 1e}]',
    '[{"id": "a", "n": -}]',
    '[{"id": "a", "n": 01}]',
    # What SQLite's json functions read and orjson refuses: text after a NUL, deep nesting.
    '[{"id": "a"}]\x00',
    '[{"id": "a", "d": ' + "[" * 1100 + "]" * 1100 + "}]",
    # Strict JSON the server must still read (a proof on it is what 0012 is for).
    '[{"id": "call_1", "function": {"arguments": "{\\"a\\": 1.5e-3, \\"b\\": [true, null]}"}}]',
    '[ {"id" : "ok\\\\q", "n": -0.5E+10, "m": [1, 2.0, 0]} ]\r\n',
]


@pytest.mark.parametrize("tool_calls", _EDGES)
def test_the_indexed_call_id_at_the_edges(db, tool_calls):
    """0012's ``call_id`` where the server's JSON and orjson read a text apart, and where they
    agree (then the index holds the id: strict JSON is what the proof is for)."""
    indexed = check_indexed_call_id(db, "assistant", tool_calls)
    if tool_calls.startswith(('[{"id": "call_1"', "[ {")):
        assert indexed is not None


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    role=st.sampled_from(["assistant", "assistant", "Assistant", "assistant ", "user", "tool"]),
    tool_calls=_TOOL_CALLS,
)
def test_the_indexed_call_id_is_the_records_one_call_or_null(db, role, tool_calls):
    """0012's ``call_id``, what the pairing proof reads instead of the JSON: where it is not
    NULL, it is the one call id ``Message.call_ids`` reads from the same row; and no text a
    runtime may store makes its INSERT fail (a longer id than the column holds, text that is
    not JSON where the server does not check it)."""
    check_indexed_call_id(db, role, tool_calls)


def check_indexed_call_id(db, role: str, tool_calls: str) -> str | None:
    """A row of ``tool_calls`` written as a runtime writes it: its ``call_id`` NULL or the
    one id of ``Message.call_ids``. Returns the ``call_id`` (None also where the server
    refused the row: MariaDB's JSON column, or 0009's JSON_LENGTH under strict mode, refuses
    some text before 0012 sees it)."""
    sid = next(_ids)
    with db.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO agent_session (session_id) VALUES (:s)"), {"s": sid})
    try:
        with db.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO agent_message (session_id, role, content, tool_calls)"
                    " VALUES (:s, :role, 'x', :calls)"
                ),
                {"s": sid, "role": role, "calls": tool_calls},
            )
    except sa.exc.DBAPIError as exc:
        assert db.kind != "sqlite", exc  # SQLite's column takes any text
        # Not JSON: the server's own refusals (MariaDB's 4025 CHECK and 403x-404x JSON
        # syntax errors, MySQL's 3140).
        code = exc.orig.args[0] if exc.orig is not None else None
        assert code == 3140 or 4025 <= code <= 4049, exc
        return None
    with db.engine.begin() as conn:
        indexed = conn.execute(
            sa.text("SELECT call_id FROM agent_message WHERE session_id = :s"), {"s": sid}
        ).scalar_one()
    (message,) = Store(db.engine).messages(sid)
    if indexed is not None:
        assert message.call_ids == (indexed,), (role, tool_calls)
    return indexed
