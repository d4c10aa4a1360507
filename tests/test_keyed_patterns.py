"""A keyed pattern finds what its pattern finds: its words only pass over texts it cannot match."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.core import span_facts, work_state
from ctxtool.core.keyed_patterns import KeyedPattern

# Every keyed pattern of the user-statement rules.
KEYED = {
    "prohibition": span_facts._PROHIBITION_KEYED,
    "rule": span_facts._RULE_KEYED,
    "decision": span_facts._DECISION_KEYED,
    "arrow": span_facts._ARROW_KEYED,
    "rejection": work_state._REJECTION_KEYED,
}
# Pieces of the patterns' words, cased as users write them, with the characters re's
# case-insensitive matching takes for ASCII letters (ſ for s, K for k, İ and ı for i).
PIECES = [
    "never", "Never", "NEVER", "don't", "dont", "Don't", "do", "not", "Do Not", "must",
    "mustn't", "shouldn't", "should", "shouldnt", "shall", "no", "No", "more", "stop", "Stop",
    "stopping", "without", "you", "You", "cannot", "can't", "can", "may", "are", "allowed",
    "to", "always", "make", "sure", "only", "from", "now", "on", "keep", "Keep", "the", "it",
    "old", "let's", "Let's", "lets", "go", "with", "use", "decided", "i", "I", "we", "We",
    "we'll", "will", "actually", "really", "want", "prefer", "instead", "of", "rather",
    "than", "needed", "longer", "rename", "x", "as", "just", "for", "reference", "nah",
    "naahh", "NAH", "nope", "that's", "That's", "horrible", "like", "this", "hate", "ugh",
    "yuck", "scrap", "way", "that", "->", "→", "-", ">", ",", ".", "!", "?", "'", "ſtop",
    "ſure", "Keep", "İ", "ı", "é", "1", "src/m3.py", "editing",
]  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([" ", "", "  ", "\t", "\n"]), st.sampled_from(PIECES)),
        max_size=14,
    )
)
def test_a_keyed_pattern_finds_what_its_pattern_finds(pieces):
    text = "".join(j + w for j, w in pieces)
    for name, keyed in KEYED.items():
        found, expected = keyed.search(text), keyed.pattern.search(text)
        assert (found and found.span()) == (expected and expected.span()), (name, text)


@pytest.mark.parametrize("name", list(KEYED))
def test_each_word_of_a_match_is_a_key(name):
    """Whatever text a pattern matches (in the sampled texts above and the rules' own
    examples), one of its words is in the match itself."""
    keyed = KEYED[name]
    examples = [
        "never do that", "don't push", "do not touch it", "you can't edit", "stop editing it",
        "without asking first", "mustn't", "shouldnt", "no more commits", "always use tabs",
        "make sure it passes", "only the docs", "from now on", "keep the tests", "keep it short",
        "let's go with plan b", "we'll use uv", "go with a", "decided", "i really want x",
        "we prefer y", "instead of z", "rather than q", "not needed", "no longer", "rename a to b",
        "keep the old one", "for reference", "a -> b", "nahhh", "nope", "no, that's bad",
        "that's ugly", "i don't like that", "hate it", "ugh", "yuck", "scrap that", "not that",
        "no way", "i don't want it", "do not like this", "hate this", "should not", "it's bad -> good",
    ]  # fmt: skip
    matched = 0
    for text in examples:
        m = keyed.pattern.search(text)
        if m:
            matched += 1
            assert any(w in m.group(0).lower() for w in keyed.words), (name, text)
            assert keyed.search(text) is not None
    assert matched


def test_a_text_beyond_ascii_is_always_searched():
    keyed = KeyedPattern(re.compile(r"\bstop\b", re.I), ("stop",))
    assert keyed.search("ſtop it") is not None  # re takes ſ for s; "ſtop" holds no "stop"
    assert keyed.search("go on") is None
