"""The summary's Markdown renderer (markdown-it-py, CommonMark): the shapes summaries use, and
nothing of theirs unescaped."""

from __future__ import annotations

import re

from hypothesis import given, settings
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
        "<pre><code>&lt;x&gt; &amp; y",
        "</code></pre>",
    ]


def test_numbered_lists_count_nested_lists_nest_and_code_is_bold_too():
    """As runtimes write summaries (Claude Code's compaction): items apart by blank lines keep
    counting, bullets indented under an item are its sub-list, ``**`path`**`` is bold code."""
    out = markdown_to_html(
        "1. First:\n   - `a.py` - read\n     - deeper\n\n2. **`push_session.py`**: made\n\n3. Third"
    )
    assert out.count("<ol>") == 1 and out.count("<li>") == 5, out
    assert "<p><b><code>push_session.py</code></b>: made</p>" in out
    assert "<p>First:</p>\n<ul>\n<li><code>a.py</code> - read\n<ul>\n<li>deeper</li>\n</ul>" in out


def test_raw_html_links_and_images_stay_text():
    out = markdown_to_html(
        '<script>alert(1)</script>\n\n<b onclick="x">b</b> [a](http://x) ![i](http://y) <http://z>'
    )
    assert "<script" not in out and "<b " not in out and "<a" not in out and "<img" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out


def test_an_unclosed_fence_is_code_to_the_end():
    assert markdown_to_html("```\n**not bold**") == "<pre><code>**not bold**</code></pre>"


# What a summary's Markdown may become: CommonMark's block and inline tags, with no attribute
# but an ordered list's start and a fence's language (escaped).
_MARKUP = re.compile(
    r'</?(h[2-6]|p|ul|li|pre|code|b|em|blockquote)>|<br>|<hr>|</ol>|<ol( start="\d+")?>'
    r'|<code class="language-[^"<>]*">'
)


# No deadline: the first example imports markdown-it and builds the parser, which on a loaded
# machine took longer than hypothesis' 200 ms.
@settings(deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>&\"'`*#-1. \nab")), max_size=80))
def test_no_markup_of_the_text_survives(text):
    out = _MARKUP.sub("", markdown_to_html(text))
    assert "<" not in out and ">" not in out and '"' not in out
