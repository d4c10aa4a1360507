"""A request's own words and sentences are what they were before their quicker paths."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.core.span_facts import _SENTENCE_BREAK
from ctxtool.core.work_state import own_words


def own_words_before(text: str) -> str:
    text = re.sub(r"(?ms)^\s*(```|~~~).*?(^\s*\1|\Z)", " ", text)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(">"))
    text = re.sub(r"[\"“]([^\"”]{120,})[\"”]", " ", text)
    return " ".join(text.split())


PIECES = [
    "fix", "the", "test.", "Done!", "why?", "a" * 130, "```", "~~~", ">", "> quoted", '"',
    "“", "”", "'", "x.py", "\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "\x85",
    "\u2028", "\u2029", "\t", "  ", "1.", "-", "é",
]  # fmt: skip


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([" ", "", "\n"]), st.sampled_from(PIECES)), max_size=16))
def test_own_words_and_sentence_breaks_are_as_before(pieces):
    text = "".join(j + w for j, w in pieces)
    assert own_words(text) == own_words_before(text), repr(text)
    assert _SENTENCE_BREAK.split(text) == re.split(r"(?<=[.!?])\s+|\n+", text), repr(text)
