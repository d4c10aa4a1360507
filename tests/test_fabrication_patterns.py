"""The fabrication check's patterns find what they found before they were sped up."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.core.evaluator.fabrications import _LINE_NUMBER, _URL

# _LINE_NUMBER before its lookahead.
_LINE_NUMBER_BEFORE = re.compile(
    r"\blines?\s+(\d{1,6})(?:\s*(?:-|–|to|and)\s*(\d{1,6}))?\b|"
    r"(?<![\w/])L(\d{1,6})\b|"
    r"(?<=[\w)])\.[a-z]{1,5}:(\d{1,6})\b",
    re.I,
)
PIECES = [
    "line", "Line", "LINES", "lines", "L", "l", "13", "40", "-", "–", "to", "and", "parser",
    ".py", ".PY", ":", "(x)", ")", "/", "a", "ln", "İ", "ı", "ſ", "K", "1", ".", "é", "http",
    "://", "https://host/a", "ftp://x", "`git log`", "src/m0.py", "v2.13",
]  # fmt: skip


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([" ", "", "\n", "\t"]), st.sampled_from(PIECES)), max_size=16
    )
)
def test_line_numbers_and_urls_are_found_as_before(pieces):
    text = "".join(j + w for j, w in pieces)
    before = [(m.span(), m.groups()) for m in _LINE_NUMBER_BEFORE.finditer(text)]
    assert [(m.span(), m.groups()) for m in _LINE_NUMBER.finditer(text)] == before, text
    assert _LINE_NUMBER.sub(" ", text) == _LINE_NUMBER_BEFORE.sub(" ", text)
    if "://" not in text:  # stated_items leaves a text without it as it is
        assert _URL.sub(" ", text) == text
