"""Stored text made safe for a terminal line. Its own module, apart from the output formatter,
because every failure line goes through it: the command line's start-up imports this, not
tabulate."""

from __future__ import annotations

import re
from typing import Any

# C0 and C1 controls, DEL, and the Unicode bidi overrides that can disguise text; newline and
# tab are layout (allowed only where a caller says so).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_LAYOUT = re.compile(r"[\n\t]")


_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape_control(match: re.Match) -> str:
    ch = match.group(0)
    if ch in _NAMED:
        return _NAMED[ch]
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def visible(text: Any, newlines: bool = False) -> str:
    """Text safe to print on a terminal: control characters (ESC, OSC, BEL, CR, bidi overrides)
    shown as ``\\x1b``-style escapes, so stored data can neither drive the terminal (clear it,
    write the clipboard, fake lines) nor hide. With ``newlines`` line breaks and tabs stay.
    Machine output (--json) is never passed through this: it stays exact."""
    text = "" if text is None else str(text)
    text = _CONTROL.sub(_escape_control, text)
    if not newlines:
        text = _LAYOUT.sub(_escape_control, text)
    return text
