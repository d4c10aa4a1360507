"""The main line of a tree-shaped transcript (Claude Code ``parentUuid``, Pi v2+ ``parentId``).

A session's messages are its main line: the path from the newest record back to the root.
Records on abandoned branches (a rewind, an edited message) are not on it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from ..core.source_records import BranchedTranscript, Line
from .fields import label

Link = Callable[[dict], "tuple[str, str | None] | None"]


class MainLineFilter:
    """Keeps a tree-format parser on the session's main line.

    Without a known main line it checks that the file is linear (each record's parent is the
    record before it) and raises BranchedTranscript otherwise; with one (from :func:`main_line`)
    it drops, and counts, the records of abandoned branches.
    """

    def __init__(self, main: set[str] | None):
        self.main = main
        self.previous: str | None = None

    def keeps(self, link: tuple[str, str | None] | None, kind, skipped: Counter) -> bool:
        if link is None:
            return True
        record_id, parent_id = link
        if self.main is None:
            if parent_id is not None and self.previous is not None and parent_id != self.previous:
                raise BranchedTranscript(record_id)
            self.previous = record_id
            return True
        if record_id in self.main:
            return True
        skipped[f"abandoned_branch:{label(kind)}"] += 1
        return False


def main_line(lines: Iterable[Line], link: Link) -> set[str]:
    """First pass over a branched file: the ids on the path from its newest record back to the
    root (``link`` gives a record's (id, parent id), or None for records outside the tree).

    A parent the file does not hold (a trimmed log, a record lost to a crash) is read as the
    record written just before: the file is append-only, so that is where the conversation
    went on; otherwise every earlier record would look like an abandoned branch. Safe against
    cycles."""
    links: dict[str, str | None] = {}
    leaf = None
    for line in lines:
        found = link(line.obj)
        if found:
            record_id, parent = found
            if parent is not None and parent not in links:
                parent = leaf
            links[record_id] = parent
            leaf = record_id
    path: set[str] = set()
    node = leaf
    while node is not None and node not in path:
        path.add(node)
        node = links.get(node)
    return path
