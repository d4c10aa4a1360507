"""The fabrication check's history (``SourceText``, issue #45 item 12) is read lowered and
normalised only when that says something else: whatever is looked up, and whatever the
history, the answer is the normalised text's. Real transcripts (their messages, as the check
gets them) and strings cut from them at every kind of boundary: across line breaks and runs of
spaces, with a space at an end, at the text's very start and end."""

from __future__ import annotations

import random

import pytest

from ctxtool.core.evaluator.answers import message_text, normalise
from ctxtool.core.evaluator.fabrications import (
    _NUMBERS,
    _WORD,
    Fabrication,
    SourceText,
    _ngrams,
    stated_items,
)
from ctxtool.core.records import Message
from ctxtool.db import create_engine
from ctxtool.importer import Importer
from ctxtool.migrate import Migrator
from ctxtool.store import Store

from .conftest import TRANSCRIPTS

FILES = [
    ("codex", "codex/edgerunner-codex-session.jsonl"),
    ("claude-code", "claude-code/bhavana-claude-session.jsonl"),
    ("pi", "pi/kimchi-dev-session.jsonl"),
]


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    out = []
    for fmt, name in FILES:
        path = tmp_path_factory.mktemp(fmt) / "store.db"
        engine = create_engine(f"sqlite:///{path}")
        Migrator(engine).up()
        Importer(engine, fmt=fmt).import_paths([str(TRANSCRIPTS / name)])
        store = Store(engine)
        for session_id in store.session_ids():
            out.append((name, store.messages(session_id)))
        engine.dispose()
    return out


def _lookups(raw: str, rng: random.Random) -> list[str]:
    """Strings to look up: cut from the raw text, lowered as it is or normalised, at random
    and at its whitespace (so that many cross a line break or a run of spaces)."""
    lowered_raw = raw.lower()
    spaces = [i for i, c in enumerate(raw) if c.isspace()][:4000]
    out = ["", " ", "  ", "a  b"]
    for _ in range(300):
        start = rng.choice(spaces) if spaces and rng.random() < 0.6 else rng.randrange(len(raw))
        start = max(0, start + rng.choice([-6, -1, 0, 1]))
        piece = lowered_raw[start : start + rng.choice([2, 5, 12, 30, 80])]
        out += [piece, normalise(piece), f" {normalise(piece)}", f"{normalise(piece)} "]
        out.append(" ".join(normalise(piece).split()[:2]) + "  x")
    out += [normalise(raw)[:40], normalise(raw)[-40:], f" {normalise(raw)[:20]}"]
    return out


def test_what_the_history_holds_is_what_its_normalised_text_holds(histories):
    rng = random.Random(45)
    for name, messages in histories:
        extra = ["  the previous summary\n\n  with `code`  ", "src/a.py\nsrc/b.py"]
        source = SourceText(messages, extra)
        raw = "\n".join([message_text(m) for m in messages] + extra)
        normalised = normalise(raw)
        for part in _lookups(raw, rng):
            assert source.holds(part) == (part in normalised), (name, part)
        assert source.text == normalised
        # The numbers and the words: the same runs as in the normalised text.
        numbers = {n.replace(",", "") for n in _NUMBERS.findall(normalised)}
        for n in list(numbers)[:200] + ["1", "13", "1,234", "99999999999"]:
            expected = n.replace(",", "") in numbers | set(
                __import__("re").findall(r"\d+", normalised)
            )
            assert source.has_number(n) == expected, (name, n)
        words = _WORD.findall(normalised)
        grams = _ngrams(words, 8)
        for i in range(0, max(1, len(words) - 8), max(1, len(words) // 50)):
            run = tuple(words[i : i + 8])
            assert source.has_words(run) == (run in grams)
            short = tuple(words[i : i + 3])
            assert source.has_words(short) == (f" {' '.join(short)} " in f" {' '.join(words)} ")


def test_each_stated_item_is_found_as_in_the_normalised_text(histories):
    """Every item a summary could state, cut from the history itself or altered, is judged
    as the normalised text judges it (paths by their basename, commands by their steps)."""
    for name, messages in histories:
        source = SourceText(messages)
        reference = _Reference(messages)
        raw = "\n".join(message_text(m) for m in messages)
        items = stated_items(raw[:60000])
        items += [Fabrication(i.kind, i.text + "x") for i in items[:200]]
        items += [
            Fabrication("path", "nowhere/at  all.py"),
            Fabrication("command", "git   status  && ls"),
            Fabrication("identifier", "Some.thing()"),
            Fabrication("figure", "1,234"),
        ]
        assert items
        for item in items:
            assert source.contains(item) == reference.contains(item), (name, item)


class _Reference(SourceText):
    """The check as it was: every lookup in the normalised text."""

    def holds(self, part: str) -> bool:
        return part in self.text


def test_a_plain_list_of_lookups():
    source = SourceText([Message(1, 1, "user", "Fix  src/a.py\n\nthen   run `pytest -q`")])
    assert source.holds("src/a.py") and source.holds("fix src/a.py then run")
    assert source.holds("then run pytest -q")  # a run of spaces and a line break apart
    assert not source.holds(" fix")  # the normalised text starts at "fix"
    assert source.holds(" src/a.py")  # after a space inside the text
    assert not source.holds("fix  src")  # two spaces: never in a normalised text
    assert not source.holds("src/b.py")
