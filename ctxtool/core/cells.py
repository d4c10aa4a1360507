"""How a text fits a width: the one way ctxtool measures, shortens and pads a cell, a preview or
a column. Apart from the rules that use it so that a table (``ctxtool.terminal``) can fit one
without loading them.

Widths are terminal columns, not characters: a CJK ideograph or a fullwidth form takes two
columns (Unicode's East Asian Width W and F), a combining mark or a format character (a
zero-width joiner) none. The standard library's ``unicodedata`` says so; wcwidth would add a
dependency for the few cases it knows better (emoji sequences, Hangul jamo)."""

from __future__ import annotations

import unicodedata
from functools import lru_cache


@lru_cache(maxsize=4096)
def _char_width(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(text: str) -> int:
    """The columns ``text`` (one line, made visible) takes on a terminal."""
    if text.isascii():
        return len(text)
    return sum(1 if ch.isascii() else _char_width(ch) for ch in text)


def cut_at_width(text: str, width: int) -> int:
    """How many of ``text``'s characters fit in ``width`` columns (a mark stays with the
    character it combines with)."""
    if text.isascii():
        return min(len(text), max(width, 0))
    used = 0
    for i, ch in enumerate(text):
        used += 1 if ch.isascii() else _char_width(ch)
        if used > width:
            return i
    return len(text)


def pad(text: str, width: int) -> str:
    """``text`` followed by spaces to ``width`` columns (``str.ljust`` in columns)."""
    return text + " " * (width - display_width(text))


def shorten(text: str, width: int, from_left: bool = False) -> str:
    """``text`` in at most ``width`` columns, a cut marked with "…"; ``from_left`` keeps the
    end (a path's file)."""
    if display_width(text) <= width:
        return text
    room = max(width - 1, 0)
    if from_left:
        kept = cut_at_width(text[::-1], room)
        return "…" + text[len(text) - kept :]
    return text[: cut_at_width(text, room)] + "…"
