"""The renderings of a context view, pure (plain records, no database): Markdown fences survive
backticks in contents, HTML escapes everything and collapses tools, JSONL is the OpenAI list."""

from __future__ import annotations

import json
from datetime import datetime

from ctxtool.context_text import message_rows, render_text
from ctxtool.core.inspection import build_view, point_in_history
from ctxtool.core.records import Compaction, Message, Session, restore_context
from ctxtool.export import render_html, render_jsonl, render_markdown
from ctxtool.output import OutputFormat
from ctxtool.terminal import fit_table

T = datetime(2026, 3, 1, 9, 30)


def view():
    session = Session(
        7,
        title="Fix <the> build",
        model="gpt-4o",
        system_prompt="sys",
        source_format="claude-code",
        source_id="abc",
    )
    cp = Compaction(
        3,
        7,
        "so far: ```inner``` fence",
        first_kept_message_id=10,
        summarizer="extractive",
        created_at=T,
    )
    messages = [
        Message(10, 7, "user", "run it\n```\ncode\n```", created_at=T),
        Message(
            11,
            7,
            "assistant",
            None,
            tool_calls=[
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd": "make"}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{}"}},
            ],
            created_at=T,
        ),
        Message(12, 7, "tool", "ok <done>", tool_call_id="c1", created_at=T),
        Message(13, 7, "assistant", "Built & done.", created_at=T),
    ]
    ctx = restore_context(7, "sys", cp, messages)
    counts = [5, 10, 20, 30, 40, 8, 50]  # system, summary, 10, 11, 12, synthetic c2, 13
    return build_view(session, point_in_history([cp]), ctx, counts, "o200k_base", False)


def test_view_items_know_ids_kinds_and_calls():
    v = view()
    assert [(i.kind, i.id) for i in v.items] == [
        ("system_prompt", None),
        ("summary", None),
        ("message", 10),
        ("message", 11),
        ("message", 12),
        ("synthetic_result", None),
        ("message", 13),
    ]
    assert v.items[4].answers == {"id": "c1", "name": "bash", "arguments": '{"cmd": "make"}'}
    assert v.tokens == 3 + 163 and v.header()["synthetic_results"] == 1
    doc = v.document()
    assert doc["summary"] == "so far: ```inner``` fence" and doc["messages"][2]["id"] == 10
    assert [r["tool"] for r in message_rows(v)] == [
        None,
        "→ bash ×2",
        "← bash",
        "⚠ no result bash",
        None,
    ]


def test_markdown_fences_are_longer_than_any_in_the_content():
    md = render_markdown(view())
    assert "````\nrun it\n```\ncode\n```\n````" in md
    assert "✂ **cut: messages from #10 on are kept verbatim" in md
    assert "## #12 tool · result of bash (c1)" in md
    assert "no result was recorded for bash (c2)" in md


def test_html_escapes_and_collapses():
    page = render_html(view())
    assert "Fix &lt;the&gt; build" in page and "ok &lt;done&gt;" in page and "<the>" not in page
    assert page.count("<details") == 5  # two calls, one result, one synthetic result, the summary
    assert page.count("<details open>") == 1  # the summary folds, open
    assert 'class="msg system summary"' not in page and 'class="msg user summary"' in page


def test_jsonl_is_the_openai_list_and_text_has_real_newlines():
    v = view()
    lines = [json.loads(line) for line in render_jsonl(v).splitlines()]
    assert lines == [i.openai for i in v.items]
    assert lines[5] == {
        "role": "tool",
        "content": "No result was recorded for this tool call.",
        "tool_call_id": "c2",
    }
    text = render_text(v)
    assert "run it\n```\ncode\n```" in text and '→ call bash({"cmd": "make"})  [c1]' in text


def test_fit_table_shortens_long_cells_to_the_width():
    rows = [
        {"id": i, "title": "x" * 200, "model": "m" * 30, "created": "2026-03-01 09:30"}
        for i in range(3)
    ]
    for width in (50, 80, 120):
        out = fit_table(
            rows,
            OutputFormat(),
            ["id", "title", "model", "created"],
            width,
            ["title", "model"],
            optional=["created"],
        )
        assert max(len(line) for line in out.splitlines()) <= width
    narrow = fit_table(
        rows,
        OutputFormat(),
        ["id", "title", "model", "created"],
        40,
        ["title", "model"],
        optional=["created"],
    )
    assert "created" not in narrow and "…" in narrow
    whole = fit_table(rows, OutputFormat(), ["id", "title", "model"], None, ["title"])
    assert "x" * 200 in whole
