"""`ctxtool search` and `ctxtool context trace`: the pure trace over plain lists, then the store
on both databases through the library and the real click entry point."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from ctxtool.core.records import MESSAGES_THROUGH, Compaction, Message
from ctxtool.core.trace import Standing, TextMatch, trace_fact
from ctxtool.db.schema import agent_compaction, agent_message, agent_session
from ctxtool.store import Store
from ctxtool.store import search as search_module
from ctxtool.store.search import (
    can_fulltext_index,
    fulltext_index,
    fulltext_terms,
    snippet,
)

T0 = datetime(2026, 3, 1, 12, 0, 0)
LIGHT = TextMatch("light theme")


def msg(i, content, role="user", **kw):
    return Message(i, 1, role, content, created_at=T0 + timedelta(minutes=i), **kw)


def cp(i, first_kept, summary, through):
    return Compaction(i, 1, summary, first_kept, details={MESSAGES_THROUGH: through})


# -- the pure rule --------------------------------------------------------------------------------


def test_a_fact_kept_verbatim_when_no_checkpoint_or_after_the_latest_cut():
    said = [msg(1, "Use a Light theme")]
    assert trace_fact(said, [], LIGHT.found_in).standing is Standing.KEPT
    kept = trace_fact(said, [cp(10, 1, "nothing", 1)], LIGHT.found_in)
    assert kept.standing is Standing.KEPT and kept.steps[0].kept_ids == (1,)
    # written after the latest checkpoint: still after its cut, so in the restored context
    later = trace_fact([msg(9, "light THEME")], [cp(10, 3, "nothing", 5)], LIGHT.found_in)
    assert later.standing is Standing.KEPT and later.describe().startswith("kept verbatim")


def test_the_first_checkpoint_of_the_run_that_no_longer_holds_it_is_why_it_forgot():
    said = [msg(1, "Use a pastel scheme. Light theme (white background).")]
    cps = [
        cp(10, 3, "User wants a Light theme", 4),
        cp(11, 6, "Tests added.", 7),
        cp(12, 8, "More tests.", 9),
    ]
    trace = trace_fact(said, cps, LIGHT.found_in)
    assert trace.standing is Standing.LOST
    assert [s.holds for s in trace.steps] == [True, False, False]
    assert trace.summarized_by == 10
    assert trace.dropped_by.checkpoint_id == 11
    assert trace.describe() == "summarized and lost at checkpoint 11"
    assert "DROPPED" in trace.steps[1].describe()
    # a later summary that says it again: held, nothing was forgotten
    again = trace_fact(said, [*cps, cp(13, 8, "light theme is back", 9)], LIGHT.found_in)
    assert again.standing is Standing.SUMMARIZED and again.dropped_by is None
    assert again.describe() == "summarized by checkpoint 10, still held by the latest summary"
    # dropped, said again, dropped again: the last drop is the answer
    twice = trace_fact(said, [*cps, cp(13, 8, "Light theme", 9), cp(14, 8, "x", 9)], LIGHT.found_in)
    assert twice.dropped_by.checkpoint_id == 14


def test_checkpoints_written_before_the_fact_appeared_are_not_steps():
    said = [msg(5, "light theme")]
    cps = [cp(10, 2, "early", 3), cp(11, 4, "earlier still", 4), cp(12, 7, "gone", 8)]
    trace = trace_fact(said, cps, LIGHT.found_in)
    assert [s.checkpoint_id for s in trace.steps] == [12]
    assert trace.dropped_by.checkpoint_id == 12


def test_a_fact_kept_by_one_cut_then_summarized_away():
    said = [msg(4, None, "assistant", tool_calls=[{"function": {"arguments": "Light theme"}}])]
    cps = [cp(10, 3, "a", 5), cp(11, 6, "b", 7)]
    trace = trace_fact(said, cps, LIGHT.found_in)
    assert trace.steps[0].kept_ids == (4,) and trace.steps[0].holds
    assert trace.steps[1].summarized_ids == (4,) and not trace.steps[1].holds
    assert trace.summarized_by == 11 and trace.dropped_by.checkpoint_id == 11


def test_text_match_is_case_insensitive_and_escapes_unless_regex():
    assert TextMatch("a.b").found_in("A.B") and not TextMatch("a.b").found_in("axb")
    assert TextMatch("a.b", regex=True).found_in("AXB")
    with pytest.raises(ValueError):
        TextMatch("")
    assert snippet("x" * 200 + "Light Theme" + "y" * 200, LIGHT).startswith("…x")
    assert fulltext_terms("the Light theme (white)") == "+light* +theme* +white*"
    assert fulltext_terms("a to of") is None


# -- the store -----------------------------------------------------------------------------------

REQUEST = "Use a pleasant pastel color scheme. Light theme (white background), please."


def _session(db, session_id, messages, checkpoints=()):
    """Messages (role, content, tool_calls) at T0 + n minutes; checkpoints (first kept index,
    summary, through index) with message indexes turned into ids."""
    with db.engine.begin() as conn:
        conn.execute(agent_session.insert().values(session_id=session_id))
        ids = []
        for n, (role, content, calls) in enumerate(messages):
            ids.append(
                conn.execute(
                    agent_message.insert().values(
                        session_id=session_id,
                        role=role,
                        content=content,
                        tool_calls=calls,
                        tool_call_id="c1" if role == "tool" else None,
                        created_at=T0 + timedelta(minutes=n),
                    )
                ).inserted_primary_key[0]
            )
        cp_ids = []
        for kept, summary, through in checkpoints:
            cp_ids.append(
                conn.execute(
                    agent_compaction.insert().values(
                        session_id=session_id,
                        summary=summary,
                        first_kept_message_id=ids[kept],
                        parent_compaction_id=cp_ids[-1] if cp_ids else 0,
                        created_at=T0 + timedelta(minutes=through, seconds=30),
                        details={MESSAGES_THROUGH: ids[through]},
                    )
                ).inserted_primary_key[0]
            )
    return ids, cp_ids


CALL = [
    {
        "id": "c1",
        "type": "function",
        "function": {
            "name": "bash",
            "arguments": json.dumps({"cmd": "grep -rn 'Light theme' src"}),
        },
    }
]
FORGETFUL = [
    ("user", REQUEST, None),
    ("assistant", "Sure.", None),
    ("user", "Add the tests. 100%_done means all of them", None),
    ("assistant", None, CALL),
    ("tool", "src/app.css:1: /* LIGHT THEME */", None),
    ("user", "Now the footer.", None),
    ("assistant", "Done.", None),
]
# checkpoint 1 summarizes the request and says it; checkpoint 2 summarizes the rest and not it
FORGETFUL_CHECKPOINTS = [
    (3, "The user wants a light theme and pastel colours.", 4),
    (5, "Tests.", 6),
]


@pytest.fixture
def forgetful(db):
    ids, cps = _session(db, 7, FORGETFUL, FORGETFUL_CHECKPOINTS)
    other, _ = _session(db, 8, [("user", "a light theme here too", None)])
    return db, ids, cps, other


def test_search_finds_messages_and_summaries_newest_first_with_their_standing(forgetful):
    db, ids, cps, other = forgetful
    hits = search_module.search(db.engine, LIGHT)  # the name an earlier docs/search.md showed
    assert [(h.session_id, h.kind, h.id) for h in hits] == [
        (7, "summary", cps[0]),  # written after message 4 (T0 + 4m30s)
        (7, "message", ids[4]),
        (7, "message", ids[3]),
        (8, "message", other[0]),  # as old as the request: the later id first
        (7, "message", ids[0]),
    ]
    where = {(h.kind, h.id): h.trace for h in hits}
    assert where["message", ids[0]].describe() == f"summarized and lost at checkpoint {cps[1]}"
    assert where["message", ids[0]].summarized_by == cps[0]
    assert where["message", ids[3]].standing is Standing.LOST  # kept by cp 1, summarized by 2
    assert where["summary", cps[0]].dropped_by.checkpoint_id == cps[1]
    assert where["message", other[0]].standing is Standing.KEPT
    tool_call = next(h for h in hits if h.id == ids[3])
    assert "grep -rn 'Light theme' src" in tool_call.snippet
    assert Store(db.engine).search(LIGHT, limit=2) == hits[:2]


def test_search_filters_run_on_the_server(forgetful):
    db, ids, cps, other = forgetful
    assert [h.id for h in Store(db.engine).search(LIGHT, session="8")] == [other[0]]
    assert [h.id for h in Store(db.engine).search(LIGHT, role="tool")] == [ids[4]]
    assert [h.kind for h in Store(db.engine).search(LIGHT, role="summary")] == ["summary"]
    recent = Store(db.engine).search(LIGHT, since=T0 + timedelta(minutes=2))
    assert {h.id for h in recent if h.kind == "message"} == {ids[3], ids[4]}
    # LIKE's wildcards are the text itself
    assert [h.id for h in Store(db.engine).search(TextMatch("100%_done"))] == [ids[2]]
    assert Store(db.engine).search(TextMatch("100%xdone")) == []
    regex = Store(db.engine).search(TextMatch(r"light\s+theme \(white", regex=True))
    assert [h.id for h in regex] == [ids[0]]


def test_trace_session_names_the_checkpoint_that_dropped_it(forgetful):
    db, ids, cps, _ = forgetful
    found = Store(db.engine).trace_session("7", LIGHT)
    assert [m.id for m in found.messages] == [ids[0], ids[3], ids[4]]
    steps = found.trace.steps
    assert [(s.checkpoint_id, s.holds) for s in steps] == [(cps[0], True), (cps[1], False)]
    assert steps[0].kept_ids == (ids[3], ids[4]) and steps[0].in_summary
    assert found.trace.dropped_by.checkpoint_id == cps[1]


def test_search_cli(forgetful, cli):
    db, ids, cps, other = forgetful
    result = cli("--db", db.url, "search", "Light theme")
    assert result.exit_code == 0, result.output
    assert f"session 7 · message {ids[0]} (user)" in result.output
    assert f"summarized and lost at checkpoint {cps[1]}" in result.output
    assert "kept verbatim in the restored context" in result.output
    assert "Light theme (white background)" in result.output
    out = json.loads(
        cli("--db", db.url, "search", "light theme", "--session", "7", "--json").output
    )
    assert {h["id"] for h in out if h["kind"] == "message"} == {ids[0], ids[3], ids[4]}
    assert all(h["lost_at"] == cps[1] for h in out)
    # No hit exits 1, as grep does, with nothing on stdout (scripts test for it).
    nothing = cli("--db", db.url, "search", "nobody said this")
    assert (nothing.exit_code, nothing.stdout) == (1, "")
    assert nothing.stderr == "nothing says nobody said this\n"
    rows = cli("--db", db.url, "search", "light theme", "--session", "7", "--csv").stdout
    assert rows.splitlines()[0] == "session_id,kind,id,role,created_at,snippet,where"
    assert len(rows.splitlines()) == 1 + len(out)
    nl = cli("--db", db.url, "search", "light theme", "--session", "7", "--nl").stdout
    assert [json.loads(line)["id"] for line in nl.splitlines()] == [h["id"] for h in out]
    assert "session_id" in cli("--db", db.url, "search", "light theme", "--fmt", "github").stdout
    nothing_json = cli("--db", db.url, "search", "nobody said this", "--json")
    assert (nothing_json.exit_code, json.loads(nothing_json.stdout)) == (1, [])
    bad = cli("--db", db.url, "search", "(unclosed", "--regex")
    assert bad.exit_code == 2 and "is not a regular expression" in bad.output
    missing = cli("--db", db.url, "search", "x", "--session", "999")
    assert missing.exit_code != 0 and "session 999 does not exist" in missing.output
    assert "Traceback" not in bad.output + missing.output


def test_context_trace_cli(forgetful, cli):
    db, ids, cps, _ = forgetful
    result = cli("--db", db.url, "context", "trace", "7", "light theme")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == "appeared in:"
    assert f"  message {ids[0]} (user, 2026-03-01 12:00:00): {REQUEST}" in lines
    assert f"why it forgot: checkpoint {cps[1]} neither kept" in result.output
    assert any(line.startswith(f"  checkpoint {cps[1]}") and "DROPPED" in line for line in lines)
    doc = json.loads(cli("--db", db.url, "context", "trace", "7", "light theme", "--json").output)
    assert doc["lost_at"] == cps[1] and doc["standing"] == "lost"
    assert [m["id"] for m in doc["appeared_in"]] == [ids[0], ids[3], ids[4]]
    none = cli("--db", db.url, "context", "trace", "8", "pastel")
    assert (
        none.exit_code == 1 and "no message and no summary of this session says it" in none.output
    )
    assert cli("--db", db.url, "context", "trace", "8", "pastel", "--json").exit_code == 1


def test_create_index_is_for_mysql_only(sqlite_db, cli):
    result = cli("--db", sqlite_db.url, "search", "--create-index")
    assert result.exit_code != 0 and "MySQL/MariaDB feature" in result.output


def test_the_fulltext_index_finds_the_same_hits(mysql_db, cli, monkeypatch):
    ids, cps = _session(mysql_db, 7, FORGETFUL, FORGETFUL_CHECKPOINTS)
    before = Store(mysql_db.engine).search(LIGHT)
    short = Store(mysql_db.engine).search(TextMatch("the"))
    result = cli("--db", mysql_db.url, "search", "--create-index")
    assert result.exit_code == 0
    assert "FULLTEXT index created on content and tool_calls" in result.output
    with mysql_db.engine.connect() as conn:
        assert fulltext_index(conn) == ("content", "tool_calls")
    assert Store(mysql_db.engine).create_fulltext_index() == []
    assert Store(mysql_db.engine).search(LIGHT) == before  # the newest rows, scanned first
    monkeypatch.setattr(search_module, "NEWEST_ROWS_FIRST", 0)  # every row through the index
    assert Store(mysql_db.engine).search(LIGHT) == before
    assert [h.id for h in Store(mysql_db.engine).search(TextMatch("grep -rn 'LIGHT"))] == [ids[3]]
    # words the index leaves out (too short, stopwords): the scan still answers
    assert fulltext_terms("the") is None
    assert Store(mysql_db.engine).search(TextMatch("the")) == short and len(short) == 6


def test_a_column_innodb_cannot_fulltext_index_stays_scanned(mysql_db, cli):
    """MySQL 8's JSON type takes no FULLTEXT index (the ALTER fails): --create-index indexes
    what it can, says which column stays scanned, and the search still finds tool-call hits.
    A BLOB column stands in here for MySQL's JSON (MariaDB's JSON is LONGTEXT)."""
    ids, _ = _session(mysql_db, 7, FORGETFUL, FORGETFUL_CHECKPOINTS)
    with mysql_db.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE agent_message MODIFY tool_calls LONGBLOB NULL")
    result = cli("--db", mysql_db.url, "search", "--create-index")
    assert result.exit_code == 0, result.output
    assert "FULLTEXT index created on content;" in result.output
    assert "tool_calls cannot have one on this server" in result.output
    with mysql_db.engine.connect() as conn:
        assert fulltext_index(conn) == ("content",)
    # (a BLOB compares bytes: the stand-in is searched by a lower-case part of the call)
    assert ids[3] in [h.id for h in Store(mysql_db.engine).search(TextMatch("grep -rn"))]
    assert can_fulltext_index("longtext") and not can_fulltext_index("json")
