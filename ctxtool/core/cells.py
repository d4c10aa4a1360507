"""How a text fits a width: the one way ctxtool shortens a cell, a preview or a column. Apart
from the rules that use it so that a table (``ctxtool.terminal``) can fit one without loading
them."""

from __future__ import annotations


def shorten(text: str, width: int, from_left: bool = False) -> str:
    """``text`` in at most ``width`` characters, a cut marked with "…"; ``from_left`` keeps the
    end (a path's file)."""
    if len(text) <= width:
        return text
    if from_left:
        return "…" + text[len(text) - max(width - 1, 0) :]
    return text[: max(width - 1, 0)] + "…"
