"""The summary's Markdown renderer: the shapes summaries use, and nothing of theirs unescaped."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxtool.markdown_to_html import markdown_to_html


def test_headings_lists_code_and_bold():
    out = markdown_to_html(
        "# Goal\nFix it **now**, see `a<b>.py`\n\n- one\n- two\n1. first\n\n```\n<x> & y\n```"
    )
    assert out.splitlines() == [
        "<h2>Goal</h2>",
        "<p>Fix it <b>now</b>, see <code>a&lt;b&gt;.py</code></p>",
        "<ul>",
        "<li>one</li>",
        "<li>two</li>",
        "</ul>",
        "<ol>",
        "<li>first</li>",
        "</ol>",
        "<pre><code>&lt;x&gt; &amp; y</code></pre>",
    ]


def test_an_unclosed_fence_is_code_to_the_end():
    assert markdown_to_html("```\n**not bold**") == "<pre><code>**not bold**</code></pre>"


@given(st.text(alphabet=st.sampled_from(list("<>&\"'`*#-1. \nab")), max_size=80))
def test_no_markup_of_the_text_survives(text):
    out = markdown_to_html(text)
    for tag in ("h2", "h3", "h4", "h5", "h6", "p", "ul", "ol", "li", "pre", "code", "b", "br"):
        out = out.replace(f"<{tag}>", "").replace(f"</{tag}>", "")
    assert "<" not in out and ">" not in out and '"' not in out
