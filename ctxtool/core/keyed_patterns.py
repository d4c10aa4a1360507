"""A regular expression searched only in a text that holds one of its words (pure).

The user-statement rules search a dozen patterns of words in every sentence the user wrote,
and the re module steps through each position of the sentence for each of them. A text of
ASCII characters that holds none of the words every match of a pattern holds cannot match it,
and ``in`` finds that out many times faster than the search. A text with other characters is
always searched: re's case-insensitive matching there is wider than ``str.lower`` (``ſ``
matches ``s``, ``K`` the Kelvin sign), so the words could miss a match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KeyedPattern:
    """``pattern`` and ``words``: lower-case strings, one of which is in every text the pattern
    matches (case aside). :meth:`search` gives what ``pattern.search`` gives."""

    pattern: re.Pattern[str]
    words: tuple[str, ...]

    def __post_init__(self) -> None:
        assert self.words and all(w == w.lower() and w.isascii() for w in self.words), self.words

    def search(self, text: str) -> re.Match[str] | None:
        if text.isascii():
            lowered = text.lower()
            if not any(w in lowered for w in self.words):
                return None
        return self.pattern.search(text)
